#!/bin/bash
# ab.sh — A/B decode timings on the GPU machine: every variant on every model, alternated over
# rounds in one call, so machine-to-machine drift cancels (a fresh machine can differ from the
# last call's by 2-3%). From the repo root, with memra and memra-synth in $D (default dist):
#   bash tools/device/ab.sh MODELS -- VARIANTS
#   MODELS:   preset:type[:layers], e.g. llama31-8b:q4_k_m qwen3-30b-a3b:q4_k_m:8
#   VARIANTS: label=plugin_dir[:ENV=value[,ENV=value...]], e.g. main=old new=dist new-v5=dist:MEMRA_GEMV=v5
#   (a memra executable in plugin_dir runs that variant instead of $D/memra: a core change's A/B)
# Env: R rounds (2), DEPTH the --bench-d list (512), BACKEND (sm90a), D, WORK (models, kept
# between runs), OUT; PP=512 times prompt processing (pp512 at depth 0) instead of tg128.
# Prints one line per run as it goes, then a table of the medians (each memra bench -r 3).
# Models are synthesized (when not in WORK already) before the first timed run.
set -u
D=${D:-dist}
W=${WORK:-/tmp/memra-models}
O=${OUT:-/tmp/memra-ab}
R=${R:-2}
DEPTH=${DEPTH:-512}
PP=${PP:-0}
if [ "$PP" -gt 0 ]; then
  TEST="pp$PP" BENCH=(--bench-p "$PP" --bench-n 0)
else
  TEST=tg128 BENCH=(--bench-p 0 --bench-n 128 --bench-d "$DEPTH")
fi
mkdir -p "$W" "$O"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
models=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#models[@]} -gt 0 ] && [ $# -gt 0 ] || { echo "usage: ab.sh MODEL... -- LABEL=DIR[:ENV=V,...]..." >&2; exit 2; }
for v in "$@"; do # a variant's folder must exist (memra refuses a missing --plugin-dir) and hold
  dir=${v#*=}; dir=${dir%%:*} # the plugin (dist-carry's is packed: its rows came back empty)
  [ -d "$dir" ] || { echo "ab: variant ${v%%=*}: no folder $dir" >&2; exit 2; }
  so="$dir/libmemra_${BACKEND:-sm90a}.so"
  [ -f "$so" ] || { echo "ab: variant ${v%%=*}: no $so (unpack gpu-plugins.tar.xz first?)" >&2; exit 2; }
done
file_of() { # preset:type[:layers] -> model path
  local p t l
  IFS=: read -r p t l <<<"$1"
  echo "$W/$p-$t${l:+-l$l}.gguf"
}
( for m in "${models[@]}"; do
    f=$(file_of "$m"); IFS=: read -r p t l <<<"$m"
    [ -s "$f" ] || { "$D/memra-synth" --preset "$p" --types "$t" --seed 1 ${l:+--layers "$l"} \
      -o "$f.tmp" >>"$O/synth.log" 2>&1 && mv "$f.tmp" "$f"; }
  done ) &
SP=$!
# Every model before the first timed run: a synthesis on the host's CPUs beside a benchmark
# distorted it (2026-12-02: a hybrid tg128 read 1,371 against 2,625 in the next round).
t_syn=$(date +%s)
wait $SP
echo "ab: models ready in $(( $(date +%s) - t_syn )) s"
declare -A sum
for r in $(seq "$R"); do
  for m in "${models[@]}"; do
    f=$(file_of "$m")
    while [ ! -s "$f" ] && kill -0 $SP 2>/dev/null; do sleep 1; done
    [ -s "$f" ] || { echo "ab: no model $f (synth.log)"; continue; }
    for v in "$@"; do
      label=${v%%=*}; rest=${v#*=}; dir=${rest%%:*}; envs=""
      [ "$rest" != "$dir" ] && envs=${rest#*:}
      bin="$D/memra"; [ -x "$dir/memra" ] && bin="$dir/memra" # a variant of the core too
      out=$(env ${envs//,/ } timeout 150 "$bin" bench --plugin-dir "$dir" --backend "${BACKEND:-sm90a}" -m "$f" \
        "${BENCH[@]}" -r 3 2>"$O/err.txt" | grep "| $TEST " |
        cut -d'|' -f5,6 | tr -s ' ' | tr '\n' ' ')
      echo "round $r  $m  $label: $out"
      sum["$m $label"]+="$out; "
    done
  done
done
echo
echo "$TEST tok/s (test | median, one entry per round)"
for m in "${models[@]}"; do for v in "$@"; do
  label=${v%%=*}; printf '%-32s %-12s %s\n' "$m" "$label" "${sum["$m $label"]:-}"
done; done
