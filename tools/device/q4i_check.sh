#!/bin/bash
# q4i_check.sh — the integer-MMA Q4_K form (matmul_tc4i.cuh, build define MEMRA_TC_Q4I=1) on the GPU in
# one call (LIM seconds, 420 by default), most telling first: gemv_bench Q4_K of main / q4i and, with no
# copies (where the consumers are the limit: the H200's regime), nc / ncq4i; ab.sh tg128 @ d512 on
# Llama-3.1-8B Q4_K_M: main and q4i as built, nc and ncq4i with MEMRA_QKV_MIXED=0 (the no-copy probe
# lives in v11 only); then with the time left opcheck --quick of var-q4i against the CPU plugin (every
# Q4_K row within its tolerance, v11 == v7 bitwise) and the graph gate with it.
# Build here first (repo root): bash tools/device/pack.sh, then
#   bash tools/device/build_variant.sh q4i "-DMEMRA_TC_Q4I=1" matmul.cu moe.cu
#   bash tools/device/build_variant.sh nc "-DMEMRA_T11_NOCOPY=1" matmul.cu
#   bash tools/device/build_variant.sh ncq4i "-DMEMRA_TC_Q4I=1 -DMEMRA_T11_NOCOPY=1" matmul.cu
# and carry ["dist-carry"]. VARS: more var-NAME builds timed beside them with MEMRA_QKV_MIXED=0 (e.g.
# "skip ncskip" of structure_probe.sh); on an H200 ABI 1.23's owed A/B (mixed0) rides along.
set -u
D=${D:-dist-carry}
LIM=${LIM:-420}
T0=$(date +%s)
left() { echo $((LIM - ($(date +%s) - T0))); }
tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$D
O=${OUT:-/tmp/o}
W=/tmp/memra-models
mkdir -p "$O" "$W"
GPU=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)
echo "$GPU"
for v in q4i nc ncq4i ${VARS:-}; do
  mkdir -p "/tmp/v-$v" && xz -dc "$D/var-$v/libmemra_sm90a.so.xz" >"/tmp/v-$v/libmemra_sm90a.so"
done
M=$W/llama31-8b-q4_k_m.gguf
[ -s "$M" ] || "$D/memra-synth" --preset llama31-8b --types q4_k_m --seed 1 -o "$M" >"$O/synth.log" 2>&1 &
SY=$!
for p in main q4i nc ncq4i; do
  so=/tmp/v-$p/libmemra_sm90a.so
  [ $p = main ] && so=$D/libmemra_sm90a.so
  timeout 40 "$D/gemv_bench" "$so" Q4_K 2>/dev/null | grep -E "^Q4_K" | sort -u >"$O/g-$p.txt"
done
echo "gemv_bench Q4_K us: shape | main q4i nc ncq4i"
for p in main q4i nc ncq4i; do awk -v v="$p" '{print v, $1, $2, $3, $4}' "$O/g-$p.txt"; done |
  awk '{k = $2 " " $3 " " $4; if (!(k in seen)) { seen[k] = 1; ord[n++] = k } t[k] = t[k] " | " $5}
       END { for (i = 0; i < n; ++i) print ord[i] t[ord[i]] }'
wait $SY
AB=(main="$D" q4i=/tmp/v-q4i nc=/tmp/v-nc:MEMRA_QKV_MIXED=0 ncq4i=/tmp/v-ncq4i:MEMRA_QKV_MIXED=0)
for v in ${VARS:-}; do AB+=("$v=/tmp/v-$v:MEMRA_QKV_MIXED=0"); done
case "$GPU" in *H200*) AB+=(mixed0="$D:MEMRA_QKV_MIXED=0") ;; esac
KEEP=130 # the gate's and opcheck's share; a short call (LIM < 300) gives it all to the A/B
[ "$LIM" -lt 300 ] && KEEP=5
R=${R:-2} D=$D timeout $(($(left) - KEEP)) bash tools/device/ab.sh llama31-8b:q4_k_m -- "${AB[@]}" |
  tail -$((${#AB[@]} + 2))
[ "$(left)" -gt 60 ] || exit 0
timeout 50 "$D/memra" gate graph --plugin-dir /tmp/v-q4i --backend sm90a -m "$M" \
  --gate-p 200 -n 256 2>&1 | tail -2
timeout $(($(left) - 5)) "$D/opcheck" --quick "$D/libmemra_cpu.so" /tmp/v-q4i/libmemra_sm90a.so \
  >"$O/opcheck.txt" 2>&1
echo "opcheck --quick q4i (rc $?): worst Q4_K rows, failures, summary"
grep -E "^(ok|FAIL) .*Q4_K" "$O/opcheck.txt" |
  awk '{for (i = 1; i < NF; ++i) if ($i == "err") print $(i + 1), $0}' | sort -g | tail -4 |
  cut -d' ' -f2- | cut -c1-150
grep -E "^FAIL" "$O/opcheck.txt" | head -6 | cut -c1-150
grep -cE "^(ok|FAIL)" "$O/opcheck.txt"
tail -1 "$O/opcheck.txt"
