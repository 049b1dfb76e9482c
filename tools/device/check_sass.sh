#!/bin/bash
# check_sass.sh DIR [ARCH ...] — the GPU plugins in DIR carry exactly their own SASS and no PTX:
# libmemra_sm90a.so only sm_90a cubins, libmemra_sm120a.so only sm_120a, neither any PTX
# (PTX would let the driver JIT a slower, non-arch-specific path onto another GPU); and
# the sm90a plugin's prefill kernels run on warpgroup tensor cores: HGMMA in every instance
# of the GEMM (gemm_wgmma_v1_kernel) and of the attention (attention_prefill_wgmma_v1_kernel).
# Needs cuobjdump (CUOBJDUMP, else PATH, else /usr/local/cuda/bin). Exit 0 = pass.
set -u
dir=${1:?usage: check_sass.sh DIR [sm_90a] [sm_120a]}
shift
arches=${*:-sm_90a sm_120a} # the device run checks sm_90a (the sm120a plugin stays here)
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
if [ ! -x "$cuobjdump" ]; then
  echo "check_sass: cuobjdump not found (set CUOBJDUMP)" >&2
  exit 2
fi
fail=0
for arch in $arches; do
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
# Per kernel function: its HGMMA count (cuobjdump -sass prints "Function : NAME" first).
so="$dir/libmemra_sm90a.so"
if [ -f "$so" ]; then
  counts=$("$cuobjdump" -sass "$so" 2>/dev/null |
    awk '/Function :/ {f = $3; n[f] += 0} /HGMMA/ {n[f]++} END {for (k in n) print n[k], k}')
  for k in gemm_wgmma_v1_kernel attention_prefill_wgmma_v1_kernel; do
    fns=$(grep -c "$k" <<<"$counts" || true)
    bare=$(grep "$k" <<<"$counts" | awk '$1 == 0' | wc -l)
    hg=$(grep "$k" <<<"$counts" | awk '{s += $1} END {print s + 0}')
    if [ "$fns" -eq 0 ]; then
      echo "FAIL $so: no $k"; fail=1
    elif [ "$bare" -ne 0 ]; then
      echo "FAIL $so: $bare of $fns $k instance(s) without HGMMA"; fail=1
    else
      echo "ok   $so: $k: $fns instance(s), $hg HGMMA"
    fi
  done
fi
exit $fail
