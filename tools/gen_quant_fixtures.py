#!/usr/bin/env python3
"""Fixtures for tests/quant: random ggml blocks and the floats the official `gguf`
package dequantizes them to.

For every type, writes tests/quant/fixtures/<TYPE>.blocks (raw blocks, ggml layout) and
<TYPE>.f32 (expected little-endian float32 values, from gguf.quants.dequantize). Block
bytes are random; the fp16 scale fields are overwritten with random finite values of
sensible magnitude (2^-20 .. 2^-1, both signs, some fp16 subnormals), so the expected
floats contain no NaN or Inf. F16/BF16/F32 "blocks" are random bit patterns with NaNs
excluded (NaN payloads are checked by hand in the unit tests) but Inf and subnormals kept.

Seeded: re-running gives byte-identical files. Usage: python3 tools/gen_quant_fixtures.py
[--out DIR] [--seed N]
"""
import argparse
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T

# type -> (blocks in the fixture, byte offsets of its fp16 scale fields)
TYPES = {
    T.F32: (96, []),
    T.F16: (96, []),
    T.BF16: (96, []),
    T.Q8_0: (12, [0]),
    T.Q4_0: (12, [0]),
    T.Q4_1: (12, [0, 2]),
    T.Q5_0: (12, [0]),
    T.Q5_1: (12, [0, 2]),
    T.Q2_K: (6, [80, 82]),   # d, dmin after scales[16] and qs[64]
    T.Q3_K: (6, [108]),      # d after hmask[32], qs[64], scales[12]
    T.Q4_K: (6, [0, 2]),
    T.Q5_K: (6, [0, 2]),
    T.Q6_K: (6, [208]),      # d after ql[128], qh[64], scales[16]
}


def random_halves(rng, n):
    """Random finite fp16 values, magnitudes 2^-20 .. 2^-1 (the low end is subnormal)."""
    mag = rng.uniform(1.0, 2.0, size=n) * np.exp2(rng.integers(-20, 0, size=n).astype(np.float64))
    sign = np.where(rng.integers(0, 2, size=n) == 1, -1.0, 1.0)
    h = (mag * sign).astype(np.float16)
    assert np.all(np.isfinite(h)) and np.all(h != 0)
    return h


def f32_bits_no_nan(rng, n):
    """Random float32 bit patterns, NaNs redrawn (Inf, subnormals and zeros may occur)."""
    bits = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    while (nan := np.isnan(bits.view(np.float32))).any():
        bits[nan] = rng.integers(0, 1 << 32, size=int(nan.sum()), dtype=np.uint64).astype(np.uint32)
    return bits


def make_blocks(rng, qtype, nblocks, half_offsets):
    blck, size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype == T.F32:
        return f32_bits_no_nan(rng, nblocks).view(np.uint8)
    if qtype in (T.F16, T.BF16):
        bits = rng.integers(0, 1 << 16, size=nblocks, dtype=np.uint64).astype(np.uint16)
        exp_mask, man_mask = (0x7C00, 0x03FF) if qtype == T.F16 else (0x7F80, 0x007F)
        nan = ((bits & exp_mask) == exp_mask) & ((bits & man_mask) != 0)
        bits[nan] &= np.uint16(~man_mask & 0xFFFF)  # NaN -> Inf of the same sign
        bits[:4] = [exp_mask, 0x8000 | exp_mask, 0x0001, 0x8000 | man_mask]  # +-Inf, subnormals
        return bits.view(np.uint8)
    raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint64).astype(np.uint8)
    for off in half_offsets:
        raw[:, off:off + 2] = random_halves(rng, nblocks).view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "quant", "fixtures"))
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    total = 0
    for qtype, (nblocks, offs) in TYPES.items():
        blocks = make_blocks(rng, qtype, nblocks, offs)
        expect = np.ascontiguousarray(gguf.quants.dequantize(blocks.copy(), qtype), dtype="<f4").reshape(-1)
        blck, size = gguf.GGML_QUANT_SIZES[qtype]
        assert blocks.size == nblocks * size and expect.size == nblocks * blck
        assert not np.isnan(expect).any(), qtype.name
        for ext, arr in (("blocks", blocks), ("f32", expect)):
            path = os.path.join(args.out, f"{qtype.name}.{ext}")
            with open(path, "wb") as f:
                f.write(arr.tobytes())
            total += arr.nbytes
        print(f"{qtype.name:5s} {nblocks:3d} blocks, {blocks.nbytes:6d} B blocks, {expect.nbytes:6d} B floats")
    print(f"total {total} bytes in {os.path.normpath(args.out)}", file=sys.stderr)


if __name__ == "__main__":
    main()
