#!/usr/bin/env bash
# The memra CLI end to end on the default model and the CPU plugin: greedy text and ids,
# prompt sources, logits dump, config file vs flags, seeds, chat through a pipe and a
# pseudo-terminal, backends/info/bench, and one-line errors with the right exit codes.
set -uo pipefail
MEMRA=tools/memra/memra
PLUGINS=$(mktemp -d)
cp plugins/cpu/libmemra_cpu.so "$PLUGINS/"
: "${MEMRA_MODEL:?MEMRA_MODEL is not set: run through tools/test.sh, which fetches the default model}"
M=(-m "$MEMRA_MODEL" --plugin-dir "$PLUGINS" --backend cpu -t 2)
T=${TEST_TMPDIR:-$(mktemp -d)}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_eq() { [ "$1" == "$2" ] || fail "$3: got [$1], want [$2]"; }
expect_has() { grep -qF -- "$2" <<<"$1" || fail "$3: [$1] lacks [$2]"; }

# Greedy ids equal HF transformers' (tests/e2e/fixtures/smollm2_case0.txt, first 16).
want=$(grep '^greedy_hf' tests/e2e/fixtures/smollm2_case0.txt | cut -d' ' -f2-17 | tr ' ' ',')
got=$($MEMRA run "${M[@]}" -p "The capital of France is" -n 16 --temp 0 --print-ids 2>/dev/null)
expect_eq "$got" "[$want]" "greedy ids"
out=$($MEMRA run "${M[@]}" -p "The capital of France is" -n 16 --temp 0 2>/dev/null)
expect_has "$out" "The capital of France is Paris." "greedy text"

# The same prompt from stdin, and as ids (no BOS added), gives the same tokens.
got=$(echo -n "The capital of France is" | $MEMRA "${M[@]}" -n 16 --temp 0 --print-ids 2>/dev/null)
expect_eq "$got" "[$want]" "stdin prompt"
got=$($MEMRA "${M[@]}" --prompt-ids 504,3575,282,4649,314 -n 16 --temp 0 --print-ids 2>/dev/null)
expect_eq "$got" "[$want]" "--prompt-ids"

# Logits dump: [5 positions x 49152] float32.
$MEMRA "${M[@]}" --prompt-ids 504,3575,282,4649,314 -n 1 --temp 0 --dump-logits "$T/l.f32" \
  >/dev/null 2>&1 || fail "dump-logits exit"
expect_eq "$(stat -c %s "$T/l.f32" 2>/dev/null)" "$((5 * 49152 * 4))" "dump-logits size"

# Config file values apply; flags override them.
printf '[memra]\nn-predict = 3\ntemp = 0\n' >"$T/c.ini"
got=$($MEMRA "${M[@]}" --config "$T/c.ini" -p "The capital of France is" --print-ids 2>/dev/null)
expect_eq "$got" "[$(cut -d, -f1-3 <<<"$want")]" "config n-predict"
got=$($MEMRA "${M[@]}" --config "$T/c.ini" -n 5 -p "The capital of France is" --print-ids 2>/dev/null)
expect_eq "$got" "[$(cut -d, -f1-5 <<<"$want")]" "flag overrides config"
printf '[memra]\nbogus = 1\n' >"$T/bad.ini"
err=$($MEMRA "${M[@]}" --config "$T/bad.ini" -p x 2>&1 >/dev/null); rc=$?
expect_eq "$rc" 2 "bad config exit"
expect_has "$err" "unknown key 'bogus'" "bad config message"

# Sampling: the same seed gives the same tokens; another seed, other tokens.
s1=$($MEMRA "${M[@]}" -p "Once upon a time" -n 24 --temp 1.0 --seed 11 --print-ids 2>/dev/null)
s2=$($MEMRA "${M[@]}" -p "Once upon a time" -n 24 --temp 1.0 --seed 11 --print-ids 2>/dev/null)
s3=$($MEMRA "${M[@]}" -p "Once upon a time" -n 24 --temp 1.0 --seed 12 --print-ids 2>/dev/null)
expect_eq "$s1" "$s2" "same seed"
[ "$s1" != "$s3" ] || fail "seeds 11 and 12 gave the same 24 tokens"

# Chat: 3 turns through a pipe, then through a pseudo-terminal.
chat=$(printf 'What is the capital of France?\nAnd of Italy?\nThanks!\n' |
  $MEMRA chat "${M[@]}" -n 24 --temp 0 2>/dev/null); rc=$?
expect_eq "$rc" 0 "chat exit"
expect_eq "$(grep -c . <<<"$chat")" 3 "chat: one reply line per turn"
expect_has "$chat" "Paris" "chat turn 1"
expect_has "$chat" "Rome" "chat turn 2"
pty=$(printf 'What is the capital of France?\n/reset\nWhat is the capital of France?\n/exit\n' |
  script -qec "$MEMRA chat ${M[*]} -n 16 --temp 0" /dev/null 2>/dev/null)
expect_has "$pty" "> " "chat prompt on a terminal"
expect_has "$pty" "(history cleared)" "chat /reset"
[ "$(grep -c Paris <<<"$pty")" -ge 2 ] || fail "chat on a pty: [$pty]"

# A progress bar while the model loads on a terminal; none when stderr is a pipe.
bar=$(script -qec "$MEMRA run ${M[*]} -p x -n 1 --temp 0" /dev/null 2>&1)
expect_has "$bar" "loading model [" "progress bar on a terminal"
nobar=$($MEMRA run "${M[@]}" -p x -n 1 --temp 0 2>&1 >/dev/null)
if grep -q "loading model" <<<"$nobar"; then fail "progress bar drawn without a terminal"; fi

