#!/bin/bash
# mixed_check.sh — ABI 1.23's mixed q / k / v launch (matmul_tc11mx.cuh; MEMRA_QKV_MIXED=0 turns it
# off) on the GPU in one call (~5 minutes): opcheck --quick (its rmsnorm_matmul_mixed rows: against
# the CPU, Q4_K rows == rmsnorm_matmul_n's, a second call and row 0 of three bit-identical), the
# graph gate on Llama-3.1-8B Q4_K_M with the slot on, then ab.sh off / on (R rounds, tg128 @ d512).
# Build here first: bash tools/device/pack.sh; carry ["dist-carry"]. PL: the plugin's folder
# ($D; a build_variant.sh plugin's var-NAME is unpacked into /tmp/v-NAME first); VARS: more
# variants for the A/B (var-NAME in $D, each run with the slot on). Prints the table last.
set -u
D=${D:-dist-carry}
tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH=$D
unpack() { # var-NAME -> /tmp/v-NAME holding its plugin
  mkdir -p "/tmp/v-$1" && xz -dc "$D/var-$1/libmemra_sm90a.so.xz" >"/tmp/v-$1/libmemra_sm90a.so"
}
PL=${PL:-$D}
case "$PL" in var-*) unpack "${PL#var-}" && PL=/tmp/v-${PL#var-} ;; esac
AB=(off="$PL:MEMRA_QKV_MIXED=0" on="$PL")
for v in ${VARS:-}; do unpack "$v" && AB+=("$v=/tmp/v-$v"); done
O=${OUT:-/tmp/o}
W=${WORK:-/tmp/memra-models}
mkdir -p "$O" "$W"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
M=$W/llama31-8b-q4_k_m.gguf
[ -s "$M" ] || "$D/memra-synth" --preset llama31-8b --types q4_k_m --seed 1 -o "$M" >"$O/synth.log" 2>&1 &
SY=$!
timeout 240 "$D/opcheck" --quick "$D/libmemra_cpu.so" "$PL/libmemra_sm90a.so" >"$O/opcheck.txt" 2>&1
echo "opcheck --quick: the mixed slot's rows, then the summary"
grep -E "rmsnorm_matmul_mixed|K=4096 (q, k, v|v \(Q6_K\))" "$O/opcheck.txt" | cut -c1-150
grep -E "FAIL|fail" "$O/opcheck.txt" | grep -v "^  " | tail -8
tail -2 "$O/opcheck.txt"
for v in ${VARS:-}; do # the variants' mixed rows too
  timeout 240 "$D/opcheck" --quick "$D/libmemra_cpu.so" "/tmp/v-$v/libmemra_sm90a.so" >"$O/opcheck-$v.txt" 2>&1
  echo "$v: $(grep -cE '^ok .*rmsnorm_matmul_mixed|PASS  bit-identical' "$O/opcheck-$v.txt") mixed rows ok; $(tail -1 "$O/opcheck-$v.txt")"
done
wait $SY
timeout 150 "$D/memra" gate graph --plugin-dir "$PL" --backend sm90a -m "$M" \
  --gate-p 200 -n 256 2>&1 | tail -3
R=${R:-2} WORK=$W D=$D bash tools/device/ab.sh llama31-8b:q4_k_m -- "${AB[@]}" | tail -6
