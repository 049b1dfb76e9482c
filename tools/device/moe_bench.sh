#!/bin/bash
# moe_bench.sh — decode and prefill of a Qwen3-30B-A3B-shaped MoE (Q4_K_M, 17 GB), on a
# fresh GPU machine: the file does not fit beside acceptance.sh's models on its 64 GiB
# disk (seen: "write failed: No space left on device"). From the repo root, carry ["dist"]:
#   bash tools/device/moe_bench.sh        (about 4 minutes: the synth is most of it)
set -u
D=${D:-dist}
W=${W:-/tmp/memra-moe}
O=${OUT:-/tmp/memra-moe-out}
mkdir -p "$W" "$O"
export LD_LIBRARY_PATH="$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
df -h "$W" | tail -1
t0=$(date +%s)
"$D/memra-synth" --preset qwen3-30b-a3b --types q4_k_m --seed 1 -o "$W/moe30.gguf" >"$O/synth.log" 2>&1 ||
  { echo "synth failed: $(tail -1 "$O/synth.log")"; exit 1; }
echo "synth: $(($(date +%s) - t0)) s"
"$D/memra" bench --plugin-dir "$D" --backend sm90a -m "$W/moe30.gguf" --bench-p 512 --bench-n 128 \
  -r 3 | tee "$O/bench-moe30.md"
