/* text_fuzz.c — libFuzzer target for what a server request turns into before the model sees it
 * (run: tools/fuzz/run_text_fuzz.sh): the JSON body of /v1/completions and /v1/chat/completions,
 * the chat template's rendering of the messages, and the two vocabulary kinds' encoders on any
 * bytes. The input's first byte picks the path, the rest is the body or the text.
 *
 * Properties, each a finding (abort) when broken:
 *  - memra_api_parse returns MEMRA_OK or MEMRA_E_INVALID with a one-line message; accepted
 *    token ids lie in the vocabulary, accepted chat messages have a role and content;
 *  - an accepted conversation renders with Llama 3.1's template and its text encodes;
 *  - byte-level BPE (Llama 3.1's vocabulary): valid UTF-8 encodes to ids in the vocabulary whose
 *    pieces concatenate to the text exactly (with and without special-token parsing); invalid
 *    UTF-8 is MEMRA_E_INVALID with a message;
 *  - SPM (Gemma 3's vocabulary): any bytes encode to ids in the vocabulary, and the streaming
 *    detokenizer takes every id;
 *  - a vocabulary built from the input (tokens, types, scores, merges and special ids written
 *    into a GGUF as a hostile file could hold them) loads or is refused with MEMRA_E_FORMAT and
 *    a one-line message; one that loads encodes sample texts to ids in its range, and every id
 *    detokenizes;
 *  - the CLI's flags (argv from the input) and its INI config file parse, or are refused with
 *    MEMRA_E_INVALID and one line;
 *  - nothing allocated is left behind.
 * The vocabularies come from MEMRA_FUZZ_DATA (run_text_fuzz.sh unpacks them there). */
#define _POSIX_C_SOURCE 200809L /* unsetenv */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/text/chat.h"
#include "core/text/hf_import.h"
#include "core/text/tokenizer.h"
#include "core/text/utf8.h"
#include "tools/memra/options.h"
#include "tools/serve/parse.h"

static memra_tokenizer *g_bpe, *g_spm;
static char *g_tmpl; /* Llama 3.1's chat template */

static void die(const char *what, const char *msg) {
  fprintf(stderr, "text_fuzz: %s%s%s\n", what, msg ? ": " : "", msg ? msg : "");
  abort();
}

static char *data_path(const char *name) {
  const char *dir = getenv("MEMRA_FUZZ_DATA");
  if (!dir) die("MEMRA_FUZZ_DATA is not set", NULL);
  const size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p) die("out of memory", NULL);
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  unsetenv("MEMRA_CONFIG"); /* the flags mode reads no config but its own */
  memra_err err;
  char *tj = data_path("llama3_1/tokenizer.json"),
       *cfg = data_path("llama3_1/tokenizer_config.json");
  if (memra_tokenizer_from_hf_files(tj, cfg, &g_bpe, &g_tmpl, &err) != MEMRA_OK)
    die("llama3_1 tokenizer", err.msg);
  if (!g_tmpl) die("llama3_1 tokenizer_config.json has no chat template", NULL);
  free(tj), free(cfg);
  char *gp = data_path("gemma3_vocab.gguf");
  memra_gguf *g = NULL;
  if (memra_gguf_open(gp, &g, &err) != MEMRA_OK) die("gemma3_vocab.gguf", err.msg);
  if (memra_tokenizer_from_gguf(g, &g_spm, &err) != MEMRA_OK) die("gemma3 tokenizer", err.msg);
  memra_gguf_close(g);
  free(gp);
  return 0;
}

static void check_one_line(memra_status st, memra_status want, const memra_err *err,
                           const char *what) {
  if (st != want || err->msg[0] == 0 || strchr(err->msg, '\n')) {
    fprintf(stderr, "text_fuzz: %s: status %d (want %d), message '%s'\n", what, (int)st, (int)want,
            err->msg);
    abort();
  }
}

