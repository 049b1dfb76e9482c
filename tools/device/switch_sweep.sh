#!/bin/bash
# switch_sweep.sh — every run-time switch of the GPU plugins once on prompts and decode, looking
# for faults, not speed: for each model and each switch, a `memra bench` of a prompt and a few
# tokens (prefill and decode paths both) and a graph gate (eager == replay). Why: the opt-in
# paths are timed at tg128 and rarely run beside the defaults that changed after them; the
# twenty-sixth session found MEMRA_MMID_COMBINE=1 faulting on MoE prompts once matmul_id v4 took
# prompt rows (docs/PERF.md). From the repo root on the GPU machine, with memra and memra-synth
# in $D (default dist-carry; its gpu-plugins.tar.xz unpacked here when needed):
#   bash tools/device/switch_sweep.sh [MODEL...] [-- ENV=V...]
#   MODEL: preset:type[:layers] (default qwen3-30b-a3b:q4_k_m:4 qwen3next-80b-a3b:q4_k_m
#          llama31-8b:q4_k_m); ENV=V: the switches (default: the list below)
# Env: BACKEND (sm90a), P (prompt, 256), N (tokens, 8), GATE_N (graph gate tokens, 96; 0: no gate),
# LIMIT (seconds; stops before a new switch past it), WORK (models, kept between runs).
# Prints a line per failure (rc, the first error line), then "switch_sweep: R runs, F failed";
# exits 1 when one failed. The default lists (two runs a model and switch) took 164 s on an H100
# (twenty-seventh session: 180 runs, 0 failed), models synthesized before; LIMIT guards a call.
set -u
D=${D:-dist-carry}
W=${WORK:-/tmp/memra-models}
P=${P:-256}
N=${N:-8}
GATE_N=${GATE_N:-96}
LIMIT=${LIMIT:-0}
B=${BACKEND:-sm90a}
[ -f "$D/gpu-plugins.tar.xz" ] && [ ! -f "$D/libmemra_sm90a.so" ] && tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
models=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
switches=("$@")
[ ${#models[@]} -gt 0 ] || models=(qwen3-30b-a3b:q4_k_m:4 qwen3next-80b-a3b:q4_k_m llama31-8b:q4_k_m)
# The plugins' switches (plugins/cuda/backend.cu and the kernels' getenv calls), each away from
# its default; MEMRA_SWEEP_NONE=1 is the defaults themselves.
[ ${#switches[@]} -gt 0 ] || switches=(MEMRA_SWEEP_NONE=1 MEMRA_MMID_GLU=0 MEMRA_RMS_GATE=0
  MEMRA_RMS_QK=0 MEMRA_SHEXP_STACK=0 MEMRA_MMID_COMBINE=1 MEMRA_ROPE_ATT=1 MEMRA_MNCONV=0
  MEMRA_ATT_GATE=0 MEMRA_GDN_NORM=0 MEMRA_FFN_GLU=1 MEMRA_FFN_GLU=2 MEMRA_NORM_MM=1 MEMRA_ACC=0
  MEMRA_QK_ROPE=1 MEMRA_COMBINE_NORM=1 MEMRA_ROUTE_GLU=1 MEMRA_MM_NORM=1 MEMRA_QKV_ROPE=1
  MEMRA_ATT=5 MEMRA_ATT_FUSE=1 MEMRA_ATT_HS=2 MEMRA_T11_DYN=0 MEMRA_T11_DYN=3 MEMRA_PDL=0
  MEMRA_LOOKAHEAD=0 MEMRA_MOE_FUSE=0 MEMRA_MMID_GROUP=0 MEMRA_GEMV=v5 MEMRA_GEMV_Q6=tc
  MEMRA_T11_DYN_MIN=2 MEMRA_T11_PER_MIN=2)
mkdir -p "$W"
file_of() { # preset:type[:layers] -> model path (ab.sh's names, so its models are reused)
  local p t l
  IFS=: read -r p t l <<<"$1"
  echo "$W/$p-$t${l:+-l$l}.gguf"
}
for m in "${models[@]}"; do
  f=$(file_of "$m")
  IFS=: read -r p t l <<<"$m"
  [ -s "$f" ] || { "$D/memra-synth" --preset "$p" --types "$t" --seed 1 ${l:+--layers "$l"} \
    -o "$f.tmp" >/dev/null 2>&1 && mv "$f.tmp" "$f"; } || { echo "switch_sweep: no model $m"; exit 2; }
done
t0=$(date +%s)
runs=0
bad=0
fail() { # what rc output
  bad=$((bad + 1))
  local why
  why=$(grep -i -m1 'error\|illegal\|fatal\|mismatch\|FAIL' <<<"$3")
  [ -n "$why" ] || why=$(grep -v '^\s*$' <<<"$3" | tail -1)
  echo "FAIL $1: rc $2: ${why:0:200}"
}
for s in "${switches[@]}"; do
  if [ "$LIMIT" -gt 0 ] && [ $(($(date +%s) - t0)) -gt "$LIMIT" ]; then
    echo "switch_sweep: stopped at $s (LIMIT $LIMIT s)"
    break
  fi
  for m in "${models[@]}"; do
    f=$(file_of "$m")
    out=$(env "$s" timeout 120 "$D/memra" bench --backend "$B" --plugin-dir "$D" -m "$f" \
      --bench-p "$P" --bench-n "$N" -r 1 2>&1)
    rc=$?
    runs=$((runs + 1))
    rows=$(grep -c "| pp$P \|| tg$N " <<<"$out")
    if [ "$rc" -ne 0 ] || [ "$rows" -ne 2 ]; then fail "$s $m bench" "$rc" "$out"; fi
    [ "$GATE_N" -gt 0 ] || continue
    out=$(env "$s" timeout 120 "$D/memra" gate graph --backend "$B" --plugin-dir "$D" -m "$f" \
      --gate-p "$P" -n "$GATE_N" 2>&1)
    rc=$?
    runs=$((runs + 1))
    if [ "$rc" -ne 0 ] || ! grep -q 'PASS' <<<"$out"; then fail "$s $m gate" "$rc" "$out"; fi
  done
done
echo "switch_sweep: $runs runs, $bad failed ($(($(date +%s) - t0)) s)"
[ "$bad" -eq 0 ]
