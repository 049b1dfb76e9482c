#!/bin/bash
# optin.sh — on the GPU machine: the checks and timings of the opt-in switches written without a
# device (docs/PERF.md, fourteenth session), in parts that each fit a call's 600 s. Since the
# fifteenth session matmul_id v4 and GDN v2 are the default (their switches =0 take v3 / v1):
#   PARTS=checks  opcheck_families (matmul_id v4, the GDN v2 kernels, moe_combine_rmsnorm) and
#                 opcheck (rmsnorm_qk_rope_kv) with the switches on, memcheck over the families'
#                 quick cases, the chunk and batch gates with v4 and GDN v2, the graph gates with
#                 every decode switch on;
#   PARTS=ab      pp512 A/B (v4, GDN v2), tg128 A/B (GDN v2, ABI 1.19, ABI 1.20, all);
#   PARTS=prof    a prompt profile per kernel (ncu) of each file with v4 and GDN v2;
#   PARTS=next    matmul_id v3's early ids (the default since the sixteenth session; MEMRA_MMID_EARLY=0
#                 waits; moe_combine v2, measured beside it, was slower and is gone): opcheck_families
#                 --quick, 300 greedy tokens with and without == each other, graph gates, a tg128 A/B;
#   PARTS=route   ABI 1.21 moe_route_glu (MEMRA_ROUTE_GLU=1, opt-in): opcheck_families --quick with
#                 it (its bitwise cases), 300 greedy tokens == the route launch's, graph gates,
#                 a tg128 A/B with and without the down launch's own route (MEMRA_ROUTE_DOWN=0),
#                 and the route launch triggering first (MEMRA_ROUTE_TRIGGER=1, unmeasured);
#   PARTS=att6    decode attention v6 (MEMRA_ATT=6, opt-in, written without a device in the
#                 seventeenth session): opcheck --quick (its cases against the CPU, rows alone ==
#                 batch), memcheck over the same, attn_bench's table (v6 beside v5),
#                 graph gates (N 512) and a batch gate on Llama-8B Q8_0 and Q4_K_M with it;
#   PARTS=att6q   the short form in one call: opcheck --quick's v6 lines, attn_bench's table, the graph
#                 gate on Llama Q8_0 with v6 and a tg128 A/B (v5 / v6 / v6 TX) on it at d512;
#   PARTS=dyn     matmul v11's dynamic tiles (MEMRA_T11_DYN=1|2|3): opcheck --quick under 3 (v11 ==
#                 v7 bitwise), 300 greedy tokens == static on Llama Q4_K_M, the graph gate under 2,
#                 tg128 A/B static / dyn 1 / 2 / 3 on Llama Q4_K_M at d512 (MEMRA_ATT=DYN_ATT, 5);
#   PARTS=dynq8   the same for v13 on Llama Q8_0 (static / dyn 1 / dyn 3);
#   PARTS=first   one call for both (the device lends little): opcheck --quick under MEMRA_T11_DYN=3
#                 (v6's lines, v11 / v13 == v7 / v8 bitwise), attn_bench, the graph gate on Llama Q8_0
#                 with v6, 300 tokens dyn == static on Q4_K_M, tg128 A/B v5 / v6 / dyn 2 / dyn 3 on
#                 Llama Q8_0 and Q4_K_M at d512; PARTS=firstq v5, v6 and dyn 4 (~350 s);
#   PARTS=min     no models (~250 s): opcheck --quick under dyn 3, attn_bench, gemv_bench Q4_K / Q6_K /
#                 Q8_0 static, dyn 2, dyn 3 (kernel times and output hashes);
#   PARTS=att6ab  its tg128 A/B on Llama-8B Q8_0 and Q4_K_M at d512 and d4096 (v5, v6, v6 with its
#                 pushes by st.async: MEMRA_ATT6_TX=1); PARTS=att6moe the MoE (group 8) at d512.
# Since the nineteenth session v6 and MEMRA_T11_DYN=4 are the defaults: each variant names its
# attention (MEMRA_ATT=5 / 6) and tiles (MEMRA_T11_DYN=0 static) so the labels keep meaning what they say.
# From the repo root after tools/device/pack.sh, carrying dist-carry:  PARTS=checks bash
# tools/device/optin.sh. Models go to WORK (/tmp/memra-models; kept while the machine is warm).
set -u
D=${D:-dist-carry}
W=${WORK:-/tmp/memra-models}
O=${OUT:-/tmp/memra-optin}
PARTS=${PARTS:-checks}
[ -f "$D/gpu-plugins.tar.xz" ] && [ ! -f "$D/libmemra_sm90a.so" ] && tar xJf "$D/gpu-plugins.tar.xz" -C "$D"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$W" "$O"
HY=qwen3next-80b-a3b-q4_k_m-l4 MOE=qwen3-30b-a3b-q4_k_m-l8
syn() { [ -s "$W/$1.gguf" ] || "$D/memra-synth" --preset "$2" --types "$3" --seed 1 ${4:+--layers "$4"} \
  -o "$W/$1.gguf" >"$O/synth-$1.log" 2>&1; }
