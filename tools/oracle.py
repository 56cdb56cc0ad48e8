#!/usr/bin/env python3
"""
oracle.py: the independent reference for ngx_llm's engine (docs/oracle.md,
docs/numerics.md).

One command writes every golden file the C tests compare against:

  t/data/golden/<model>.json      prompt ids, top-20 logits at the last
                                  prompt position, 32-token greedy
                                  continuation with the reference's top-2
                                  margin at every step
  t/data/models/tiny-*.gguf       tiny random-weight llama models with rows
                                  of 256, so Q4_K and Q6_K can be tested
  t/data/tokenizers/smollm2.out   SmolLM2 ids for the 46 gpt2-bpe .inp strings
  t/data/models/hf-*              tiny Hugging Face directories (and GGUFs)
  t/data/golden-quant/<mix>.json  the default model requantized by our
                                  quantizer (`ngx_llm_engine quantize`,
                                  llama.cpp's mixes): the files t/055
                                  remakes, checks by sha256 and serves

Inputs: the fixtures `make deps` made ($FIXTURES, default
$XDG_CACHE_HOME/ngx_llm/fixtures) and the default model ($MODEL). Run it
from the repository root with the oracle venv (docs/oracle.md):

  $VENV/bin/python tools/oracle.py

The reference is Hugging Face transformers (fp32, GGUF dequantized by the
gguf package). Every golden is cross-checked against a second, independent
forward pass written here in numpy float64 on the raw GGUF tensors (Meta
order Q/K, interleaved RoPE): a wrong Q/K un-permutation in transformers'
GGUF loader, or a wrong dequantizer, would show up as a disagreement and the
tool stops. The same numpy forward also estimates the error an engine that
quantizes activations (llama.cpp style) should have, and shows how far a
broken engine (wrong RoPE order, wrong norm epsilon, wrong GQA mapping)
would land from the reference.

The tool is deterministic: seeded weights, one torch thread, fixed rounding.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as QT


# ---------------------------------------------------------------------------
# what is checked, and how strictly
# ---------------------------------------------------------------------------

GREEDY_STEPS = 32
TOP_K = 20

# Logit tolerance (absolute, in logits) per golden: the engine's logits
# must be within it of the reference, and greedy ids must match the
# reference up to the first step where the reference's top-2 margin falls
# below it (docs/numerics.md, rule 2). The C test (t/unit/test_golden.c) holds the same
# table with the reasons; keep them equal (it checks the golden's copy).
# Float weights (F32/F16/BF16) meet float activations in our engine, so
# only summation order differs: 0.01. Quantized weights meet int8
# activations (kernels/matmul.h): about twice the error this tool's
# simulation of that shows (act_quant below, over the prompt and every
# greedy step), well under the error of a wrong RoPE order or GQA mapping.
FLOAT_TOLERANCE = 0.01
QUANT_TOLERANCE = {
    "tiny260K": 0.8,        # engine measured <= 0.38, simulation <= 0.36
    "tiny": 0.5,            # engine <= 0.27, simulation <= 0.22
    "smollm2": 3.0,         # engine <= 1.14, simulation <= 1.55 (step 20
                            # of "plain", where logits reach 22)
    "hf-gptoss": 0.5,       # MXFP4 experts, int8 activations: engine
                            # <= 0.24; the same engine with float
                            # activations in the experts: <= 2e-5
}


def tolerance_for(label, weight_type):
    if weight_type in ("F32", "F16", "BF16"):
        return FLOAT_TOLERANCE
    for prefix, tolerance in QUANT_TOLERANCE.items():
        if label.startswith(prefix):
            return tolerance
    sys.exit("oracle: no tolerance for %s" % label)


# SmolLM2-135M-Instruct: plain text, digits (its pre-tokenizer splits
# digits one by one), a ~100-token paragraph, and a chat-templated turn.
SMOLLM2_CASES = [
    {"name": "plain", "text": "The capital of France is"},
    {"name": "digits",
     "text": "In 1969, 3 astronauts flew 384400 km to the Moon and"},
    {"name": "long",
     "text": (
         "The history of the printing press begins in the fifteenth "
         "century, when Johannes Gutenberg combined movable metal type, "
         "oil-based ink and a wooden press adapted from those used to make "
         "wine. Before his invention, books were copied by hand, which made "
         "them rare and expensive. Within a few decades, printing shops "
         "had spread to more than two hundred cities across Europe, and "
         "millions of books had been produced. The effect on science, "
         "religion and politics was profound, because ideas could now "
         "travel faster than ever before. Historians often say that")},
    {"name": "chat",
     "messages": [{"role": "user",
                   "content": "What is the capital of France? "
                              "Answer in one sentence."}]},
]

# tiny260K and the tiny models share tiny260K's 512-token SPM vocabulary
# (the first 512 pieces of Llama 2's, tools/fixtures.py).
STORIES_CASES = [
    {"name": "plain", "text": "Once upon a time"},
    {"name": "names", "text": "Lily and Tom went to the park. They saw a"},
    {"name": "long",
     "text": (
         "Once upon a time, there was a little girl named Lily. She loved "
         "to play outside in the sun with her friends. One day, she saw a "
         "big red ball in the park. She wanted to play with it, but a boy "
         "named Tom had it. Lily asked Tom if she could play too. Tom said "
         "yes and they played together all day. They were very happy and "
         "became best friends. When the sun went down, Lily went home to "
         "her mom and")},
]

# The mixes t/032-quantized.t and t/055-quant-fidelity.t make from the
# default model with our quantizer (ngx_llm_engine quantize; SmolLM2's rows
# of 576 fall back to Q4_0/Q5_0/Q5_1/IQ4_NL as llama.cpp's do).
QUANT_MIXES = ["Q4_K_M", "Q2_K", "Q5_K_M", "IQ4_XS"]

STORIES_TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1"]

# Tiny random llama models (docs/oracle.md): rows of 256 so K-quants apply.
# The token embeddings are scaled down to a mean square near the norm
# epsilon, so the first RMSNorm depends on epsilon strongly: an engine that
# ignores the file's epsilon fails on them (real models barely notice).
TINY_MODELS = [
    {
        "name": "tiny-q4k-untied",
        "seed": 1,
        "dim": 256, "hidden": 512, "layers": 1, "heads": 4, "kv_heads": 2,
        "rope_base": 500000.0, "eps": 1e-6, "tied": False,
        # like llama.cpp's Q4_K_M: Q4_K mostly, Q6_K where it matters
        "types": {"token_embd": "Q4_K", "attn_q": "Q4_K", "attn_k": "Q4_K",
                  "attn_v": "Q6_K", "attn_output": "Q4_K",
                  "ffn_gate": "Q4_K", "ffn_up": "Q4_K", "ffn_down": "Q6_K",
                  "output": "Q6_K"},
    },
    {
        "name": "tiny-q6k-tied",
        "seed": 2,
        "dim": 256, "hidden": 256, "layers": 2, "heads": 8, "kv_heads": 2,
        "rope_base": 10000.0, "eps": 1e-5, "tied": True,
        "types": {"token_embd": "Q6_K", "attn_q": "Q6_K", "attn_k": "Q6_K",
                  "attn_v": "Q6_K", "attn_output": "Q6_K",
                  "ffn_gate": "Q6_K", "ffn_up": "Q6_K", "ffn_down": "Q6_K"},
    },
    {
        "name": "tiny-mixed",
        "seed": 3,
        "dim": 256, "hidden": 256, "layers": 1, "heads": 4, "kv_heads": 1,
        "rope_base": 10000.0, "eps": 1e-5, "tied": True,
        # one file, one type per tensor kind: F16 embeddings, Q8_0
        # attention, Q4_K/Q6_K feed-forward, F32 norms
        "types": {"token_embd": "F16", "attn_q": "Q8_0", "attn_k": "Q8_0",
                  "attn_v": "Q8_0", "attn_output": "Q8_0",
                  "ffn_gate": "Q4_K", "ffn_up": "Q4_K", "ffn_down": "Q6_K"},
    },
]

# The Python cross-check must agree with transformers within this: both are
# exact arithmetic on the same dequantized weights (fp32 vs float64).
CROSSCHECK_LIMIT = 2e-3


# ---------------------------------------------------------------------------
# GGUF reading
# ---------------------------------------------------------------------------

def field_value(field):
    value = field.contents()
    return value


def read_gguf(path):
    """Metadata as a dict, tensors as float32 arrays of shape (ne1, ne0),
    and each tensor's ggml type name."""
    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        meta[key] = field_value(field)
    tensors, types = {}, {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        shape = [int(n) for n in reversed(t.shape.tolist())]
        tensors[t.name] = np.asarray(w, dtype=np.float32).reshape(shape)
        types[t.name] = t.tensor_type.name
    return meta, tensors, types


def model_weight_type(types):
    """The type that dominates the 2-D weights (what a file is 'called')."""
    counts = {}
    for name, type_name in types.items():
        if name.endswith("norm.weight"):
            continue
        counts[type_name] = counts.get(type_name, 0) + 1
    return max(sorted(counts), key=lambda k: counts[k])


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------------------
# K-quant encoders (the gguf package dequantizes Q4_K/Q6_K but cannot
# quantize them). Any valid encoding will do: the reference dequantizes what
# the file holds. Layouts follow gguf.quants' dequantizers, and each encoder
# is checked by decoding its output with them.
# ---------------------------------------------------------------------------

QK_K = 256


def f16_round(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize_q4_k(rows):
    """(n, 256k) float32 -> (n, 144k) uint8. x = d*sc*q - dmin*m, q in 0..15,
    eight 32-element sub-blocks with 6-bit sc and m."""
    blocks = rows.reshape(-1, 8, 32).astype(np.float32)
    nb = blocks.shape[0]
    lo = np.minimum(blocks.min(axis=2), 0.0)             # (nb, 8)
    hi = blocks.max(axis=2)
    sub_scale = (hi - lo) / 15.0
    sub_min = -lo
    d = f16_round(sub_scale.max(axis=1) / 63.0)          # (nb,)
    dmin = f16_round(sub_min.max(axis=1) / 63.0)
    d32, dmin32 = d.astype(np.float32), dmin.astype(np.float32)
    safe_d = np.where(d32 > 0, d32, 1.0)[:, None]
    safe_dmin = np.where(dmin32 > 0, dmin32, 1.0)[:, None]
    sc = np.clip(np.rint(sub_scale / safe_d), 0, 63).astype(np.uint8)
    mq = np.clip(np.rint(sub_min / safe_dmin), 0, 63).astype(np.uint8)
    step = (d32[:, None] * sc)[:, :, None]
    offset = (dmin32[:, None] * mq)[:, :, None]
    safe_step = np.where(step > 0, step, 1.0)
    q = np.clip(np.rint((blocks + offset) / safe_step), 0, 15)
    q = np.where(step > 0, q, 0).astype(np.uint8)        # (nb, 8, 32)

    scales = np.zeros((nb, 12), dtype=np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (mq[:, 0:4] & 63) | ((mq[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((mq[:, 4:8] & 15) << 4)
    # bytes of chunk c (64 elements): low nibble sub-block 2c, high 2c+1
    q = q.reshape(nb, 4, 2, 32)
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d.reshape(nb, 1).view(np.uint8),
                          dmin.reshape(nb, 1).view(np.uint8),
                          scales, qs], axis=1)
    return out.reshape(rows.shape[0], -1)


def quantize_q6_k(rows):
    """(n, 256k) float32 -> (n, 210k) uint8. x = d*scale*q, q in -32..31,
    sixteen 16-element sub-blocks with int8 scales."""
    blocks = rows.reshape(-1, 16, 16).astype(np.float32)
    nb = blocks.shape[0]
    sub_scale = np.abs(blocks).max(axis=2) / 31.0        # (nb, 16)
    d = f16_round(sub_scale.max(axis=1) / 127.0)
    d32 = d.astype(np.float32)
    safe_d = np.where(d32 > 0, d32, 1.0)[:, None]
    sc = np.clip(np.rint(sub_scale / safe_d), -127, 127).astype(np.int8)
    step = (d32[:, None] * sc.astype(np.float32))[:, :, None]
    safe_step = np.where(step != 0, step, 1.0)
    q = np.clip(np.rint(blocks / safe_step), -32, 31)
    q = np.where(step != 0, q, 0).astype(np.int16) + 32
    q = q.reshape(nb, 2, 128).astype(np.uint8)          # two halves

    # element r of a half: low 4 bits in ql[r % 64] nibble r // 64,
    # high 2 bits in qh[r % 32] at bit 2 * (r // 32)
    low, high = q & 15, q >> 4
    ql = (low[:, :, 0:64] | (low[:, :, 64:128] << 4)).reshape(nb, 128)
    qh = (high[:, :, 0:32] | (high[:, :, 32:64] << 2)
          | (high[:, :, 64:96] << 4) | (high[:, :, 96:128] << 6))
    qh = qh.reshape(nb, 64)
    out = np.concatenate([ql, qh, sc.view(np.uint8),
                          d.reshape(nb, 1).view(np.uint8)], axis=1)
    return out.reshape(rows.shape[0], -1)


def encode_tensor(w, type_name):
    """float32 (rows, cols) -> (array to store, ggml type)."""
    qtype = QT[type_name]
    if type_name == "F32":
        return w.astype(np.float32), qtype
    if type_name == "F16":
        return w.astype(np.float16), qtype
    if type_name == "Q4_K":
        data = quantize_q4_k(w)
    elif type_name == "Q6_K":
        data = quantize_q6_k(w)
    else:
        data = gguf.quants.quantize(w.astype(np.float32), qtype)
    back = gguf.quants.dequantize(data, qtype).reshape(w.shape)
    err = np.abs(back - w).max() / max(np.abs(w).max(), 1e-30)
    if err > 0.2:
        sys.exit("oracle: %s encoder is broken: relative error %.3f"
                 % (type_name, err))
    return data, qtype


# ---------------------------------------------------------------------------
# tiny random-weight models
# ---------------------------------------------------------------------------

def stories_vocab(fixtures):
    path = os.path.join(fixtures, "models/tiny260K-f32.gguf")
    meta, _, _ = read_gguf(path)
    return meta


def tiny_weights(spec):
    """Seeded float32 weights, scaled so activations and logits have a
    useful spread (logit std of a few units, attention not uniform)."""
    rng = np.random.default_rng(spec["seed"])
    dim, hidden = spec["dim"], spec["hidden"]
    head_dim = dim // spec["heads"]
    kv_dim = head_dim * spec["kv_heads"]
    vocab = 512

    def normal(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def gain(n, centre, spread):
        return (centre + spread * rng.standard_normal(n)).astype(np.float32)

    w = {}
    # mean square ~4e-6: comparable to the norm epsilon on purpose
    w["token_embd.weight"] = normal(vocab, dim, 2e-3)
    for layer in range(spec["layers"]):
        p = "blk.%d." % layer
        w[p + "attn_norm.weight"] = gain(dim, 1.0, 0.1)
        w[p + "attn_q.weight"] = normal(dim, dim, 1.5 / np.sqrt(dim))
        w[p + "attn_k.weight"] = normal(kv_dim, dim, 1.5 / np.sqrt(dim))
        w[p + "attn_v.weight"] = normal(kv_dim, dim, 1.0 / np.sqrt(dim))
        w[p + "attn_output.weight"] = normal(dim, dim, 1.0 / np.sqrt(dim))
        w[p + "ffn_norm.weight"] = gain(dim, 1.0, 0.1)
        w[p + "ffn_gate.weight"] = normal(hidden, dim, 1.0 / np.sqrt(dim))
        w[p + "ffn_up.weight"] = normal(hidden, dim, 1.0 / np.sqrt(dim))
        w[p + "ffn_down.weight"] = normal(dim, hidden, 1.0 / np.sqrt(hidden))
    if spec["tied"]:
        # logits = norm(x) @ embd^T with tiny embeddings: a large output
        # gain gives logits a std of ~3
        w["output_norm.weight"] = gain(dim, 100.0, 10.0)
    else:
        w["output_norm.weight"] = gain(dim, 1.0, 0.1)
        w["output.weight"] = normal(vocab, dim, 3.0 / np.sqrt(dim))
    return w


def write_tiny(spec, vocab_meta, path):
    w = tiny_weights(spec)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(spec["name"])
    writer.add_context_length(512)
    writer.add_embedding_length(spec["dim"])
    writer.add_feed_forward_length(spec["hidden"])
    writer.add_block_count(spec["layers"])
    writer.add_head_count(spec["heads"])
    writer.add_head_count_kv(spec["kv_heads"])
    writer.add_rope_dimension_count(spec["dim"] // spec["heads"])
    writer.add_rope_freq_base(spec["rope_base"])
    writer.add_layer_norm_rms_eps(spec["eps"])
    writer.add_vocab_size(512)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(vocab_meta["tokenizer.ggml.tokens"])
    writer.add_token_scores(vocab_meta["tokenizer.ggml.scores"])
    writer.add_token_types(vocab_meta["tokenizer.ggml.token_type"])
    writer.add_bos_token_id(vocab_meta["tokenizer.ggml.bos_token_id"])
    writer.add_eos_token_id(vocab_meta["tokenizer.ggml.eos_token_id"])
    writer.add_unk_token_id(vocab_meta["tokenizer.ggml.unknown_token_id"])
    writer.add_add_bos_token(True)
    writer.add_add_space_prefix(True)
    for name, value in w.items():
        kind = name.split(".")[-2]
        if value.ndim == 1 or name.endswith("norm.weight"):
            writer.add_tensor(name, value.astype(np.float32))
            continue
        data, qtype = encode_tensor(value, spec["types"][kind])
        if qtype in (QT.F32, QT.F16):
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# ---------------------------------------------------------------------------
# independent forward pass: numpy float64, straight from the GGUF tensors
# ---------------------------------------------------------------------------

class NumpyLlama:
    """llama forward on GGUF tensors as stored: Q and K in Meta order, so
    RoPE rotates adjacent pairs (2i, 2i+1). Options reproduce a broken
    engine (rope="neox", gqa="mod", eps=...) or an engine that quantizes
    activations before quantized dot products (act_quant=True)."""

    def __init__(self, meta, tensors, types, rope="meta", gqa="div",
                 eps=None, act_quant=False):
        arch = meta["general.architecture"]
        self.dim = int(meta[arch + ".embedding_length"])
        self.layers = int(meta[arch + ".block_count"])
        self.heads = int(meta[arch + ".attention.head_count"])
        self.kv_heads = int(meta.get(arch + ".attention.head_count_kv",
                                     self.heads))
        self.head_dim = self.dim // self.heads
        self.rope_dim = int(meta.get(arch + ".rope.dimension_count",
                                     self.head_dim))
        self.rope_base = float(meta.get(arch + ".rope.freq_base", 10000.0))
        file_eps = float(meta[arch + ".attention.layer_norm_rms_epsilon"])
        self.eps = file_eps if eps is None else eps
        self.rope, self.gqa, self.act_quant = rope, gqa, act_quant
        self.t = {k: v.astype(np.float64) for k, v in tensors.items()}
        self.types = types
        if "output.weight" not in self.t:
            self.t["output.weight"] = self.t["token_embd.weight"]
            self.types["output.weight"] = self.types["token_embd.weight"]

    def norm(self, x, w):
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(ms + self.eps) * w

    def quant_act(self, x, type_name):
        """What our engine's matmul does to the activations (kernels/
        matmul.h): int8 in blocks of 32 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/
        IQ4_NL/MXFP4 weights and of 256 for K-quants and IQ4_XS (Q8_K);
        float activations for F32/F16/BF16 weights."""
        if type_name in ("F32", "F16", "BF16"):
            return x
        block = 256 if type_name.endswith("_K") or type_name == "IQ4_XS" \
            else 32
        shape = x.shape
        xb = x.reshape(-1, block)
        scale = np.abs(xb).max(axis=1, keepdims=True) / 127.0
        safe = np.where(scale > 0, scale, 1.0)
        q = np.clip(np.rint(xb / safe), -127, 127)
        return (q * scale).reshape(shape)

    def matmul(self, x, name):
        if self.act_quant:
            x = self.quant_act(x, self.types[name])
        return x @ self.t[name].T

    def rotate(self, x, positions):
        """x: (T, n_heads, head_dim)."""
        half = self.rope_dim // 2
        freqs = self.rope_base ** (-np.arange(half) * 2.0 / self.rope_dim)
        angle = positions[:, None].astype(np.float64) * freqs[None, :]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        out = x.copy()
        if self.rope == "meta":
            a, b = x[..., 0:self.rope_dim:2], x[..., 1:self.rope_dim:2]
            out[..., 0:self.rope_dim:2] = a * cos - b * sin
            out[..., 1:self.rope_dim:2] = a * sin + b * cos
        else:
            a, b = x[..., 0:half], x[..., half:self.rope_dim]
            out[..., 0:half] = a * cos - b * sin
            out[..., half:self.rope_dim] = a * sin + b * cos
        return out

    def attention(self, x, p, positions):
        T, hd = x.shape[0], self.head_dim
        q = self.matmul(x, p + "attn_q.weight").reshape(T, self.heads, hd)
        k = self.matmul(x, p + "attn_k.weight").reshape(T, self.kv_heads, hd)
        v = self.matmul(x, p + "attn_v.weight").reshape(T, self.kv_heads, hd)
        q, k = self.rotate(q, positions), self.rotate(k, positions)
        group = self.heads // self.kv_heads
        mask = np.triu(np.full((T, T), -np.inf), 1)
        out = np.empty((T, self.heads, hd))
        for h in range(self.heads):
            kv = h // group if self.gqa == "div" else h % self.kv_heads
            s = q[:, h, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, h, :] = s @ v[:, kv, :]
        return self.matmul(out.reshape(T, self.dim), p + "attn_output.weight")

    def ffn(self, x, p):
        g = self.matmul(x, p + "ffn_gate.weight")
        u = self.matmul(x, p + "ffn_up.weight")
        return self.matmul(g / (1.0 + np.exp(-g)) * u, p + "ffn_down.weight")

    def forward(self, ids):
        """All-position logits (T, vocab) for a whole sequence."""
        positions = np.arange(len(ids))
        x = self.t["token_embd.weight"][np.asarray(ids)]
        for layer in range(self.layers):
            p = "blk.%d." % layer
            x = x + self.attention(self.norm(x, self.t[p + "attn_norm.weight"]),
                                   p, positions)
            x = x + self.ffn(self.norm(x, self.t[p + "ffn_norm.weight"]), p)
        x = self.norm(x, self.t["output_norm.weight"])
        return self.matmul(x, "output.weight")


# ---------------------------------------------------------------------------
# the reference: transformers
# ---------------------------------------------------------------------------

def load_transformers(path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from tokenizers import pre_tokenizers

    folder, name = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                 dtype=torch.float32)
    model.eval()
    for pname, param in model.named_parameters():
        if param.dtype != torch.float32:
            sys.exit("oracle: %s: %s is %s, not dequantized fp32"
                     % (path, pname, param.dtype))
    meta = gguf.GGUFReader(path).fields
    pre = meta.get("tokenizer.ggml.pre")
    if pre is not None and pre.contents() == "smollm":
        # transformers maps no GGUF pre-tokenizer name "smollm" and falls
        # back to plain GPT-2 ByteLevel; SmolLM2's own tokenizer.json is
        # Sequence[Digits(individual_digits), ByteLevel(use_regex)], which
        # is also llama.cpp's "smollm" rule (\p{N} split first)
        tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False,
                                     trim_offsets=True, use_regex=True)])
    return tok, model


def encode_case(tok, case):
    """(prompt text as fed to the tokenizer, ids, chat or not)."""
    if "messages" in case:
        text = tok.apply_chat_template(case["messages"],
                                       add_generation_prompt=True,
                                       tokenize=False)
        ids = tok(text, add_special_tokens=False).input_ids
        return text, ids
    return case["text"], tok(case["text"]).input_ids


def reference_run(model, ids):
    """Last-position logits and a greedy continuation with margins, from
    transformers with its KV cache."""
    import torch

    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        first = out.logits[0, -1].double().numpy().copy()
        logits, past = first, out.past_key_values
        greedy, margins, top1 = [], [], []
        for _ in range(GREEDY_STEPS):
            order = np.argsort(-logits, kind="stable")
            nxt = int(order[0])
            greedy.append(nxt)
            top1.append(float(logits[nxt]))
            margins.append(float(logits[order[0]] - logits[order[1]]))
            out = model(torch.tensor([[nxt]]), past_key_values=past,
                        use_cache=True)
            logits, past = out.logits[0, -1].double().numpy(), \
                out.past_key_values
    return first, greedy, margins, top1


def top_k(logits, k):
    order = np.argsort(-logits, kind="stable")[:k]
    return [[int(i), float(logits[i])] for i in order]


def first_small_margin(margins, tolerance):
    for step, m in enumerate(margins):
        if m < tolerance:
            return step
    return -1


def compare_numpy(np_model, ids, greedy, first_logits, tolerance):
    """Teacher-forced numpy logits along the reference's greedy path:
    max |logit diff| on the reference top-20, and the first greedy step
    where numpy's argmax differs (-1 if none)."""
    logits = np_model.forward(list(ids) + greedy[:-1])
    last = len(ids) - 1
    top = [i for i, _ in top_k(first_logits, TOP_K)]
    diff = float(np.abs(logits[last, top] - first_logits[top]).max())
    diverge = -1
    for step, want in enumerate(greedy):
        if int(np.argmax(logits[last + step])) != want:
            diverge = step
            break
    return diff, diverge


# ---------------------------------------------------------------------------
# goldens
# ---------------------------------------------------------------------------

def r6(x):
    return float("%.6g" % x)


def make_golden(label, path, base, relpath, cases, out_path, probes):
    import transformers
    import torch

    meta, tensors, types = read_gguf(path)
    weight_type = model_weight_type(types)
    tolerance = tolerance_for(label, weight_type)
    tok, model = load_transformers(path)
    exact = NumpyLlama(meta, dict(tensors), dict(types))
    variants = {"act_quant": NumpyLlama(meta, dict(tensors), dict(types),
                                        act_quant=True)}
    if probes:
        file_eps = exact.eps
        variants["rope_neox"] = NumpyLlama(meta, dict(tensors), dict(types),
                                           rope="neox")
        variants["eps_wrong"] = NumpyLlama(
            meta, dict(tensors), dict(types),
            eps=1e-5 if abs(file_eps - 1e-5) > 1e-9 else 1e-6)
        if exact.kv_heads != exact.heads:
            variants["gqa_mod"] = NumpyLlama(meta, dict(tensors),
                                             dict(types), gqa="mod")

    golden = {
        "model": {"base": base, "path": relpath,
                  "bytes": os.path.getsize(path), "sha256": sha256_of(path)},
        "weight_type": weight_type,
        "tensor_types": sorted(set(types.values())),
        "reference": "transformers %s, torch %s, fp32, GGUF dequantized by "
                     "gguf %s" % (transformers.__version__,
                                  torch.__version__.split("+")[0],
                                  gguf_version()),
        "tolerance": tolerance,
        "greedy_steps": GREEDY_STEPS,
        "cases": [],
    }
    report = []
    for case in cases:
        text, ids = encode_case(tok, case)
        first, greedy, margins, top1 = reference_run(model, ids)
        diff, diverge = compare_numpy(exact, ids, greedy, first, tolerance)
        small = first_small_margin(margins, tolerance)
        if diff > CROSSCHECK_LIMIT or (diverge != -1 and
                                       margins[diverge] > CROSSCHECK_LIMIT):
            sys.exit("oracle: %s/%s: transformers and the numpy forward "
                     "disagree (max diff %.3g, greedy step %d)"
                     % (label, case["name"], diff, diverge))
        entry = {
            "name": case["name"],
            "prompt": text,
            "chat": "messages" in case,
            "prompt_ids": ids,
            "top_logits": [[i, r6(v)] for i, v in top_k(first, TOP_K)],
            "logit_std": r6(float(first.std())),
            "greedy_ids": greedy,
            "greedy_top1_logits": [r6(v) for v in top1],
            "greedy_margins": [r6(v) for v in margins],
            "first_small_margin_step": small,
            "crosscheck_max_diff": r6(diff),
        }
        if "messages" in case:
            entry["messages"] = case["messages"]
        line = {"case": case["name"], "tokens": len(ids),
                "crosscheck": diff, "small_margin_step": small}
        for vname, vmodel in variants.items():
            vdiff, vdiv = compare_numpy(vmodel, ids, greedy, first, tolerance)
            line[vname] = (vdiff, vdiv)
            if vname == "act_quant":
                entry["act_quant_estimate"] = {
                    "max_diff": r6(vdiff), "greedy_divergence": vdiv}
        golden["cases"].append(entry)
        report.append(line)

    with open(out_path, "w") as f:
        f.write(dump_golden(golden))
    print_report(label, weight_type, tolerance, report)
    return report


def dump_golden(golden):
    """JSON with one line per field: small diffs, readable in review."""
    def one(v):
        return json.dumps(v, ensure_ascii=False)

    lines = ["{"]
    for key, value in golden.items():
        if key != "cases":
            lines.append('  %s: %s,' % (one(key), one(value)))
    lines.append('  "cases": [')
    for n, case in enumerate(golden["cases"]):
        fields = ['    %s: %s' % (one(k), one(v)) for k, v in case.items()]
        lines.append("   {\n" + ",\n".join(fields) + "\n   }"
                     + ("," if n + 1 < len(golden["cases"]) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:
        return "?"


def print_report(label, weight_type, tolerance, report):
    print("%s (%s, tolerance %g)" % (label, weight_type, tolerance))
    for line in report:
        parts = ["  %-7s %3d tok  xcheck %.2e  small-margin step %3d"
                 % (line["case"], line["tokens"], line["crosscheck"],
                    line["small_margin_step"])]
        for key in ("act_quant", "rope_neox", "eps_wrong", "gqa_mod"):
            if key in line:
                parts.append("%s %.3g/%d" % (key, line[key][0], line[key][1]))
        print("  ".join(parts))
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# tokenizer vectors
# ---------------------------------------------------------------------------

def write_smollm2_vectors(model_path, fixtures, out_path):
    from transformers import AutoTokenizer  # noqa: F401 (load check)

    tok, _ = load_tokenizer_only(model_path)
    inp = os.path.join(fixtures, "llama.cpp/ggml-vocab-gpt-2.gguf.inp")
    with open(inp, encoding="utf-8") as f:
        strings = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    with open(out_path, "w", encoding="utf-8") as f:
        for s in strings:
            ids = tok(s, add_special_tokens=False).input_ids
            f.write("".join(" %d" % i for i in ids) + "\n")
    print("%s: %d strings" % (out_path, len(strings)))


def load_tokenizer_only(path):
    from transformers import AutoTokenizer
    from tokenizers import pre_tokenizers

    folder, name = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    pre = gguf.GGUFReader(path).fields.get("tokenizer.ggml.pre")
    if pre is not None and pre.contents() == "smollm":
        tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False,
                                     trim_offsets=True, use_regex=True)])
    return tok, None


# ---------------------------------------------------------------------------
# Hugging Face directories (docs/models.md): tiny random models of each
# architecture, saved by transformers (safetensors) with a real tokenizer
# cut down to a small vocabulary, and their GGUF conversion written here
# from the same weights. The reference is transformers on the directory.
# ---------------------------------------------------------------------------

# Each tokenizer keeps its first `keep` ids (all 256 byte tokens among
# them), the merges among those, and the special tokens the chat template
# uses, renumbered after them: same pre-tokenizer, normalizer, decoder and
# post-processor as the published file, a vocabulary small enough to commit.
HF_TEMPLATES = "llama.cpp/templates"
HF_MODELS = [
    {   # Llama 2 / TinyLlama style: SentencePiece BPE with byte fallback
        "name": "hf-llama", "arch": "llama", "seed": 11,
        "tokenizer": "llama2-spm", "keep": 600, "specials": [],
        "template": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
        "dtype": "float32", "tied": False,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "eps": 1e-5, "theta": 10000.0,
    },
    {   # Llama 3.1+: byte-level BPE, rope_scaling "llama3"; the original
        # context is tiny so the scaling changes the short test prompts
        "name": "hf-llama3", "arch": "llama", "seed": 12,
        "tokenizer": "llama3-bpe", "keep": 600,
        "specials": ["<|begin_of_text|>", "<|end_of_text|>",
                     "<|start_header_id|>", "<|end_header_id|>",
                     "<|eot_id|>"],
        "template": "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "dtype": "bfloat16", "tied": True,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "eps": 1e-5, "theta": 10000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32},
    },
    {   # Mistral: SentencePiece BPE, sliding-window attention
        "name": "hf-mistral", "arch": "mistral", "seed": 13,
        "tokenizer": "llama2-spm", "keep": 600, "specials": [],
        "template": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
        "dtype": "float16", "tied": False,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 1,
        "eps": 1e-5, "theta": 1000000.0, "sliding_window": 12,
    },
    {   # Qwen2.5: q/k/v biases, NFC normalizer
        "name": "hf-qwen2", "arch": "qwen2", "seed": 14,
        "tokenizer": "qwen2-bpe", "keep": 600,
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "template": "Qwen-Qwen2.5-7B-Instruct.jinja",
        "dtype": "bfloat16", "tied": True,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "eps": 1e-6, "theta": 1000000.0,
    },
    {   # Qwen2.5 long context: rope_scaling "yarn" (gpt-oss's rope too);
        # the original context (16) is shorter than the test prompts, so
        # the ramp between beta_fast and beta_slow and the attention factor
        # (0.1 ln 4 + 1) both move the logits
        "name": "hf-qwen2-yarn", "arch": "qwen2", "seed": 18,
        "tokenizer": "qwen2-bpe", "keep": 600,
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "template": "Qwen-Qwen2.5-7B-Instruct.jinja",
        "dtype": "float32", "tied": True,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "eps": 1e-6, "theta": 10000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 16},
    },
    {   # Qwen3: per-head q/k RMSNorm, head_dim != hidden / heads
        "name": "hf-qwen3", "arch": "qwen3", "seed": 15,
        "tokenizer": "qwen2-bpe", "keep": 600,
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>",
                     "<think>", "</think>"],
        "dtype": "bfloat16", "tied": True,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "head_dim": 32, "eps": 1e-6, "theta": 1000000.0,
    },
    {   # Gemma 3 (text): a sliding layer then a global one (pattern 2 in
        # place of 6), window 12 < the prompts, own rope bases with linear
        # scaling x8 on the global layer (as 4B-27B), QK-norm, norms around
        # attention and FFN as 1 + w, GeGLU, sqrt(dim) embedding scale,
        # query_pre_attn_scalar 24 != head_dim 32. SentencePiece vocabulary
        # with Gemma's turn markers and the published Gemma 2 template (the
        # Gemma 3 one is not among the fixtures: same turn format)
        "name": "hf-gemma3", "arch": "gemma3_text", "seed": 16,
        "tokenizer": "llama2-spm", "keep": 600,
        "specials": ["<start_of_turn>", "<end_of_turn>"],
        "specials_special": True,
        "template": "google-gemma-2-2b-it.jinja",
        "dtype": "bfloat16", "tied": True,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "head_dim": 32, "eps": 1e-6, "theta": 1000000.0,
        "theta_local": 10000.0, "rope_linear": 8.0, "sliding_window": 12,
        "swa_pattern": 2, "query_pre_attn_scalar": 24,
    },
    {   # Qwen3-MoE: 8 experts of 32, 2 routed per token, renormalised
        # top-k weights (Qwen3-30B-A3B's norm_topk_prob); dense attention
        # as qwen3 (QK-norm). "hidden" is unused by its MoE layers.
        "name": "hf-qwen3moe", "arch": "qwen3_moe", "seed": 16,
        "tokenizer": "qwen2-bpe", "keep": 600,
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>",
                     "<think>", "</think>"],
        "dtype": "bfloat16", "tied": False,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "head_dim": 32, "eps": 1e-6, "theta": 1000000.0,
        "template": "Qwen-Qwen3-0.6B.jinja",
        "moe": {"experts": 8, "used": 2, "ff": 32, "norm": True},
    },
    {   # the same without renormalisation (norm_topk_prob false): the
        # top-k softmax probabilities weight the experts as they are
        "name": "hf-qwen3moe-nonorm", "arch": "qwen3_moe", "seed": 17,
        "tokenizer": "qwen2-bpe", "keep": 600,
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>",
                     "<think>", "</think>"],
        "dtype": "float32", "tied": True,
        "dim": 64, "hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2,
        "head_dim": 32, "eps": 1e-6, "theta": 1000000.0,
        "template": "Qwen-Qwen3-0.6B.jinja",
        "moe": {"experts": 6, "used": 3, "ff": 48, "norm": False},
    },
    {   # gpt-oss: a sliding layer (window 12 < the prompts) then a full
        # one, q/k/v/o biases, a sink per head, YaRN (factor 8, original
        # context 16, truncate false as the published config), 8 experts
        # of 64 with 4 routed (router bias, softmax over the top 4),
        # biases and the clamped SwiGLU; experts rounded to MXFP4 before
        # the reference runs and stored as the published checkpoints
        # (*_blocks, *_scales), so both formats hold the same values.
        # Harmony's special tokens on the qwen2 vocabulary (o200k is in no
        # fixture), the published gpt-oss template
        "name": "hf-gptoss", "arch": "gpt_oss", "seed": 20,
        "tokenizer": "qwen2-bpe", "keep": 600,
        "specials": ["<|endoftext|>", "<|return|>", "<|constrain|>",
                     "<|channel|>", "<|start|>", "<|end|>", "<|message|>",
                     "<|call|>"],
        "specials_special": True, "eos": "<|return|>",
        "template": "openai-gpt-oss-120b.jinja",
        "dtype": "bfloat16", "tied": False,
        "dim": 64, "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2,
        "head_dim": 32, "eps": 1e-5, "theta": 150000.0,
        "sliding_window": 12,
        "rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                         "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False,
                         "original_max_position_embeddings": 16},
        "moe": {"experts": 8, "used": 4, "ff": 64},
    },
]

