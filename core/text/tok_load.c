/* tok_load.c — builds a tokenizer from the tokenizer.ggml.* metadata of a GGUF file. */
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/text/tok_internal.h"
#include "core/text/utf8.h"

/* Optional scalar id: -1 when absent; a value outside the vocabulary is an error. */
static memra_status get_id(const memra_gguf *g, const char *key, int32_t n_vocab, int32_t *out,
                           memra_err *err) {
  int64_t v;
  *out = -1;
  memra_status st = memra_gguf_get_i64(g, key, &v, err);
  if (st == MEMRA_E_NOT_FOUND) return MEMRA_OK;
  if (st) return st;
  if (v < 0 || v >= n_vocab)
    return memra_errf(err, MEMRA_E_FORMAT, "%s = %lld is outside the vocabulary of %d tokens", key,
                      (long long)v, n_vocab);
  *out = (int32_t)v;
  return MEMRA_OK;
}

static memra_status get_flag(const memra_gguf *g, const char *key, bool dflt, bool *out,
                             memra_err *err) {
  *out = dflt;
  memra_status st = memra_gguf_get_bool(g, key, out, err);
  return st == MEMRA_E_NOT_FOUND ? MEMRA_OK : st;
}

/* SPM byte tokens are spelled <0xNN>. */
static int parse_byte_token(const char *s, uint32_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* The bytes a token decodes to, written at dst (room: 3 * n for SPM's ▁ -> ' ' never grows;
 * BPE's code points -> bytes never grows). Returns the length. */
static uint32_t decode_piece(const memra_tokenizer *t, int32_t id, const char *s, uint32_t n,
                             char *dst) {
  int32_t ty = t->types[id];
  if (ty == MEMRA_TT_CONTROL || ty == MEMRA_TT_USER_DEFINED || ty == MEMRA_TT_UNKNOWN) {
    if (t->kind == MEMRA_TOK_SPM && ty == MEMRA_TT_USER_DEFINED) goto spm;
    memcpy(dst, s, n);
    return n;
  }
  if (t->kind == MEMRA_TOK_SPM) {
    int b = ty == MEMRA_TT_BYTE ? parse_byte_token(s, n) : -1;
    if (b >= 0) {
      dst[0] = (char)b;
      return 1;
    }
  spm:;
    uint32_t o = 0;
    for (uint32_t i = 0; i < n;) {
      if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0)
        dst[o++] = ' ', i += 3;
      else
        dst[o++] = s[i++];
    }
    return o;
  }
  uint32_t o = 0;
  for (uint32_t i = 0; i < n;) {
    uint32_t cp;
    size_t l = memra_utf8_valid_len((const uint8_t *)s + i, n - i, &cp);
    int b = l ? memra_cp_to_byte(cp) : -1;
    if (b < 0) { /* not a byte-map character: keep its bytes as they are */
      l = l ? l : 1;
      memcpy(dst + o, s + i, l);
      o += (uint32_t)l;
    } else {
      dst[o++] = (char)b;
    }
    i += (uint32_t)l;
  }
  return o;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Orders the special tokens longest text first (then by id): leftmost-longest matching. */
static int sort_specials(memra_tokenizer *t) {
  uint64_t *k = memra_malloc((t->n_special ? t->n_special : 1) * sizeof *k);
  if (!k) return -1;
  for (int32_t i = 0; i < t->n_special; i++)
    k[i] = ((uint64_t)(UINT32_MAX - t->tok_len[t->special[i]]) << 32) | (uint32_t)t->special[i];
  qsort(k, (size_t)t->n_special, sizeof *k, cmp_u64);
  for (int32_t i = 0; i < t->n_special; i++)
    t->special[i] = (int32_t)(k[i] & UINT32_MAX);
  memra_free(k);
  /* Matching probes, per first byte, each distinct length once: a hash lookup per length
   * instead of a compare per special (Gemma has 6000+ of them starting with '<'). */
  t->sp_len = memra_malloc((t->n_special ? t->n_special : 1) * sizeof *t->sp_len);
  if (!t->sp_len || memra_strmap_init(&t->sp_map, (size_t)t->n_special)) return -1;
  uint32_t o = 0;
  for (int b = 0; b < 256; b++) {
    t->sp_len_off[b] = o;
    for (int32_t i = 0; i < t->n_special; i++) {
      uint32_t l;
      const char *s = memra_tok_text(t, t->special[i], &l);
      if ((uint8_t)s[0] != b) continue;
      if (o == t->sp_len_off[b] || t->sp_len[o - 1] != l) t->sp_len[o++] = l;
    }
  }
  t->sp_len_off[256] = o;
  for (int32_t i = 0; i < t->n_special; i++) {
    uint32_t l;
    const char *s = memra_tok_text(t, t->special[i], &l);
    memra_strmap_put(&t->sp_map, s, l, t->special[i]);
  }
  return 0;
}

static const char *const EOG_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end_of_text|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<|end|>",    "<EOT>",           "<|return|>",    "</s>"};

memra_status memra_tokenizer_from_gguf(const memra_gguf *g, memra_tokenizer **out, memra_err *err) {
  memra_status st;
  memra_str model = {0}, pre = {0};
  uint64_t n = 0, n_merges = 0;
  const memra_gguf_kv *kv_tok = NULL, *kv_sc = NULL, *kv_ty = NULL, *kv_mg = NULL;
  *out = NULL;
  if ((st = memra_gguf_get_str(g, "tokenizer.ggml.model", &model, err))) return st;
  int kind = memra_str_eq(model, "llama")  ? MEMRA_TOK_SPM
             : memra_str_eq(model, "gpt2") ? MEMRA_TOK_BPE
                                           : 0;
  if (!kind)
    return memra_errf(err, MEMRA_E_UNSUPPORTED,
                      "tokenizer.ggml.model '%.*s' is not supported (known: llama, gpt2)",
                      (int)(model.len > 64 ? 64 : model.len), model.ptr);
  if ((st = memra_gguf_get_arr(g, "tokenizer.ggml.tokens", MEMRA_GGUF_STRING, &n, &kv_tok, err)))
    return st;
  if (n == 0 || n > (1u << 24))
    return memra_errf(err, MEMRA_E_FORMAT, "tokenizer.ggml.tokens: %llu tokens (expected 1..16M)",
                      (unsigned long long)n);
  uint64_t m;
  st = memra_gguf_get_arr(g, "tokenizer.ggml.scores", MEMRA_GGUF_F32, &m, &kv_sc, err);
  if (st == MEMRA_E_NOT_FOUND)
    kv_sc = NULL;
  else if (st)
    return st;
  else if (m != n)
    return memra_errf(err, MEMRA_E_FORMAT, "tokenizer.ggml.scores: %llu entries for %llu tokens",
                      (unsigned long long)m, (unsigned long long)n);
  st = memra_gguf_get_arr(g, "tokenizer.ggml.token_type", MEMRA_GGUF_I32, &m, &kv_ty, err);
  if (st == MEMRA_E_NOT_FOUND)
    kv_ty = NULL;
  else if (st)
    return st;
  else if (m != n)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "tokenizer.ggml.token_type: %llu entries for %llu tokens",
                      (unsigned long long)m, (unsigned long long)n);
  st = memra_gguf_get_arr(g, "tokenizer.ggml.merges", MEMRA_GGUF_STRING, &n_merges, &kv_mg, err);
  if (st == MEMRA_E_NOT_FOUND)
    kv_mg = NULL, n_merges = 0;
  else if (st)
    return st;
  if (n_merges > (1u << 26))
    return memra_errf(err, MEMRA_E_FORMAT, "tokenizer.ggml.merges: %llu merges (too many)",
                      (unsigned long long)n_merges);
  if (kind == MEMRA_TOK_BPE && n_merges == 0)
    return memra_errf(err, MEMRA_E_FORMAT, "tokenizer.ggml.merges: required by a gpt2 vocabulary");
  st = memra_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
  if (st && st != MEMRA_E_NOT_FOUND) return st;

  memra_tokenizer *t = memra_calloc(1, sizeof *t);
  if (!t) return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory");
  t->kind = kind;
  t->n_vocab = (int32_t)n;
  if (pre.len) {
    size_t l = pre.len < sizeof t->pre_name - 1 ? pre.len : sizeof t->pre_name - 1;
    memcpy(t->pre_name, pre.ptr, l);
  }
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; i++)
    total += memra_gguf_arr_str(g, kv_tok, i).len;
  if (total > (1ull << 30)) { /* text and pieces share one arena of 32-bit offsets */
    memra_tokenizer_free(t);
    return memra_errf(err, MEMRA_E_FORMAT, "tokenizer.ggml.tokens: %llu bytes of text (too many)",
                      (unsigned long long)total);
  }
  t->arena = memra_malloc(2 * total + 1);
  t->tok_off = memra_malloc(n * sizeof *t->tok_off);
  t->tok_len = memra_malloc(n * sizeof *t->tok_len);
  t->pc_off = memra_malloc(n * sizeof *t->pc_off);
  t->pc_len = memra_malloc(n * sizeof *t->pc_len);
  t->types = memra_malloc(n * sizeof *t->types);
  t->eog = memra_calloc(n, 1);
  t->special = memra_malloc(n * sizeof *t->special);
  if (kv_sc) t->scores = memra_malloc(n * sizeof *t->scores);
  if (!t->arena || !t->tok_off || !t->tok_len || !t->pc_off || !t->pc_len || !t->types || !t->eog ||
      !t->special || (kv_sc && !t->scores) || memra_strmap_init(&t->tok_map, n))
    goto oom;
  uint32_t o = 0;
  for (uint64_t i = 0; i < n; i++) {
    memra_str s = memra_gguf_arr_str(g, kv_tok, i);
    memcpy(t->arena + o, s.ptr, s.len);
    t->tok_off[i] = o, t->tok_len[i] = (uint32_t)s.len;
    o += (uint32_t)s.len;
    t->types[i] = kv_ty ? (int32_t)memra_gguf_arr_i64(kv_ty, i) : MEMRA_TT_NORMAL;
    if (t->scores) t->scores[i] = (float)memra_gguf_arr_f64(kv_sc, i);
  }
  for (uint64_t i = 0; i < n; i++) {
    uint32_t l;
    const char *s = memra_tok_text(t, (int32_t)i, &l);
    memra_strmap_put(&t->tok_map, s, l, (int32_t)i);
    t->pc_off[i] = o;
    t->pc_len[i] = decode_piece(t, (int32_t)i, s, l, t->arena + o);
    o += t->pc_len[i];
  }
  for (int b = 0; b < 256; b++)
    t->byte_tok[b] = -1;
  for (uint64_t i = 0; i < n; i++) {
    uint32_t l;
    const char *s = memra_tok_text(t, (int32_t)i, &l);
    int32_t ty = t->types[i];
    if (ty == MEMRA_TT_BYTE) {
      int b = parse_byte_token(s, l);
      if (b >= 0 && t->byte_tok[b] < 0) t->byte_tok[b] = (int32_t)i;
    }
    if ((ty == MEMRA_TT_CONTROL || ty == MEMRA_TT_USER_DEFINED || ty == MEMRA_TT_UNKNOWN) && l > 0)
      t->special[t->n_special++] = (int32_t)i;
  }
  if (sort_specials(t)) goto oom;

  if (n_merges) {
    t->merge_result = memra_malloc(n_merges * sizeof *t->merge_result);
    if (!t->merge_result || memra_pairmap_init(&t->merges, n_merges)) goto oom;
    char buf[1024];
    for (uint64_t r = 0; r < n_merges; r++) {
      memra_str s = memra_gguf_arr_str(g, kv_mg, r);
      const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
      if (!sp || s.len - 1 > sizeof buf) {
        memra_tokenizer_free(t);
        return memra_errf(err, MEMRA_E_FORMAT,
                          "tokenizer.ggml.merges[%llu]: expected 'left right', got %llu bytes",
                          (unsigned long long)r, (unsigned long long)s.len);
      }
      size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
      int32_t a = memra_strmap_get(&t->tok_map, s.ptr, ll);
      int32_t b = memra_strmap_get(&t->tok_map, sp + 1, rl);
      memcpy(buf, s.ptr, ll);
      memcpy(buf + ll, sp + 1, rl);
      int32_t c = memra_strmap_get(&t->tok_map, buf, ll + rl);
      t->merge_result[r] = c;
      /* A merge whose parts or result are not tokens can never apply: skip it. */
      if (a >= 0 && b >= 0 && c >= 0) memra_pairmap_put(&t->merges, a, b, (int32_t)r);
    }
    t->n_merges = (int32_t)n_merges;
  }

  if ((st = get_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err)) ||
      (st = get_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err)) ||
      (st = get_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot, err)) ||
      (st = get_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom, err)) ||
      (st = get_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err)) ||
      (st = get_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad, err)) ||
      (st = get_flag(g, "tokenizer.ggml.add_bos_token", kind == MEMRA_TOK_SPM, &t->add_bos, err)) ||
      (st = get_flag(g, "tokenizer.ggml.add_eos_token", false, &t->add_eos, err)) ||
      (st = get_flag(g, "tokenizer.ggml.add_space_prefix", kind == MEMRA_TOK_SPM,
                     &t->add_space_prefix, err))) {
    memra_tokenizer_free(t);
    return st;
  }
  if (kind == MEMRA_TOK_SPM && t->unk < 0) {
    int32_t u = memra_strmap_get(&t->tok_map, "<unk>", 5);
    if (u >= 0 && t->types[u] == MEMRA_TT_UNKNOWN) t->unk = u;
  }
  /* End of generation: the declared ids, and control tokens that end a turn by name. */
  if (t->eos >= 0) t->eog[t->eos] = 1;
  if (t->eot >= 0) t->eog[t->eot] = 1;
  if (t->eom >= 0) t->eog[t->eom] = 1;
  for (size_t k = 0; k < sizeof EOG_TEXTS / sizeof EOG_TEXTS[0]; k++) {
    int32_t id = memra_strmap_get(&t->tok_map, EOG_TEXTS[k], strlen(EOG_TEXTS[k]));
    if (id >= 0 && t->types[id] == MEMRA_TT_CONTROL) t->eog[id] = 1;
  }
  if ((st = memra_pretok_init(t, err))) {
    memra_tokenizer_free(t);
    return st;
  }
  *out = t;
  return MEMRA_OK;
oom:
  memra_tokenizer_free(t);
  return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory for %llu tokens",
                    (unsigned long long)n);
}