# opcheck --quick and its attention v6 lines (every command under a timeout: a cluster barrier
# that never completes would hang the call)
opcheck_v6() {
  timeout 150 "$D/opcheck" --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/op-att6.txt" 2>&1
  echo "== opcheck --quick (attention v6 cases) rc $?: $(tail -1 "$O/op-att6.txt")"
  grep -E "FAIL" "$O/op-att6.txt" | head -8 | cut -c1-130
  grep -E "v6" "$O/op-att6.txt" | cut -c1-130
}
# opcheck --quick under dynamic tiles (v11 / v13 == v7 / v8 bitwise) with its v6 lines, then attn_bench
opcheck_dyn_attn() {
  MEMRA_T11_DYN=3 timeout 150 "$D/opcheck" --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" \
    >"$O/op-dyn3.txt" 2>&1
  echo "== opcheck --quick MEMRA_T11_DYN=3 rc $?: $(tail -1 "$O/op-dyn3.txt")"
  grep -E "FAIL" "$O/op-dyn3.txt" | head -8 | cut -c1-130
  grep -E "v6" "$O/op-dyn3.txt" | cut -c1-130
  timeout 60 "$D/attn_bench" "$D/libmemra_sm90a.so" >"$O/attn-bench.txt" 2>&1
  echo "== attn_bench rc $?"
  cat "$O/attn-bench.txt"
}
want() { [[ " $PARTS " == *" $1 "* ]]; }
if want checks || want ab || want prof || want next || want route; then # the parts that use them
  syn "$HY" qwen3next-80b-a3b q4_k_m 4 &
  syn "$MOE" qwen3-30b-a3b q4_k_m 8 &
fi
# same_tokens FILE BASE_ENV ENV...: 300 greedy tokens of FILE under each ENV (NAME=V) == under BASE_ENV
same_tokens() {
  local f=$1 e
  shift
  for e in "$@"; do
    env "$e" timeout 60 "$D/memra" run "${G[@]}" -m "$W/$f.gguf" --prompt-ids 11,22,33,44,55 \
      -n 300 --temp 0 >"$O/run-$f-${e//=/}.txt" 2>/dev/null
  done
  local b=$1
  shift
  for e in "$@"; do
    cmp -s "$O/run-$f-${b//=/}.txt" "$O/run-$f-${e//=/}.txt" && echo "== $f $e: 300 tokens == $b" ||
      echo "== $f $e: DIFFERS from $b"
  done
}
line() { grep -E 'PASS|MISMATCH|FAIL' "$1" | head -2 | tr '\n' ' '; }
G=(--plugin-dir "$D" --backend sm90a)

