#!/bin/bash
# profile_src.sh — on the GPU machine: Nsight Compute's source counters (stall samples per SASS
# instruction) of one GEMV kernel over gemv_bench, one launch a shape, each shape's
# `--page source` CSV under $OUT and ncu_source.py's summary on stdout. From the repo root:
#   bash tools/device/profile_src.sh [PLUGIN.so]
#   Env: D (dist-carry), KERNEL (ncu regex, matmul_v11), TYPES (Q4_K), SHAPES ('|'-separated
#   substrings of gemv_bench's shape names: "output 128256|ffn_gate/up 14336"), RANGES (hex
#   offset ranges for ncu_source.py, e.g. "2e30-3d70:loop 40e0-4100:barrier").
# The offsets are those of `cuobjdump -sass` of the same plugin (here: no GPU needed).
set -u
D=${D:-dist-carry}
P=${1:-$D/libmemra_sm90a.so}
O=${OUT:-/tmp/memra-profile}
mkdir -p "$O"
[ -f "$D/gpu-plugins.tar.xz" ] && [ ! -f "$D/libmemra_sm90a.so" ] && tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "profile_src: ncu not found"; exit 2; }
IFS='|' read -ra shape_list <<<"${SHAPES:-output 128256|ffn_gate/up 14336}"
for sh in "${shape_list[@]}"; do
  tag=$(echo "$sh" | tr -c 'a-zA-Z0-9\n' '_')
  GEMV_BENCH_SHAPE="$sh" timeout 200 "$NCU" --section SourceCounters --section WarpStateStats \
    --section SchedulerStats --kernel-name regex:"${KERNEL:-matmul_v11}" --launch-skip 12 \
    --launch-count 1 --import-source no -f -o "$O/$tag" "$D/gemv_bench" "$P" ${TYPES:-Q4_K} \
    >"$O/$tag.log" 2>&1 || { echo "profile_src: ncu failed on '$sh' ($O/$tag.log)"; continue; }
  "$NCU" -i "$O/$tag.ncu-rep" --page source --csv --print-source sass >"$O/$tag.csv" 2>"$O/$tag.err"
  echo "== $sh"
  "$NCU" -i "$O/$tag.ncu-rep" --page details 2>/dev/null |
    grep -E "Active Warps Per Scheduler|Eligible Warps Per Scheduler|One or More Eligible|Warp Cycles Per Issued"
  # shellcheck disable=SC2086
  python3 "$(dirname "$0")/ncu_source.py" "$O/$tag.csv" --top 12 ${RANGES:-}
done
