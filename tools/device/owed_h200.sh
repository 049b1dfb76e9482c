#!/bin/bash
# owed_h200.sh — the H200 runs the thirty-second to thirty-fifth sessions could not get (every call
# got an H100), in one device call of ~9 minutes. Each variant lost or was even on the H100 and is
# aimed at the H200, whose Q4_K tiles wait on their consumers (docs/PERF.md):
#   skip   -DMEMRA_T11_SKIP=1 (timing probe, WRONG results): what the Q4_K consumers cost the step
#   pad64  -DMEMRA_T11_PAD=64: padded ring rows against the shared-memory bank conflicts
#   sb8    -DMEMRA_T11_SB4K=8: half-tile stages, four v11 blocks an SM
#   cw8    -DMEMRA_TC_WARPS=8 (matmul.cu moe.cu): eight warps a tile (other sums, own bits)
#   cw4k8  -DMEMRA_TC_WARPS_4K=8 (matmul.cu): eight warps a tile for dense rows of K <= 4096 only
#   v6n    MEMRA_V6_NORM=1 on the default plugin: the router's norm in its v6 head
#   mixed0 MEMRA_QKV_MIXED=0 on the default plugin: the q / k launch and v's own (the thirty-seventh
#          session's default, ABI 1.23's mixed launch, +1.3-1.6% on the H100)
# Build here first (repo root): bash tools/device/pack.sh, then for each variant
#   bash tools/device/build_variant.sh NAME "DEFINES" matmul.cu [moe.cu]
# and carry ["dist-carry"] (the tree plus dist-carry stay under 64 MiB with these four variants).
# On an H100 it stops after its first line: those figures are in PERF already (ANY_GPU=1 runs it
# anyway). LIM: seconds for the whole call (560); RL: rounds of the Llama A/B (2).
set -u
D=${D:-dist-carry}
LIM=${LIM:-560}
T0=$(date +%s)
left() { echo $((LIM - ($(date +%s) - T0))); }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$GPU"
case "$GPU" in *H200*) ;; *) [ "${ANY_GPU:-0}" = 1 ] || exit 0 ;; esac
tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$D
O=${OUT:-/tmp/o}
W=/tmp/memra-models
mkdir -p "$O" "$W"
VARS=()
for v in skip pad64 sb8 cw8 cw4k8; do
  [ -f "$D/var-$v/libmemra_sm90a.so.xz" ] || continue
  mkdir -p "/tmp/v-$v" && xz -dc "$D/var-$v/libmemra_sm90a.so.xz" >"/tmp/v-$v/libmemra_sm90a.so"
  VARS+=("$v")
done
(
  "$D/memra-synth" --preset llama31-8b --types q4_k_m --seed 1 -o "$W/llama31-8b-q4_k_m.gguf"
  "$D/memra-synth" --preset qwen3-30b-a3b --types q4_k_m --seed 1 --layers 8 \
    -o "$W/qwen3-30b-a3b-q4_k_m-l8.gguf"
  "$D/memra-synth" --preset qwen3next-80b-a3b --types q4_k_m --seed 1 --layers 4 \
    -o "$W/qwen3next-80b-a3b-q4_k_m-l4.gguf"
) >"$O/synth.log" 2>&1 &
SY=$!
# 1. the persistent program's bound on this GPU (tools/device/layer_bench.cu)
[ -x "$D/layer_bench" ] && timeout 60 "$D/layer_bench" 20 2>&1 | grep -E "^copy|\| (launch|layer|step|nowait) \||^bits"
# 2. the variants' GEMVs alone (us, and whether the bits are main's)
timeout 60 "$D/gemv_bench" "$D/libmemra_sm90a.so" Q4_K Q6_K 2>/dev/null | grep -E "^Q[46]_K" | sort -u >"$O/g-main.txt"
for v in "${VARS[@]}"; do
  timeout 60 "$D/gemv_bench" "/tmp/v-$v/libmemra_sm90a.so" Q4_K Q6_K 2>/dev/null | grep -E "^Q[46]_K" |
    sort -u >"$O/g-$v.txt"
done
echo "gemv_bench us: shape | main | ${VARS[*]} (= when main's bits)"
for v in "${VARS[@]}"; do
  paste <(awk '{print $4, $NF}' "$O/g-main.txt") <(awk '{print $4, $NF}' "$O/g-$v.txt") |
    awk '{print "|", $3 ($2 == $4 ? "=" : "")}' >"$O/g-$v.cmp"
done
paste -d' ' <(awk '{print $1, $2, $3, "|", $4}' "$O/g-main.txt") $(for v in "${VARS[@]}"; do echo "$O/g-$v.cmp"; done)
wait $SY
# 3. the step: Llama Q4_K_M with every variant; the MoE and the hybrid with those meant for them
AB=(main="$D" mixed0="$D:MEMRA_QKV_MIXED=0") # mixed0: v's own launch again (ABI 1.23 off)
for v in "${VARS[@]}"; do AB+=("$v=/tmp/v-$v"); done
[ "$(left)" -gt 200 ] && R=${RL:-2} D=$D timeout $(($(left) - 150)) bash tools/device/ab.sh llama31-8b:q4_k_m -- "${AB[@]}" 2>&1 | tail -$((${#AB[@]} + 1))
AB2=(main="$D" v6n="$D:MEMRA_V6_NORM=1")
for v in sb8 cw8 cw4k8; do [ -d "/tmp/v-$v" ] && AB2+=("$v=/tmp/v-$v"); done
[ "$(left)" -gt 60 ] && R=1 D=$D timeout $(($(left) - 40)) bash tools/device/ab.sh qwen3-30b-a3b:q4_k_m:8 qwen3next-80b-a3b:q4_k_m:4 -- "${AB2[@]}" 2>&1 | tail -$((2 * ${#AB2[@]} + 1))
# 4. issue 4's row at HEAD, the floor from this run's copy
[ "$(left)" -gt 30 ] && timeout $(($(left) - 5)) "$D/memra" bench --plugin-dir "$D" --backend sm90a \
  -m "$W/llama31-8b-q4_k_m.gguf" --bench-p 0 --bench-n 128 --bench-d 512 -r 3 2>&1 | tail -4
