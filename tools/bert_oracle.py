#!/usr/bin/env python3
"""Goldens for the BERT-family encoders (issue 32, docs/oracle.md).

One command writes, from the BERT vocabulary of the pinned llama-cpp-python
sdist ($FIXTURES/llama.cpp/ggml-vocab-bert-bge.gguf, `make deps`):

  t/data/tokenizers/bert-wordpiece.json  transformers' BertTokenizerFast ids
        of a varied test set (accents, CJK, punctuation, unknown words,
        lowercasing), uncased on the whole bge vocabulary and on the tiny
        models' cut one, cased on the cut one (t/unit/test_wordpiece.c)
  t/data/tokenizers/bert-cased/          that cased tokenizer (tokenizer.json)
  t/data/models/hf-bert-embed/           tiny random BertModel as a
        sentence-transformers embedder (CLS pooling, Normalize: bge's shape)
  t/data/models/hf-nomic-embed/          tiny random NomicBertModel (rotary,
        SwiGLU, no biases) as an embedder (mean pooling, Normalize)
  t/data/models/hf-bert-rerank/          tiny random
        BertForSequenceClassification (one label): a cross-encoder
  t/data/models/*.gguf                   the three converted by this tool
        with llama.cpp's tensor names and metadata: F32, F16 and Q8_0 (the
        cross-encoder F32, F16, and .nopooler: without the pooler, as
        llama.cpp's converter writes it; its golden logit_no_pooler)
  t/data/embed/bert.json                 sentence-transformers' encode of
        the embedders, transformers' logits of the cross-encoder's pairs

The tiny models keep the first KEEP ids of the bge vocabulary (specials,
characters, the commonest words), so their embedding tables stay small;
their tokenizers are that cut vocabulary, BertTokenizerFast's own files.

    FIXTURES=... $VENV/bin/python tools/bert_oracle.py   # repository root

With --bench OUT.gguf [f16|f32] it writes only the speed row's model (docs/perf.md,
`make bench-peers` EMBED_GGUF): a random BertModel of bge-small's shape
(12 layers, hidden 384, FFN 1536, 12 heads, 512 positions) on the whole
bge vocabulary, CLS pooling, F16 (default, about 65 MB) or F32 matrices:
keep it outside the repository.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

import gguf
import sentence_transformers
import transformers
from sentence_transformers import CrossEncoder, SentenceTransformer, models
from transformers import (BertConfig, BertForSequenceClassification,
                          BertModel, BertTokenizerFast, NomicBertConfig,
                          NomicBertModel)

KEEP = 3000
MODELS = "t/data/models"
TOLERANCE = 1e-4          # cosine distance, F32/F16 weights
RERANK_TOLERANCE = 1e-3   # absolute, logits

TEXTS = [
    "Hello world",
    " Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France?",
    "Äpfel und Birnen kosten 3,50 €",
    "café naïve résumé Ångström",
    "ÉCOLE Façade SCHÖN",
    "日本語のテキストと中文字符",
    "Mixed 中文 and English, 한국어 too",
    "email: someone@example.com; url=https://x.y/z?a=1&b=2",
    "unaffable supercalifragilisticexpialidocious xyzzyq",
    "tabs\tand\nnewlines\r\n  spaces",
    "[CLS] literal [SEP] markers [MASK]",
    "emoji 🦙 and symbols ½ ™ © §",
    "Ünïcödé çontrol\u200b\u0007 chars\u00ad",
    "ÀÉÎÕÜ àéîõü ñÑ ßẞ İı",
    "a" * 120,
    "",
    "   ",
    "don't stop-believing... (really)!!",
    "Привет, мир! Ελληνικά",
    "1234567890 3.14159 -42",
]
PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("What is the capital of France?", "The quick brown fox."),
    ("how do bees fly", "Bees flap their wings very fast."),
]


def fixtures():
    return os.environ.get("FIXTURES", os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "ngx_llm", "fixtures"))


def bge_vocab():
    """vocab.txt's lines from llama.cpp's phantom-space GGUF vocabulary
    (its converter wrote "▁w" for a word start and "w" for "##w")."""
    path = os.path.join(fixtures(), "llama.cpp/ggml-vocab-bert-bge.gguf")
    if not os.path.exists(path):
        sys.exit("bert_oracle: %s is missing (make deps)" % path)
    r = gguf.GGUFReader(path)
    out = []
    for t in r.fields["tokenizer.ggml.tokens"].contents():
        if t.startswith("[") and t.endswith("]"):
            out.append(t)
        elif t.startswith("\u2581"):
            out.append(t[1:])
        else:
            out.append("##" + t)
    return out


def write_vocab(folder, vocab):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocab))


def tokenizer(folder, vocab, lower):
    """BertTokenizerFast of vocab saved into folder (tokenizer.json and its
    config; vocab.txt removed: the fast tokenizer's file is the one read)"""
    with tempfile.TemporaryDirectory() as tmp:
        write_vocab(tmp, vocab)
        tok = BertTokenizerFast(os.path.join(tmp, "vocab.txt"),
                                do_lower_case=lower)
    os.makedirs(folder, exist_ok=True)
    tok.save_pretrained(folder)
    for extra in ("vocab.txt", "special_tokens_map.json"):
        p = os.path.join(folder, extra)
        if os.path.exists(p):
            os.remove(p)
    return BertTokenizerFast.from_pretrained(folder)


def tokenizer_golden(full, cut):
    with tempfile.TemporaryDirectory() as tmp:
        write_vocab(tmp, full)
        tok_full = BertTokenizerFast(os.path.join(tmp, "vocab.txt"),
                                     do_lower_case=True)
    tok_cut = tokenizer(os.path.join("t/data/tokenizers", "bert-uncased"),
                        cut, True)
    shutil.rmtree("t/data/tokenizers/bert-uncased")
    tok_cased = tokenizer("t/data/tokenizers/bert-cased", cut, False)
    inp = os.path.join(fixtures(), "llama.cpp/ggml-vocab-bert-bge.gguf.inp")
    texts = list(TEXTS)
    with open(inp) as f:
        texts += f.read().split("\n__ggml_vocab_test__\n")[:-1]
    cases = []
    for t in texts:
        cases.append({
            "text": t,
            "bge": tok_full(t)["input_ids"],
            "cut": tok_cut(t)["input_ids"],
            "cased": tok_cased(t)["input_ids"],
        })
    q, d = PAIRS[0]
    pair = tok_full(q, d)
    return {
        "vocab": "llama.cpp/ggml-vocab-bert-bge.gguf",
        "cut_vocab": KEEP,
        "reference": versions(),
        "pair": {"query": q, "document": d, "ids": pair["input_ids"],
                 "types": pair["token_type_ids"]},
        "cases": cases,
    }


def versions():
    return {"transformers": transformers.__version__,
            "sentence-transformers": sentence_transformers.__version__,
            "torch": torch.__version__.split("+")[0],
            "gguf": "0.19"}


def spread(model, seed):
    """random weights a little wider than BERT's 0.02 init, so that the
    tiny model's layers move the vectors (norm weights near 1)"""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layernorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0)
                        + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def st_wrap(folder, pooling):
    """sentence-transformers' Transformer + Pooling + Normalize over an HF
    model directory, saved into it"""
    word = models.Transformer(folder)
    pool = models.Pooling(word.get_word_embedding_dimension(),
                          pooling_mode=pooling)
    st = SentenceTransformer(modules=[word, pool, models.Normalize()],
                             device="cpu")
    st.save(folder)
    for extra in ("README.md", "vocab.txt", "special_tokens_map.json"):
        p = os.path.join(folder, extra)
        if os.path.exists(p):
            os.remove(p)
    return SentenceTransformer(folder, device="cpu")


