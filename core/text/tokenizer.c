/* tokenizer.c — special-token splitting, BOS/EOS, dispatch to SPM or BPE, accessors. */
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/text/tok_internal.h"

void memra_tokenizer_free(memra_tokenizer *t) {
  if (!t) return;
  memra_pretok_free(t);
  memra_strmap_free(&t->tok_map);
  memra_pairmap_free(&t->merges);
  memra_free(t->arena);
  memra_free(t->tok_off);
  memra_free(t->tok_len);
  memra_free(t->pc_off);
  memra_free(t->pc_len);
  memra_free(t->scores);
  memra_free(t->types);
  memra_free(t->merge_result);
  memra_free(t->special);
  memra_free(t->sp_len);
  memra_strmap_free(&t->sp_map);
  memra_free(t->eog);
  memra_free(t);
}

int32_t memra_tokenizer_n_vocab(const memra_tokenizer *t) { return t->n_vocab; }
int32_t memra_tokenizer_bos(const memra_tokenizer *t) { return t->bos; }
int32_t memra_tokenizer_eos(const memra_tokenizer *t) { return t->eos; }
bool memra_tokenizer_add_bos(const memra_tokenizer *t) { return t->add_bos; }

bool memra_tokenizer_is_eog(const memra_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->n_vocab && t->eog[id];
}

int32_t memra_tokenizer_find(const memra_tokenizer *t, const char *text, size_t len) {
  return text ? memra_strmap_get(&t->tok_map, text, len) : -1;
}

bool memra_token_is_special(const memra_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->n_vocab &&
         (t->types[id] == MEMRA_TT_CONTROL || t->types[id] == MEMRA_TT_UNKNOWN);
}

const char *memra_token_piece(const memra_tokenizer *t, int32_t id, size_t *len) {
  if (id < 0 || id >= t->n_vocab) {
    if (len) *len = 0;
    return NULL;
  }
  if (len) *len = t->pc_len[id];
  return t->arena + t->pc_off[id];
}

/* The special token whose text starts text[0..len), longest first; -1 if none. */
static int32_t match_special(const memra_tokenizer *t, const char *text, size_t len,
                             bool parse_special) {
  uint8_t b = (uint8_t)text[0];
  for (uint32_t k = t->sp_len_off[b]; k < t->sp_len_off[b + 1]; k++) {
    uint32_t l = t->sp_len[k];
    if (l > len) continue;
    int32_t id = memra_strmap_get(&t->sp_map, text, l);
    if (id < 0) continue;
    if (!parse_special && t->types[id] != MEMRA_TT_USER_DEFINED) continue;
    return id;
  }
  return -1;
}

/* Encodes a run of ordinary text (between special tokens). */
static memra_status encode_plain(const memra_tokenizer *t, const char *text, size_t len,
                                 bool after_special, memra_idvec *out, memra_err *err) {
  memra_status st = MEMRA_OK;
  char *norm = NULL;
  size_t nlen = 0;
  if (t->nfc) {
    if ((st = memra_nfc(text, len, &norm, &nlen, err))) return st;
    text = norm, len = nlen;
  }
  if (t->kind == MEMRA_TOK_SPM) {
    /* Spaces become U+2581; a space is prepended at the start and after a special token. */
    size_t extra = t->add_space_prefix && after_special ? 1 : 0, nsp = 0;
    for (size_t i = 0; i < len; i++)
      nsp += text[i] == ' ';
    size_t wl = len + 2 * nsp + 3 * extra;
    char *w = memra_malloc(wl ? wl : 1);
    if (!w) {
      memra_free(norm);
      return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory for %zu bytes", len);
    }
    size_t o = 0;
    if (extra) memcpy(w, "\xE2\x96\x81", 3), o = 3;
    for (size_t i = 0; i < len; i++) {
      if (text[i] == ' ')
        memcpy(w + o, "\xE2\x96\x81", 3), o += 3;
      else
        w[o++] = text[i];
    }
    st = memra_spm_encode(t, w, o, out, err);
    memra_free(w);
  } else {
    size_t *offs = NULL, n = 0;
    st = memra_pretok_split(t, text, len, &offs, &n, err);
    for (size_t i = 0; st == MEMRA_OK && i < n; i++)
      st = memra_bpe_encode(t, text + offs[2 * i], offs[2 * i + 1], out, err);
    memra_free(offs);
  }
  memra_free(norm);
  return st;
}

memra_status memra_tokenize(const memra_tokenizer *t, const char *text, size_t len, bool add_bos,
                            bool parse_special, int32_t **ids, size_t *n_ids, memra_err *err) {
  memra_idvec out = {0};
  memra_status st = MEMRA_OK;
  *ids = NULL, *n_ids = 0;
  if (!text && len)
    return memra_errf(err, MEMRA_E_INVALID, "tokenize: NULL text of length %zu", len);
  if (add_bos && t->add_bos && t->bos >= 0 && memra_idvec_push(&out, t->bos)) goto oom;
  bool after_special = true;
  size_t start = 0;
  for (size_t i = 0; i < len && st == MEMRA_OK;) {
    int32_t sp = t->n_special ? match_special(t, text + i, len - i, parse_special) : -1;
    if (sp < 0) {
      i++;
      continue;
    }
    if (i > start) st = encode_plain(t, text + start, i - start, after_special, &out, err);
    if (st) break;
    if (memra_idvec_push(&out, sp)) goto oom;
    after_special = true;
    i += t->tok_len[sp];
    start = i;
  }
  if (st == MEMRA_OK && start < len)
    st = encode_plain(t, text + start, len - start, after_special, &out, err);
  if (st) {
    memra_free(out.v);
    return st;
  }
  if (add_bos && t->add_eos && t->eos >= 0 && memra_idvec_push(&out, t->eos)) goto oom;
  if (!out.v && !(out.v = memra_malloc(sizeof(int32_t)))) goto oom; /* never NULL on success */
  *ids = out.v, *n_ids = out.n;
  return MEMRA_OK;
oom:
  memra_free(out.v);
  return memra_errf(err, MEMRA_E_OOM, "tokenize: out of memory for %zu bytes of text", len);
}
