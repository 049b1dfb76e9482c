#!/bin/bash
# sass_diff.sh REV [FILE.cu ...] — here, no GPU needed: compiles each plugins/cuda source (all by
# default) for sm_90a at the working tree and at REV (a git worktree under /tmp) and says, kernel
# by kernel, whether the machine code changed (cubin_text.py). A change meant to leave the
# default path's kernels alone (a new opt-in kernel, a host-side route) shows "0 changed".
set -u
REV=${1:?usage: sass_diff.sh REV [FILE.cu ...]}
shift
ROOT=$(git rev-parse --show-toplevel)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
O=${OUT:-/tmp/memra-sass-diff}
BASE=$O/base
mkdir -p "$O"
rm -rf "$BASE"
git -C "$ROOT" worktree remove --force "$BASE" 2>/dev/null
git -C "$ROOT" worktree add -q --detach "$BASE" "$REV" || exit 1
F=(-std=c++17 -O3 -I. -Iplugins/include -arch=sm_90a -DMEMRA_CUDA_NAME=\"sm90a\"
  -DMEMRA_CUDA_CC_MAJOR=9 -DMEMRA_CUDA_CC_MINOR=0)
files=("$@")
[ ${#files[@]} -gt 0 ] || files=($(cd "$ROOT" && ls plugins/cuda/*.cu))
for f in "${files[@]}"; do
  b=$(basename "$f" .cu)
  (cd "$ROOT" && "$NVCC" "${F[@]}" -cubin "plugins/cuda/$b.cu" -o "$O/new_$b.cubin") || exit 1
  echo "== $b"
  if [ -f "$BASE/plugins/cuda/$b.cu" ]; then
    (cd "$BASE" && "$NVCC" "${F[@]}" -cubin "plugins/cuda/$b.cu" -o "$O/old_$b.cubin") || exit 1
    python3 "$ROOT/tools/device/cubin_text.py" "$O/new_$b.cubin" "$O/old_$b.cubin"
  else
    echo "  a new file"
  fi
done
git -C "$ROOT" worktree remove --force "$BASE"