HF_CASES = [
    {"name": "plain",
     "text": "The quick brown fox jumps over the lazy dog, and then it "
             "runs back into the forest to find its friends."},
    # accents, CJK and an emoji: byte-level BPE spells them in bytes, the
    # SentencePiece vocabularies need byte fallback for every one of them
    {"name": "bytes", "text": "Caf\u00e9 na\u00efve \u2014 \u65e5\u672c "
                              "\U0001F642 12345"},
    {"name": "chat",
     "messages": [{"role": "user", "content": "Hi! What is 2+2?"}]},
]


def truncate_tokenizer(tj, tc, keep, specials):
    """(tokenizer.json, tokenizer_config.json) cut to `keep` ids plus the
    named special tokens; returns both and the new vocabulary size."""
    model = tj["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < keep}
    if model.get("byte_fallback"):
        # SentencePiece vocabularies hold every character of every piece;
        # a cut one must too, or HF (no merge with an unknown character)
        # and SentencePiece (merge any pair whose text is a piece) differ
        chars = sorted({c for t in vocab for c in t if c not in vocab},
                       key=lambda c: model["vocab"].get(c, 1 << 30))
        missing = [c for c in chars if c not in model["vocab"]]
        if missing:
            sys.exit("oracle: characters %r are no pieces" % missing)
        for c in chars:
            vocab[c] = len(vocab)
    byte_ok = sum(1 for t in vocab if len(t) == 1) >= 188 \
        or sum(1 for t in vocab if t.startswith("<0x")) == 256
    if not byte_ok:
        sys.exit("oracle: the first %d ids do not hold every byte" % keep)
    merges = []
    for m in model["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append(m)
    model["vocab"], model["merges"] = vocab, merges
    remap, added, nid = {}, [], len(vocab)
    for at in tj["added_tokens"]:
        if at["id"] < keep:
            remap[at["id"]] = at["id"]
            added.append(at)
        elif at["content"] in specials:
            remap[at["id"]] = nid
            added.append(dict(at, id=nid))
            nid += 1
    for content in specials:
        # a special token the source vocabulary lacks (Qwen3's <think>
        # pair on the Qwen2 vocabulary): added as Qwen3's file adds it
        if content not in {a["content"] for a in added}:
            added.append({"id": nid, "content": content,
                          "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False,
                          "special": False})
            nid += 1
    tj["added_tokens"] = added

    def fix_ids(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "ids" and isinstance(v, list):
                    node[k] = [remap[i] for i in v]
                else:
                    fix_ids(v)
        elif isinstance(node, list):
            for v in node:
                fix_ids(v)
    fix_ids(tj.get("post_processor"))
    dec = tc.get("added_tokens_decoder", {})
    tc["added_tokens_decoder"] = {str(remap[int(k)]): v
                                  for k, v in dec.items()
                                  if int(k) in remap}
    if "additional_special_tokens" in tc:
        kept = {a["content"] for a in added}
        tc["additional_special_tokens"] = [
            s for s in tc["additional_special_tokens"] if s in kept]
    return tj, tc, nid


def hf_config(spec, vocab):
    from transformers import AutoConfig

    kw = dict(vocab_size=vocab, hidden_size=spec["dim"],
              intermediate_size=spec["hidden"],
              num_hidden_layers=spec["layers"],
              num_attention_heads=spec["heads"],
              num_key_value_heads=spec["kv_heads"],
              max_position_embeddings=256, rms_norm_eps=spec["eps"],
              rope_theta=spec["theta"], tie_word_embeddings=spec["tied"],
              bos_token_id=None, eos_token_id=None)
    if "head_dim" in spec:
        kw["head_dim"] = spec["head_dim"]
    if "rope_scaling" in spec:
        kw["rope_scaling"] = dict(spec["rope_scaling"])
    if spec["arch"] == "mistral":
        kw["sliding_window"] = spec.get("sliding_window")
    if spec["arch"] == "gemma3_text":
        del kw["rope_theta"]
        kw.update(
            sliding_window=spec["sliding_window"],
            layer_types=["full_attention" if (i + 1) % spec["swa_pattern"]
                         == 0 else "sliding_attention"
                         for i in range(spec["layers"])],
            query_pre_attn_scalar=spec["query_pre_attn_scalar"],
            rope_parameters={
                "full_attention": {"rope_type": "linear",
                                   "factor": spec["rope_linear"],
                                   "rope_theta": spec["theta"]},
                "sliding_attention": {"rope_type": "default",
                                      "rope_theta": spec["theta_local"]}},
            pad_token_id=None)
    if spec["arch"] == "gpt_oss":
        del kw["rope_theta"]
        moe = spec["moe"]
        kw.update(
            intermediate_size=moe["ff"], num_local_experts=moe["experts"],
            num_experts_per_tok=moe["used"], head_dim=spec["head_dim"],
            sliding_window=spec["sliding_window"], attention_bias=True,
            layer_types=["full_attention" if i % 2 else "sliding_attention"
                         for i in range(spec["layers"])],
            rope_parameters=dict(spec["rope_scaling"],
                                 rope_theta=spec["theta"]),
            pad_token_id=None)
        kw.pop("rope_scaling", None)
    elif "moe" in spec:
        moe = spec["moe"]
        kw.update(num_experts=moe["experts"],
                  num_experts_per_tok=moe["used"],
                  moe_intermediate_size=moe["ff"],
                  norm_topk_prob=moe["norm"], decoder_sparse_step=1,
                  mlp_only_layers=[])
    return AutoConfig.for_model(spec["arch"], **kw)


def hf_init_weights(model, spec):
    """Seeded weights with a useful spread: logits of std ~5, biases and
    q/k-norm gains large enough that dropping them shows."""
    import torch

    g = torch.Generator().manual_seed(spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("q_norm.weight") or name.endswith(
                    "k_norm.weight"):
                v = 1.0 + 0.5 * r
            elif "norm" in name and spec["arch"] == "gemma3_text":
                v = 0.1 * r             # Gemma scales by 1 + w
            elif "norm" in name:
                v = 1.0 + 0.1 * r
            elif name.endswith("sinks"):
                v = 4.0 + 2.0 * r       # gpt-oss: comparable to the scores
            elif name.endswith(".bias") or name.endswith("_proj_bias"):
                v = 0.5 * r
            elif name.endswith("experts.gate_up_proj"):
                # gpt-oss (E, dim, 2ff): gates past the clamp at 7
                v = 3.0 * r / np.sqrt(p.shape[1])
            elif name.endswith("experts.down_proj"):
                v = r / np.sqrt(p.shape[1])
            elif name.endswith("mlp.router.weight"):
                v = 2.0 * r / np.sqrt(p.shape[-1])
            elif "embed_tokens" in name:
                v = r
            elif "lm_head" in name:
                v = 4.0 * r / np.sqrt(p.shape[1])
            elif "q_proj" in name or "k_proj" in name:
                v = 1.5 * r / np.sqrt(p.shape[1])
            elif name.endswith("mlp.gate.weight"):
                # MoE router: spread enough that routing differs by token
                v = 2.0 * r / np.sqrt(p.shape[-1])
            else:
                v = r / np.sqrt(p.shape[-1])
            p.copy_(v)


def hf_permute(w, n_head):
    """HF rotate-half rows -> Meta's adjacent pairs, as llama.cpp's
    convert_hf_to_gguf.py does for llama-architecture GGUFs."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_factors(spec, head_dim):
    """rope_freqs.weight as llama.cpp's converter writes it."""
    import math

    rs = spec["rope_scaling"]
    base, dim = spec["theta"], head_dim
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    lo_wl = rs["original_max_position_embeddings"] / rs["low_freq_factor"]
    hi_wl = rs["original_max_position_embeddings"] / rs["high_freq_factor"]
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(rs["factor"])
        else:
            smooth = ((rs["original_max_position_embeddings"] / wl
                       - rs["low_freq_factor"])
                      / (rs["high_freq_factor"] - rs["low_freq_factor"]))
            out.append(1.0 / ((1 - smooth) / rs["factor"] + smooth))
    return np.array(out, dtype=np.float32)


HF_GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
}

# per-expert HF tensors (mlp.experts.N.<proj>.weight), stacked by expert
# into llama.cpp's 3-D tensors
HF_GGUF_EXPERTS = {
    "gate_proj": "ffn_gate_exps.weight",
    "up_proj": "ffn_up_exps.weight",
    "down_proj": "ffn_down_exps.weight",
}

# Gemma's four norms of a layer (llama.cpp's names)
HF_GGUF_GEMMA3_NAMES = dict(HF_GGUF_NAMES, **{
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
})


def gguf_tokenizer(writer, tj, tc, spec, vocab):
    """The cut-down tokenizer.json as llama.cpp's metadata."""
    model = tj["model"]
    tokens = [""] * vocab
    types = [1] * vocab
    for t, i in model["vocab"].items():
        tokens[i] = t
    special = {a["content"] for a in tj["added_tokens"] if a["special"]}
    for a in tj["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = 3 if a["special"] else 4
    spm = model.get("byte_fallback", False)
    for i, t in enumerate(tokens):
        if spm and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types[i] = 6
        if t == model.get("unk_token"):
            types[i] = 2
    ids = {t: i for i, t in enumerate(tokens)}
    if spm:
        # SentencePiece merges the pair whose piece scores highest; HF the
        # pair whose merge comes first: score = -(rank of the first merge
        # that makes the piece) gives the same order
        scores = [-1e9] * vocab
        for rank, m in enumerate(model["merges"]):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if scores[ids[a + b]] == -1e9:
                scores[ids[a + b]] = -float(rank)
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_add_space_prefix(True)
    else:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("llama-bpe" if spec["tokenizer"]
                                 == "llama3-bpe" else "qwen2")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges([m if isinstance(m, str) else " ".join(m)
                                 for m in model["merges"]])
    bos, eos = tc.get("bos_token"), tc.get("eos_token")
    if isinstance(bos, dict):
        bos = bos["content"]
    if isinstance(eos, dict):
        eos = eos["content"]
    if bos in ids:
        writer.add_bos_token_id(ids[bos])
    if eos in ids:
        writer.add_eos_token_id(ids[eos])
    if model.get("unk_token") in ids:
        writer.add_unk_token_id(ids[model["unk_token"]])
    post = json.dumps(tj.get("post_processor"))
    writer.add_add_bos_token(bos is not None and bos in special
                             and ('"%s"' % bos) in post)
    if tc.get("chat_template"):
        writer.add_chat_template(tc["chat_template"])
    del special


def write_hf_gguf(spec, folder, tj, tc, vocab, path):
    import torch
    from safetensors.torch import load_file

    st = load_file(os.path.join(folder, "model.safetensors"))
    arch = {"llama": "llama", "mistral": "llama",
            "qwen3_moe": "qwen3moe"}.get(spec["arch"], spec["arch"])
    gemma = arch == "gemma3_text"
    arch = "gemma3" if gemma else arch
    names = HF_GGUF_GEMMA3_NAMES if gemma else HF_GGUF_NAMES
    head_dim = spec.get("head_dim", spec["dim"] // spec["heads"])
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(spec["name"])
    writer.add_context_length(256)
    writer.add_embedding_length(spec["dim"])
    writer.add_feed_forward_length(spec["hidden"])
    writer.add_block_count(spec["layers"])
    writer.add_head_count(spec["heads"])
    writer.add_head_count_kv(spec["kv_heads"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(spec["theta"])
    writer.add_layer_norm_rms_eps(spec["eps"])
    writer.add_vocab_size(vocab)
    if spec.get("sliding_window"):
        writer.add_sliding_window(spec["sliding_window"])
    if gemma:
        # llama.cpp's gemma3 keys; the pattern, local base and attention
        # scale llama.cpp fixes (6, 10000, head_dim) are written because
        # the tiny model differs
        writer.add_sliding_window_pattern(spec["swa_pattern"])
        writer.add_float32("gemma3.rope.freq_base_swa", spec["theta_local"])
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(spec["rope_linear"])
        writer.add_float32("gemma3.attention.query_pre_attn_scalar",
                           float(spec["query_pre_attn_scalar"]))
    rs = spec.get("rope_scaling", {})
    if rs.get("rope_type") == "yarn":
        # llama.cpp's keys; its betas default to 32 and 1 as transformers'
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rs["factor"])
        writer.add_rope_scaling_orig_ctx_len(
            rs["original_max_position_embeddings"])
    if "moe" in spec:
        writer.add_expert_count(spec["moe"]["experts"])
        writer.add_expert_used_count(spec["moe"]["used"])
        writer.add_expert_feed_forward_length(spec["moe"]["ff"])
        # llama.cpp renormalises qwen3moe's top-k unless this says not to
        writer.add_expert_weights_norm(spec["moe"]["norm"])
    gguf_tokenizer(writer, tj, tc, spec, vocab)

    def add(name, t):
        if t.ndim == 1:
            writer.add_tensor(name, t.float().numpy())
        elif t.dtype == torch.bfloat16:
            writer.add_tensor(name, t.view(torch.int16).numpy()
                              .view(np.uint16), raw_dtype=QT.BF16)
        elif t.dtype == torch.float16:
            writer.add_tensor(name, t.numpy())
        else:
            writer.add_tensor(name, t.float().numpy())

    experts = {}
    for name in sorted(st):
        t = st[name]
        if gemma and name.endswith("norm.weight"):
            t = t.float() + 1.0     # llama.cpp's converter: norm_shift
        if ".mlp.experts." in name:
            layer, rest = name[len("model.layers."):].split(".", 1)
            _, _, e, proj, _ = rest.split(".")
            experts.setdefault((int(layer), proj), {})[int(e)] = t
        elif name == "model.embed_tokens.weight":
            add("token_embd.weight", t)
        elif name == "model.norm.weight":
            add("output_norm.weight", t)
        elif name == "lm_head.weight":
            add("output.weight", t)
        else:
            layer, rest = name[len("model.layers."):].split(".", 1)
            out = "blk.%s.%s" % (layer, names[rest])
            if arch == "llama" and rest == "self_attn.q_proj.weight":
                t = hf_permute(t, spec["heads"])
            elif arch == "llama" and rest == "self_attn.k_proj.weight":
                t = hf_permute(t, spec["kv_heads"])
            add(out, t.contiguous())
    for (layer, proj), per in sorted(experts.items()):
        add("blk.%d.%s" % (layer, HF_GGUF_EXPERTS[proj]),
            torch.stack([per[e] for e in sorted(per)]).contiguous())
    if spec.get("rope_scaling", {}).get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight",
                          llama3_rope_factors(spec, head_dim))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def mxfp4_round(model):
    """gpt-oss: every expert matrix rounded to MXFP4 in place (gguf-py's
    quantizer, llama.cpp's rounding); returns {(layer, proj): ggml blocks
    (E, rows, cols / 32 * 17) of the matrices as (out, in) rows}."""
    import torch

    blocks = {}
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            ex = layer.mlp.experts
            for proj in ("gate_up_proj", "down_proj"):
                p = getattr(ex, proj)                   # (E, in, out)
                w = p.detach().float().transpose(1, 2).contiguous().numpy()
                q = gguf.quants.quantize(w, QT.MXFP4)   # (E, out, bytes)
                d = gguf.quants.dequantize(q, QT.MXFP4).reshape(w.shape)
                p.copy_(torch.from_numpy(d).transpose(1, 2))
                blocks[(i, proj)] = q
    return blocks


def mxfp4_hf(q):
    """ggml MXFP4 blocks (..., nb * 17) -> the published checkpoints'
    (*_blocks (..., nb, 16), *_scales (..., nb)): the same scale byte and
    codes, two per byte in element order, low nibble first."""
    b = q.reshape(q.shape[:-1] + (q.shape[-1] // 17, 17))
    scales, qs = b[..., 0], b[..., 1:]
    codes = np.concatenate([qs & 15, qs >> 4], axis=-1)      # elements
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8), \
        scales.copy()


def write_gptoss_files(spec, folder, blocks, tj, tc, vocab, gguf_path):
    """The saved directory's experts replaced by MXFP4 *_blocks/*_scales
    (and a quantization_config, as openai/gpt-oss-20b), and the GGUF with
    llama.cpp's gpt-oss names, written from the same blocks."""
    import torch
    from safetensors.torch import load_file, save_file

    path = os.path.join(folder, "model.safetensors")
    st = load_file(path)
    for (i, proj), q in blocks.items():
        pre = "model.layers.%d.mlp.experts.%s" % (i, proj)
        del st[pre]
        bl, sc = mxfp4_hf(q)
        st[pre + "_blocks"] = torch.from_numpy(bl)
        st[pre + "_scales"] = torch.from_numpy(sc)
    save_file(st, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    cfg_path = os.path.join(folder, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn",
                                   "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"]}
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)

    moe, head_dim = spec["moe"], spec["head_dim"]
    rs = spec["rope_scaling"]
    writer = gguf.GGUFWriter(gguf_path, "gpt-oss")
    writer.add_name(spec["name"])
    writer.add_context_length(256)
    writer.add_embedding_length(spec["dim"])
    writer.add_feed_forward_length(moe["ff"])
    writer.add_block_count(spec["layers"])
    writer.add_head_count(spec["heads"])
    writer.add_head_count_kv(spec["kv_heads"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(spec["theta"])
    writer.add_layer_norm_rms_eps(spec["eps"])
    writer.add_vocab_size(vocab)
    writer.add_sliding_window(spec["sliding_window"])
    writer.add_expert_count(moe["experts"])
    writer.add_expert_used_count(moe["used"])
    writer.add_expert_feed_forward_length(moe["ff"])
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(rs["factor"])
    writer.add_rope_scaling_orig_ctx_len(
        rs["original_max_position_embeddings"])
    gguf_tokenizer(writer, tj, tc, spec, vocab)

    def add(name, t):
        if t.ndim == 1 or t.dtype != torch.bfloat16:
            writer.add_tensor(name, t.float().numpy())
        else:
            writer.add_tensor(name, t.contiguous().view(torch.int16).numpy()
                              .view(np.uint16), raw_dtype=QT.BF16)

    names = dict(HF_GGUF_NAMES, **{
        "self_attn.o_proj.bias": "attn_output.bias",
        "self_attn.sinks": "attn_sinks.weight",
        "post_attention_layernorm.weight": "post_attention_norm.weight",
        "mlp.router.weight": "ffn_gate_inp.weight",
        "mlp.router.bias": "ffn_gate_inp.bias"})
    for name in sorted(st):
        t = st[name]
        if name == "model.embed_tokens.weight":
            add("token_embd.weight", t)
        elif name == "model.norm.weight":
            add("output_norm.weight", t)
        elif name == "lm_head.weight":
            add("output.weight", t)
        elif ".mlp.experts." in name:
            layer, rest = name[len("model.layers."):].split(".", 1)
            blk = "blk.%s." % layer
            if rest.endswith("gate_up_proj_bias"):
                add(blk + "ffn_gate_exps.bias", t[:, 0::2].float())
                add(blk + "ffn_up_exps.bias", t[:, 1::2].float())
            elif rest.endswith("down_proj_bias"):
                add(blk + "ffn_down_exps.bias", t.float())
        else:
            layer, rest = name[len("model.layers."):].split(".", 1)
            add("blk.%s.%s" % (layer, names[rest]), t)
    for (i, proj), q in sorted(blocks.items()):
        blk = "blk.%d." % i
        if proj == "gate_up_proj":
            writer.add_tensor(blk + "ffn_gate_exps.weight",
                              np.ascontiguousarray(q[:, 0::2]),
                              raw_dtype=QT.MXFP4)
            writer.add_tensor(blk + "ffn_up_exps.weight",
                              np.ascontiguousarray(q[:, 1::2]),
                              raw_dtype=QT.MXFP4)
        else:
            writer.add_tensor(blk + "ffn_down_exps.weight", q,
                              raw_dtype=QT.MXFP4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_hf_model(spec, fixtures, folder, gguf_path):
    import shutil
    import torch
    from transformers import AutoModelForCausalLM

    src = os.path.join(fixtures, "tokenizers", spec["tokenizer"])
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(src, "tokenizer_config.json"),
              encoding="utf-8") as f:
        tc = json.load(f)
    tj, tc, vocab = truncate_tokenizer(tj, tc, spec["keep"],
                                       spec["specials"])
    if spec.get("specials_special"):
        # Gemma's turn markers are special tokens of its vocabulary (one
        # id each in every text), not plain added words
        for a in tj["added_tokens"]:
            if a["content"] in spec["specials"]:
                a["special"] = True
                tc.setdefault("added_tokens_decoder", {})[str(a["id"])] = {
                    k: v for k, v in a.items() if k != "id"}
    if "template" in spec:
        with open(os.path.join(fixtures, HF_TEMPLATES, spec["template"]),
                  encoding="utf-8") as f:
            tc["chat_template"] = f.read()
    tc.pop("model_max_length", None)
    if "eos" in spec:
        tc["eos_token"] = spec["eos"]

    torch.manual_seed(spec["seed"])
    model = AutoModelForCausalLM.from_config(hf_config(spec, vocab),
                                             dtype=torch.float32)
    hf_init_weights(model, spec)
    blocks = mxfp4_round(model) if spec["arch"] == "gpt_oss" else None
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    model.to(getattr(torch, spec["dtype"])).save_pretrained(
        folder, safe_serialization=True)
    # transformers writes the weights 0600: nginx's engine user reads them
    os.chmod(os.path.join(folder, "model.safetensors"), 0o644)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(folder, extra)):
            os.remove(os.path.join(folder, extra))
    with open(os.path.join(folder, "tokenizer.json"), "w",
              encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w",
              encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    if blocks is not None:
        write_gptoss_files(spec, folder, blocks, tj, tc, vocab, gguf_path)
        # the reference: the model as saved (bf16 values, experts the
        # MXFP4 values the blocks hold), in float32; a fresh model, since
        # .to(bfloat16) also rounded the rotary buffers (inv_freq), which
        # the state dict does not hold
        ref = AutoModelForCausalLM.from_config(model.config,
                                               dtype=torch.float32)
        ref.load_state_dict({k: v.float() for k, v
                             in model.state_dict().items()})
        return ref
    write_hf_gguf(spec, folder, tj, tc, vocab, gguf_path)
    return None


def dir_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, n))
               for n in sorted(os.listdir(folder)))


def make_hf_goldens(spec, repo, fixtures, golden_dir):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rel_dir = "t/data/models/%s" % spec["name"]
    rel_gguf = rel_dir + ".gguf"
    folder, gpath = os.path.join(repo, rel_dir), os.path.join(repo, rel_gguf)
    model = write_hf_model(spec, fixtures, folder, gpath)

    tok = AutoTokenizer.from_pretrained(folder)
    reread = None
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager")
    else:
        from transformers import Mxfp4Config

        model.config._attn_implementation = "eager"
        # transformers reading the written directory back (its own MXFP4
        # decoding of *_blocks/*_scales) must give the reference's logits
        reread = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager",
            quantization_config=Mxfp4Config(dequantize=True))
        reread.eval()
    model.eval()
    weight_type = {"float32": "F32", "float16": "F16",
                   "bfloat16": "BF16"}[spec["dtype"]]
    tensor_types = [weight_type, "F32"]
    if spec["arch"] == "gpt_oss":
        # MXFP4 experts meet int8 activations in the engine (as llama.cpp)
        tensor_types = ["MXFP4", weight_type, "F32"]
        weight_type = "MXFP4"
    tolerance = tolerance_for(spec["name"], weight_type)
    cases, report = [], []
    for case in HF_CASES:
        text, ids = encode_case(tok, case)
        first, greedy, margins, top1 = reference_run(model, ids)
        xcheck = 0.0
        if reread is not None:
            with torch.no_grad():
                back = reread(torch.tensor([ids])).logits[0, -1].double()
            xcheck = float(np.abs(back.numpy() - first).max())
            if xcheck > CROSSCHECK_LIMIT:
                sys.exit("oracle: %s/%s: transformers reading the directory "
                         "back is %.3g off the reference"
                         % (spec["name"], case["name"], xcheck))
        entry = {
            "name": case["name"],
            "prompt": text,
            "chat": "messages" in case,
            "prompt_ids": ids,
            "top_logits": [[i, r6(v)] for i, v in top_k(first, TOP_K)],
            "logit_std": r6(float(first.std())),
            "greedy_ids": greedy,
            "greedy_top1_logits": [r6(v) for v in top1],
            "greedy_margins": [r6(v) for v in margins],
            "first_small_margin_step": first_small_margin(margins,
                                                          tolerance),
            "greedy_text": tok.decode(greedy),
        }
        if "messages" in case:
            entry["messages"] = case["messages"]
        cases.append(entry)
        report.append({"case": case["name"], "tokens": len(ids),
                       "crosscheck": xcheck,
                       "small_margin_step": entry["first_small_margin_step"]})
    for fmt, rel, path in (("hf", rel_dir, folder),
                           ("gguf", rel_gguf, gpath)):
        golden = {
            "model": {"base": "REPO", "path": rel,
                      "bytes": dir_bytes(path) if fmt == "hf"
                      else os.path.getsize(path)},
            "format": fmt,
            "arch": spec["arch"],
            "weight_type": weight_type,
            "tensor_types": tensor_types,
            "reference": "transformers %s, torch %s, fp32 (eager attention) "
                         "on the HF directory; the GGUF is written by "
                         "tools/oracle.py from the same safetensors"
                         % (transformers.__version__,
                            torch.__version__.split("+")[0]),
            "tolerance": tolerance,
            "greedy_steps": GREEDY_STEPS,
            "cases": cases,
        }
        name = spec["name"] + (".json" if fmt == "hf" else "-gguf.json")
        with open(os.path.join(golden_dir, name), "w") as f:
            f.write(dump_golden(golden))
    print_report(spec["name"], weight_type, tolerance, report)


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def make_quant_goldens(args, golden_dir, probes):
    """The default model requantized by our quantizer into each mix, in
    build/t/fidelity/ (where t/055-quant-fidelity.t remakes it: base
    BUILD), and its golden from transformers on that very file. The golden's sha256 is the file's:
    a quantizer that writes other bytes fails t/055 until the golden is
    made again."""
    import subprocess

    os.makedirs(golden_dir, exist_ok=True)
    out_dir = os.path.join(args.repo, "build/t/fidelity")
    os.makedirs(out_dir, exist_ok=True)
    for mix in args.mixes or QUANT_MIXES:
        rel = "t/fidelity/smollm2-%s.gguf" % mix
        path = os.path.join(args.repo, "build", rel)
        subprocess.run([args.engine, "quantize", args.model, path, mix],
                       check=True, stdout=subprocess.DEVNULL)
        make_golden("smollm2-" + mix.lower(), path, "BUILD", rel,
                    SMOLLM2_CASES, os.path.join(golden_dir, mix + ".json"),
                    probes)


def main():
    default_cache = os.path.join(os.environ.get("XDG_CACHE_HOME")
                                 or os.path.expanduser("~/.cache"), "ngx_llm")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", default=os.environ.get(
        "FIXTURES", os.path.join(default_cache, "fixtures")),
        help="the fixtures `make deps` made (tools/fixtures.py)")
    ap.add_argument("--model", default=os.environ.get(
        "MODEL", os.path.join(default_cache,
                              "SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--repo", default=".")
    ap.add_argument("--only", nargs="*", default=None,
                    help="subset: smollm2 stories tiny tokenizer hf "
                    "quant")
    ap.add_argument("--engine", default="build/ngx_llm_engine",
                    help="with --only quant: the engine binary whose "
                    "quantizer makes the files")
    ap.add_argument("--mixes", nargs="*", default=None,
                    help="with --only quant: these mixes (%s)"
                    % " ".join(QUANT_MIXES))
    ap.add_argument("--hf", nargs="*", default=None,
                    help="with --only hf: these HF models (hf-llama ...)")
    ap.add_argument("--no-probes", action="store_true",
                    help="skip the broken-engine variants (faster)")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    parts = set(args.only or ["tokenizer", "tiny", "stories", "smollm2",
                              "hf", "quant"])
    golden_dir = os.path.join(args.repo, "t/data/golden")
    models_dir = os.path.join(args.repo, "t/data/models")
    os.makedirs(golden_dir, exist_ok=True)
    os.makedirs(models_dir, exist_ok=True)
    os.makedirs(os.path.join(args.repo, "t/data/tokenizers"), exist_ok=True)
    probes = not args.no_probes

    if "tokenizer" in parts:
        write_smollm2_vectors(args.model, args.fixtures, os.path.join(
            args.repo, "t/data/tokenizers/smollm2.out"))

    if "tiny" in parts:
        vocab = stories_vocab(args.fixtures)
        for spec in TINY_MODELS:
            rel = "t/data/models/%s.gguf" % spec["name"]
            path = os.path.join(args.repo, rel)
            write_tiny(spec, vocab, path)
            make_golden(spec["name"], path, "REPO", rel, STORIES_CASES,
                        os.path.join(golden_dir, spec["name"] + ".json"),
                        probes)

    if "stories" in parts:
        for t in STORIES_TYPES:
            rel = "models/tiny260K-%s.gguf" % t
            make_golden("tiny260K-" + t, os.path.join(args.fixtures, rel),
                        "FIXTURES", rel, STORIES_CASES,
                        os.path.join(golden_dir, "tiny260K-%s.json" % t),
                        probes)

    if "hf" in parts:
        only = set(args.hf or [spec["name"] for spec in HF_MODELS])
        for spec in HF_MODELS:
            if spec["name"] in only:
                make_hf_goldens(spec, args.repo, args.fixtures, golden_dir)

    if "quant" in parts:
        make_quant_goldens(args, os.path.join(args.repo,
                                              "t/data/golden-quant"), probes)

    if "smollm2" in parts:
        make_golden("smollm2-q4_1", args.model, "MODEL",
                    os.path.basename(args.model), SMOLLM2_CASES,
                    os.path.join(golden_dir, "smollm2-q4_1.json"), probes)


if __name__ == "__main__":
    main()
