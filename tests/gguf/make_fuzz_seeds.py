#!/usr/bin/env python3
"""Writes small hand-made GGUF files, valid and hostile, to tests/gguf/fuzz_regressions/
(seed-*). They seed tools/fuzz/run_gguf_fuzz.sh and are replayed by
//tests/gguf:gguf_fuzz_regress_test. Re-run: python3 tests/gguf/make_fuzz_seeds.py"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_regressions")


def u32(v): return struct.pack("<I", v & 0xffffffff)
def u64(v): return struct.pack("<Q", v & 0xffffffffffffffff)
def s(t): b = t.encode() if isinstance(t, str) else t; return u64(len(b)) + b
def hdr(nt, nkv, ver=3): return b"GGUF" + u32(ver) + u64(nt) + u64(nkv)
def tinfo(name, ne, typ, off): return s(name) + u32(len(ne)) + b"".join(u64(e) for e in ne) + u32(typ) + u64(off)
def pad(b, a=32): return b + b"\0" * (-len(b) % a)


def strarr(key, items): return s(key) + u32(9) + u32(8) + u64(len(items)) + b"".join(s(i) for i in items)


SEEDS = {
    # valid: alignment 64, string array, f32 array, F32 + Q8_0 tensors
    "seed-valid-align64": pad(hdr(2, 3) + s("general.alignment") + u32(4) + u32(64)
                              + strarr("tokenizer.ggml.tokens", ["<s>", "", "hi"])
                              + s("scores") + u32(9) + u32(6) + u64(3) + struct.pack("<3f", 1.5, -2, 0.25)
                              + tinfo("a", [4], 0, 0) + tinfo("q", [32, 2], 8, 64), 64)
    + struct.pack("<4f", 1, 2, 3, 4) + b"\0" * 48 + bytes(range(68)),
    # valid v2 with a Q4_K row and every scalar type
    "seed-valid-v2": pad(hdr(1, 12, 2) + b"".join(s("k%d" % t) + u32(t) + v for t, v in [
        (0, b"\x07"), (1, b"\xf9"), (2, u32(300)[:2]), (3, b"\xff\x7f"), (4, u32(70000)),
        (5, u32(-5)), (6, struct.pack("<f", 0.5)), (7, b"\x01"), (8, s("str")), (10, u64(1 << 40)),
        (11, u64(-9)), (12, struct.pack("<d", -0.125))]) + tinfo("k", [256], 12, 0)) + bytes(144),
    "seed-overlap": pad(hdr(2, 0) + tinfo("a", [16], 0, 0) + tinfo("b", [16], 0, 32)) + bytes(96),
    "seed-nested-array": hdr(0, 1) + s("k") + u32(9) + u32(9) + u64(1) + bytes(16),
    "seed-dup-key": hdr(0, 2) + s("a") + u32(4) + u32(1) + s("a") + u32(4) + u32(2),
    "seed-huge-counts": hdr(1 << 59, 1 << 60) + bytes(64),
    "seed-misaligned": pad(hdr(1, 0) + tinfo("t", [1], 0, 4)) + bytes(64),
    "seed-bad-block": pad(hdr(1, 0) + tinfo("t", [33, 2], 2, 0)) + bytes(64),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
