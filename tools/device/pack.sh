#!/bin/bash
# pack.sh — build the device-check binaries here (Bazel) and copy them into dist/
# (git-ignored), the folder run.sh expects on the GPU machine (which has no Bazel).
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build //backends/sm90a:libmemra_sm90a //backends/sm120a:libmemra_sm120a \
  //plugins/cpu:libmemra_cpu.so //tools/device:opcheck //tools/device:gemv_bench \
  //tools/memra:memra //tools/synth:memra-synth
mkdir -p dist
for f in backends/sm90a/libmemra_sm90a.so backends/sm120a/libmemra_sm120a.so \
  plugins/cpu/libmemra_cpu.so tools/device/opcheck tools/device/gemv_bench tools/memra/memra \
  tools/synth/memra-synth; do
  install -m 0755 "bazel-bin/$f" dist/
done
# Shared libraries the GPU machine lacks (memra links cJSON and libmicrohttpd + its TLS
# stack); glibc and libstdc++ are there.
for lib in $(ldd dist/memra | awk '/=> \// {print $3}'); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*) ;;
    *) cp -L "$lib" dist/ ;;
  esac
done
ls -la dist
