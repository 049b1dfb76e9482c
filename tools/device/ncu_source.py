#!/usr/bin/env python3
"""ncu_source.py — where a kernel's warps wait, instruction by instruction: reads the CSV of
`ncu -i REP --page source --csv --print-source sass` (profile_src.sh writes it) and prints the
stall reasons over the whole kernel, the most sampled instructions (offset from the kernel's
first instruction, share of all samples, top reason), and, given ranges of offsets, each
range's share and top reasons (offsets as `cuobjdump -sass` of the same plugin prints them,
so a range can be a loop or a barrier of the kernel).

  python3 ncu_source.py SRC.csv [--top N] [START-END:NAME ...]    (hex offsets: 2e30-3d70:loop)
"""
import csv
import sys

ALL = "Warp Stall Sampling (All Samples)"


def load(path):
    rows = list(csv.reader(open(path, errors="replace")))
    hi = next((i for i, r in enumerate(rows) if "Address" in r and "Source" in r), None)
    if hi is None:
        sys.exit(f"ncu_source: {path}: no 'Address' / 'Source' header (not a --page source CSV)")
    h = rows[hi]
    data = [r for r in rows[hi + 1:] if len(r) == len(h)]
    if not data or ALL not in h:
        sys.exit(f"ncu_source: {path}: no instructions or no '{ALL}' column")
    col = {n: i for i, n in enumerate(h)}

    def num(r, n):
        v = r[col[n]].replace(",", "") if n in col else ""
        try:
            return float(v)
        except ValueError:
            return 0.0

    base = int(data[0][col["Address"]], 16)
    ins = [(int(r[col["Address"]], 16) - base, r[col["Source"]].strip(), r) for r in data]
    stalls = [n for n in h if n.startswith("stall_") and "Not Issued" not in n]
    return ins, stalls, num


def top_reasons(rs, stalls, num, total, k=3):
    v = sorted(((sum(num(r, s) for r in rs), s[6:]) for s in stalls), reverse=True)[:k]
    return ", ".join(f"{n} {100 * x / total:.1f}%" for x, n in v if x > 0)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    top, ranges, args = 25, [], argv[2:]
    while args:
        a = args.pop(0)
        if a == "--top":
            top = int(args.pop(0))
            continue
        try:
            span, name = a.split(":", 1)
            lo, hi = (int(x, 16) for x in span.split("-"))
        except ValueError:
            sys.exit(f"ncu_source: bad range '{a}' (want START-END:NAME, hex offsets)")
        ranges.append((lo, hi, name))
    ins, stalls, num = load(argv[1])
    total = sum(num(r, ALL) for _, _, r in ins) or 1.0
    print(f"{len(ins)} instructions, {total:.0f} samples; stall reasons over the kernel:")
    print("  " + top_reasons([r for _, _, r in ins], stalls, num, total, k=10))
    print(f"the {top} most sampled instructions (offset, share, top reason, instruction):")
    for off, src, r in sorted(ins, key=lambda x: -num(x[2], ALL))[:top]:
        print(f"  {off:05x} {100 * num(r, ALL) / total:5.2f}%  {top_reasons([r], stalls, num, total, 1):<22} {src[:60]}")
    if ranges:
        print("| range | offsets | samples | warp instructions | top reasons |")
        print("| --- | --- | ---: | ---: | --- |")
        for lo, hi, name in ranges:
            rs = [r for off, _, r in ins if lo <= off < hi]
            s = sum(num(r, ALL) for r in rs)
            ex = sum(num(r, "Instructions Executed") for r in rs)
            print(f"| {name} | {lo:x}-{hi:x} | {100 * s / total:.1f}% | {ex:.0f} | {top_reasons(rs, stalls, num, total)} |")


if __name__ == "__main__":
    main(sys.argv)
