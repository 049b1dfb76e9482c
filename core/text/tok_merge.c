/* tok_merge.c — the merge loops: byte-level BPE by merge rank, SPM by rank or score.
 * Both run in O(n log n) per word with a binary heap of candidate pairs. */
#include <math.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/text/tok_internal.h"
#include "core/text/utf8.h"

int memra_idvec_push(memra_idvec *v, int32_t id) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 64;
    int32_t *p = memra_realloc(v->v, cap * sizeof *p);
    if (!p) return -1;
    v->v = p, v->cap = cap;
  }
  v->v[v->n++] = id;
  return 0;
}

typedef struct sym {
  int32_t id; /* token of the symbol's text, -1 if none */
  int32_t prev, next;
  uint32_t off, len; /* into the working text; len 0: merged away */
} sym;

typedef struct cand {
  double key; /* lower merges first: the rank, or minus the score */
  int32_t left, right;
  int32_t result; /* the merged token */
  uint32_t len;   /* left.len + right.len when pushed: detects stale entries */
} cand;

typedef struct heap {
  cand *v;
  size_t n, cap;
} heap;

static int cand_less(const cand *a, const cand *b) {
  if (a->key != b->key) return a->key < b->key;
  return a->left < b->left; /* leftmost first among equals, as HF and sentencepiece */
}

static int heap_push(heap *h, cand c) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 64;
    cand *p = memra_realloc(h->v, cap * sizeof *p);
    if (!p) return -1;
    h->v = p, h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!cand_less(&c, &h->v[up])) break;
    h->v[i] = h->v[up];
    i = up;
  }
  h->v[i] = c;
  return 0;
}

static cand heap_pop(heap *h) {
  cand top = h->v[0], last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const cand *mv = &last;
    if (l < h->n && cand_less(&h->v[l], mv)) m = l, mv = &h->v[l];
    if (r < h->n && cand_less(&h->v[r], mv)) m = r;
    if (m == i) break;
    h->v[i] = h->v[m];
    i = m;
  }
  if (h->n) h->v[i] = last;
  return top;
}

/* Pushes the pair (l, r) if the vocabulary can merge it. by_rank: the merges table;
 * otherwise the score of the concatenated text's token (NORMAL tokens only: HF's
 * merges never produce special or byte tokens). */
static int try_pair(const memra_tokenizer *t, const char *text, const sym *s, int32_t l, int32_t r,
                    bool by_rank, heap *h) {
  if (l < 0 || r < 0) return 0;
  cand c = {0, l, r, -1, s[l].len + s[r].len};
  if (by_rank) {
    if (s[l].id < 0 || s[r].id < 0) return 0;
    int32_t rank = memra_pairmap_get(&t->merges, s[l].id, s[r].id);
    if (rank < 0) return 0;
    c.key = rank;
    c.result = t->merge_result[rank];
  } else {
    int32_t id = memra_strmap_get(&t->tok_map, text + s[l].off, c.len);
    if (id < 0) return 0;
    int32_t ty = t->types ? t->types[id] : MEMRA_TT_NORMAL;
    if (ty != MEMRA_TT_NORMAL && ty != MEMRA_TT_UNDEFINED) return 0;
    c.key = t->scores ? -(double)t->scores[id] : 0.0;
    c.result = id;
  }
  return heap_push(h, c);
}

/* Splits text into characters and merges them; the surviving symbols stay in s. */
static memra_status merge_word(const memra_tokenizer *t, const char *text, size_t len, bool by_rank,
                               sym **out_s, size_t *out_n, memra_err *err) {
  sym *s = memra_malloc((len ? len : 1) * sizeof *s);
  heap h = {0};
  if (!s) return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory for %zu bytes", len);
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    size_t cl = memra_utf8_char_len((const uint8_t *)text + i, len - i);
    s[n].off = (uint32_t)i, s[n].len = (uint32_t)cl;
    s[n].id = memra_strmap_get(&t->tok_map, text + i, cl);
    s[n].prev = (int32_t)n - 1, s[n].next = i + cl < len ? (int32_t)n + 1 : -1;
    n++, i += cl;
  }
  for (size_t i = 0; i + 1 < n; i++)
    if (try_pair(t, text, s, (int32_t)i, (int32_t)i + 1, by_rank, &h)) goto oom;
  while (h.n) {
    cand c = heap_pop(&h);
    sym *l = &s[c.left], *r = &s[c.right];
    if (l->len == 0 || r->len == 0 || l->next != c.right || l->len + r->len != c.len) continue;
    l->len += r->len;
    l->id = c.result;
    r->len = 0;
    l->next = r->next;
    if (r->next >= 0) s[r->next].prev = c.left;
    if (try_pair(t, text, s, l->prev, c.left, by_rank, &h)) goto oom;
    if (try_pair(t, text, s, c.left, l->next, by_rank, &h)) goto oom;
  }
  memra_free(h.v);
  *out_s = s, *out_n = n;
  return MEMRA_OK;
oom:
  memra_free(h.v);
  memra_free(s);
  return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory merging %zu bytes", len);
}

memra_status memra_bpe_encode(const memra_tokenizer *t, const char *text, size_t len,
                              memra_idvec *out, memra_err *err) {
  /* Each byte shown as its GPT-2 code point: at most 2 bytes of UTF-8 per byte. */
  char stackbuf[512];
  char *m = len * 2 <= sizeof stackbuf ? stackbuf : memra_malloc(len * 2);
  if (!m) return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory for %zu bytes", len);
  size_t ml = 0;
  for (size_t i = 0; i < len; i++)
    ml += memra_utf8_encode(memra_byte_to_cp((uint8_t)text[i]), m + ml);
  memra_status st = MEMRA_OK;
  int32_t whole = t->ignore_merges ? memra_strmap_get(&t->tok_map, m, ml) : -1;
  if (whole >= 0) {
    if (memra_idvec_push(out, whole)) st = memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory");
  } else {
    sym *s = NULL;
    size_t n = 0;
    st = merge_word(t, m, ml, true, &s, &n, err);
    for (size_t i = 0; st == MEMRA_OK && i < n; i++) {
      if (s[i].len == 0) continue;
      int32_t id = s[i].id;
      if (id < 0) id = t->unk; /* a vocabulary without this byte: the unknown token */
      if (id >= 0 && memra_idvec_push(out, id))
        st = memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory");
    }
    memra_free(s);
  }
  if (m != stackbuf) memra_free(m);
  return st;
}

memra_status memra_spm_encode(const memra_tokenizer *t, const char *text, size_t len,
                              memra_idvec *out, memra_err *err) {
  sym *s = NULL;
  size_t n = 0;
  memra_status st = merge_word(t, text, len, t->n_merges > 0, &s, &n, err);
  if (st) return st;
  for (size_t i = 0; i < n; i++) {
    if (s[i].len == 0) continue;
    if (s[i].id >= 0) {
      if (memra_idvec_push(out, s[i].id)) goto oom;
      continue;
    }
    /* Byte fallback: every byte as <0xNN>, or the unknown token if one is missing. */
    bool all = true;
    for (uint32_t k = 0; k < s[i].len; k++)
      all &= t->byte_tok[(uint8_t)text[s[i].off + k]] >= 0;
    if (all) {
      for (uint32_t k = 0; k < s[i].len; k++)
        if (memra_idvec_push(out, t->byte_tok[(uint8_t)text[s[i].off + k]])) goto oom;
    } else if (t->unk >= 0) {
      if (memra_idvec_push(out, t->unk)) goto oom;
    }
  }
  memra_free(s);
  return MEMRA_OK;
oom:
  memra_free(s);
  return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory");
}
