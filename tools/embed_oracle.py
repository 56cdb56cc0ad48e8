#!/usr/bin/env python3
"""Goldens for pooled embeddings (docs/oracle.md, issue 32).

transformers (fp32, one thread) runs t/data/models/hf-qwen3 (the tiny
random-weight Qwen3 of tools/oracle.py) as an embedder: the last hidden
state (Qwen3Model's output, after the final norm) of each prompt, pooled
as sentence-transformers does (last token, mean), L2-normalised
(torch.nn.functional.normalize), and Matryoshka-truncated (the first 16
components, then normalised: sentence-transformers' truncate_dim).
Writes t/data/embed/hf-qwen3.json, read by t/unit/test_embed.c.

    $VENV/bin/python tools/embed_oracle.py      # from the repository root
"""
import json
import os

import torch
import transformers
from transformers import AutoModel, AutoTokenizer

MODEL = "t/data/models/hf-qwen3"
OUT = "t/data/embed/hf-qwen3.json"
TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "What is the capital of France?",
         "a"]
TRUNCATE = 16


def r6(v):
    return [float("%.6g" % x) for x in v]


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModel.from_pretrained(MODEL, dtype=torch.float32).eval()
    cases = []
    for text in TEXTS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            h = model(torch.tensor([ids])).last_hidden_state[0]   # (n, dim)
        last = h[-1]
        mean = h.sum(0) / h.shape[0]
        norm = torch.nn.functional.normalize
        cases.append({
            "text": text,
            "prompt_ids": ids,
            "last": r6(norm(last, dim=0).tolist()),
            "mean": r6(norm(mean, dim=0).tolist()),
            "last_raw": r6(last.tolist()),
            "last_truncated": r6(norm(last[:TRUNCATE], dim=0).tolist()),
        })
    out = {
        "model": MODEL,
        "reference": {"transformers": transformers.__version__,
                      "torch": torch.__version__.split("+")[0]},
        "hidden_size": model.config.hidden_size,
        "truncate_dim": TRUNCATE,
        "tolerance": 1e-4,
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
