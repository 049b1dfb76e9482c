#!/bin/bash
# acceptance.sh — the acceptance figures of the GPU issues in one or two device calls (PARTS), from the
# repo root with dist/ (or pack.sh's dist-carry/ and DIST=dist-carry: the plugins xz-packed
# to fit a call's 64 MiB) and .whl/ (for the transformers comparison) carried (tools/device/pack.sh; the sm120a sm_90 test build in
# dist/test90/, outside the plugin folder, since it probes as a working "sm120a" here).
# Models are synthesized here by memra-synth, in the background while the op checks run.
#   1. op checks: opcheck (every op vs the CPU plugin), opcheck_families, gemm_check,
#      mma_check (sm120a test build), memcheck over opcheck --quick, logits vs HF
#      transformers for a synthetic model
#   2. gates on the Llama-3.1-8B shape: graph (N=512, F16 and Q4_K_M), batch (B=8; F16 too:
#      GEMV v12 alone vs v6 in the batch),
#      chunk (P=1000 in chunks of 67), graph on the sm120a test build
#   3. memra bench per type: pp512, pp4096, tg128 after 512 and 4096, FP8 KV beside; Q8_0's
#      graph and batch gates (GEMV v13 alone vs v8b in the batch) and MEMRA_GEMV_Q8=v8b beside
#   4. aggregate decode at 8/32/64 sequences; sm120a test build vs sm90a top-1 agreement
#   5. hybrid (Qwen3-Next-80B-A3B layers, 4) at F16 and Q4_K_M (graph, batch and chunk gates,
#      MEMRA_MMID=v2, MEMRA_GEMV_F32=v3 and MEMRA_SHEXP_STACK=0 beside); Qwen3-30B-A3B shape, 8 layers, Q4_K_M
# A short table last. Logs in $OUT.
set -u
D=${DIST:-dist}
# pack.sh's dist-carry/: the GPU plugins packed to fit a call's 64 MiB
[ -f "$D/gpu-plugins.tar.xz" ] && [ ! -f "$D/libmemra_sm90a.so" ] && tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
O=${OUT:-/tmp/memra-acc}
W=${WORK:-/tmp/memra-models}
TYPES=${TYPES:-q4_k_m f16 q8_0}
mkdir -p "$O" "$W"
export PATH="$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T90="$D/test90/libmemra_sm120a_sm90test.so"
OPTS=(--plugin-dir "$D" --backend sm90a)
# PARTS picks sections (a fresh machine takes more than one call's 600 s for all four):
# PARTS="checks gates" in one call, PARTS="bench hybrid" in the next.
PARTS=${PARTS:-checks gates bench hybrid}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
declare -a SUMMARY
row() { # also to $O/summary.txt as it goes: a call cut short still returns what ran
  SUMMARY+=("$(printf '%-44s %s' "$1" "$2")")
  echo ">> $1: $2" | tee -a "$O/summary.txt"
}
t_start=$(date +%s)
since() { echo "$(( $(date +%s) - t_start )) s"; }

# Models, in the background (CPU work) while the GPU runs the op checks.
synth() { # preset type out
  [ -s "$3" ] || "$D/memra-synth" --preset "$1" --types "$2" --seed 1 -o "$3.tmp" >>"$O/synth.log" 2>&1 &&
    mv "$3.tmp" "$3"
}
(
  for ty in $TYPES; do synth llama31-8b "$ty" "$W/l8-$ty.gguf"; done
  synth qwen3-8b q4_k_m "$W/q8b-q4_k_m.gguf"
  synth qwen3next-80b-a3b q4_k_m "$W/hy-q4_k_m.gguf"
  synth qwen3next-80b-a3b f16 "$W/hy-f16.gguf"
  # Qwen3-30B-A3B shape, 8 of its 48 layers (the whole file, 17 GB, does not fit the disk beside
  # these: tools/device/moe_bench.sh runs it alone)
  [ -s "$W/moe8-q4_k_m.gguf" ] || "$D/memra-synth" --preset qwen3-30b-a3b --types q4_k_m --seed 1 \
    --layers 8 -o "$W/moe8-q4_k_m.gguf.tmp" >>"$O/synth.log" 2>&1 && mv "$W/moe8-q4_k_m.gguf.tmp" "$W/moe8-q4_k_m.gguf"
) &
SYNTH_PID=$!
wait_for() { while [ ! -s "$1" ] && kill -0 $SYNTH_PID 2>/dev/null; do sleep 1; done; [ -s "$1" ]; }

