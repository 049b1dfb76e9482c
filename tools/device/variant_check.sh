#!/bin/bash
# variant_check.sh — on the GPU machine, before timing build_variant.sh's plugins with ab.sh: each
# variant against the CPU plugin (opcheck --quick) and against the main plugin's bits (every "y"
# hash of gemv_bench for the types given, which must all be equal for a variant meant to keep the
# arithmetic). From the repo root with pack.sh's dist-carry (or D=dist):
#   bash tools/device/variant_check.sh NAME... [-- TYPE...]
#   (each variant unpacked into $VC_DIR/NAME, default /tmp/memra-variant-check: ab.sh variant folders)
#   NAME: a build_variant.sh name (dist-carry/var-NAME/libmemra_sm90a.so.xz); TYPE: gemv_bench's
#   type names (default Q8_0 Q4_K Q6_K). Prints a line per variant; the exit status is non-zero
#   when one fails either check.
set -u
D=${D:-dist-carry}
O=${VC_DIR:-/tmp/memra-variant-check} # not $OUT: the device sets it, and ab.sh wants the plugins here
[ -f "$D/gpu-plugins.tar.xz" ] && [ ! -f "$D/libmemra_sm90a.so" ] && tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
names=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Q8_0 Q4_K Q6_K)
[ ${#names[@]} -gt 0 ] || { echo "usage: variant_check.sh NAME... [-- TYPE...]" >&2; exit 2; }
mkdir -p "$O"
hashes() { # plugin.so -> "shape hash" lines of gemv_bench
  timeout 300 "$D/gemv_bench" "$1" "${types[@]}" 2>/dev/null | grep ' y [0-9a-f]\{16\}$' |
    awk '{print substr($0, 1, 31), $NF}' # type, shape name, hash
}
hashes "$D/libmemra_sm90a.so" >"$O/main.txt"
[ -s "$O/main.txt" ] || { echo "variant_check: gemv_bench gave no hashes for the main plugin" >&2; exit 1; }
bad=0
for n in "${names[@]}"; do
  dir="$O/$n"
  mkdir -p "$dir"
  xz -dc "$D/var-$n/libmemra_sm90a.so.xz" >"$dir/libmemra_sm90a.so" || { echo "$n: no plugin"; bad=1; continue; }
  timeout 300 "$D/opcheck" --quick "$D/libmemra_cpu.so" "$dir/libmemra_sm90a.so" >"$dir/opcheck.txt" 2>&1
  rc=$?
  hashes "$dir/libmemra_sm90a.so" >"$dir/hashes.txt"
  same=$(comm -12 <(sort "$O/main.txt") <(sort "$dir/hashes.txt") | wc -l)
  total=$(wc -l <"$O/main.txt")
  echo "$n: opcheck --quick rc $rc ($(tail -1 "$dir/opcheck.txt")); gemv_bench hashes equal to main: $same of $total"
  [ "$rc" -eq 0 ] && [ "$same" -eq "$total" ] || bad=1
done
exit $bad