if want checks; then
  MEMRA_MMID_GROUP=1 MEMRA_COMBINE_NORM=1 "$D/opcheck_families" "$D/libmemra_cpu.so" \
    "$D/libmemra_sm90a.so" >"$O/opf.txt" 2>&1
  echo "== opcheck_families (v4, combine-norm; GDN v2 by call) rc $?: $(tail -1 "$O/opf.txt")"
  grep FAIL "$O/opf.txt" | head -8
  grep -E "alone == batched|v2 ==|v2 state|moe_combine_rmsnorm .*==" "$O/opf.txt" | cut -c1-120
  MEMRA_QK_ROPE=1 "$D/opcheck" --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/op.txt" 2>&1
  echo "== opcheck --quick (rmsnorm_qk_rope_kv) rc $?: $(tail -1 "$O/op.txt")"
  grep FAIL "$O/op.txt" | head -8
  grep -E "qk_rope_kv" "$O/op.txt" | cut -c1-120
  MEMRA_MMID_GROUP=1 MEMRA_COMBINE_NORM=1 compute-sanitizer --tool memcheck "$D/opcheck_families" \
    --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" >"$O/mc.txt" 2>&1
  echo "== memcheck opcheck_families --quick rc $?: $(grep -E 'ERROR SUMMARY' "$O/mc.txt" | tail -1)"
  wait
  for f in "$HY" "$MOE"; do
    MEMRA_MMID_GROUP=1 MEMRA_GDN_PIPE=1 timeout 120 "$D/memra" gate chunk "${G[@]}" -m "$W/$f.gguf" \
      --gate-p 1000 --ubatch 67 >"$O/g.txt" 2>&1
    echo "== gate chunk v4 + GDN v2 $f rc $?: $(line "$O/g.txt")"
    MEMRA_MMID_GROUP=1 MEMRA_GDN_PIPE=1 timeout 120 "$D/memra" gate batch "${G[@]}" -m "$W/$f.gguf" \
      --gate-b 8 --gate-p 512 -n 32 >"$O/g.txt" 2>&1
    echo "== gate batch v4 + GDN v2 $f rc $?: $(line "$O/g.txt")"
    MEMRA_QK_ROPE=1 MEMRA_COMBINE_NORM=1 MEMRA_GDN_PIPE=1 timeout 120 "$D/memra" gate graph "${G[@]}" \
      -m "$W/$f.gguf" --gate-p 200 -n 512 >"$O/g.txt" 2>&1
    echo "== gate graph 1.19 + 1.20 + GDN v2 $f rc $?: $(line "$O/g.txt")"
  done
fi

if want ab; then
  wait
  PP=512 WORK=$W OUT=$O/ab R=2 D=$D timeout 240 bash tools/device/ab.sh \
    qwen3next-80b-a3b:q4_k_m:4 qwen3-30b-a3b:q4_k_m:8 -- base="$D:MEMRA_MMID_GROUP=0,MEMRA_GDN_PIPE=0" \
    v4="$D:MEMRA_GDN_PIPE=0" pipe="$D:MEMRA_MMID_GROUP=0" both="$D" >"$O/ab-pp.txt" 2>&1
  grep -E "^qwen" "$O/ab-pp.txt"
  WORK=$W OUT=$O/ab2 R=2 DEPTH=512 D=$D timeout 330 bash tools/device/ab.sh \
    qwen3next-80b-a3b:q4_k_m:4 qwen3-30b-a3b:q4_k_m:8 -- base="$D:MEMRA_GDN_PIPE=0" pipe="$D" \
    qkrope="$D:MEMRA_QK_ROPE=1" cnorm="$D:MEMRA_COMBINE_NORM=1" \
    all="$D:MEMRA_QK_ROPE=1,MEMRA_COMBINE_NORM=1" >"$O/ab-tg.txt" 2>&1
  grep -E "^qwen" "$O/ab-tg.txt"
fi

if want prof; then
  wait
  for f in "$HY" "$MOE"; do
    echo "== prompt profile (v4, GDN v2) $f"
    MEMRA_MMID_GROUP=1 MEMRA_GDN_PIPE=1 PROMPT=512 D=$D OUT=$O/prof timeout 280 \
      bash tools/device/profile_step.sh "$W/$f.gguf" | head -14
  done