# 1. Op checks.
if want checks; then
"$D/opcheck" "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/opcheck.txt" 2>"$O/opcheck.err"
row "opcheck sm90a vs cpu (rc $?)" "$(tail -1 "$O/opcheck.txt")"
"$D/opcheck" "$D/libmemra_cpu.so" "$T90" >"$O/opcheck-t90.txt" 2>"$O/opcheck-t90.err"
row "opcheck sm120a test build vs cpu (rc $?)" "$(tail -1 "$O/opcheck-t90.txt")"
MEMRA_GEMV=tc "$D/opcheck" "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/opcheck-tc.txt" 2>&1
row "opcheck sm90a MEMRA_GEMV=tc (rc $?)" "$(tail -1 "$O/opcheck-tc.txt")"
MEMRA_GEMV_Q6=tc "$D/opcheck" --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/opcheck-q6.txt" 2>&1
row "opcheck --quick sm90a MEMRA_GEMV_Q6=tc (rc $?)" "$(tail -1 "$O/opcheck-q6.txt")"
"$D/opcheck_families" "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/families.txt" 2>&1
row "opcheck_families ops (rc $?)" "$(tail -1 "$O/families.txt")"
"$D/opcheck_families" --e2e "$D/libmemra_sm90a.so" tests/families/fixtures >"$O/families-e2e.txt" 2>&1
row "opcheck_families fixtures vs HF (rc $?)" "$(tail -1 "$O/families-e2e.txt")"
"$D/gemm_check" "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/gemm_check.txt" 2>&1
row "gemm_check sm90a (rc $?)" "$(tail -1 "$O/gemm_check.txt")"
"$D/mma_check" "$D/libmemra_cpu.so" "$T90" "$D/libmemra_sm90a.so" >"$O/mma_check.txt" 2>&1
row "mma_check sm120a test build (rc $?)" "$(tail -1 "$O/mma_check.txt")"
"$D/mma_check" "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/mma_check-sm90a.txt" 2>&1
row "mma_check sm90a (wgmma attention) (rc $?)" "$(tail -1 "$O/mma_check-sm90a.txt")"
bash tools/device/check_sass.sh "$D" sm_90a >"$O/sass.txt" 2>&1 # sm_120a: checked by pack.sh's host
row "check_sass, HGMMA in gemm/attention (rc $?)" "$(grep -c '^ok' "$O/sass.txt") ok"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/opcheck" --quick "$D/libmemra_cpu.so" \
  "$D/libmemra_sm90a.so" >"$O/memcheck.txt" 2>&1
row "memcheck opcheck --quick (rc $?)" "$(grep 'ERROR SUMMARY' "$O/memcheck.txt" | tail -1)"
"$D/gemm_check" "$D/libmemra_cpu.so" "$T90" >"$O/gemm_check-t90.txt" 2>&1
row "gemm_check sm120a test build (rc $?)" "$(tail -1 "$O/gemm_check-t90.txt")"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/gemm_check" --quick \
  "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/memcheck-gemm.txt" 2>&1
row "memcheck gemm_check --quick (rc $?)" "$(grep 'ERROR SUMMARY' "$O/memcheck-gemm.txt" | tail -1)"
timeout 60 "$D/attn_bench" "$D/libmemra_sm90a.so" >"$O/attn_bench.txt" 2>&1
row "attn_bench (rc $?): F16 L512/4096/4224 B1, us v5 / v4 / v2" "$(awk '$1 == "F16" && $4 == 1 {printf "%s/%s/%s ", $5, $6, $7}' "$O/attn_bench.txt")"
timeout 120 "$D/gemm_bench" "$D/libmemra_sm90a.so" >"$O/gemm_bench.txt" 2>&1
row "gemm_bench 8192^3 (rc $?): op, kernel, cuBLAS, kernel/cuBLAS" "$(grep -m1 -A2 'M=N=K=8192' "$O/gemm_bench.txt" | tail -2 | tr -s ' ' | tr '\n' ';')"
# GEMV versions that must give their predecessors' bits: v9 == v5 (K-quants), v13 / v8b == v8 (Q8_0)
timeout 120 "$D/gemv_ab" "$D/libmemra_sm90a.so" >"$O/gemv_ab.txt" 2>&1
row "gemv_ab v9 == v5 (rc $?)" "$(tail -1 "$O/gemv_ab.txt")"
"$D/gemv_bench" "$D/libmemra_sm90a.so" >"$O/gemv.txt" 2>"$O/gemv.err"
MEMRA_GEMV=v5 MEMRA_GEMV_Q8=v8a MEMRA_GEMV_F16=v6 "$D/gemv_bench" "$D/libmemra_sm90a.so" >"$O/gemv-old.txt" 2>"$O/gemv-old.err"
diff <(grep '^Q8_0' "$O/gemv-old.txt" | awk '{print $2,$3,$NF}') \
  <(grep '^Q8_0' "$O/gemv.txt" | awk '{print $2,$3,$NF}') >/dev/null && r=identical || r=DIFFER
