#!/bin/bash
# build_variant.sh — EXPERIMENT: the sm90a plugin with some sources recompiled under extra
# defines, the rest taken from the Bazel build (bazel-bin/plugins/cuda/obj_sm90a, so run
# tools/device/pack.sh first), linked here by nvcc into dist-carry/var-NAME/libmemra_sm90a.so.xz.
# CI never builds it. Usage (repo root):
#   bash tools/device/build_variant.sh NAME "-DMACRO=V ..." attention.cu [more.cu ...]
# On the GPU machine: xz -dc the plugin into a folder of its own and pass it as --plugin-dir
# (or as an ab.sh variant's folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { echo "usage: build_variant.sh NAME DEFINES SRC.cu..." >&2; exit 2; }
NAME=$1 DEFS=$2
shift 2
NVCC=/usr/local/cuda/bin/nvcc
B=bazel-bin/plugins/cuda/obj_sm90a
O=/tmp/memra-variant-$NAME
mkdir -p "$O" "dist-carry/var-$NAME"
F="-std=c++17 -O3 -I. -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC,-fvisibility=hidden
   -DMEMRA_CUDA_NAME=\"sm90a\" -DMEMRA_CUDA_CC_MAJOR=9 -DMEMRA_CUDA_CC_MINOR=0 $DEFS"
objs=()
for o in "$B"/*.o; do
  src=$(basename "$o" .o)
  if printf '%s\n' "$@" | grep -qx "$src"; then
    lang=""; case "$src" in *.c) lang="-x c";; esac # probe.c: the ABI minor it reports
    $NVCC $F $lang -c "plugins/cuda/$src" -o "$O/$src.o" &
    objs+=("$O/$src.o")
  else
    objs+=("$o")
  fi
done
wait
$NVCC -shared -cudart static -gencode=arch=compute_90a,code=sm_90a -Xlinker --exclude-libs,ALL \
  "${objs[@]}" -o "$O/libmemra_sm90a.so"
xz -T2 -c "$O/libmemra_sm90a.so" > "dist-carry/var-$NAME/libmemra_sm90a.so.xz"
ls -l "dist-carry/var-$NAME/"
