#!/bin/bash
# profile_step.sh MODEL [N] — where one decode step's time goes: Nsight Compute over
# `memra run` (a 3-token prompt, N generated tokens, graph replay profiled per node), each
# kernel's duration summed per name and divided by the decode steps, with launches per step
# and DRAM throughput. The sum is kernel time without PDL's overlap: an upper bound on the
# step, the gap to the measured tok/s is launch and dependency latency.
# On the GPU machine, from the repo root, carry ["dist"]:  bash tools/device/profile_step.sh M.gguf
# PROMPT=512: the same table for one eval of a 512-token prompt instead (N = 1: the prompt step
# alone, which is where a pp512 figure's time goes).
set -u
D=${D:-dist}
MODEL=${1:?usage: profile_step.sh MODEL.gguf [N]}
N=${2:-5}
PROMPT=${PROMPT:-0}
IDS=1,2,3
if [ "$PROMPT" -gt 0 ]; then
  N=1
  IDS=$(seq -s, 100 $((99 + PROMPT)))
fi
O=${OUT:-/tmp/memra-profile}
mkdir -p "$O"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "profile_step: ncu not found"; exit 2; }
[ -x "$D/memra" ] || { echo "profile_step: no $D/memra (D names the folder of the binaries)"; exit 2; }
timeout 500 "$NCU" --csv --page raw --print-units base --graph-profiling node --clock-control none \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  --kernel-name-base demangled "$D/memra" run --plugin-dir "$D" --backend "${BACKEND:-sm90a}" \
  -m "$MODEL" --prompt-ids "$IDS" -n "$N" --temp 0 >"$O/step_ncu.csv" 2>"$O/step_ncu.err"
rc=$?
echo "ncu rc $rc"
[ $rc -eq 0 ] || { tail -5 "$O/step_ncu.err"; exit 1; }
python3 - "$O/step_ncu.csv" "$N" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
steps = max(int(sys.argv[2]) - 1, 1)  # the first token comes from the prompt step (N 1: it alone)
hdr = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
h = rows[hdr]
c = {n: h.index(n) for n in h}
ks = [r for r in rows[hdr + 2:] if len(r) == len(h)]
agg = collections.OrderedDict()
for r in ks:
    k = r[c["Kernel Name"]].split("(")[0][:60]
    num = lambda v: float(v.replace(",", "") or 0)  # ncu prints thousands separators
    t = num(r[c["gpu__time_duration.sum"]]) * 1e-3  # us
    d = num(r[c["dram__throughput.avg.pct_of_peak_sustained_elapsed"]])
    a = agg.setdefault(k, [0, 0.0, 0.0])
    a[0] += 1; a[1] += t; a[2] += d * t
tot = sum(a[1] for a in agg.values())
print(f"{'kernel':60s} {'per step':>8s} {'us/step':>9s} {'us each':>8s} {'DRAM%':>6s}")
for k, (n, t, dt) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{k:60s} {n / steps:8.1f} {t / steps:9.1f} {t / n:8.2f} {dt / t if t else 0:6.1f}")
print(f"total kernel time per decode step (the prompt step's gemm/prefill kernels included, / {steps}): {tot / steps:.1f} us")
PY