row "Q8_0 v13 (one row), v8b (batches) == v8 output hashes (gemv_bench)" "$r"
row "gemv_bench Q8_0 us, v13 (v8): q/o, gate/up, down, output" "$(paste <(grep '^Q8_0' "$O/gemv.txt" | head -4 | awk '{print $4}') <(grep '^Q8_0' "$O/gemv-old.txt" | head -4 | awk '{print $4}') | awk '{printf "%s (%s)  ", $1, $2}')"
MEMRA_GEMV=tc "$D/gemv_bench" "$D/libmemra_sm90a.so" >"$O/gemv-tc.txt" 2>"$O/gemv-tc.err"
diff <(grep -E '^Q4_K' "$O/gemv-tc.txt" | awk '{print $1,$2,$3,$NF}') \
  <(grep -E '^Q4_K' "$O/gemv.txt" | awk '{print $1,$2,$3,$NF}') >/dev/null && r=identical || r=DIFFER
row "Q4_K v11 == v7 output hashes (gemv_bench)" "$r"
diff <(grep -E '^(F16|BF16)' "$O/gemv-old.txt" | awk '{print $1,$2,$3,$NF}') \
  <(grep -E '^(F16|BF16)' "$O/gemv.txt" | awk '{print $1,$2,$3,$NF}') >/dev/null && r=identical || r=DIFFER
row "F16/BF16 v12 == v6 output hashes (gemv_bench)" "$r"
row "gemv_bench F16 us, v12 (v6): q/o, gate/up, down, output, 151936x2048" "$(paste <(grep '^F16' "$O/gemv.txt" | grep -v 'M=' | awk '{print $4}') <(grep '^F16' "$O/gemv-old.txt" | grep -v 'M=' | awk '{print $4}') | awk '{printf "%s (%s)  ", $1, $2}')"
# Q6_K on the tensor cores: by default its output matrices, MEMRA_GEMV_Q6=tc every K <= 4096;
# its v11 == its v7, and its speed
MEMRA_GEMV_Q6=tc "$D/gemv_bench" "$D/libmemra_sm90a.so" >"$O/gemv-q6.txt" 2>"$O/gemv-q6.err"
MEMRA_GEMV_Q6=tc MEMRA_GEMV=tc "$D/gemv_bench" "$D/libmemra_sm90a.so" >"$O/gemv-q6tc.txt" 2>"$O/gemv-q6tc.err"
diff <(grep -E '^Q6_K' "$O/gemv-q6tc.txt" | awk '{print $1,$2,$3,$NF}') \
  <(grep -E '^Q6_K' "$O/gemv-q6.txt" | awk '{print $1,$2,$3,$NF}') >/dev/null && r=identical || r=DIFFER
