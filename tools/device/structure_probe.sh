#!/bin/bash
# structure_probe.sh — how a Q4_K_M decode step's time divides between v11's bytes, its consumers
# and everything else (the launches' structure, attention, the small kernels), on any Hopper GPU,
# in one call (~4 minutes): `memra bench` (Llama-3.1-8B Q4_K_M, tg128 @ d512) on four builds of
# one tree, each with MEMRA_QKV_MIXED=0 so every Q4_K GEMV runs v11 (the probes live there):
#   main    the plugin as built
#   nc      -DMEMRA_T11_NOCOPY=1: v11's producers copy nothing (WRONG values): bound by consumers
#   skip    -DMEMRA_T11_SKIP=1: v11's Q4_K consumers skip their arithmetic (WRONG values)
#   ncskip  both: neither bytes nor consumers in v11's Q4_K tiles, the structure's own bound
# nc - ncskip prices the consumers where nothing waits on DRAM (the H200's regime, docs/PERF.md
# thirty-sixth session); ncskip is what a leaner consumer cannot pass without fewer launches.
# Build here first (repo root): bash tools/device/pack.sh, then
#   bash tools/device/build_variant.sh nc "-DMEMRA_T11_NOCOPY=1" matmul.cu
#   bash tools/device/build_variant.sh skip "-DMEMRA_T11_SKIP=1" matmul.cu
#   bash tools/device/build_variant.sh ncskip "-DMEMRA_T11_NOCOPY=1 -DMEMRA_T11_SKIP=1" matmul.cu
# (`mixed`, the plugin as it ships, rides along: the A/B of ABI 1.23's mixed launch.)
# and carry ["dist-carry"]. VARS adds more var-NAME builds (run the same way). Prints the table last.
set -u
D=${D:-dist-carry}
tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$D
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
AB=(main="$D:MEMRA_QKV_MIXED=0" mixed="$D") # mixed: the default (ABI 1.23 on), its own A/B
for v in nc skip ncskip ${VARS:-}; do
  [ -f "$D/var-$v/libmemra_sm90a.so.xz" ] || { echo "var-$v missing: skipped"; continue; }
  mkdir -p "/tmp/v-$v" && xz -dc "$D/var-$v/libmemra_sm90a.so.xz" >"/tmp/v-$v/libmemra_sm90a.so"
  AB+=("$v=/tmp/v-$v:MEMRA_QKV_MIXED=0")
done
R=${R:-2} D=$D bash tools/device/ab.sh llama31-8b:q4_k_m -- "${AB[@]}" | tail -$((${#AB[@]} + 2))
