#!/usr/bin/env bash
# README command 2: the whole test suite — plain and sanitizer (ASan+UBSan) builds, the
# bounded GGUF and request-text fuzz runs and the end-to-end tests on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
MEMRA_MODEL=$(bash tools/fetch_default_model.sh)
MEMRA_GEMMA3=$(bash tools/fetch_gemma3.sh)
export MEMRA_MODEL MEMRA_GEMMA3
skip=""
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "test: nvcc not found: the GPU plugin builds and their tests are skipped" >&2
  skip="-//backends/... -//tests/gpu_plugins/..."
fi
# Bazel's strict PATH sees only /usr/bin: name the python3 that has the test packages.
env_flags="--test_env=MEMRA_MODEL=$MEMRA_MODEL --test_env=MEMRA_GEMMA3=$MEMRA_GEMMA3"
env_flags="$env_flags --test_env=MEMRA_PYTHON=$(command -v python3)"
status=0
bazel test $env_flags -- //... $skip || status=1
# The sanitizer pass leaves out the real Gemma 3 run (minutes of model math, no new code
# paths beyond the tiny-family tests it keeps).
bazel test --config=san $env_flags -- //tests/... $skip -//tests/families:gemma3_test || status=1
if [ -x tools/fuzz/run_gguf_fuzz.sh ]; then
  bash tools/fuzz/run_gguf_fuzz.sh "${MEMRA_FUZZ_SECONDS:-60}" || status=1
fi
if [ -x tools/fuzz/run_text_fuzz.sh ]; then
  bash tools/fuzz/run_text_fuzz.sh "${MEMRA_FUZZ_SECONDS:-60}" || status=1
fi
bazel shutdown >/dev/null 2>&1 || true
if [ $status -ne 0 ]; then echo "test: FAILED" >&2; else echo "test: all passed"; fi
exit $status
