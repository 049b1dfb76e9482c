#!/bin/bash
# check_sass.sh DIR — the GPU plugins in DIR carry exactly their own SASS and no PTX:
# libmemra_sm90a.so only sm_90a cubins, libmemra_sm120a.so only sm_120a, neither any PTX
# (PTX would let the driver JIT a slower, non-arch-specific path onto another GPU).
# Needs cuobjdump (CUOBJDUMP, else PATH, else /usr/local/cuda/bin). Exit 0 = pass.
set -u
dir=${1:?usage: check_sass.sh DIR}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
if [ ! -x "$cuobjdump" ]; then
  echo "check_sass: cuobjdump not found (set CUOBJDUMP)" >&2
  exit 2
fi
fail=0
for arch in sm_90a sm_120a; do
  so="$dir/libmemra_${arch/_/}.so"
  if [ ! -f "$so" ]; then
    echo "FAIL $so: missing"; fail=1; continue
  fi
  elf=$("$cuobjdump" --list-elf "$so" 2>&1)
  ptx=$("$cuobjdump" --list-ptx "$so" 2>&1 | grep -E '^PTX file +[0-9]+:' || true)
  n_elf=$(grep -c 'ELF file' <<<"$elf" || true)
  n_own=$(grep 'ELF file' <<<"$elf" | grep -c "\.$arch\.cubin" || true)
  others=$(grep 'ELF file' <<<"$elf" | grep -v "\.$arch\.cubin" || true)
  if [ "$n_elf" -eq 0 ]; then
    echo "FAIL $so: no SASS at all"; fail=1
  elif [ -n "$others" ]; then
    echo "FAIL $so: SASS for other architectures:"; echo "$others"; fail=1
  elif [ -n "$ptx" ]; then
    echo "FAIL $so: carries PTX:"; echo "$ptx"; fail=1
  else
    echo "ok   $so: $n_own $arch cubin(s), no PTX"
  fi
done
exit $fail