def make_bert(cut):
    folder = os.path.join(MODELS, "hf-bert-embed")
    shutil.rmtree(folder, ignore_errors=True)
    cfg = BertConfig(vocab_size=KEEP, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=128, type_vocab_size=2,
                     hidden_act="gelu")
    torch.manual_seed(1)
    m = BertModel(cfg, add_pooling_layer=False)
    spread(m, 1)
    m.save_pretrained(folder)
    tokenizer(folder, cut, True)
    return folder, st_wrap(folder, "cls")


def make_nomic(cut):
    folder = os.path.join(MODELS, "hf-nomic-embed")
    shutil.rmtree(folder, ignore_errors=True)
    cfg = NomicBertConfig(vocab_size=KEEP, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=64, max_position_embeddings=128,
                          type_vocab_size=2,
                          rope_parameters={"rope_type": "default",
                                           "rope_theta": 1000.0})
    torch.manual_seed(2)
    m = NomicBertModel(cfg, add_pooling_layer=False)
    spread(m, 2)
    m.save_pretrained(folder)
    tokenizer(folder, cut, True)
    return folder, st_wrap(folder, "mean")


def make_rerank(cut):
    folder = os.path.join(MODELS, "hf-bert-rerank")
    shutil.rmtree(folder, ignore_errors=True)
    cfg = BertConfig(vocab_size=KEEP, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=128, type_vocab_size=2,
                     hidden_act="gelu", num_labels=1)
    torch.manual_seed(3)
    m = BertForSequenceClassification(cfg)
    spread(m, 3)
    m.save_pretrained(folder)
    tok = tokenizer(folder, cut, True)
    return folder, m.eval(), tok


