#!/bin/bash
# profile_gemv.sh — why the decode GEMVs sit at 35-60% of the copy bandwidth: Nsight Compute
# over gemv_bench (every type on the Llama-3.1-8B shapes, M = 1), one line per shape and kernel
# with its time, DRAM throughput, achieved occupancy, issue activity and the top stall reasons.
# On the GPU machine, from the repo root, carry ["dist"]:
#   bash tools/device/profile_gemv.sh [PLUGIN.so]     (a few minutes; MEMRA_GEMV=tc works;
#   TYPES="Q8_0 F16" limits gemv_bench to those types, SHAPES="ffn_down|output 128256" to
#   those shapes: substrings of gemv_bench's shape names, '|'-separated)
# Raw CSV in $OUT/gemv_ncu.csv, the table on stdout.
set -u
D=${D:-dist}
P=${1:-$D/libmemra_sm90a.so}
O=${OUT:-/tmp/memra-profile}
mkdir -p "$O"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "profile_gemv: ncu not found"; exit 2; }
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
M="$M,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.avg.per_cycle_active"
M="$M,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread"
for s in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle \
  barrier not_selected selected tex_throttle; do
  M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
# One ncu pass per shape (GEMV_BENCH_SHAPE), 6 launches each after 12 skipped, so that every
# shape is profiled (one pass over all shapes spent its launch count on the first shape: the
# graphs replay each shape many times). SHAPES picks them (default: gemv_bench's M = 1 shapes).
SHAPES=${SHAPES:-"attn_q/out|ffn_gate/up 14336|ffn_down|output 128256|output 151936"}
: >"$O/gemv_ncu.csv"
IFS='|' read -ra shape_list <<<"$SHAPES"
for sh in "${shape_list[@]}"; do
  echo "#SHAPE,$sh" >>"$O/gemv_ncu.csv"
  GEMV_BENCH_SHAPE="$sh" timeout 300 "$NCU" --csv --page raw --print-units base \
    --graph-profiling node --metrics "$M" --kernel-name-base demangled \
    --kernel-name regex:'matmul_v|tc_prep' --launch-skip 12 --launch-count 6 \
    "$D/gemv_bench" "$P" ${TYPES:-} >>"$O/gemv_ncu.csv" 2>>"$O/gemv_ncu.err"
  echo "ncu ($sh) rc $?"
done
python3 - "$O/gemv_ncu.csv" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
# the passes' CSVs one after another, each after its "#SHAPE,name" line: a header ("ID", ...),
# a units row, then one row per profiled launch
h, shape, agg = None, "", collections.OrderedDict()
for i, r in enumerate(rows):
    if r and r[0] == "#SHAPE":
        shape, h = r[1], None
    elif r and r[0] == "ID":
        h, col, units = r, {n: r.index(n) for n in r}, i + 1
        hdr = h
    elif h is not None and i != units and len(r) == len(h):
        agg.setdefault((shape, r[col["Kernel Name"]][:60], r[col["launch__grid_size"]]), []).append(r)
if not agg:
    sys.exit("profile_gemv: no kernels profiled")
stall = [n for n in hdr if n.startswith("smsp__average_warps_issue_stalled_")]
print("| shape | kernel | grid | regs | us | DRAM % | warps active % | IPC | top stalls (per issue) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
f = lambda r, n: float(r[col[n]].replace(",", "") or 0)
for (sh, k, g), rs in agg.items():
    med = lambda n: sorted(f(r, n) for r in rs)[len(rs) // 2]
    st = sorted(((med(n), n.split("stalled_")[1].split("_per")[0]) for n in stall), reverse=True)[:3]
    print(f"| {sh} | {k} | {g} | {int(med('launch__registers_per_thread'))} | {med('gpu__time_duration.sum') / 1e3:.1f} "
          f"| {med('dram__throughput.avg.pct_of_peak_sustained_elapsed'):.0f} "
          f"| {med('sm__warps_active.avg.pct_of_peak_sustained_active'):.0f} "
          f"| {med('sm__inst_executed.avg.per_cycle_active'):.2f} | "
          + ", ".join(f"{n} {v:.1f}" for v, n in st) + " |")
PY
