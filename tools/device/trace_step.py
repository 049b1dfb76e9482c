#!/usr/bin/env python3
"""trace_step.py — EXPERIMENT: read trace.cuh's records (MEMRA_TRACE_OUT of a trace build) and
print a decode layer's dependency chain. Records sorted by their release (the time a block passed
its PDL wait) fall into launches (a run of one grid size and shared memory); a launch's chain time
is the next launch's first release minus its own (the next launch can pass its wait only once this
one completed). The launch sequence repeats once a layer: its period is found, and each position
of the layer is averaged over the repeats (the last ones, where every file's ring still holds
records).

res50: how long before the launch's first release its median block became resident (resident_before
is its first block's): a GEMV whose blocks arrive only as the last one's leave starts its ring then.

The ring GEMVs (v11, v13) also leave marks (trace.cuh memra_trace_mark): when a block's head (x
split, the norm) is done and when the block ends. Where a launch has them, four more columns split
its chain time: head (a block's mark 1 after its own release, median), end50 and endmax (the
blocks' ends after the launch's first release: median, last) and next (the next launch's first
release after the last end: the completion's signal), all us.

--blocks adds, for each launch with marks, how its blocks' ends follow their arrival: the blocks'
residency before the release (p10 / p50 / p90), the median end of each quarter of them in order of
arrival, and the median end on SMs holding one block of the launch against two or more.

usage: trace_step.py TRACE [LAYERS (24)] [--blocks]"""
import bisect
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
            L["recs"].append(r)
        else:
            out.append({"sig": sig, "n": 1, "W": r[1], "t0": r[0], "recs": [r]})
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--blocks"]
    data = open(args[0], "rb").read()
    nl = int(args[1]) if len(args) > 1 else 24
    recs = [REC.unpack_from(data, i) for i in range(0, len(data) - REC.size + 1, REC.size)]
    recs = [r for r in recs if r[0] and r[1] >= r[0]]
    marks = sorted((r for r in recs if r[5] >> 30), key=lambda r: r[1])
    recs = [r for r in recs if not r[5] >> 30]
    recs.sort(key=lambda r: r[1])
    ln = launches(recs)
    mt = [m[1] for m in marks]
    for i, L in enumerate(ln):  # a launch's marks: its sig, between its first release and the next's
        hi = ln[i + 1]["W"] if i + 1 < len(ln) else float("inf")
        a, b = bisect.bisect_left(mt, L["W"]), bisect.bisect_left(mt, hi)
        L["marks"] = [m for m in marks[a:b] if (m[4], m[5] & 0x3FFFFFFF) == L["sig"]]
        L["next"] = hi
    for r in recs:  # (grid, smem, block) -> its releases, for the head column
        REL.setdefault((r[4], r[5], r[3]), []).append(r[1])
    for i, L in enumerate(ln):
        L["chain"] = (ln[i + 1]["W"] - L["W"]) if i + 1 < len(ln) else 0
    sigs = [L["sig"] for L in ln]
    tail = sigs[-3000:]
    best = max(range(4, 96), key=lambda p: sum(1 for i in range(len(tail) - p) if tail[i] == tail[i + p]))
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
    print("pos   grid    smem  blocks  chain_us (min..max)  early_blocks  resident_before_us"
          "   res50    head   end50  endmax    next")
    tot = 0.0
    for p in range(best):
        xs = [ln[base + k * best + p] for k in range(use)]
        c = [x["chain"] / 1000 for x in xs]
        e = sum(1 for x in xs if x["W"] - x["t0"] > 300) / len(xs)
        rb = sum(x["W"] - x["t0"] for x in xs) / len(xs) / 1000
        r50 = sum(x["W"] - median([r[0] for r in x["recs"]]) for x in xs) / len(xs) / 1000
        tot += sum(c) / len(c)
        s = xs[0]["sig"]
        print(f"{p:3d} {s[0]:6d} {s[1]:7d} {xs[0]['n']:6d}  {sum(c)/len(c):7.2f} ({min(c):5.2f}..{max(c):5.2f})  {e:8.2f}  {rb:10.2f}  {r50:6.2f}"
              + split_cols(xs))
    print(f"layer chain {tot:.2f} us")
    if "--blocks" in sys.argv:
        for p in range(best):
            line = blocks_cols([ln[base + k * best + p] for k in range(use)])
            if line:
                print(f"{p:3d} {line}")


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None


def split_cols(xs):
    """head / end50 / endmax / next of launches xs (one position over the layers), averaged."""
    cols = [[], [], [], []]
    for L in xs:
        ends = [m[1] for m in L["marks"] if m[5] >> 30 == 2]
        heads = []
        for m in L["marks"]:
            if m[5] >> 30 != 1:
                continue
            rs = REL.get((m[4], m[5] & 0x3FFFFFFF, m[3]), [])
            j = bisect.bisect_right(rs, m[1]) - 1  # the block's last release before its mark
            if j >= 0 and rs[j] >= L["W"]:
                heads.append(m[1] - rs[j])
        if not ends:
            continue
        h = median(heads)
        if h is not None:
            cols[0].append(h)
        cols[1].append(median(ends) - L["W"])
        cols[2].append(max(ends) - L["W"])
        if L["next"] != float("inf"):
            cols[3].append(L["next"] - max(ends))
    if not cols[1]:
        return ""
    return "".join(f"  {sum(c) / len(c) / 1000:6.2f}" if c else "       -" for c in cols)


def blocks_cols(xs):
    """Arrival against end for the blocks of launches xs (one position over the layers), us."""
    res, quarter, persm = [], [[], [], [], []], {1: [], 2: []}
    for L in xs:
        end = {m[3]: m[1] for m in L["marks"] if m[5] >> 30 == 2}
        rs = sorted((r for r in L["recs"] if r[3] in end), key=lambda r: r[0])
        if not rs:
            continue
        per = Counter(r[2] for r in rs)
        for i, r in enumerate(rs):
            e = (end[r[3]] - L["W"]) / 1000
            res.append((L["W"] - r[0]) / 1000)
            quarter[4 * i // len(rs)].append(e)
            persm[min(per[r[2]], 2)].append(e)
    if not res:
        return ""
    res.sort()
    q = "/".join(f"{median(v):.2f}" if v else "-" for v in quarter)
    s1 = f"{median(persm[1]):.2f} ({len(persm[1])})" if persm[1] else "-"
    s2 = f"{median(persm[2]):.2f} ({len(persm[2])})" if persm[2] else "-"
    return (f"resident before release p10/p50/p90 {res[len(res) // 10]:.2f}/{median(res):.2f}/"
            f"{res[9 * len(res) // 10]:.2f}  end by arrival quarter {q}  end on SMs of 1 block {s1},"
            f" of 2+ {s2}")


REL = {}


if __name__ == "__main__":
    main()
