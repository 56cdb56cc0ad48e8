#!/usr/bin/env python3
"""
fixtures.py: the test fixtures ngx_llm makes itself, from files `make deps`
fetched from a package registry (docs/testing.md). Python 3 standard
library only, deterministic: integer RNG, IEEE arithmetic (+ - * / sqrt,
correctly rounded everywhere), no libm transcendental functions, so every
machine writes the same bytes; tools/deps.sh checks them against the sha256
pins in tools/fixtures.sha256.

  fixtures.py tokenizer-json VOCAB.gguf KIND OUT_DIR [TEMPLATE.jinja]
      a Hugging Face tokenizer.json + tokenizer_config.json holding a
      llama.cpp vocab-only GGUF's full vocabulary. KIND: llama3-bpe,
      qwen2-bpe (byte-level BPE) or llama2-spm (SentencePiece as HF's
      LlamaTokenizerFast stores it: BPE with byte fallback, merges made
      from the scores as transformers' SentencePieceExtractor does).
      The tests check our tokenizer.json loader against the HF-made
      .inp/.out vectors of the same vocabulary.

  fixtures.py tiny260k SPM_VOCAB.gguf OUT_DIR
      tiny260K-{f32,f16,bf16,q8_0,q4_0,q4_1}.gguf: a llama of
      stories260K's shape (dim 64, hidden 172, 5 layers, 8 heads, 4 KV
      heads, context 512, tied classifier) with seeded weights and 512
      pieces of the Llama 2 SPM vocabulary (spm_subset). ffn_down stays F16
      in the quantized files (172 is not a multiple of 32). Goldens:
      tools/oracle.py (transformers) -> t/data/golden/tiny260K-*.json.
"""

import json
import math
import os
import struct
import sys


# ---------------------------------------------------------------------------
# GGUF: read the metadata of a file, write a whole file
# ---------------------------------------------------------------------------

GGUF_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f",
               7: "?", 10: "Q", 11: "q", 12: "d"}
GGUF_STRING, GGUF_ARRAY = 8, 9


def read_gguf_metadata(path):
    """key -> value (strings as bytes, arrays as lists)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        sys.exit("fixtures: %s is not a GGUF file" % path)
    pos = 4

    def take(fmt):
        nonlocal pos
        size = struct.calcsize("<" + fmt)
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += size
        return values[0]

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return data[pos - n:pos]

    def value(kind):
        if kind == GGUF_STRING:
            return string()
        if kind == GGUF_ARRAY:
            item, n = take("I"), take("Q")
            return [value(item) for _ in range(n)]
        return take(GGUF_SCALAR[kind])

    take("I")                       # version
    take("Q")                       # tensors
    meta = {}
    for _ in range(take("Q")):
        key = string().decode()
        meta[key] = value(take("I"))
    return meta


def gguf_value(v):
    """python value -> (type id, bytes)."""
    if isinstance(v, bool):
        return 7, struct.pack("<?", v)
    if isinstance(v, int):
        return 4, struct.pack("<I", v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, (bytes, str)):
        b = v.encode() if isinstance(v, str) else v
        return GGUF_STRING, struct.pack("<Q", len(b)) + b
    if isinstance(v, tuple):        # ("i32" | "f32", list)
        kind, items = v
        code, fmt = {"i32": (5, "<i"), "f32": (6, "<f")}[kind]
        return GGUF_ARRAY, (struct.pack("<IQ", code, len(items))
                            + b"".join(struct.pack(fmt, x) for x in items))
    if isinstance(v, list):         # strings
        return GGUF_ARRAY, (struct.pack("<IQ", GGUF_STRING, len(v))
                            + b"".join(gguf_value(x)[1] for x in v))
    raise TypeError(type(v))


def write_gguf(path, meta, tensors, alignment=32):
    """tensors: [(name, dims (ne0 first), ggml type, bytes)]."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(meta))]
    for key, v in meta.items():
        kind, raw = gguf_value(v)
        out += [gguf_value(key)[1], struct.pack("<I", kind), raw]
    offset = 0
    for name, dims, ggml_type, raw in tensors:
        out += [gguf_value(name)[1], struct.pack("<I", len(dims)),
                b"".join(struct.pack("<Q", d) for d in dims),
                struct.pack("<IQ", ggml_type, offset)]
        offset += -(-len(raw) // alignment) * alignment
    head = b"".join(out)
    head += b"\0" * (-len(head) % alignment)
    body = b"".join(raw + b"\0" * (-len(raw) % alignment)
                    for _, _, _, raw in tensors)
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(head + body)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# tokenizer.json from a vocab-only GGUF
# ---------------------------------------------------------------------------

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
               r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL = 1, 2, 3
TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 4, 5, 6


def added_token(i, content, special):
    return {"id": i, "content": content, "single_word": False,
            "lstrip": False, "rstrip": False, "normalized": not special,
            "special": special}


def byte_level(split, trim_offsets, ignore_merges, normalizer):
    """llama3-bpe / qwen2-bpe: the parts of tokenizer.json besides vocab,
    as Meta's and Qwen's published files have them."""
    level = {"type": "ByteLevel", "add_prefix_space": False,
             "trim_offsets": trim_offsets, "use_regex": False}
    return {
        "normalizer": normalizer,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split},
             "behavior": "Isolated", "invert": False}, level]},
        "post_processor": dict(level, trim_offsets=False),
        "decoder": dict(level, trim_offsets=False),
        "model_extra": {"unk_token": None, "fuse_unk": False,
                        "byte_fallback": False,
                        "ignore_merges": ignore_merges},
    }


