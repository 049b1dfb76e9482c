#!/bin/bash
# profile_gemv.sh — why the decode GEMVs sit at 35-60% of the copy bandwidth: Nsight Compute
# over gemv_bench (every type on the Llama-3.1-8B shapes, M = 1), one line per kernel with
# its time, DRAM throughput, achieved occupancy, issue activity and the top stall reasons.
# On the GPU machine, from the repo root, carry ["dist"]:
#   bash tools/device/profile_gemv.sh [PLUGIN.so]     (about 2 minutes; MEMRA_GEMV=tc works;
#   TYPES="Q8_0 F16" limits gemv_bench to those types)
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
# Every matmul / GEMV kernel of one pass (the graphs replay each shape many times: the first
# 12 launches of each kernel name are enough).
timeout 600 "$NCU" --csv --page raw --print-units base --graph-profiling node --metrics "$M" \
  --kernel-name-base demangled --kernel-name regex:'matmul_v|tc_prep' --launch-count 240 \
  "$D/gemv_bench" "$P" ${TYPES:-} >"$O/gemv_ncu.csv" 2>"$O/gemv_ncu.err"
echo "ncu rc $?: $(grep -c '"matmul\|"tc_prep' "$O/gemv_ncu.csv") kernels"
python3 - "$O/gemv_ncu.csv" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
h = rows[hdr]
col = {n: h.index(n) for n in h}
stall = [n for n in h if n.startswith("smsp__average_warps_issue_stalled_")]
agg = collections.OrderedDict()
for r in rows[hdr + 2:]:
    if len(r) != len(h):
        continue
    key = (r[col["Kernel Name"]][:70], r[col["launch__grid_size"]])
    agg.setdefault(key, []).append(r)
print("| kernel | grid | regs | us | DRAM % | warps active % | IPC | top stalls (per issue) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
f = lambda r, n: float(r[col[n]].replace(",", "") or 0)
for (k, g), rs in agg.items():
    med = lambda n: sorted(f(r, n) for r in rs)[len(rs) // 2]
    st = sorted(((med(n), n.split("stalled_")[1].split("_per")[0]) for n in stall), reverse=True)[:3]
    print(f"| {k} | {g} | {int(med('launch__registers_per_thread'))} | {med('gpu__time_duration.sum') / 1e3:.1f} "
          f"| {med('dram__throughput.avg.pct_of_peak_sustained_elapsed'):.0f} "
          f"| {med('sm__warps_active.avg.pct_of_peak_sustained_active'):.0f} "
          f"| {med('sm__inst_executed.avg.per_cycle_active'):.2f} | "
          + ", ".join(f"{n} {v:.1f}" for v, n in st) + " |")
PY
