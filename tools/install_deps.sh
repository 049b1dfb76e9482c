#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and test memra (run as root).
set -euo pipefail
pkgs="bazel-bootstrap bazel-rules-java libinih-dev libgtest-dev libpcre2-dev libcjson-dev
      libmicrohttpd-dev clang libclang-rt-14-dev python3 python3-pip unzip ca-certificates"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
# Python packages the tests drive the engine with (the official openai client).
reqs=""
for r in tests/*/requirements.txt; do [ -f "$r" ] && reqs="$reqs -r $r"; done
if [ -n "$reqs" ] && ! python3 -c "import openai" 2>/dev/null; then
  # Debian's own python3 refuses system-wide installs unless told (PEP 668).
  python3 -m pip install -q --disable-pip-version-check $reqs 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages $reqs
fi