# ---------------------------------------------------------------------------
# GGUF, as llama.cpp's convert_hf_to_gguf.py names and describes it
# ---------------------------------------------------------------------------

BERT_NAMES = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
    "pooler.dense.weight": "cls.weight",
    "pooler.dense.bias": "cls.bias",
    "classifier.weight": "cls.output.weight",
    "classifier.bias": "cls.output.bias",
}
BERT_LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
NOMIC_LAYER = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "attn_output_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "post_mlp_layernorm": "layer_output_norm",
}


def gguf_name(hf, nomic):
    hf = hf.removeprefix("bert.").removeprefix("nomic_bert.")
    if hf in BERT_NAMES:
        return BERT_NAMES[hf]
    table, pre = (NOMIC_LAYER, "layers.") if nomic \
        else (BERT_LAYER, "encoder.layer.")
    if not hf.startswith(pre):
        sys.exit("bert_oracle: no GGUF name for %s" % hf)
    n, rest = hf[len(pre):].split(".", 1)
    part, kind = rest.rsplit(".", 1)
    return "blk.%s.%s.%s" % (n, table[part], kind)


def write_gguf(model, cut, path, arch, pooling, qtype, pooler=True):
    cfg = model.config
    nomic = arch == "nomic-bert"
    w = gguf.GGUFWriter(path, arch)
    w.add_name(os.path.basename(path))
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_head_count(cfg.num_attention_heads)
    w.add_layer_norm_eps(cfg.layer_norm_eps)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType(pooling))
    if nomic:
        w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list([t if t.startswith("[") and t.endswith("]")
                      else t[2:] if t.startswith("##") else "\u2581" + t
                      for t in cut])
    w.add_token_types([3 if t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                  "[MASK]") else 1 for t in cut])
    w.add_uint32("tokenizer.ggml.token_type_count", cfg.type_vocab_size)
    for key, tok in (("unknown", "[UNK]"), ("seperator", "[SEP]"),
                     ("padding", "[PAD]"), ("cls", "[CLS]"),
                     ("mask", "[MASK]")):
        w.add_uint32("tokenizer.ggml.%s_token_id" % key, cut.index(tok))
    for name, t in model.state_dict().items():
        if "position_ids" in name or "token_type_ids" in name \
                or (name.removeprefix("bert.").startswith("pooler.")
                    and (pooling != 4 or not pooler)):
            continue    # an embedder's unused pooler (sentence-transformers
                        # loads the model with one, freshly initialised)
        a = t.detach().float().numpy()
        gname = gguf_name(name, nomic)
        if a.ndim == 2 and qtype != "f32" and gname != "token_types.weight":
            if qtype == "f16":
                w.add_tensor(gname, a.astype(np.float16))
                continue
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(gname, q, raw_shape=q.shape,
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            continue
        w.add_tensor(gname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def r6(v):
    return [float("%.6g" % x) for x in v]


def main():
    torch.set_num_threads(1)
    full = bge_vocab()
    cut = full[:KEEP]
    golden = tokenizer_golden(full, cut)
    with open("t/data/tokenizers/bert-wordpiece.json", "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")

    out = {"reference": versions(), "tolerance": TOLERANCE,
           "rerank_tolerance": RERANK_TOLERANCE, "embedders": [],
           "rerank": None}
    for make, arch, pooling in ((make_bert, "bert", 2),
                                (make_nomic, "nomic-bert", 1)):
        folder, st = make(cut)
        model = st[0].auto_model
        for q in ("f32", "f16", "q8_0"):
            sfx = "" if q == "f32" else "." + q
            write_gguf(model, cut, folder + sfx + ".gguf", arch, pooling, q)
        vecs = st.encode(TEXTS[:10], convert_to_numpy=True,
                         normalize_embeddings=False)
        ids = [st.tokenizer(t)["input_ids"] for t in TEXTS[:10]]
        out["embedders"].append({
            "model": folder, "arch": arch,
            "pooling": "cls" if pooling == 2 else "mean",
            "cases": [{"text": t, "ids": i, "vector": r6(v.tolist())}
                      for t, i, v in zip(TEXTS[:10], ids, vecs)],
        })
    folder, m, tok = make_rerank(cut)
    write_gguf(m, cut, folder + ".gguf", "bert", 4, "f32")
    write_gguf(m, cut, folder + ".f16.gguf", "bert", 4, "f16")
    # as llama.cpp's converter writes it: no pooler (it drops pooler.dense),
    # llama.cpp's rank pooling reads the classifier off the [CLS] state
    write_gguf(m, cut, folder + ".nopooler.gguf", "bert", 4, "f32",
               pooler=False)
    cases = []
    for q, d in PAIRS:
        enc = tok(q, d, return_tensors="pt")
        with torch.no_grad():
            logit = m(**enc).logits[0, 0].item()
            h = m.bert(**enc).last_hidden_state[0, 0]
            bare = m.classifier(h)[0].item()
        cases.append({"query": q, "document": d,
                      "ids": enc["input_ids"][0].tolist(),
                      "types": enc["token_type_ids"][0].tolist(),
                      "logit": float("%.7g" % logit),
                      "logit_no_pooler": float("%.7g" % bare)})
    ce = CrossEncoder(folder, device="cpu")
    scores = ce.predict(PAIRS)   # sigmoid of the logit (one label)
    for c, s in zip(cases, scores):
        c["score"] = float("%.7g" % s)
    out["rerank"] = {"model": folder, "cases": cases}
    for root, _, files in os.walk(MODELS):   # torch writes 0600 files
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    with open("t/data/embed/bert.json", "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote t/data/embed/bert.json, t/data/tokenizers/"
          "bert-wordpiece.json and the models")


def bench_model(path, qtype):
    full = bge_vocab()
    cfg = BertConfig(vocab_size=len(full), hidden_size=384,
                     num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=1536, max_position_embeddings=512,
                     type_vocab_size=2, hidden_act="gelu")
    torch.manual_seed(7)
    m = BertModel(cfg, add_pooling_layer=False).eval()
    write_gguf(m, full, path, "bert", 2, qtype)
    print("wrote %s (bge-small's shape, random weights, %s)"
          % (path, qtype.upper()))


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--bench":
        bench_model(sys.argv[2], sys.argv[3] if len(sys.argv) == 4
                    else "f16")
    else:
        main()