fi

if want next; then
  wait
  "$D/opcheck_families" --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" \
    >"$O/opf-next.txt" 2>&1
  echo "== opcheck_families --quick rc $?: $(tail -1 "$O/opf-next.txt")"
  grep -E "FAIL" "$O/opf-next.txt" | head -8 | cut -c1-110
  for f in "$HY" "$MOE"; do
    same_tokens "$f" MEMRA_MMID_EARLY=0 MEMRA_MMID_EARLY=1
    timeout 120 "$D/memra" gate graph "${G[@]}" -m "$W/$f.gguf" --gate-p 200 -n 512 >"$O/g.txt" 2>&1
    echo "== gate graph early $f rc $?: $(line "$O/g.txt")"
  done
  WORK=$W OUT=$O/ab3 R=2 DEPTH=512 D=$D timeout 240 bash tools/device/ab.sh \
    qwen3next-80b-a3b:q4_k_m:4 qwen3-30b-a3b:q4_k_m:8 -- base="$D:MEMRA_MMID_EARLY=0" early="$D" \
    >"$O/ab-next.txt" 2>&1
  grep -E "^qwen" "$O/ab-next.txt"
fi

if want route; then
  wait
  MEMRA_ROUTE_GLU=1 "$D/opcheck_families" --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" \
    >"$O/opf-route.txt" 2>&1
  echo "== opcheck_families --quick (moe_route_glu) rc $?: $(tail -1 "$O/opf-route.txt")"
  grep -E "FAIL|moe_route_glu .*==" "$O/opf-route.txt" | head -12 | cut -c1-110
  for f in "$HY" "$MOE"; do
    same_tokens "$f" MEMRA_ROUTE_GLU=0 MEMRA_ROUTE_GLU=1 MEMRA_ROUTE_TRIGGER=1
    MEMRA_ROUTE_GLU=1 timeout 120 "$D/memra" gate graph "${G[@]}" -m "$W/$f.gguf" --gate-p 200 \
      -n 512 >"$O/g.txt" 2>&1
    echo "== gate graph moe_route_glu $f rc $?: $(line "$O/g.txt")"
  done
  WORK=$W OUT=$O/ab4 R=2 DEPTH=512 D=$D timeout 200 bash tools/device/ab.sh \
    qwen3next-80b-a3b:q4_k_m:4 qwen3-30b-a3b:q4_k_m:8 -- base="$D" rg="$D:MEMRA_ROUTE_GLU=1" \
    rgnd="$D:MEMRA_ROUTE_GLU=1,MEMRA_ROUTE_DOWN=0" tf="$D:MEMRA_ROUTE_TRIGGER=1" >"$O/ab-route.txt" 2>&1
  grep -E "^qwen" "$O/ab-route.txt"
fi

if want att6; then
  { syn llama31-8b-q8_0 llama31-8b q8_0; syn llama31-8b-q4_k_m llama31-8b q4_k_m; } & # ab.sh's names
  LSP=$!
  opcheck_v6
  timeout 200 compute-sanitizer --tool memcheck "$D/opcheck" --quick "$D/libmemra_cpu.so" \
    "$D/libmemra_sm90a.so" >"$O/mc-att6.txt" 2>&1
  echo "== memcheck opcheck --quick (v6 cases) rc $?: $(grep -E 'ERROR SUMMARY' "$O/mc-att6.txt" | tail -1)"
  timeout 150 "$D/attn_bench" "$D/libmemra_sm90a.so" >"$O/attn-bench.txt" 2>&1
  cat "$O/attn-bench.txt"
  wait $LSP
  for t in q8_0 q4_k_m; do
    L=$W/llama31-8b-$t.gguf
    MEMRA_ATT=6 timeout 120 "$D/memra" gate graph "${G[@]}" -m "$L" --gate-p 200 -n 512 >"$O/g.txt" 2>&1
    echo "== gate graph v6 llama $t rc $?: $(line "$O/g.txt")"
    MEMRA_ATT=6 timeout 120 "$D/memra" gate batch "${G[@]}" -m "$L" --gate-b 8 --gate-p 512 -n 32 \
      >"$O/g.txt" 2>&1
    echo "== gate batch v6 llama $t rc $?: $(line "$O/g.txt")"
  done
