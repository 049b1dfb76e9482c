#!/usr/bin/env python3
"""trace_step.py — EXPERIMENT: read trace.cuh's records (MEMRA_TRACE_OUT of a trace build) and
print a decode layer's dependency chain. Records sorted by their release (the time a block passed
its PDL wait) fall into launches (a run of one grid size and shared memory); a launch's chain time
is the next launch's first release minus its own (the next launch can pass its wait only once this
one completed). The launch sequence repeats once a layer: its period is found, and each position
of the layer is averaged over the repeats (the last ones, where every file's ring still holds
records).

usage: trace_step.py TRACE [LAYERS (24)]"""
import struct
import sys
from collections import Counter

REC = struct.Struct("<QQIIII")


def launches(recs):
    out = []
    for r in recs:
        sig = (r[4], r[5])
        L = out[-1] if out else None
        if L and L["sig"] == sig and L["n"] < sig[0]:
            L["n"] += 1
            L["t0"] = min(L["t0"], r[0])
        else:
            out.append({"sig": sig, "n": 1, "W": r[1], "t0": r[0]})
    return out


def main():
    data = open(sys.argv[1], "rb").read()
    nl = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    recs = [REC.unpack_from(data, i) for i in range(0, len(data) - REC.size + 1, REC.size)]
    recs = [r for r in recs if r[0] and r[1] >= r[0]]
    recs.sort(key=lambda r: r[1])
    ln = launches(recs)
    for i, L in enumerate(ln):
        L["chain"] = (ln[i + 1]["W"] - L["W"]) if i + 1 < len(ln) else 0
    sigs = [L["sig"] for L in ln]
    tail = sigs[-3000:]
    best = max(range(4, 40), key=lambda p: sum(1 for i in range(len(tail) - p) if tail[i] == tail[i + p]))
    # the last long run where the pattern holds (ok[i]: launch i repeats launch i - period)
    runs, i = [], best
    while i < len(sigs):
        if sigs[i] == sigs[i - best]:
            j = i
            while j < len(sigs) and sigs[j] == sigs[j - best]:
                j += 1
            runs.append((i - best, j))  # launches [i - best, j) follow the pattern
            i = j
        else:
            i += 1
    runs = [r for r in runs if r[1] - r[0] >= 4 * best] or runs
    start, stop = runs[-1]
    layers = (stop - start) // best
    use = max(1, min(layers - 2, nl))
    base = stop - (use + 1) * best  # whole layers, the last one left out
    print(f"records {len(recs)}, launches {len(ln)}, layer period {best}, repeating layers {layers}, averaged {use}")
    print("pos   grid    smem  blocks  chain_us (min..max)  early_blocks  resident_before_us")
    tot = 0.0
    for p in range(best):
        xs = [ln[base + k * best + p] for k in range(use)]
        c = [x["chain"] / 1000 for x in xs]
        e = sum(1 for x in xs if x["W"] - x["t0"] > 300) / len(xs)
        rb = sum(x["W"] - x["t0"] for x in xs) / len(xs) / 1000
        tot += sum(c) / len(c)
        s = xs[0]["sig"]
        print(f"{p:3d} {s[0]:6d} {s[1]:7d} {xs[0]['n']:6d}  {sum(c)/len(c):7.2f} ({min(c):5.2f}..{max(c):5.2f})  {e:8.2f}  {rb:10.2f}")
    print(f"layer chain {tot:.2f} us")


if __name__ == "__main__":
    main()
