#!/usr/bin/env bash
# README command 1: install, build, fetch the default model, generate text.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/build.sh
bash tools/fetch_default_model.sh >/dev/null
bazel shutdown >/dev/null 2>&1 || true
dist/memra --backend auto -p "The capital of France is" -n 32 --temp 0
