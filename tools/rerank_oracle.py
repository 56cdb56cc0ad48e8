#!/usr/bin/env python3
"""A tiny random-weight Qwen3 reranker and its goldens (docs/oracle.md,
issue 32).

Makes t/data/models/hf-qwen3-rerank: hf-qwen3's byte-level BPE tokenizer
with three merges more ("no", "ye", "yes": the tokens a Qwen3-Reranker
reads; the control tokens renumbered after them) and a Qwen3ForCausalLM of
hf-qwen3's shape drawn by transformers from a fixed seed (fp32, lm_head
untied as in the 4B and 8B rerankers), its "yes" and "no" rows moved
along a random direction, less the pairs' mean state, so that the scores
spread over (0, 1) (the last position reads the same suffix in every
pair: unmoved, every score is within 1e-3 of the others). Then scores query-document pairs as Qwen3-Reranker's model card
does: prefix + "<Instruct>: ...\\n<Query>: ...\\n<Document>: ..." + suffix
(prefix and suffix tokenized with their control tokens, the middle as
text, no special tokens added), one forward, the last position's logits,
score = softmax([logit(no), logit(yes)])[yes]. Writes
t/data/rerank/hf-qwen3.json (ids, the two logits, the score of each pair),
read by t/unit/test_rerank.c and t/041-rerank.t.

    $VENV/bin/python tools/rerank_oracle.py     # from the repository root
"""
import json
import os

import torch
import transformers
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

BASE = "t/data/models/hf-qwen3"
MODEL = "t/data/models/hf-qwen3-rerank"
OUT = "t/data/rerank/hf-qwen3.json"
NEW = ["no", "ye", "yes"]
MERGES = ["n o", "y e", "ye s"]
PREFIX = ("<|im_start|>system\nJudge whether the Document meets the "
          "requirements based on the Query and the Instruct provided. Note "
          "that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
          "<|im_start|>user\n")
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
INSTRUCTION = ("Given a web search query, retrieve relevant passages that "
               "answer the query")
CASES = [
    {"query": "What is the capital of China?",
     "documents": ["The capital of China is Beijing.",
                   "Gravity is a force that attracts two bodies.",
                   "yes no yes"]},
    {"query": "Explain gravity",
     "instruction": "Judge the passage",
     "documents": ["Gravity is a force that attracts two bodies towards "
                   "each other.", "a"]},
]


def make_tokenizer():
    with open(os.path.join(BASE, "tokenizer.json")) as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]
    n = len(vocab)
    shift = {}
    for i, tok in enumerate(NEW):
        vocab[tok] = n + i
    for a in tj["added_tokens"]:
        shift[a["id"]] = a["id"] + len(NEW)
        a["id"] += len(NEW)
    tj["model"]["merges"] += MERGES
    with open(os.path.join(BASE, "tokenizer_config.json")) as f:
        tc = json.load(f)
    tc["added_tokens_decoder"] = {
        str(shift[int(k)]): v for k, v in tc["added_tokens_decoder"].items()}
    # hf-qwen3's config lists only the special ones: transformers 5 would
    # then read <think> as text; Qwen3's own lists every added token
    for a in tj["added_tokens"]:
        tc["added_tokens_decoder"].setdefault(str(a["id"]), {
            k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                              "single_word", "special")})
    os.makedirs(MODEL, exist_ok=True)
    with open(os.path.join(MODEL, "tokenizer.json"), "w") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
    with open(os.path.join(MODEL, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    return n + len(NEW) + len(tj["added_tokens"])


def make_model(vocab_size, tok):
    with open(os.path.join(BASE, "config.json")) as f:
        cfg = json.load(f)
    cfg["vocab_size"] = vocab_size
    cfg["dtype"] = "float32"
    cfg["tie_word_embeddings"] = False
    for k in ("architectures", "transformers_version", "model_type"):
        cfg.pop(k, None)
    torch.manual_seed(32)
    model = Qwen3ForCausalLM(Qwen3Config(**cfg)).float().eval()
    return model, tok.convert_tokens_to_ids("yes"), \
        tok.convert_tokens_to_ids("no")


def spread(model, tok, yes, no):
    """Move lm_head's yes/no rows: logit(yes) - logit(no) = v . h with v a
    random direction orthogonal to the pairs' mean last state, scaled to a
    spread of about 2 across the pairs."""
    hs = []
    for c in CASES:
        inst = c.get("instruction", INSTRUCTION)
        for d in c["documents"]:
            ids = pair_ids(tok, inst, c["query"], d)
            with torch.no_grad():
                h = model.model(torch.tensor([ids])).last_hidden_state[0, -1]
            hs.append(h)
    hs = torch.stack(hs)
    mean = hs.mean(0)
    g = torch.Generator().manual_seed(7)
    v = torch.randn(hs.shape[1], generator=g)
    v -= (v @ mean) / (mean @ mean) * mean
    v *= 2.0 / ((hs - mean) @ v).std()
    with torch.no_grad():
        w = model.lm_head.weight
        w[yes] += v / 2
        w[no] -= v / 2
    model.save_pretrained(MODEL, safe_serialization=True)
    os.remove(os.path.join(MODEL, "generation_config.json"))
    os.chmod(os.path.join(MODEL, "model.safetensors"), 0o644)


def pair_ids(tok, instruction, query, doc):
    body = "<Instruct>: %s\n<Query>: %s\n<Document>: %s" % (
        instruction, query, doc)
    return (tok.encode(PREFIX, add_special_tokens=False)
            + tok(body, add_special_tokens=False,
                  split_special_tokens=True)["input_ids"]
            + tok.encode(SUFFIX, add_special_tokens=False))


def main():
    torch.set_num_threads(1)
    vocab_size = make_tokenizer()
    tok = AutoTokenizer.from_pretrained(MODEL)
    model, yes, no = make_model(vocab_size, tok)
    spread(model, tok, yes, no)
    model = Qwen3ForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    model.eval()
    cases = []
    for c in CASES:
        inst = c.get("instruction", INSTRUCTION)
        pairs = []
        for d in c["documents"]:
            ids = pair_ids(tok, inst, c["query"], d)
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0, -1]
            two = torch.stack([logits[no], logits[yes]])
            score = torch.nn.functional.log_softmax(two, dim=0)[1].exp()
            pairs.append({"document": d, "ids": ids,
                          "logit_yes": float(logits[yes]),
                          "logit_no": float(logits[no]),
                          "score": float(score)})
        case = {"query": c["query"], "pairs": pairs}
        if "instruction" in c:
            case["instruction"] = c["instruction"]
        cases.append(case)
    out = {
        "model": MODEL,
        "reference": {"transformers": transformers.__version__,
                      "torch": torch.__version__.split("+")[0]},
        "yes": yes, "no": no,
        "tolerance": 1e-3,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", OUT, "and", MODEL)
    for c in cases:
        for p in c["pairs"]:
            print("%d ids  yes %.4f no %.4f  score %.6f" % (
                len(p["ids"]), p["logit_yes"], p["logit_no"], p["score"]))


if __name__ == "__main__":
    main()
