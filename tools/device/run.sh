#!/bin/bash
# run.sh — the one command for the GPU machine, from the repo root, with dist/ carried
# (tools/device/pack.sh builds it here). Builds nothing there. Runs, in order:
#   1. check_sass: each plugin carries exactly its own SASS and no PTX
#   2. the probe of both plugins on this GPU (sm120a must decline on an H200)
#   3. opcheck: every op of sm90a against the CPU oracle (full set)
#   4. compute-sanitizer memcheck over opcheck --quick
#   5. gemv_bench: decode GEMV on Llama-3.1-8B shapes vs the copy bandwidth
# and prints a short summary table last. Logs go to $OUT (or /tmp/memra-device).
set -u
D=${DIST:-dist}
# pack.sh's dist-carry/: the GPU plugins packed to fit a call's 64 MiB
[ -f "$D/gpu-plugins.tar.xz" ] && [ ! -f "$D/libmemra_sm90a.so" ] && tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
O=${OUT:-/tmp/memra-device}
mkdir -p "$O"
export PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  2>&1 | tee "$O/gpu.txt"

tools/device/check_sass.sh "$D" >"$O/sass.txt" 2>&1
sass_rc=$?
cat "$O/sass.txt"

"$D/gemv_bench" "$D/libmemra_sm120a.so" >"$O/probe120.txt" 2>&1
probe120=$(grep -o 'declines: .*' "$O/probe120.txt" || echo "did not decline: $(head -c 300 "$O/probe120.txt")")

"$D/opcheck" "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/opcheck.txt" 2>"$O/opcheck.err"
op_rc=$?
grep -E '^(FAIL|FATAL)|^  (ref|test):' "$O/opcheck.err" | head -40
head -2 "$O/opcheck.err"

san=compute-sanitizer
command -v "$san" >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
"$san" --tool memcheck --error-exitcode 9 "$D/opcheck" --quick "$D/libmemra_cpu.so" \
  "$D/libmemra_sm90a.so" >"$O/memcheck.txt" 2>&1
san_rc=$?
grep -E 'ERROR SUMMARY|Invalid|========= [A-Z]' "$O/memcheck.txt" | head -15

"$D/gemv_bench" "$D/libmemra_sm90a.so" >"$O/gemv.txt" 2>"$O/gemv.err"
gemv_rc=$?
tail -3 "$O/gemv.err"

echo
echo "==== opcheck by op (full table in opcheck.txt) ===="
awk 'length($0) > 76 && substr($0, 1, 2) != "op" && $0 !~ /^opcheck/ {
       op = substr($0, 1, 10); gsub(/ /, "", op); split(substr($0, 77), f, " ");
       n[op]++; if (f[3] != "PASS") bad[op]++; if (f[1] + 0 > mx[op]) mx[op] = f[1] + 0;
       if (f[2] + 0 > tl[op]) tl[op] = f[2] + 0 }
     END { printf "%-11s %5s %5s %10s %8s\n", "op", "cases", "fail", "max err", "tol";
           for (o in n) printf "%-11s %5d %5d %10.2e %8.0e\n", o, n[o], bad[o], mx[o], tl[o] }' \
  "$O/opcheck.txt"
grep -E ' FAIL' "$O/opcheck.txt" | head -20
echo
echo "==== summary ===="
printf '%-34s %s\n' "check_sass (sm_90a, sm_120a, no PTX)" "$([ $sass_rc = 0 ] && echo PASS || echo FAIL)"
printf '%-34s %s\n' "sm120a probe on this GPU" "$probe120"
printf '%-34s %s\n' "opcheck sm90a vs cpu" "$(tail -1 "$O/opcheck.txt") (rc $op_rc)"
printf '%-34s %s\n' "compute-sanitizer memcheck" "$(grep 'ERROR SUMMARY' "$O/memcheck.txt" | tail -1) (rc $san_rc)"
echo
tail -40 "$O/gemv.txt"
[ $sass_rc = 0 ] && [ $op_rc = 0 ] && [ $san_rc = 0 ] && [ $gemv_rc = 0 ]
