#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer for a bounded time.
#   tools/fuzz/run_gguf_fuzz.sh [SECONDS=60] [WORKDIR=${TMPDIR:-/tmp}/memra_gguf_fuzz]
# Builds tools/fuzz/gguf_fuzz.c with clang (-fsanitize=fuzzer,address,undefined) and the
# core sources it needs, seeds the corpus from tests/gguf/fixtures and
# tests/gguf/fuzz_regressions, and exits non-zero on any finding. A finding is saved under
# WORKDIR/artifacts/: copy it into tests/gguf/fuzz_regressions/ (replayed by
# //tests/gguf:gguf_fuzz_regress_test) once fixed.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-60}"
work="${2:-${TMPDIR:-/tmp}/memra_gguf_fuzz}"
. tools/fuzz/fuzz_lib.sh
fuzz_check run_gguf_fuzz.sh "$secs"
mkdir -p "$work/corpus" "$work/artifacts"

srcs=(tools/fuzz/gguf_fuzz.c tools/fuzz/gguf_touch.c
      core/gguf/gguf_read.c core/gguf/gguf_access.c core/gguf/gguf_dump.c core/gguf/gguf_write.c
      core/base/alloc.c core/base/err.c)
bin="$work/gguf_fuzz"
# One clang process, -O1: light on a shared machine.
clang -std=c11 -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -I. "${srcs[@]}" -lm -o "$bin"

cp tests/gguf/fixtures/*.gguf "$work/corpus/"
if compgen -G "tests/gguf/fuzz_regressions/*" >/dev/null; then
  cp tests/gguf/fuzz_regressions/* "$work/corpus/"
fi

fuzz_run run_gguf_fuzz.sh "$bin" "$work" "$secs" -max_len=20000 -dict=tools/fuzz/gguf.dict