fi

if want att6ab; then
  WORK=$W OUT=$O/ab6 R=2 DEPTH="512,4096" D=$D timeout 440 bash tools/device/ab.sh \
    llama31-8b:q8_0 llama31-8b:q4_k_m -- v5="$D:MEMRA_ATT=5,MEMRA_T11_DYN=0" \
    v6="$D:MEMRA_ATT=6,MEMRA_T11_DYN=0" v6d4="$D" >"$O/ab-att6.txt" 2>&1
  grep -E "^llama" "$O/ab-att6.txt"
fi

if want att6moe; then
  WORK=$W OUT=$O/ab6m R=2 DEPTH=512 D=$D timeout 150 bash tools/device/ab.sh \
    qwen3-30b-a3b:q4_k_m:8 -- v5="$D:MEMRA_ATT=5" v6="$D:MEMRA_ATT=6" >"$O/ab-att6m.txt" 2>&1
  grep -E "^qwen" "$O/ab-att6m.txt"
fi

if want att6q; then
  L=$W/llama31-8b-q8_0.gguf
  syn llama31-8b-q8_0 llama31-8b q8_0 &
  LSP=$!
  opcheck_v6
  timeout 150 "$D/attn_bench" "$D/libmemra_sm90a.so" >"$O/attn-bench.txt" 2>&1
  echo "== attn_bench rc $?"
  cat "$O/attn-bench.txt"
  wait $LSP
  MEMRA_ATT=6 timeout 90 "$D/memra" gate graph "${G[@]}" -m "$L" --gate-p 200 -n 512 >"$O/g.txt" 2>&1
  echo "== gate graph v6 llama q8_0 rc $?: $(line "$O/g.txt")"
  WORK=$W OUT=$O/ab6q R=2 DEPTH=512 D=$D timeout 200 bash tools/device/ab.sh llama31-8b:q8_0 -- \
    v5="$D:MEMRA_ATT=5" v6="$D:MEMRA_ATT=6" v6tx="$D:MEMRA_ATT=6,MEMRA_ATT6_TX=1" >"$O/ab-att6q.txt" 2>&1
  grep -E "^round|^llama" "$O/ab-att6q.txt"
fi

if want dyn; then
  K=llama31-8b-q4_k_m
  syn $K llama31-8b q4_k_m &
  LSP=$!
  MEMRA_T11_DYN=3 timeout 150 "$D/opcheck" --quick "$D/libmemra_cpu.so" "$D/libmemra_sm90a.so" \
    >"$O/op-dyn.txt" 2>&1
  echo "== opcheck --quick MEMRA_T11_DYN=3 rc $?: $(tail -1 "$O/op-dyn.txt")"
  grep -E "FAIL" "$O/op-dyn.txt" | head -8 | cut -c1-130
  wait $LSP
  same_tokens $K MEMRA_T11_DYN=0 MEMRA_T11_DYN=1 MEMRA_T11_DYN=2 MEMRA_T11_DYN=3
  MEMRA_T11_DYN=2 timeout 90 "$D/memra" gate graph "${G[@]}" -m "$W/$K.gguf" --gate-p 200 -n 512 \
    >"$O/g-dyn.txt" 2>&1
  echo "== gate graph dyn 2 llama q4_k_m rc $?: $(line "$O/g-dyn.txt")"
  A=${DYN_ATT:-5}
  # $D/old (optional): the last commit's plugin, whose static path the runtime switch must not slow
  OLD=()
  [ -f "$D/old/libmemra_sm90a.so" ] && OLD=(old="$D/old:MEMRA_ATT=$A")
  WORK=$W OUT=$O/abdyn R=${R:-2} DEPTH=512 D=$D timeout 330 bash tools/device/ab.sh llama31-8b:q4_k_m -- \
    "${OLD[@]}" st="$D:MEMRA_ATT=$A,MEMRA_T11_DYN=0" d1="$D:MEMRA_ATT=$A,MEMRA_T11_DYN=1" d2="$D:MEMRA_ATT=$A,MEMRA_T11_DYN=2" \
    d3="$D:MEMRA_ATT=$A,MEMRA_T11_DYN=3" >"$O/ab-dyn.txt" 2>&1
  grep -E "^round|^llama" "$O/ab-dyn.txt"