static bool utf8_ok(const char *s, size_t n) {
  uint32_t cp;
  for (size_t i = 0, l; i < n; i += l)
    if ((l = memra_utf8_valid_len((const uint8_t *)s + i, n - i, &cp)) == 0) return false;
  return true;
}

static void ids_in_vocab(const memra_tokenizer *t, const int32_t *ids, size_t n, const char *what) {
  const int32_t nv = memra_tokenizer_n_vocab(t);
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= nv) die(what, "an id outside the vocabulary");
}

/* Byte-level BPE: pieces concatenate to the text; invalid UTF-8 is refused with a message. */
static void bpe_round_trip(const char *s, size_t n, bool special) {
  memra_err err;
  int32_t *ids = NULL;
  size_t n_ids = 0;
  const memra_status st = memra_tokenize(g_bpe, s, n, false, special, &ids, &n_ids, &err);
  if (!utf8_ok(s, n)) {
    check_one_line(st, MEMRA_E_INVALID, &err, "bpe: invalid UTF-8");
    return;
  }
  if (st != MEMRA_OK) die("bpe: valid UTF-8 refused", err.msg);
  ids_in_vocab(g_bpe, ids, n_ids, "bpe");
  size_t at = 0;
  for (size_t i = 0; i < n_ids; ++i) {
    size_t len = 0;
    const char *p = memra_token_piece(g_bpe, ids[i], &len);
    if (!p || at + len > n || memcmp(s + at, p, len) != 0)
      die("bpe: pieces differ from the text", NULL);
    at += len;
  }
  if (at != n) die("bpe: pieces shorter than the text", NULL);
  memra_free(ids);
}

/* SPM: any bytes encode; every id goes through the streaming detokenizer. */
static void spm_encode(const char *s, size_t n, bool special) {
  memra_err err;
  int32_t *ids = NULL;
  size_t n_ids = 0;
  if (memra_tokenize(g_spm, s, n, true, special, &ids, &n_ids, &err) != MEMRA_OK)
    die("spm: refused", err.msg);
  ids_in_vocab(g_spm, ids, n_ids, "spm");
  memra_detok d;
  memra_detok_init(&d);
  char out[256];
  for (size_t i = 0; i < n_ids; ++i)
    if (memra_detok_push(&d, g_spm, ids[i], out, sizeof out) >= sizeof out)
      die("spm: detok wrote past its buffer", NULL);
  if (memra_detok_flush(&d, out, sizeof out) >= sizeof out) die("spm: flush past its buffer", NULL);
  memra_free(ids);
}

static void api(memra_api_kind kind, const char *body, size_t n) {
  memra_err err;
  memra_api_req r;
  const int32_t nv = memra_tokenizer_n_vocab(g_bpe);
  const memra_status st = memra_api_parse(kind, body, n, nv, &r, &err);
  if (st != MEMRA_OK) {
    check_one_line(st, st == MEMRA_E_OOM ? MEMRA_E_OOM : MEMRA_E_INVALID, &err, "api_parse");
    if (r.root || r.prompt_ids || r.msgs)
      die("api_parse: a rejected body left its allocations", NULL);
    return;
  }
  if (r.prompt_ids) ids_in_vocab(g_bpe, r.prompt_ids, (size_t)r.n_prompt_ids, "api_parse ids");
  if (kind == MEMRA_API_CHAT) {
    for (size_t i = 0; i < r.n_msgs; ++i)
      if (!r.msgs[i].role || !r.msgs[i].content)
        die("api_parse: a message without role or content", NULL);
    char *text = NULL;
    const memra_status cs = memra_chat_render(g_tmpl, r.msgs, r.n_msgs, true, "<|begin_of_text|>",
                                              "<|eot_id|>", &text, &err);
    if (cs == MEMRA_OK) {
      bpe_round_trip(text, strlen(text), true);
      memra_free(text);
    } else {
      check_one_line(cs, MEMRA_E_INVALID, &err, "chat_render");
    }
  } else if (r.prompt) {
    bpe_round_trip(r.prompt, r.prompt_len, false);
  }
  memra_api_req_free(&r);
}

