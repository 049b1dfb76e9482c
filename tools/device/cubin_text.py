#!/usr/bin/env python3
"""cubin_text.py NEW.cubin OLD.cubin — each kernel's machine code (its .text section) in NEW
against OLD: "same", "DIFF" or "NEW" a kernel, then the counts. Anonymous-namespace names carry
a hash of the file's path; it is masked so two checkouts of one file compare."""
import re
import struct
import sys


def kernels(path):
    b = open(path, "rb").read()
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdr = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = hdr[shstrndx][4]
    out = {}
    for h in hdr:
        n = b[names + h[0]:b.index(b"\0", names + h[0])].decode()
        if not n.startswith(".text."):
            continue
        n = re.sub(r"__N__[0-9a-f]+_", "__N__X_", n)
        n = re.sub(r"_cu_[0-9a-f]{8}", "_cu_X", n)
        out[n[6:]] = b[h[4]:h[4] + h[5]]
    return out


def main():
    new, old = kernels(sys.argv[1]), kernels(sys.argv[2])
    gone = sorted(set(old) - set(new))
    # a kernel whose name changed (a template parameter more) but whose code is a gone one's
    gone_code = {}
    for n in gone:
        gone_code.setdefault(old[n], []).append(n)
    counts = {"same": 0, "DIFF": 0, "NEW": 0, "renamed": 0}
    for n in sorted(new):
        if n in old:
            k = "same" if new[n] == old[n] else "DIFF"
        elif gone_code.get(new[n]):
            k = "renamed"
            gone.remove(gone_code[new[n]].pop())
        else:
            k = "NEW"
        counts[k] += 1
        if k not in ("same", "renamed"):
            print(f"  {k} {n[:110]}")
    for n in gone:
        print(f"  GONE {n[:110]}")
    print(f"  {counts['same']} same, {counts['DIFF']} changed, {counts['NEW']} new, {len(gone)} gone"
          f", {counts['renamed']} renamed with the same code")


if __name__ == "__main__":
    main()
