#!/bin/bash
# e2e.sh — the engine end to end on the GPU machine (repo root, dist/ carried; builds
# nothing): tiny fixtures vs llama.cpp, a synthetic model vs HF transformers, the graph
# gate on a synthetic Llama-3.1-8B, memra bench on the 8B shape (Q4_K_M and F16) beside the
# copy-bandwidth floor, and compute-sanitizer over a short run. Short table last.
#   BACKEND=sm90a (default) | cpu for a dry run; BIG=0 skips the 8B models.
set -u
D=${DIST:-dist}
O=${OUT:-/tmp/memra-e2e}
W=${WORK:-/tmp/memra-models}
BE=${BACKEND:-sm90a}
BIG=${BIG:-1}
TYPES=${TYPES:-q4_k_m f16}   # 8B-shape weight mixes to synthesize and benchmark
SMALL=${SMALL:-1}            # 0 skips steps 1-3 (fixtures, transformers, memcheck)
mkdir -p "$O" "$W"
export PATH="$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson travels in dist/
OPTS=(--plugin-dir "$D" --backend "$BE")
MEMRA=("$D/memra" "${OPTS[@]}")
declare -a SUMMARY
row() { SUMMARY+=("$(printf '%-40s %s' "$1" "$2")"); echo ">> $1: $2"; }

# 1. Tiny fixtures (our writer) on the backend vs llama.cpp's logits, F32 KV cache.
[ "$SMALL" = 1 ] && for t in tiny-llama tiny-qwen2 tiny-qwen3; do
  f=tests/e2e/fixtures/$t
  ids=$(cut -d' ' -f2- "$f.txt" | tr ' ' ',')
  "${MEMRA[@]}" -m "$f.gguf" --prompt-ids "$ids" -n 1 --temp 0 --kv-type f32 \
    --dump-logits "$O/$t.f32" >/dev/null 2>"$O/$t.err"
  r=$(python3 -c "
import numpy as np
a=np.fromfile('$O/$t.f32','<f4'); b=np.fromfile('$f.logits.f32','<f4')
n=len(open('$f.txt').read().split())-1; a=a.reshape(n,-1); b=b.reshape(n,-1)
e=max(np.linalg.norm(a[i]-b[i])/np.linalg.norm(b[i]) for i in range(n))
print(f'max rel L2 {e:.2e} over {n} positions', 'PASS' if e < 1e-4 else 'FAIL')" 2>&1 | tail -1)
  row "$t vs llama.cpp" "$r"
done

# 2. A synthetic SmolLM2-shaped model (Q8_0) vs HF transformers in float32.
if [ "$SMALL" = 1 ]; then
"$D/memra-synth" --preset smollm2-135m --types q8_0 --seed 3 -o "$W/s135.gguf"
python3 -c "import random; random.seed(5); print(','.join(str(random.randrange(49152)) for _ in range(97)))" >"$W/ids.txt"
"${MEMRA[@]}" -m "$W/s135.gguf" --prompt-ids "$(cat "$W/ids.txt")" -n 1 --temp 0 --kv-type f32 \
  --dump-logits "$W/s135.f32" >/dev/null 2>"$O/s135.err"
row "smollm2-135m-shape Q8_0 vs transformers" \
  "$(python3 tools/device/hf_compare.py "$W/s135.gguf" "$W/ids.txt" "$W/s135.f32" 2>"$O/hf.err" | tail -1)"
fi

# 3. compute-sanitizer memcheck over a short greedy run (graph decode included).
if [ "$BE" != cpu ] && [ "$SMALL" = 1 ]; then
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "${MEMRA[@]}" -m "$W/s135.gguf" \
    --prompt-ids 1,2,3,4,5,6,7 -n 12 --temp 0 >"$O/memcheck.txt" 2>&1
  mc_rc=$?
  row "compute-sanitizer memcheck (run -n 12)" "$(grep 'ERROR SUMMARY' "$O/memcheck.txt" | tail -1) rc $mc_rc"
fi

# 4. The 8B shape: graph gate and benchmarks.
if [ "$BIG" = 1 ]; then
  for ty in $TYPES; do
    t0=$(date +%s)
    [ -s "$W/l8-$ty.gguf" ] ||
      timeout 200 "$D/memra-synth" --preset llama31-8b --types $ty --seed 1 -o "$W/l8-$ty.gguf" ||
      row "synth $ty" FAIL
    echo "synth $ty: $(( $(date +%s) - t0 )) s, $(du -h "$W/l8-$ty.gguf" | cut -f1)"
  done
  # The issue's gate: N = 512 greedy tokens after 200, crossing 3 KV buckets, per type.
  for ty in $TYPES; do
    case $ty in q4_k_m|f16) ;; *) continue ;; esac
    timeout 150 "$D/memra" gate graph "${OPTS[@]}" -m "$W/l8-$ty.gguf" --gate-p 200 -n 512 \
      >"$O/gate-$ty.txt" 2>&1
    gate_rc=$?
    cat "$O/gate-$ty.txt"
    row "graph gate 8B $ty (rc $gate_rc)" "$(grep -E 'PASS|MISMATCH|FAIL' "$O/gate-$ty.txt" | head -1)"
    row "graph gate $ty detail" "$(head -1 "$O/gate-$ty.txt" | sed 's/.*prompt/prompt/')"
  done
  for ty in $TYPES; do
    timeout 150 "$D/memra" bench "${OPTS[@]}" -m "$W/l8-$ty.gguf" --bench-p 512 --bench-n 128 --bench-d 0,512 -r 3 \
      >"$O/bench-$ty.md" 2>"$O/bench-$ty.err"
    cat "$O/bench-$ty.md" "$O/bench-$ty.err" | tail -8
  done
fi

echo
echo "==== memra e2e on $BE ===="
printf '%s\n' "${SUMMARY[@]}"
if [ "$BIG" = 1 ]; then
  echo
  echo "copy bandwidth for the floor: 4275 GB/s measured on this H200 (tools/device/run.sh)"
  for ty in $TYPES; do
    bytes=$(stat -c %s "$W/l8-$ty.gguf")
    awk -v b="$bytes" -v ty="$ty" 'BEGIN { printf "%s: file %.2f GB, decode floor %.0f tok/s\n", ty, b/1e9, 4275e9/b }'
    grep '^|' "$O/bench-$ty.md" | tail -n +3
  done
fi