def spm_merges(tokens, scores):
    """Merges of a SentencePiece BPE vocabulary, as transformers'
    SentencePieceExtractor makes them: every split of a piece into two
    pieces of the vocabulary, ordered by the merged piece's score (high
    first), splits of one piece by the ids of their halves."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for i in sorted(range(len(tokens)), key=lambda i: -scores[i]):
        piece, local = tokens[i], []
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        merges += ["%s %s" % (l, r) for _, _, l, r in sorted(local)]
    return merges


def tokenizer_json(vocab_path, kind, out_dir, template_path=None):
    meta = read_gguf_metadata(vocab_path)
    tokens = [t.decode("utf-8") for t in meta["tokenizer.ggml.tokens"]]
    types = meta["tokenizer.ggml.token_type"]
    vocab, added = {}, []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty == TOKEN_USER_DEFINED and t.startswith("[PAD"):
            continue                # llama.cpp's padding rows: not tokens
        if ty in (TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNKNOWN):
            added.append(added_token(i, t, ty != TOKEN_USER_DEFINED))
        if kind == "llama2-spm" or ty == TOKEN_NORMAL:
            vocab[t] = i

    if kind == "llama2-spm":
        scores = meta["tokenizer.ggml.scores"]
        merges = spm_merges(tokens, [scores[i] if types[i] == TOKEN_NORMAL
                                     else -1e30 for i in range(len(tokens))])
        parts = {
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u2581"},
                {"type": "Replace", "pattern": {"String": " "},
                 "content": "\u2581"}]},
            "pre_tokenizer": None,
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "<s>", "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<s>": {"id": "<s>", "ids": [1],
                                           "tokens": ["<s>"]}}},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"},
                 "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model_extra": {"unk_token": "<unk>", "fuse_unk": True,
                            "byte_fallback": True},
        }
        config = {"add_bos_token": True, "add_eos_token": False,
                  "bos_token": "<s>", "eos_token": "</s>",
                  "unk_token": "<unk>", "legacy": True,
                  "clean_up_tokenization_spaces": False,
                  "tokenizer_class": "LlamaTokenizer"}
    elif kind == "llama3-bpe":
        merges = [m.decode("utf-8") for m in meta["tokenizer.ggml.merges"]]
        parts = byte_level(LLAMA3_SPLIT, True, True, None)
        # the early Llama 3 revision: the post-processor adds no BOS
        config = {"bos_token": "<|begin_of_text|>",
                  "eos_token": "<|end_of_text|>",
                  "clean_up_tokenization_spaces": True,
                  "tokenizer_class": "PreTrainedTokenizerFast"}
    elif kind == "qwen2-bpe":
        merges = [m.decode("utf-8") for m in meta["tokenizer.ggml.merges"]]
        parts = byte_level(QWEN2_SPLIT, False, False, {"type": "NFC"})
        config = {"add_bos_token": False, "bos_token": None,
                  "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                  "unk_token": None, "clean_up_tokenization_spaces": False,
                  "tokenizer_class": "Qwen2Tokenizer"}
    else:
        sys.exit("fixtures: unknown tokenizer kind %s" % kind)

    model = {"type": "BPE", "dropout": None, "unk_token": None,
             "continuing_subword_prefix": None, "end_of_word_suffix": None,
             "fuse_unk": False, "byte_fallback": False}
    model.update(parts.pop("model_extra"))
    model["vocab"], model["merges"] = vocab, merges
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": added}
    tj.update(parts)
    tj["model"] = model
    # as the published configs: transformers' slow-tokenizer classes
    # (Qwen2Tokenizer) take their special tokens from here, not from
    # tokenizer.json
    config["added_tokens_decoder"] = {
        str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized",
                                         "rstrip", "single_word", "special")}
        for a in added}
    if kind == "qwen2-bpe":
        config["additional_special_tokens"] = ["<|im_start|>", "<|im_end|>"]
        config["split_special_tokens"] = False
    if template_path is not None:
        with open(template_path, encoding="utf-8") as f:
            config["chat_template"] = f.read()

    os.makedirs(out_dir, exist_ok=True)
    for name, obj in (("tokenizer.json", tj),
                      ("tokenizer_config.json", config)):
        tmp = os.path.join(out_dir, name + ".part")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)
            f.write("\n")
        os.replace(tmp, os.path.join(out_dir, name))


# ---------------------------------------------------------------------------
# tiny260K: seeded weights, the six tensor types
# ---------------------------------------------------------------------------

TINY260K = {"dim": 64, "hidden": 172, "layers": 5, "heads": 8,
            "kv_heads": 4, "vocab": 512, "context": 512, "seed": 260}
SQRT3 = math.sqrt(3.0)              # correctly rounded (IEEE sqrt)


class Rng:
    """splitmix64; normal() is the sum of four uniforms scaled to
    variance 1 (Irwin-Hall): only + - * on doubles, so exact anywhere."""

    def __init__(self, seed):
        self.state = seed & (2**64 - 1)

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    def uniform(self):
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)

    def normal(self):
        s = self.uniform() + self.uniform() + self.uniform() + self.uniform()
        return (s - 2.0) * SQRT3


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def tiny_weights(spec):
    """name -> (rows, cols, row-major floats rounded to f32); scales as
    tools/oracle.py's tiny models: logits with a std of a few units."""
    rng = Rng(spec["seed"])
    dim, hidden, vocab = spec["dim"], spec["hidden"], spec["vocab"]
    kv_dim = dim // spec["heads"] * spec["kv_heads"]

    def matrix(rows, cols, scale):
        return (rows, cols, [f32(rng.normal() * scale)
                             for _ in range(rows * cols)])

    def gain(n, centre, spread):
        return (1, n, [f32(centre + spread * rng.normal()) for _ in range(n)])

    isd, ish = 1.0 / math.sqrt(dim), 1.0 / math.sqrt(hidden)
    w = {"token_embd.weight": matrix(vocab, dim, 2e-3)}
    for layer in range(spec["layers"]):
        p = "blk.%d." % layer
        w[p + "attn_norm.weight"] = gain(dim, 1.0, 0.1)
        w[p + "attn_q.weight"] = matrix(dim, dim, 1.5 * isd)
        w[p + "attn_k.weight"] = matrix(kv_dim, dim, 1.5 * isd)
        w[p + "attn_v.weight"] = matrix(kv_dim, dim, isd)
        w[p + "attn_output.weight"] = matrix(dim, dim, isd)
        w[p + "ffn_norm.weight"] = gain(dim, 1.0, 0.1)
        w[p + "ffn_gate.weight"] = matrix(hidden, dim, isd)
        w[p + "ffn_down.weight"] = matrix(dim, hidden, ish)
        w[p + "ffn_up.weight"] = matrix(hidden, dim, isd)
    # tied classifier on tiny embeddings: a large output gain
    w["output_norm.weight"] = gain(dim, 200.0, 20.0)
    return w


