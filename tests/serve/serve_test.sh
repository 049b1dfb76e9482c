#!/usr/bin/env bash
# Runs serve_test.py with a python3 that has the openai package (tests/serve/requirements.txt).
set -eu
py=""
for c in "${MEMRA_PYTHON:-}" python3 /usr/local/bin/python3 /usr/bin/python3 \
  "${HOME:-/root}"/.pyenv/versions/*/bin/python3 /root/.pyenv/versions/*/bin/python3; do
  if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && "$c" -c "import openai" 2>/dev/null; then
    py=$c
    break
  fi
done
if [ -z "$py" ]; then
  echo "serve_test: no python3 with the openai package: pip install -r tests/serve/requirements.txt" >&2
  exit 1
fi
exec "$py" tests/serve/serve_test.py tools/serve/memra-serve plugins/cpu/libmemra_cpu.so "$@"
