#!/bin/bash
# consumer_probe.sh — how fast the Q4_K consumers are by themselves, on any Hopper GPU: the limit
# of the H200's Q4_K tiles (docs/PERF.md: there the tiles wait on their consumers, not on bytes),
# measured where an H100 is what comes (the same SMs and clocks; its DRAM hides the consumers).
#   1. layer_bench's consume rows (producers copy nothing: the consumers' own rate a config)
#   2. gemv_bench Q4_K / Q6_K of the plugin and of each var-nc* variant (MEMRA_T11_NOCOPY=1 with
#      the variant's other defines), so consumer-side changes compare without the DRAM.
# Build here first (repo root): bash tools/device/pack.sh, then e.g.
#   bash tools/device/build_variant.sh nc "-DMEMRA_T11_NOCOPY=1" matmul.cu
#   bash tools/device/build_variant.sh nc-cw8 "-DMEMRA_T11_NOCOPY=1 -DMEMRA_TC_WARPS=8" matmul.cu
# and carry ["dist-carry"]. Prints the tables last.
# STEP=1 adds the decode step with v11's GEMVs free of DRAM: `memra bench` (Llama-3.1-8B Q4_K_M, tg128
# @ d512) on var-nc's plugin (WRONG values) beside the plugin's own: the step bound by the consumers and
# the launches' structure alone, the H200's limit with today's kernels (there: 471 tok/s).
set -u
D=${D:-dist-carry}
tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$D
O=${OUT:-/tmp/o}
mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 120 "$D/layer_bench" "${REPS:-10}" >"$O/layer_bench.txt" 2>&1
VARS=(main)
for d in "$D"/var-nc*; do
  [ -f "$d/libmemra_sm90a.so.xz" ] || continue
  v=$(basename "$d")
  xz -dc "$d/libmemra_sm90a.so.xz" >"/tmp/$v.so"
  VARS+=("$v")
done
for v in "${VARS[@]}"; do
  so=/tmp/$v.so
  [ "$v" = main ] && so=$D/libmemra_sm90a.so
  timeout 90 "$D/gemv_bench" "$so" Q4_K Q6_K 2>/dev/null | grep -E "^Q[46]_K" | sort -u >"$O/g-$v.txt"
done
echo "layer_bench (us a layer; consume: no copies):"
grep -E "^copy|\| (launch|step|nowait|consume) \|" "$O/layer_bench.txt" | cut -d'|' -f1-5
echo "gemv_bench us: type shape (N x K) | ${VARS[*]}"
for v in "${VARS[@]}"; do awk -v v="$v" '{print v, $1, $2, $3, $4}' "$O/g-$v.txt"; done |
  awk '{k = $2 " " $3 " " $4; if (!(k in seen)) { seen[k] = 1; ord[n++] = k } t[k] = t[k] " | " $5}
       END { for (i = 0; i < n; ++i) print ord[i] t[ord[i]] }'
if [ "${STEP:-0}" = 1 ] && [ -f "$D/var-nc/libmemra_sm90a.so.xz" ]; then
  mkdir -p /tmp/step-nc /tmp/memra-models
  xz -dc "$D/var-nc/libmemra_sm90a.so.xz" >/tmp/step-nc/libmemra_sm90a.so
  L=/tmp/memra-models/llama31-8b-q4_k_m.gguf
  [ -f "$L" ] || "$D/memra-synth" --preset llama31-8b --types q4_k_m --seed 1 -o "$L" >/dev/null 2>&1
  for p in /tmp/step-nc "$D" /tmp/step-nc "$D"; do
    echo "memra bench, plugin $p:"
    timeout 90 "$D/memra" bench --plugin-dir "$p" --backend sm90a -m "$L" --bench-p 0 --bench-n 128 \
      --bench-d 512 -r 2 2>&1 | grep -E "tg128|^floor"
  done
fi
