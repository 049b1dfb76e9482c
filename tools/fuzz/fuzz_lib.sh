# shellcheck shell=bash
# fuzz_lib.sh — what the bounded libFuzzer runs share (sourced by run_*_fuzz.sh).

# fuzz_check NAME SECONDS: the arguments and the compiler, or exit 2 with one line.
fuzz_check() {
  case "$2" in '' | *[!0-9]*) echo "$1: SECONDS must be a whole number, got '$2'" >&2; exit 2 ;; esac
  command -v clang >/dev/null || { echo "$1: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
}

# fuzz_run NAME BIN WORK SECONDS [libFuzzer flags...]: fuzzes WORK/corpus for SECONDS, findings
# under WORK/artifacts/, the log's tail on stderr; returns 1 on a finding.
fuzz_run() {
  local name=$1 bin=$2 work=$3 secs=$4 rc
  shift 4
  echo "$name: fuzzing for ${secs}s, corpus $work/corpus" >&2
  set +e
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" 2>"$work/fuzz.log"
  rc=$?
  set -e
  tail -n 25 "$work/fuzz.log" >&2
  if [ "$rc" -ne 0 ]; then
    echo "$name: FINDING (exit $rc); inputs in $work/artifacts/:" >&2
    ls -l "$work/artifacts/" >&2
    return 1
  fi
  echo "$name: no findings in ${secs}s" >&2
}