row "Q6_K (MEMRA_GEMV_Q6=tc) v11 == v7 output hashes (gemv_bench)" "$r"
row "gemv_bench Q6_K us, MEMRA_GEMV_Q6=tc (default): q/o, gate/up, down, output, 151936x2048" "$(paste <(grep '^Q6_K' "$O/gemv-q6.txt" | grep -v 'M=' | awk '{print $4}') <(grep '^Q6_K' "$O/gemv.txt" | grep -v 'M=' | awk '{print $4}') | awk '{printf "%s (%s)  ", $1, $2}')"
row "gemv_bench Q6_K us, default (MEMRA_GEMV=v5): same shapes" "$(paste <(grep '^Q6_K' "$O/gemv.txt" | grep -v 'M=' | awk '{print $4}') <(grep '^Q6_K' "$O/gemv-old.txt" | grep -v 'M=' | awk '{print $4}') | awk '{printf "%s (%s)  ", $1, $2}')"
row "gemv_bench Q4_K us, v11 (v5): q/o, gate/up, down, output" "$(paste <(grep '^Q4_K' "$O/gemv.txt" | head -4 | awk '{print $4}') <(grep '^Q4_K' "$O/gemv-old.txt" | head -4 | awk '{print $4}') | awk '{printf "%s (%s)  ", $1, $2}')"
BW=$(grep -oE 'copy bandwidth [0-9]+' "$O/gemv.txt" | grep -oE '[0-9]+$' | head -1)
row "copy bandwidth this run (GB/s)" "${BW:-?}"
# End to end against HF transformers (an implementation nobody here wrote) on a synthetic
# SmolLM2-shaped Q8_0 model, prefill logits of 97 positions (needs the gguf wheel carried
# in .whl/: transformers reads GGUF through it).
if ls .whl/gguf-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
  "$D/memra-synth" --preset smollm2-135m --types q8_0 --seed 3 -o "$W/s135.gguf" >/dev/null 2>&1
  python3 -c "import random; random.seed(5); print(','.join(str(random.randrange(49152)) for _ in range(97)))" >"$W/ids.txt"
  "$D/memra" run "${OPTS[@]}" -m "$W/s135.gguf" --prompt-ids "$(cat "$W/ids.txt")" -n 1 --temp 0 \
    --kv-type f32 --dump-logits "$W/s135.f32" >/dev/null 2>"$O/s135.err"
  row "smollm2-135m shape Q8_0 vs transformers" "$(PYTHONPATH=/tmp/site python3 \
    tools/device/hf_compare.py "$W/s135.gguf" "$W/ids.txt" "$W/s135.f32" 2>"$O/hf.err" | tail -1)"
fi
echo "op checks done at $(since)"
fi

# 2. Gates on the 8B shape.
gate() { # name args...
  local name=$1; shift
  timeout 200 "$D/memra" gate "$@" >"$O/gate-$name.txt" 2>&1
  local rc=$?
  row "gate $name (rc $rc)" "$(grep -E 'PASS|MISMATCH|FAIL' "$O/gate-$name.txt" | head -1)"
  row "  detail" "$(head -2 "$O/gate-$name.txt" | tr '\n' ' ' | cut -c1-150)"
}
L8=$W/l8-q4_k_m.gguf
if want gates; then
if wait_for "$L8"; then
  gate graph-q4_k_m graph "${OPTS[@]}" -m "$L8" --gate-p 200 -n 512
  gate batch-8 batch "${OPTS[@]}" -m "$L8" --gate-b 8 --gate-p 512 -n 128
  gate chunk chunk "${OPTS[@]}" -m "$L8" --gate-p 1000 --ubatch 67
  # ABI 1.6: prompt logits with 16-bit operands from rmsnorm/glu and gemm_glu == the F32-x path
  python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(128000)) for _ in range(600)))" >"$W/ids600.txt"
  for v in a b; do
    [ $v = b ] && export MEMRA_GEMM_X=f32
    "$D/memra" run "${OPTS[@]}" -m "$L8" --prompt-ids "$(cat "$W/ids600.txt")" -n 1 --temp 0 \
      --dump-logits "$W/op16-$v.f32" >/dev/null 2>>"$O/op16.err"
    unset MEMRA_GEMM_X
  done
  cmp -s "$W/op16-a.f32" "$W/op16-b.f32" && [ -s "$W/op16-a.f32" ] && r=PASS || r=FAIL
  row "op16 + gemm_glu == F32 x path, 600 prompt logits" "$r"
  wait_for "$W/l8-f16.gguf" && gate chunk-f16 chunk "${OPTS[@]}" -m "$W/l8-f16.gguf" --gate-p 1000 --ubatch 67
  gate graph-sm120a-test90 graph --backend "$T90" -m "$L8" --gate-p 200 -n 512
  for b in 32 64; do gate batch-$b batch "${OPTS[@]}" -m "$L8" --gate-b $b --gate-p 512 -n 32; done
  # MEMRA_GEMV=tc: v7 for one row of x too (the default runs v11 there, v7 for batches).
  export MEMRA_GEMV=tc
  gate graph-q4_k_m-tc graph "${OPTS[@]}" -m "$L8" --gate-p 200 -n 512
  gate batch-8-tc batch "${OPTS[@]}" -m "$L8" --gate-b 8 --gate-p 512 -n 128
  timeout 120 "$D/memra" bench "${OPTS[@]}" -m "$L8" --bench-p 0 --bench-n 128 --bench-d 512 -r 3 \
    >"$O/bench-q4_k_m-tc.md" 2>"$O/bench-tc.err"
  unset MEMRA_GEMV
  # sm120a test build vs sm90a: top-1 agreement at positions with a top-2 margin > 1e-2.
  python3 -c "import random; random.seed(9); print(','.join(str(random.randrange(128000)) for _ in range(97)))" >"$W/ids97.txt"
  for m in l8-q4_k_m q8b-q4_k_m; do
    wait_for "$W/$m.gguf" || continue
    for be in sm90a t90; do
      b=sm90a; [ $be = t90 ] && b=$T90
      "$D/memra" run --plugin-dir "$D" --backend "$b" -m "$W/$m.gguf" --prompt-ids "$(cat "$W/ids97.txt")" \
        -n 1 --temp 0 --dump-logits "$W/$m-$be.f32" >/dev/null 2>>"$O/agree.err"
    done
    row "top-1 sm120a-test90 vs sm90a, $m" "$(python3 -c "