def half(x):
    return struct.pack("<e", x)


def round_away(x):
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def encode_q8_0(block):
    amax = max(abs(x) for x in block)
    d = f32(amax / 127.0)
    inv = 1.0 / d if d else 0.0
    return half(d) + bytes((int(round_away(x * inv)) & 0xFF) for x in block)


def pack_nibbles(q):
    return bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def encode_q4_0(block):
    big = max(block, key=abs)
    d = f32(big / -8.0)
    inv = 1.0 / d if d else 0.0
    return half(d) + pack_nibbles([min(15, int(x * inv + 8.5))
                                   for x in block])


def encode_q4_1(block):
    lo, hi = min(block), max(block)
    d = f32((hi - lo) / 15.0)
    inv = 1.0 / d if d else 0.0
    return half(d) + half(lo) + pack_nibbles(
        [min(15, int((x - lo) * inv + 0.5)) for x in block])


def encode_bf16(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return struct.pack("<H", u)


# ggml type id, GGUF file_type, block encoder (None: element-wise)
TYPES = {
    "f32":  (0, 0, None),
    "f16":  (1, 1, None),
    "bf16": (30, 32, None),
    "q8_0": (8, 7, encode_q8_0),
    "q4_0": (2, 2, encode_q4_0),
    "q4_1": (3, 3, encode_q4_1),
}


def encode(values, type_name):
    ggml_type, _, blocks = TYPES[type_name]
    if type_name == "f32":
        return ggml_type, b"".join(struct.pack("<f", x) for x in values)
    if type_name == "f16":
        return ggml_type, b"".join(half(x) for x in values)
    if type_name == "bf16":
        return ggml_type, b"".join(encode_bf16(x) for x in values)
    return ggml_type, b"".join(blocks(values[i:i + 32])
                               for i in range(0, len(values), 32))


def spm_subset(src, n):
    """The first n pieces of an SPM vocabulary that still tokenize as it
    does: specials and bytes, then pieces in id (score) order, each after
    the characters it is made of (SentencePiece starts from characters:
    a piece whose characters are missing could never be formed)."""
    tokens = src["tokenizer.ggml.tokens"]
    types = src["tokenizer.ggml.token_type"]
    ids = [i for i in range(len(tokens)) if types[i] != TOKEN_NORMAL]
    index = {t: i for i, t in enumerate(tokens)}
    chosen = set(ids)
    for i in range(len(tokens)):
        if types[i] != TOKEN_NORMAL or i in chosen:
            continue
        need = [index[c.encode()] for c in tokens[i].decode()
                if index.get(c.encode()) not in chosen]
        need = list(dict.fromkeys(need))
        if len(ids) + len(need) + (i not in need) > n:
            break
        for j in need + ([i] if i not in need else []):
            ids.append(j)
            chosen.add(j)
    return ids[:n]


def tiny260k(vocab_path, out_dir):
    spec = TINY260K
    src = read_gguf_metadata(vocab_path)
    n = spec["vocab"]
    if src.get("tokenizer.ggml.model") != b"llama":
        sys.exit("fixtures: %s is not an SPM vocabulary" % vocab_path)
    keep = spm_subset(src, n)
    if len(keep) != n or keep[:3] != [0, 1, 2]:
        sys.exit("fixtures: %s gives no %d-piece vocabulary" % (vocab_path, n))
    weights = tiny_weights(spec)
    os.makedirs(out_dir, exist_ok=True)
    for type_name, (_, file_type, _) in TYPES.items():
        meta = {
            "general.architecture": "llama",
            "general.name": "tiny260K",
            "general.file_type": file_type,
            "llama.context_length": spec["context"],
            "llama.embedding_length": spec["dim"],
            "llama.feed_forward_length": spec["hidden"],
            "llama.block_count": spec["layers"],
            "llama.attention.head_count": spec["heads"],
            "llama.attention.head_count_kv": spec["kv_heads"],
            "llama.rope.dimension_count": spec["dim"] // spec["heads"],
            "llama.rope.freq_base": 10000.0,
            "llama.attention.layer_norm_rms_epsilon": 1e-5,
            "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": [src["tokenizer.ggml.tokens"][i]
                                      for i in keep],
            "tokenizer.ggml.scores": ("f32", [src["tokenizer.ggml.scores"][i]
                                              for i in keep]),
            "tokenizer.ggml.token_type": (
                "i32", [src["tokenizer.ggml.token_type"][i] for i in keep]),
            "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.unknown_token_id": 0,
            "tokenizer.ggml.add_bos_token": True,
            "tokenizer.ggml.add_space_prefix": True,
        }
        tensors = []
        for name, (rows, cols, values) in weights.items():
            kind = type_name
            if rows == 1 or (cols % 32 and kind.startswith("q")):
                kind = "f32" if rows == 1 else "f16"
            ggml_type, raw = encode(values, kind)
            dims = [cols] if rows == 1 else [cols, rows]
            tensors.append((name, dims, ggml_type, raw))
        write_gguf(os.path.join(out_dir, "tiny260K-%s.gguf" % type_name),
                   meta, tensors)


def main(argv):
    if len(argv) >= 4 and argv[0] == "tokenizer-json":
        tokenizer_json(argv[1], argv[2], argv[3],
                       argv[4] if len(argv) > 4 else None)
    elif len(argv) == 3 and argv[0] == "tiny260k":
        tiny260k(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
