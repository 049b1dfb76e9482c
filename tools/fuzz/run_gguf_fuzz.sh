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
case "$secs" in '' | *[!0-9]*) echo "run_gguf_fuzz.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
command -v clang >/dev/null || { echo "run_gguf_fuzz.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
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

echo "run_gguf_fuzz.sh: fuzzing for ${secs}s, corpus $work/corpus" >&2
set +e
ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=20000 \
  -print_final_stats=1 -dict=tools/fuzz/gguf.dict -artifact_prefix="$work/artifacts/" \
  "$work/corpus" 2>"$work/fuzz.log"
rc=$?
set -e
tail -n 25 "$work/fuzz.log" >&2
if [ "$rc" -ne 0 ]; then
  echo "run_gguf_fuzz.sh: FINDING (exit $rc); inputs in $work/artifacts/:" >&2
  ls -l "$work/artifacts/" >&2
  exit 1
fi
echo "run_gguf_fuzz.sh: no findings in ${secs}s" >&2
