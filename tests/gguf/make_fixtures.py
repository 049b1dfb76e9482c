#!/usr/bin/env python3
"""Writes tests/gguf/fixtures/*.gguf with the official `gguf` package (gguf-py), so the
reader is checked against files that memra's writer did not make.

Re-run: python3 tests/gguf/make_fixtures.py   (deterministic: same bytes every run)
The values below are asserted literally by tests/gguf/gguf_pyref_test.cc; change both.
"""
import os
import sys

import numpy as np
from gguf import GGUFWriter, GGUFValueType as VT, GGMLQuantizationType as QT

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def pattern(n, mul, mod, scale, shift):
    """Values exact in f16: ((i * mul) % mod) / scale - shift (mod <= 2048, scale a power of 2)."""
    i = np.arange(n, dtype=np.int64)
    return ((i * mul) % mod).astype(np.float64) / scale - shift


def all_types(path):
    w = GGUFWriter(path, arch="memratest")  # general.architecture = "memratest" comes first
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 3.25)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62) - 3)
    w.add_float64("t.f64", -1.0 / 3.0)
    w.add_bool("t.bool", True)
    w.add_bool("t.bool_false", False)
    w.add_string("t.str", "h\u00e9llo, GGUF\n\"quoted\"")
    w.add_key_value("t.arr_u8", [1, 2, 3, 255, 0, 7, 9], VT.ARRAY, sub_type=VT.UINT8)
    w.add_key_value("t.arr_i8", [-128, 127, -1], VT.ARRAY, sub_type=VT.INT8)
    w.add_key_value("t.arr_u16", [65535, 1, 300], VT.ARRAY, sub_type=VT.UINT16)
    w.add_key_value("t.arr_i16", [-32768, 32767, -5], VT.ARRAY, sub_type=VT.INT16)
    w.add_key_value("t.arr_u32", [4294967295, 17], VT.ARRAY, sub_type=VT.UINT32)
    w.add_key_value("t.arr_i32", [i * 7 - 50 for i in range(31)], VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("t.arr_f32", [0.5, -2.75, 1e-3], VT.ARRAY, sub_type=VT.FLOAT32)
    w.add_key_value("t.arr_u64", [2**64 - 1, 3], VT.ARRAY, sub_type=VT.UINT64)
    w.add_key_value("t.arr_i64", [-(2**63), 2**63 - 1, 11], VT.ARRAY, sub_type=VT.INT64)
    w.add_key_value("t.arr_f64", [0.1, -1e300], VT.ARRAY, sub_type=VT.FLOAT64)
    w.add_key_value("t.arr_bool", [True, False, True, True], VT.ARRAY, sub_type=VT.BOOL)
    w.add_key_value("t.arr_str", ["alpha", "", "\u03b3\u03ac\u03bc\u03bc\u03b1", "tab\there"],
                    VT.ARRAY, sub_type=VT.STRING)
    w.add_key_value("tokenizer.ggml.tokens", ["tok%d" % i for i in range(1000)], VT.ARRAY,
                    sub_type=VT.STRING)
    # Tensors: numpy shape (rows, cols) is GGUF ne = [cols, rows].
    w.add_tensor("f32.weight", pattern(3 * 37, 7919, 1000, 64.0, 7.0).astype(np.float32).reshape(3, 37))
    w.add_tensor("f16.weight", pattern(5 * 9, 31, 2048, 128.0, 8.0).astype(np.float16).reshape(5, 9))
    w.add_tensor("i32.vec", (np.arange(13, dtype=np.int32) * -3 + 5))
    # Q8_0 given as raw bytes: 2 rows of 64 elements = 2 x 2 blocks of 34 bytes.
    q = (np.arange(2 * 2 * 34, dtype=np.int64) * 37 % 251).astype(np.uint8).reshape(2, 68)
    w.add_tensor("q8.weight", q, raw_dtype=QT.Q8_0)
    w.add_tensor("f32.cube", pattern(2 * 3 * 5, 11, 97, 4.0, 3.0).astype(np.float32).reshape(2, 3, 5))
    write(w)


def align64(path):
    w = GGUFWriter(path, arch="memratest")
    w.add_custom_alignment(64)
    w.add_uint32("t.u32", 123456)
    w.add_tensor("a", pattern(17, 5, 61, 8.0, 2.0).astype(np.float32))
    w.add_tensor("b", pattern(3 * 4, 3, 29, 2.0, 1.0).astype(np.float32).reshape(3, 4))
    write(w)


def write(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    all_types(os.path.join(HERE, "py_all_types.gguf"))
    align64(os.path.join(HERE, "py_align64.gguf"))
    for f in sorted(os.listdir(HERE)):
        print(f, os.path.getsize(os.path.join(HERE, f)), file=sys.stderr)
