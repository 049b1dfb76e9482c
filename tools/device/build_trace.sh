#!/bin/bash
# build_trace.sh — EXPERIMENT: the sm90a plugin with trace.cuh's per-block PDL-wait records
# (-DMEMRA_CUDA_TRACE), built here by nvcc outside Bazel (CI never builds it), into
# dist-carry/trace/libmemra_sm90a.so.xz. On the GPU machine: unpack it into a folder of its own,
# run `MEMRA_TRACE_OUT=F memra bench --plugin-dir DIR ...`, then tools/device/trace_step.py F.
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=/usr/local/cuda/bin/nvcc
O=${TRACE_BUILD:-/tmp/memra-trace-build}
mkdir -p "$O" dist-carry/trace
F="-std=c++17 -O3 -I. -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC,-fvisibility=hidden
   -DMEMRA_CUDA_NAME=\"sm90a\" -DMEMRA_CUDA_CC_MAJOR=9 -DMEMRA_CUDA_CC_MINOR=0 -DMEMRA_CUDA_TRACE=1"
objs=()
for s in plugins/cuda/*.cu plugins/cuda/probe.c; do
  o="$O/$(basename "$s").o"
  objs+=("$o")
  if [ ! -s "$o" ] || [ -n "$(find plugins/cuda plugins/include -newer "$o" -name '*.*h' -o -newer "$o" -name "$(basename "$s")" | head -1)" ]; then
    lang=""; case "$s" in *.c) lang="-x c";; esac
    echo "nvcc $s"
    $NVCC $F $lang -c "$s" -o "$o" &
    while [ "$(jobs -r | wc -l)" -ge "${JOBS:-2}" ]; do sleep 1; done
  fi
done
wait
$NVCC -shared -cudart static -gencode=arch=compute_90a,code=sm_90a -Xlinker --exclude-libs,ALL \
  "${objs[@]}" -o "$O/libmemra_sm90a.so"
xz -T2 -c "$O/libmemra_sm90a.so" > dist-carry/trace/libmemra_sm90a.so.xz
ls -l dist-carry/trace/
