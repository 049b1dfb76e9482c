#!/usr/bin/env bash
# The per-architecture build matrix, checked on every CI run without a GPU: each plugin
# carries exactly its own SASS (sm_90a / sm_120a) and no PTX (tools/check_fatbin.py).
set -euo pipefail
python3 tools/check_fatbin.py backends/sm90a/libmemra_sm90a.so sm_90a
python3 tools/check_fatbin.py backends/sm120a/libmemra_sm120a.so sm_120a
# The check can fail: each plugin is refused under the other's architecture.
if python3 tools/check_fatbin.py backends/sm90a/libmemra_sm90a.so sm_120a >/dev/null ||
  python3 tools/check_fatbin.py backends/sm120a/libmemra_sm120a.so sm_90 >/dev/null; then
  echo "FAIL: check_fatbin accepted a plugin under the wrong architecture"
  exit 1
fi
echo "sass matrix: ok"
