#!/usr/bin/env python3
"""check_fatbin.py PLUGIN.so ARCH — the plugin's embedded fatbins carry only SASS (cubin)
for exactly ARCH (e.g. sm_90a, sm_120a) and no PTX. Reads the fatbin records directly, so
it needs no cuobjdump (CI machines have nvcc but no cuobjdump).

Layout facts (read off nvcc 13.0's output, see docs/ARCHITECTURE.md): a fatbin starts with
u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size; each record starts
with u16 kind (1 = PTX, 2 = cubin), u16, u32 header size, u64 payload size, ...; u32 at
byte 28 is the SM number (90, 120); u32 at byte 40 holds flags, bit 20 set for the
architecture-specific 'a' targets (sm_90a) and clear for sm_90."""
import struct
import sys

MAGIC = struct.pack("<I", 0xBA55ED50)
KIND = {1: "PTX", 2: "SASS"}


def records(blob):
    i = blob.find(MAGIC)
    while i >= 0:
        _, _, hsz, size = struct.unpack_from("<IHHQ", blob, i)
        p, end = i + hsz, i + hsz + size
        while p < end:
            kind, _, rhsz, rsize = struct.unpack_from("<HHIQ", blob, p)
            sm = struct.unpack_from("<I", blob, p + 28)[0]
            flags = struct.unpack_from("<I", blob, p + 40)[0]
            yield KIND.get(kind, f"kind{kind}"), f"sm_{sm}" + ("a" if flags & (1 << 20) else "")
            p += rhsz + rsize
        i = blob.find(MAGIC, end)


def main():
    path, want = sys.argv[1], sys.argv[2]
    recs = list(records(open(path, "rb").read()))
    bad = [r for r in recs if r != ("SASS", want)]
    if not recs:
        print(f"FAIL {path}: no fatbin records")
        return 1
    if bad:
        print(f"FAIL {path}: expected only {want} SASS, found " +
              ", ".join(sorted({f'{k} {a}' for k, a in bad})))
        return 1
    print(f"ok   {path}: {len(recs)} {want} cubin(s), no PTX")
    return 0


if __name__ == "__main__":
    sys.exit(main())