import numpy as np
a=np.fromfile('$W/$m-sm90a.f32','<f4').reshape(97,-1); b=np.fromfile('$W/$m-t90.f32','<f4').reshape(97,-1)
s=np.sort(a,axis=1); keep=(s[:,-1]-s[:,-2])>1e-2
agree=(a.argmax(1)==b.argmax(1))
print(f'{int((agree&keep).sum())}/{int(keep.sum())} positions with margin > 1e-2 agree ({int(agree.sum())}/97 overall)')" 2>&1 | tail -1)"
  done
fi
echo "gates done at $(since)"
fi

# 3. Benchmarks on the 8B shape.
if want bench; then
for ty in $TYPES; do
  wait_for "$W/l8-$ty.gguf" || { row "synth l8 $ty" FAIL; continue; }
  if [ "$ty" = f16 ]; then # v12 for one row, v6 for batches: the same bits
    gate graph-f16 graph "${OPTS[@]}" -m "$W/l8-f16.gguf" --gate-p 200 -n 512
    gate batch-f16 batch "${OPTS[@]}" -m "$W/l8-f16.gguf" --gate-b 8 --gate-p 512 -n 32
    MEMRA_GEMV_F16=v6 timeout 90 "$D/memra" bench "${OPTS[@]}" -m "$W/l8-f16.gguf" --bench-p 0 \
      --bench-n 128 --bench-d 512 -r 3 >"$O/bench-f16-v6.md" 2>&1
  fi
  if [ "$ty" = q8_0 ]; then # v13 for one row, v8b for batches: the same bits
    gate graph-q8_0 graph "${OPTS[@]}" -m "$W/l8-q8_0.gguf" --gate-p 200 -n 512
    gate batch-q8_0 batch "${OPTS[@]}" -m "$W/l8-q8_0.gguf" --gate-b 8 --gate-p 512 -n 32
    MEMRA_GEMV_Q8=v8b timeout 90 "$D/memra" bench "${OPTS[@]}" -m "$W/l8-q8_0.gguf" --bench-p 0 \
      --bench-n 128 --bench-d 512 -r 3 >"$O/bench-q8_0-v8b.md" 2>&1
  fi
  timeout 240 "$D/memra" bench "${OPTS[@]}" -m "$W/l8-$ty.gguf" --bench-p 512,4096 --bench-n 128 \
    --bench-d 512,4096 -r 3 >"$O/bench-$ty.md" 2>"$O/bench-$ty.err"
  tail -5 "$O/bench-$ty.err"
  if [ "$ty" = q4_k_m ]; then # decode attention v6 (default) vs v5, GEMV v11 vs v5, same binary
    MEMRA_ATT=5 timeout 90 "$D/memra" bench "${OPTS[@]}" -m "$W/l8-$ty.gguf" --bench-p 0 \
      --bench-n 128 --bench-d 512,4096 -r 3 >"$O/bench-q4_k_m-att5.md" 2>&1
    MEMRA_GEMV=v5 timeout 90 "$D/memra" bench "${OPTS[@]}" -m "$W/l8-$ty.gguf" --bench-p 0 \
      --bench-n 128 --bench-d 512,4096 -r 3 >"$O/bench-q4_k_m-gemv5.md" 2>&1
  fi
done
timeout 120 "$D/memra" bench "${OPTS[@]}" -m "$L8" --kv-type f8 --bench-p 512 --bench-n 128 \
  --bench-d 512,4096 -r 3 >"$O/bench-q4_k_m-f8.md" 2>"$O/bench-f8.err"
