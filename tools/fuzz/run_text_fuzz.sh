#!/usr/bin/env bash
# Fuzzes the text inputs with libFuzzer for a bounded time: the JSON bodies of the OpenAI
# endpoints, the chat template's rendering, the byte-level BPE and SPM encoders, vocabularies built
# from the input, the CLI's flags and config (tools/fuzz/text_fuzz.c says what each must satisfy).
#   tools/fuzz/run_text_fuzz.sh [SECONDS=30] [WORKDIR=${TMPDIR:-/tmp}/memra_text_fuzz]
# Builds text_fuzz.c with clang (-fsanitize=fuzzer,address,undefined) and the sources it needs,
# unpacks Llama 3.1's and Gemma 3's vocabularies from tests/text/fixtures, seeds the corpus from
# tools/fuzz/text_seeds and text_regressions, and exits non-zero on any finding (saved under
# WORKDIR/artifacts/: copy it into tools/fuzz/text_regressions/, which
# //tests/text:text_fuzz_regress_test replays, once fixed).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-30}"
work="${2:-${TMPDIR:-/tmp}/memra_text_fuzz}"
. tools/fuzz/fuzz_lib.sh
fuzz_check run_text_fuzz.sh "$secs"
mkdir -p "$work/corpus" "$work/artifacts" "$work/data/llama3_1"

gunzip -c tests/text/fixtures/llama3_1/tokenizer.json.gz >"$work/data/llama3_1/tokenizer.json"
cp tests/text/fixtures/llama3_1/tokenizer_config.json "$work/data/llama3_1/"
gunzip -c tests/text/fixtures/gemma3_vocab.gguf.gz >"$work/data/gemma3_vocab.gguf"

srcs=(tools/fuzz/text_fuzz.c tools/serve/parse.c tools/memra/options.c
      core/text/chat.c core/text/detok.c core/text/hf_import.c core/text/nfc.c core/text/pretok.c
      core/text/sampler.c core/text/strmap.c core/text/tok_load.c core/text/tok_merge.c
      core/text/tokenizer.c core/text/utf8.c
      core/gguf/gguf_read.c core/gguf/gguf_access.c core/gguf/gguf_write.c
      core/base/alloc.c core/base/err.c)
bin="$work/text_fuzz"
# One clang process, -O1: light on a shared machine.
clang -std=c11 -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -DPCRE2_CODE_UNIT_WIDTH=8 -I. "${srcs[@]}" -lcjson -lpcre2-8 -linih -lm -o "$bin"

cp tools/fuzz/text_seeds/* tools/fuzz/text_regressions/* "$work/corpus/"

export MEMRA_FUZZ_DATA="$work/data"
fuzz_run run_text_fuzz.sh "$bin" "$work" "$secs" -max_len=4096