# backends, info, bench.
b=$($MEMRA backends --plugin-dir "$PLUGINS")
expect_has "$b" "auto picks this" "backends"
i=$($MEMRA info tests/e2e/fixtures/tiny-qwen3.gguf)
expect_has "$i" "qwen3" "info arch"
expect_has "$i" "blk.1.attn_k_norm.weight" "info tensors"
bench=$($MEMRA bench "${M[@]}" --bench-p 8 --bench-n 4 -r 2 2>/dev/null)
expect_has "$bench" "| pp8 |" "bench pp"
expect_has "$bench" "| tg4 |" "bench tg"
expect_has "$bench" "floor = copy bandwidth" "bench floor note"
# the tg row: a floor in tokens/s and the median's share of it (t/s / floor), pp rows none
python3 - "$bench" <<'PY' || fail "bench floor columns"
import sys
rows = [r.split("|")[1:-1] for r in sys.argv[1].splitlines() if r.startswith("| ") and "MiB" in r]
pp = [r for r in rows if r[3].strip() == "pp8"][0]
tg = [r for r in rows if r[3].strip() == "tg4"][0]
assert pp[7].strip() == "-" and pp[8].strip() == "-", pp
floor, share, med = float(tg[7]), float(tg[8].strip().rstrip("%")), float(tg[4])
assert floor > 0 and abs(share - 100 * med / floor) < 0.1 + 1e-3 * share, (floor, share, med)
PY
$MEMRA bench "${M[@]}" --bench-p 8 --bench-n 4 -r 1 -o json 2>/dev/null |
  python3 -c '
import json, sys
r = json.load(sys.stdin)
assert [x["test"] for x in r] == ["pp8", "tg4"]
assert r[0]["floor_tps"] is None and r[1]["floor_tps"] > 0 and r[1]["copy_gbps"] > 0
assert 0 < r[1]["step_weight_bytes"] <= r[1]["size_bytes"]' ||
  fail "bench json"

# The batch and chunk gates on a tiny model (the GPU runs them at real shapes).
TM=(-m tests/e2e/fixtures/tiny-llama.gguf --plugin-dir "$PLUGINS" --backend cpu -t 2)
g=$($MEMRA gate batch "${TM[@]}" --gate-b 3 --gate-p 9 -n 12 2>/dev/null)
expect_has "$g" "PASS: all 3 x 12 tokens identical" "gate batch"
g=$($MEMRA gate chunk "${TM[@]}" --gate-p 41 --ubatch 6 2>/dev/null)
expect_has "$g" "PASS: logits of all 41 positions bit-identical" "gate chunk"

# Errors: one line, the right exit code, nothing on stdout.
check_err() { # want_rc want_substring args...
  local want_rc=$1 want=$2; shift 2
  local out err rc
  out=$("$@" 2>"$T/err"); rc=$?
  err=$(cat "$T/err")
  expect_eq "$rc" "$want_rc" "exit code of $*"
  expect_has "$err" "$want" "message of $*"
  expect_eq "$(grep -c . <<<"$err")" 1 "one-line error of $*"
  expect_eq "$out" "" "stdout of failing $*"
}
check_err 2 "unknown option '--frobnicate'" $MEMRA run --frobnicate
check_err 2 "--temp: 'hot' is not a number" $MEMRA run --temp hot -p x
check_err 2 "--top-p: 1.5 is out of range" $MEMRA run --top-p 1.5 -p x
check_err 2 "option --ctx-size needs a value" $MEMRA run -p x -c
check_err 2 "unknown command 'frob'" $MEMRA frob
check_err 1 "/nonexistent.gguf" $MEMRA run -m /nonexistent.gguf -p x
head -c 1000 "$MEMRA_MODEL" >"$T/trunc.gguf"
check_err 1 "trunc.gguf" $MEMRA run -m "$T/trunc.gguf" --plugin-dir "$PLUGINS" -p x
check_err 1 "backend 'sm77x' not found" $MEMRA run "${M[@]}" --backend sm77x -p x
check_err 1 "--prompt-ids: '99999999' is not a token id" $MEMRA run "${M[@]}" --prompt-ids 1,99999999
check_err 1 "does not fit the context" $MEMRA run "${M[@]}" -c 3 -p "The capital of France is"
check_err 2 "no file given" $MEMRA info
check_err 2 "expected graph, batch or chunk" $MEMRA gate frob
check_err 2 "--ubatch 50 must be below --gate-p 41" $MEMRA gate chunk "${TM[@]}" --gate-p 41 --ubatch 50
check_err 2 "config /dev/zero: not a regular file" $MEMRA run --config /dev/zero -p x
head -c 1048577 /dev/zero | tr '\0' '#' >"$T/big.ini"
check_err 2 "big.ini: 1048577 bytes (at most 1048576)" $MEMRA run --config "$T/big.ini" -p x
check_err 2 "unknown option '--a b'" $MEMRA run $'--a\nb'
# a plugin folder named but missing or not a folder: refused, not searched past
check_err 2 "--plugin-dir $T/none: No such file or directory" $MEMRA run --plugin-dir "$T/none" -p x
check_err 2 "--plugin-dir $T/big.ini: not a directory" $MEMRA bench --plugin-dir "$T/big.ini"
printf '[memra]\nplugin-dir = %s/none\n' "$T" >"$T/pd.ini"
check_err 2 "--plugin-dir $T/none: No such file or directory" $MEMRA backends --config "$T/pd.ini"

rm -rf "$PLUGINS"
if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all CLI checks passed"
