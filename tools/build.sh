#!/usr/bin/env bash
# Builds the memra binary and every plugin, and gathers them in dist/ (the executable's
# folder is on the plugin search path). GPU plugins are built when nvcc is present.
set -euo pipefail
cd "$(dirname "$0")/.."
targets="//tools/memra:memra //plugins/cpu:libmemra_cpu.so"
if [ -x /usr/local/cuda/bin/nvcc ]; then
  targets="$targets //backends/sm90a:libmemra_sm90a.so //backends/sm120a:libmemra_sm120a.so"
else
  echo "build: /usr/local/cuda/bin/nvcc not found, GPU plugins not built" >&2
fi
bazel build $targets
mkdir -p dist
rm -f dist/memra dist/libmemra_*.so
cp -f bazel-bin/tools/memra/memra dist/
for so in bazel-bin/plugins/cpu/libmemra_cpu.so bazel-bin/backends/*/libmemra_*.so; do
  [ -f "$so" ] && cp -f "$so" dist/
done
chmod u+w dist/*
