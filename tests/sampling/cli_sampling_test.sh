#!/bin/bash
# cli_sampling_test.sh — `memra run --device-sampling` and `--kv-type f8` end to end on the
# tiny fixtures with the CPU plugin: device sampling at temperature 0 is the greedy run;
# sampled runs are reproducible for a seed and differ across seeds; penalties are refused
# with one line; --kv-type f8 is parsed (the FP8 cache itself is checked op by op in
# fp8_attention_test; whether a context accepts it is core/models/context.c's call).
set -u
MEMRA=tools/memra/memra
PLUG=$(dirname plugins/cpu/libmemra_cpu.so)
fail=0
check() { # name, got, want
  if [[ "$2" == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: got '$2', want '$3'"; fail=1; fi
}
for model in tests/e2e/fixtures/tiny-qwen3.gguf tests/e2e/fixtures/tiny-llama.gguf; do
  M=(-m "$model" --backend cpu --plugin-dir "$PLUG" --prompt-ids 1,2,3 -n 24 --print-ids
     --no-display-prompt)
  name=$(basename "$model")
  greedy=$($MEMRA run "${M[@]}" --temp 0 2>/dev/null)
  [[ "$greedy" =~ ^\[[0-9,]+\]$ ]] || { echo "FAIL $name: greedy run printed '$greedy'"; fail=1; }
  check "$name: --device-sampling at T 0 == greedy" \
    "$($MEMRA run "${M[@]}" --temp 0 --device-sampling 2>/dev/null)" "$greedy"
  a=$($MEMRA run "${M[@]}" --temp 0.9 --top-k 0 --top-p 1 --min-p 0 --seed 11 --device-sampling 2>/dev/null)
  b=$($MEMRA run "${M[@]}" --temp 0.9 --top-k 0 --top-p 1 --min-p 0 --seed 11 --device-sampling 2>/dev/null)
  c=$($MEMRA run "${M[@]}" --temp 0.9 --top-k 0 --top-p 1 --min-p 0 --seed 12 --device-sampling 2>/dev/null)
  [[ "$a" =~ ^\[[0-9,]+\]$ ]] || { echo "FAIL $name: sampled run printed '$a'"; fail=1; }
  check "$name: same seed, same tokens" "$b" "$a"
  if [[ "$a" == "$c" ]]; then echo "FAIL $name: seeds 11 and 12 drew the same 24 tokens"; fail=1
  else echo "ok   $name: another seed, other tokens"; fi
  # top-k 1 keeps only the argmax: sampling then reproduces the greedy run.
  check "$name: --device-sampling top-k 1 == greedy" \
    "$($MEMRA run "${M[@]}" --temp 1.3 --top-k 1 --seed 3 --device-sampling 2>/dev/null)" "$greedy"
done
# --kv-type f8 end to end: greedy tokens against the F32 cache's. FP8 keeps 3 mantissa
# bits, so the tiny random models (small logit margins) may diverge after a while:
# measured with the context accepting FP8, tiny-qwen3 agrees on all 24 tokens and
# tiny-llama on the first 8; both are asserted. Until core/models/context.c accepts
# F8_E4M3 the run must fail with exactly the context's refusal (f8 parsed and passed on).
for spec in tiny-qwen3:24 tiny-llama:8; do
  model=tests/e2e/fixtures/${spec%%:*}.gguf n=${spec##*:}
  M=(-m "$model" --backend cpu --plugin-dir "$PLUG" --prompt-ids 1,2,3 -n 24 --print-ids
     --no-display-prompt --temp 0)
  f32=$($MEMRA run "${M[@]}" --kv-type f32 2>/dev/null)
  f8=$($MEMRA run "${M[@]}" --kv-type f8 2>&1)
  if [[ "$f8" == *"context: KV cache type must be F16 or F32"* ]]; then
    echo "PENDING ${spec%%:*} --kv-type f8: core/models/context.c refuses F8_E4M3 (one-line change)"
    continue
  fi
  f8=$(tail -1 <<<"$f8")
  check "${spec%%:*} --kv-type f8 greedy: first $n tokens as with f32" \
    "$(cut -d, -f1-$n <<<"${f8#[}")" "$(cut -d, -f1-$n <<<"${f32#[}")"
  check "${spec%%:*} --kv-type f8 sampled on the device: reproducible" \
    "$($MEMRA run "${M[@]}" --kv-type f8 --temp 0.8 --seed 4 --device-sampling 2>/dev/null)" \
    "$($MEMRA run "${M[@]}" --kv-type f8 --temp 0.8 --seed 4 --device-sampling 2>/dev/null)"
done
msg=$($MEMRA run -m tests/e2e/fixtures/tiny-qwen3.gguf --backend cpu --plugin-dir "$PLUG" -p x \
  --temp 0.9 --device-sampling --repeat-penalty 1.1 2>&1 >/dev/null)
check "penalties refused" "$msg" \
  "memra: --device-sampling: penalties are applied on the host only; drop --repeat-penalty 1.1"
msg=$($MEMRA run -m tests/e2e/fixtures/tiny-qwen3.gguf --backend cpu --plugin-dir "$PLUG" -p x \
  --kv-type f9 2>&1 >/dev/null)
check "bad --kv-type" "$msg" "memra: --kv-type 'f9': expected auto, f16, f32 or f8"
exit $fail
