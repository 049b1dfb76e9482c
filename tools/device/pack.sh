#!/bin/bash
# pack.sh — build the device-check binaries here (Bazel) and copy them into dist/
# (git-ignored), the folder run.sh expects on the GPU machine (which has no Bazel).
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build //backends/sm90a:libmemra_sm90a //backends/sm120a:libmemra_sm120a \
  //plugins/cpu:libmemra_cpu.so //tools/device:opcheck //tools/device:gemv_bench //tools/device:attn_bench \
  //tools/device:gemv_ab \
  //tools/memra:memra //tools/synth:memra-synth //tools/device:opcheck_families \
  //tools/device:gemm_check //tools/device:gemm_bench //tools/device:mma_check \
  //backends/sm120a:libmemra_sm120a_sm90test
mkdir -p dist/test90
# ring_bench: a standalone experiment on the weight ring's copies (nvcc alone, no plugin)
/usr/local/cuda/bin/nvcc -std=c++17 -O3 -I. -gencode=arch=compute_90a,code=sm_90a \
  tools/device/ring_bench.cu -o dist/ring_bench
# chain_bench: what a link of a kernel chain costs by hand-off (PDL wait, flag, plain launch)
/usr/local/cuda/bin/nvcc -std=c++17 -O3 -I. -gencode=arch=compute_90a,code=sm_90a \
  tools/device/chain_bench.cu -o dist/chain_bench
# layer_bench: a layer's Q4_K GEMV chain as one persistent program against a launch a GEMV
/usr/local/cuda/bin/nvcc -std=c++17 -O3 -I. -gencode=arch=compute_90a,code=sm_90a \
  tools/device/layer_bench.cu -o dist/layer_bench
for f in backends/sm90a/libmemra_sm90a.so \
  plugins/cpu/libmemra_cpu.so tools/device/opcheck tools/device/gemv_bench tools/device/attn_bench \
  tools/device/gemv_ab tools/memra/memra \
  tools/synth/memra-synth tools/device/opcheck_families tools/device/gemm_check \
  tools/device/gemm_bench tools/device/mma_check; do
  install -m 0755 "bazel-bin/$f" dist/
done
# The real sm120a plugin cannot run on the H200 and would push a device call past its 64 MiB:
# it stays here, in dist-sm120a/ (check_sass.sh checks it here; the device checks sm_90a).
mkdir -p dist-sm120a
install -m 0755 bazel-bin/backends/sm120a/libmemra_sm120a.so dist-sm120a/
# The sm120a sources built for sm_90a probe as a working "sm120a" on an H200: kept out of
# the plugin folder (dist/), passed by path.
install -m 0755 bazel-bin/backends/sm120a/libmemra_sm120a_sm90test.so dist/test90/
# Shared libraries the GPU machine lacks (memra links cJSON and libmicrohttpd + its TLS
# stack); glibc and libstdc++ are there.
for lib in $(ldd dist/memra | awk '/=> \// {print $3}'); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*) ;;
    *) cp -L "$lib" dist/ ;;
  esac
done
# The plugins are ~18 MB each and xz to ~2 MB: a call carries at most 64 MiB with the tree, so
# dist-carry/ holds dist/ with the two GPU plugins packed (acceptance.sh and run.sh unpack
# dist/gpu-plugins.tar.xz when they find it). Carry ["dist-carry"] and pass DIST=dist-carry.
rm -rf dist-carry && mkdir -p dist-carry
cp -a dist/. dist-carry/
rm -rf dist-carry/libmemra_sm90a.so dist-carry/test90
tar cJf dist-carry/gpu-plugins.tar.xz -C dist libmemra_sm90a.so test90
ls -la dist dist-carry