/* A vocabulary from the input: byte 0 picks the model and pre-tokenizer, byte 1 the special ids'
 * source; the rest split at '\n' into tokens, each token's first byte its type (0-7, past the
 * known 1-6 too) and score; gpt2 merges pair consecutive tokens. */
static void vocab(const uint8_t *d, size_t n) {
  static const char *const pre[] = {"", "gpt2", "smollm", "llama-bpe", "qwen2", "deepseek-v3"};
  enum { MAX_TOK = 512 };
  if (n < 2) return;
  const bool bpe = d[0] & 1;
  const char *pre_name = pre[(d[0] >> 3) % 6];
  const uint8_t sp = d[1];
  d += 2, n -= 2;
  char *buf = memra_malloc(n + 1);
  const char **tok = memra_malloc(MAX_TOK * sizeof *tok);
  const char **mrg = memra_malloc(MAX_TOK * sizeof *mrg);
  char *mbuf = memra_malloc(2 * n + MAX_TOK + 1);
  int32_t *ty = memra_malloc(MAX_TOK * sizeof *ty);
  float *sc = memra_malloc(MAX_TOK * sizeof *sc);
  if (!buf || !tok || !mrg || !mbuf || !ty || !sc) die("out of memory", NULL);
  memcpy(buf, d, n);
  buf[n] = 0;
  uint64_t nt = 0, nm = 0;
  size_t mo = 0;
  for (size_t i = 0; i <= n && nt < MAX_TOK;) {
    size_t j = i;
    while (j < n && buf[j] != '\n')
      ++j;
    buf[j] = 0; /* tokens end at the newline (or a NUL inside: shorter) */
    const uint8_t h = i < j ? (uint8_t)buf[i] : 0;
    ty[nt] = h & 7;
    sc[nt] = (float)(int8_t)h;
    tok[nt++] = buf + (i < j ? i + 1 : i);
    i = j + 1;
  }
  for (uint64_t i = 1; bpe && i < nt; ++i) { /* "left right" from neighbours */
    const int l = snprintf(mbuf + mo, 2 * n + MAX_TOK + 1 - mo, "%s %s", tok[i - 1], tok[i]);
    if (l < 0 || (size_t)l >= 2 * n + MAX_TOK + 1 - mo) break;
    mrg[nm++] = mbuf + mo;
    mo += (size_t)l + 1;
  }
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  if (!w) die("out of memory", NULL);
  (void)memra_gguf_writer_set_str(w, "tokenizer.ggml.model", bpe ? "gpt2" : "llama");
  (void)memra_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre_name);
  (void)memra_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, nt);
  if (sp & 1)
    (void)memra_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MEMRA_GGUF_I32, ty, nt);
  if (sp & 2) (void)memra_gguf_writer_set_arr(w, "tokenizer.ggml.scores", MEMRA_GGUF_F32, sc, nt);
  if (nm) (void)memra_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", mrg, nm);
  if (sp & 4) (void)memra_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", sp >> 3);
  if (sp & 8) (void)memra_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)nt - 1);
  if (sp & 16) (void)memra_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", sp >> 5);
  if (sp & 32) (void)memra_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", sp & 64);
  memra_err err;
  uint8_t *file = NULL;
  uint64_t fsize = 0;
  if (memra_gguf_writer_to_memory(w, &file, &fsize, &err) != MEMRA_OK) die("writer", err.msg);
  memra_gguf_writer_free(w);
  memra_gguf *g = NULL;
  if (memra_gguf_open_memory(file, fsize, "vocab.gguf", &g, &err) != MEMRA_OK)
    die("reopen", err.msg);
  memra_tokenizer *t = NULL;
  const memra_status st = memra_tokenizer_from_gguf(g, &t, &err);
  memra_gguf_close(g);
  memra_free(file);
  if (st != MEMRA_OK) {
    check_one_line(st, st == MEMRA_E_OOM ? MEMRA_E_OOM : MEMRA_E_FORMAT, &err, "vocab load");
  } else {
    static const char *const texts[] = {"Hello world", " a  b\n\n\tc 123 4567",
                                        "caf\xc3\xa9 \xe4\xbd\xa0", "<s></s><|eot_id|><unk>", ""};
    for (int k = 0; k < 5; ++k)
      for (int special = 0; special < 2; ++special) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        const memra_status ts =
            memra_tokenize(t, texts[k], strlen(texts[k]), true, special, &ids, &n_ids, &err);
        if (ts != MEMRA_OK) {
          check_one_line(ts, ts == MEMRA_E_OOM ? MEMRA_E_OOM : MEMRA_E_INVALID, &err,
                         "vocab tokenize");
          continue;
        }
        ids_in_vocab(t, ids, n_ids, "vocab tokenize");
        memra_free(ids);
      }
    memra_detok dt;
    memra_detok_init(&dt);
    char out[256];
    for (int32_t id = 0; id < memra_tokenizer_n_vocab(t); ++id)
      if (memra_detok_push(&dt, t, id, out, sizeof out) >= sizeof out)
        die("vocab: detok past its buffer", NULL);
    (void)memra_detok_flush(&dt, out, sizeof out);
    memra_tokenizer_free(t);
  }
  memra_free(buf), memra_free(tok), memra_free(mrg), memra_free(mbuf), memra_free(ty),
      memra_free(sc);
}

