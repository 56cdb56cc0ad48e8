#!/usr/bin/env python3
"""Golden vectors for the quantized block types: random blocks of each
type and their values as the `gguf` package from PyPI dequantizes them.

    python3 tools/quant_golden.py [OUT_DIR]     (default t/data/quant)

Writes OUT_DIR/<TYPE>.blocks (the raw blocks) and OUT_DIR/<TYPE>.f32 (the
little-endian float32 values gguf-py gives for them); for the types
gguf-py also quantizes, OUT_DIR/<TYPE>.x (floats) and <TYPE>.q (its
blocks of them). t/unit/
test_quant_types.c checks llm_dequant_row against them bit for bit, so
`make test` needs no Python package: the files are committed and this
script only remakes them (pinned: GGUF_VERSION below, numpy as pip
resolves it; run it in a venv outside the repository:
`python3 -m venv /tmp/v && /tmp/v/bin/pip install gguf==0.19.0`).

Scale fields are random finite halves (no inf or nan: those are not
weights), every other byte is random, so every quant value, scale and
min bit pattern occurs; MXFP4's exponent byte covers 0..250, subnormal
scales included.
"""
import importlib.metadata
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

GGUF_VERSION = "0.19.0"

# type: (blocks, byte offsets of f16 scale fields, offset of an E8M0 byte)
TYPES = {
    "Q4_0": (T.Q4_0, 16, [0], None),
    "Q4_1": (T.Q4_1, 16, [0, 2], None),
    "Q5_0": (T.Q5_0, 16, [0], None),
    "Q5_1": (T.Q5_1, 16, [0, 2], None),
    "Q8_0": (T.Q8_0, 16, [0], None),
    "IQ4_NL": (T.IQ4_NL, 16, [0], None),
    "MXFP4": (T.MXFP4, 16, [], 0),
    "Q2_K": (T.Q2_K, 4, [80, 82], None),
    "Q3_K": (T.Q3_K, 4, [108], None),
    "Q4_K": (T.Q4_K, 4, [0, 2], None),
    "Q5_K": (T.Q5_K, 4, [0, 2], None),
    "Q6_K": (T.Q6_K, 4, [208], None),
    "IQ4_XS": (T.IQ4_XS, 4, [0], None),
}


def random_half(rng, n):
    """finite halves of either sign, exponents 1..20 (about 6e-5 .. 32)"""
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    exp = rng.integers(1, 21, n, dtype=np.uint16) << 10
    man = rng.integers(0, 1024, n, dtype=np.uint16)
    return (sign | exp | man).astype("<u2")


# types gguf-py also quantizes (ggml's reference rules): OUT_DIR/<TYPE>.x
# holds random floats, OUT_DIR/<TYPE>.q gguf-py's blocks of them, and
# test_quant_types checks that llm_quantize_row writes the same bytes
QUANTIZED = {
    "Q4_0": T.Q4_0, "Q4_1": T.Q4_1, "Q5_0": T.Q5_0, "Q5_1": T.Q5_1,
    "Q8_0": T.Q8_0, "MXFP4": T.MXFP4,
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "t/data/quant"
    have = importlib.metadata.version("gguf")
    if have != GGUF_VERSION:
        sys.exit(f"quant_golden.py: gguf {have} installed, {GGUF_VERSION} "
                 "pinned")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(25)
    for name, (qtype, nblocks, halves, e8m0) in TYPES.items():
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (nblocks, size), dtype=np.uint8)
        for off in halves:
            raw[:, off:off + 2] = random_half(rng, nblocks).view(
                np.uint8).reshape(nblocks, 2)
        if e8m0 is not None:
            raw[:, e8m0] = rng.integers(0, 251, nblocks, dtype=np.uint8)
        vals = dequantize(raw.reshape(-1), qtype).astype("<f4").reshape(-1)
        assert vals.size == nblocks * block and np.isfinite(vals).all()
        raw.tofile(os.path.join(out, name + ".blocks"))
        vals.tofile(os.path.join(out, name + ".f32"))
        print(f"{name}: {nblocks} blocks, {vals.size} values")
    for name, qtype in QUANTIZED.items():
        x = (rng.standard_normal(1024) * rng.choice([0.01, 1.0, 30.0], 1024)
             ).astype("<f4")
        x[:32] = 0.0                                  # an all-zero block
        x[32:64] = np.abs(x[32:64])                   # an all-positive one
        q = quantize(x.reshape(32, 32), qtype).reshape(-1)
        x.tofile(os.path.join(out, name + ".x"))
        q.tofile(os.path.join(out, name + ".q"))
        print(f"{name}: {x.size} values quantized by gguf-py")


if __name__ == "__main__":
    main()