fi

if want dynq8; then
  K=llama31-8b-q8_0
  syn $K llama31-8b q8_0
  same_tokens $K MEMRA_T11_DYN=0 MEMRA_T11_DYN=1 MEMRA_T11_DYN=3
  A=${DYN_ATT:-5}
  WORK=$W OUT=$O/abdyn8 R=${R:-2} DEPTH=512 D=$D timeout 250 bash tools/device/ab.sh llama31-8b:q8_0 -- \
    st="$D:MEMRA_ATT=$A,MEMRA_T11_DYN=0" d1="$D:MEMRA_ATT=$A,MEMRA_T11_DYN=1" d3="$D:MEMRA_ATT=$A,MEMRA_T11_DYN=3" \
    >"$O/ab-dyn8.txt" 2>&1
  grep -E "^round|^llama" "$O/ab-dyn8.txt"
fi

if want first || want firstq; then
  ( syn llama31-8b-q8_0 llama31-8b q8_0 & syn llama31-8b-q4_k_m llama31-8b q4_k_m & wait ) &
  LSP=$!
  opcheck_dyn_attn
  wait $LSP
  MEMRA_ATT=6 timeout 90 "$D/memra" gate graph "${G[@]}" -m "$W/llama31-8b-q8_0.gguf" --gate-p 200 \
    -n 512 >"$O/g6.txt" 2>&1
  echo "== gate graph v6 llama q8_0 rc $?: $(line "$O/g6.txt")"
  # firstq: the short form (a call of ~350 s): v5 against v6 and dynamic tiles on the output
  # matrices alone (MEMRA_T11_DYN=4)
  if want firstq; then
    same_tokens llama31-8b-q4_k_m MEMRA_T11_DYN=0 MEMRA_T11_DYN=4
    VS=(v5="$D:MEMRA_ATT=5,MEMRA_T11_DYN=0" v6="$D:MEMRA_ATT=6,MEMRA_T11_DYN=0"
      d4="$D:MEMRA_ATT=5,MEMRA_T11_DYN=4")
  else
    same_tokens llama31-8b-q4_k_m MEMRA_T11_DYN=0 MEMRA_T11_DYN=2
    VS=(v5="$D:MEMRA_ATT=5,MEMRA_T11_DYN=0" v6="$D:MEMRA_ATT=6,MEMRA_T11_DYN=0"
      d2="$D:MEMRA_ATT=5,MEMRA_T11_DYN=2" d3="$D:MEMRA_ATT=5,MEMRA_T11_DYN=3")
  fi
  WORK=$W OUT=$O/abf R=2 DEPTH=512 D=$D timeout 280 bash tools/device/ab.sh llama31-8b:q8_0 \
    llama31-8b:q4_k_m -- "${VS[@]}" >"$O/ab-first.txt" 2>&1
  grep -E "^round|^llama" "$O/ab-first.txt"
fi

if want min; then
  opcheck_dyn_attn
  for v in 0 2 3; do
    MEMRA_T11_DYN=$v timeout 60 "$D/gemv_bench" "$D/libmemra_sm90a.so" Q4_K Q6_K Q8_0 \
      >"$O/gemv-dyn$v.txt" 2>&1
    echo "== gemv_bench MEMRA_T11_DYN=$v rc $?"
    cat "$O/gemv-dyn$v.txt"
  done
fi