/* The flags: argv is the input split at NUL (at most 32 words; none naming a config file, which
 * would read any path); ini: the input as the --config file. */
static void cli_opts(const char *s, size_t n, bool ini) {
  enum { MAX_ARGS = 32 };
  char *buf = memra_malloc(n + 1), *argv[MAX_ARGS + 2];
  if (!buf) die("out of memory", NULL);
  memcpy(buf, s, n);
  buf[n] = 0;
  int argc = 0;
  char path[1100] = "", flag[] = "--config";
  if (ini) {
    const char *tmp =
        getenv("TEST_TMPDIR"); /* the replay test's; the fuzzer writes beside its data */
    snprintf(path, sizeof path, "%s/fuzz.ini", tmp ? tmp : getenv("MEMRA_FUZZ_DATA"));
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(s, 1, n, f) != n || fclose(f) != 0) die("cannot write", path);
    argv[argc++] = flag;
    argv[argc++] = path;
  } else {
    for (size_t i = 0; i <= n && argc < MAX_ARGS; i += strlen(buf + i) + 1)
      if (!strstr(buf + i, "config")) argv[argc++] = buf + i;
  }
  memra_opts o;
  memra_opts_defaults(&o);
  const char *pos[4];
  int n_pos = 0;
  memra_err err;
  const memra_status st = memra_opts_parse(&o, argc, argv, 0, pos, 4, &n_pos, &err);
  if (st != MEMRA_OK) check_one_line(st, MEMRA_E_INVALID, &err, ini ? "config" : "flags");
  if (n_pos < 0 || n_pos > 4) die("flags: positional count out of range", NULL);
  memra_free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const long live0 = memra_test_live_allocs();
  const char *s = (const char *)data + 1;
  const size_t n = size - 1;
  switch (data[0] & 15) {
  case 0: api(MEMRA_API_COMPLETION, s, n); break;
  case 1: api(MEMRA_API_CHAT, s, n); break;
  case 2: bpe_round_trip(s, n, false); break;
  case 3: bpe_round_trip(s, n, true); break;
  case 4: spm_encode(s, n, false); break;
  case 5: spm_encode(s, n, true); break;
  case 6:
  case 7: vocab(data, size); break;
  case 8: cli_opts(s, n, false); break;
  case 9: cli_opts(s, n, true); break;
  default: api(data[0] & 1 ? MEMRA_API_CHAT : MEMRA_API_COMPLETION, s, n); break;
  }
  if (memra_test_live_allocs() != live0) {
    fprintf(stderr, "text_fuzz: %ld allocations leaked\n", memra_test_live_allocs() - live0);
    abort();
  }
  return 0;
}