timeout 120 "$D/memra" bench --plugin-dir "$D" --backend "$T90" -m "$L8" --bench-p 512 --bench-n 128 \
  --bench-d 512 -r 3 >"$O/bench-q4_k_m-t90.md" 2>"$O/bench-t90.err"
echo "benches done at $(since)"
fi

# 5. Hybrid.
if want hybrid; then
for ty in q4_k_m f16; do
  wait_for "$W/hy-$ty.gguf" || { row "synth hybrid $ty" FAIL; continue; }
  timeout 120 "$D/memra" bench "${OPTS[@]}" -m "$W/hy-$ty.gguf" --bench-p 512 --bench-n 128 -r 3 \
    >"$O/bench-hy-$ty.md" 2>"$O/bench-hy-$ty.err"
done
if wait_for "$W/hy-q4_k_m.gguf"; then
  gate graph-hybrid-q4_k_m graph "${OPTS[@]}" -m "$W/hy-q4_k_m.gguf" --gate-p 200 -n 512
  # matmul_id v3 and the delta rule: a prompt's rows == decode rows, chunked prefill == one-shot
  gate batch-hybrid batch "${OPTS[@]}" -m "$W/hy-q4_k_m.gguf" --gate-b 8 --gate-p 512 -n 32
  gate chunk-hybrid chunk "${OPTS[@]}" -m "$W/hy-q4_k_m.gguf" --gate-p 1000 --ubatch 67
  MEMRA_MMID=v2 timeout 120 "$D/memra" bench "${OPTS[@]}" -m "$W/hy-q4_k_m.gguf" --bench-p 512 \
    --bench-n 128 -r 3 >"$O/bench-hy-q4_k_m-mmid2.md" 2>&1
fi
if wait_for "$W/hy-f16.gguf"; then # F32 routers on v6 (fused with the shared expert's logit) vs v3
  MEMRA_GEMV_F32=v3 timeout 120 "$D/memra" bench "${OPTS[@]}" -m "$W/hy-f16.gguf" --bench-p 0 \
    --bench-n 128 -r 3 >"$O/bench-hy-f16-f32v3.md" 2>&1
  # ABI 1.9: the shared expert inside the routed launches (default) vs apart; the graph gate
  # and the batch gate with decode rows on the stacked path
  gate graph-hybrid-f16 graph "${OPTS[@]}" -m "$W/hy-f16.gguf" --gate-p 200 -n 512
  gate batch-hybrid-f16 batch "${OPTS[@]}" -m "$W/hy-f16.gguf" --gate-b 8 --gate-p 512 -n 32
  MEMRA_SHEXP_STACK=0 timeout 120 "$D/memra" bench "${OPTS[@]}" -m "$W/hy-f16.gguf" --bench-p 0 \
    --bench-n 128 -r 3 >"$O/bench-hy-f16-apart.md" 2>&1
fi
if wait_for "$W/moe8-q4_k_m.gguf"; then
  timeout 120 "$D/memra" bench "${OPTS[@]}" -m "$W/moe8-q4_k_m.gguf" --bench-p 512 --bench-n 128 -r 3 \
    >"$O/bench-moe8-q4_k_m.md" 2>"$O/bench-moe8.err"
  gate graph-moe8 graph "${OPTS[@]}" -m "$W/moe8-q4_k_m.gguf" --gate-p 200 -n 512
fi
fi
kill $SYNTH_PID 2>/dev/null

echo
echo "==== memra acceptance on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(since) ===="
printf '%s\n' "${SUMMARY[@]}"
echo
for f in "$O"/bench-*.md; do
  [ -s "$f" ] || continue
  m=$(grep -m1 -oE '\| [a-z0-9_.-]+\.gguf \| [0-9.]+ MiB' "$f" | head -1)
  bytes=$(awk -F'|' 'NR==3 {gsub(/[^0-9.]/,"",$3); print $3 * 1048576}' "$f")
  # the file's floor at this run's gemv_bench copy (when the checks ran); each decode row also
  # carries the bench's own floor and share, from the copy it measured itself
  if [ -n "${BW:-}" ]; then
    echo "$(basename "$f" .md): floor at $BW GB/s over the file = $(awk -v b="$bytes" -v bw="$BW" 'BEGIN { if (b > 0) printf "%.0f", bw * 1e9 / b }') tok/s"
  else
    echo "$(basename "$f" .md):"
  fi
  grep '^|' "$f" | tail -n +3 | cut -d'|' -f5,6,9,10
done
