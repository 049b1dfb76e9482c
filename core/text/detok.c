/* detok.c — the stream-safe detokenizer: token pieces are fed byte by byte through a small
 * UTF-8 state so that only whole characters leave; invalid sequences become U+FFFD, one
 * per maximal subpart as Rust's from_utf8_lossy (HF's ByteLevel decoder) for byte-level
 * vocabularies, one per byte as sentencepiece for SPM ones. */
#include <string.h>

#include "core/text/tok_internal.h"
#include "core/text/utf8.h"

void memra_detok_init(memra_detok *d) {
  memset(d, 0, sizeof *d);
  d->first = true;
}

static void put(const char *s, size_t n, char *out, size_t cap, size_t *o) {
  if (cap == 0) return;
  if (n > cap - 1 - *o) n = cap - 1 - *o; /* out is full: the rest is dropped */
  memcpy(out + *o, s, n);
  *o += n;
}

/* Emits what the pending bytes resolve to; keeps a still-completable prefix. */
static void drain(memra_detok *d, char *out, size_t cap, size_t *o) {
  while (d->n_pending) {
    const uint8_t *p = (const uint8_t *)d->pending;
    size_t l = memra_utf8_valid_len(p, d->n_pending, NULL);
    if (l) {
      put(d->pending, l, out, cap, o);
    } else if (memra_utf8_prefix_ok(p, d->n_pending)) {
      return;
    } else {
      l = d->per_byte ? 1 : memra_utf8_invalid_len(p, d->n_pending);
      put("\xEF\xBF\xBD", 3, out, cap, o);
    }
    memmove(d->pending, d->pending + l, d->n_pending - l);
    d->n_pending -= l;
  }
}

size_t memra_detok_push(memra_detok *d, const memra_tokenizer *t, int32_t id, char *out,
                        size_t cap) {
  size_t n = 0, o = 0;
  const char *s = memra_token_piece(t, id, &n);
  if (cap) out[0] = '\0';
  if (!s) return 0;
  /* HF's Strip decoder for SPM vocabularies that prepend a space: one leading space goes. */
  if (d->first && t->kind == MEMRA_TOK_SPM && t->add_space_prefix && n && s[0] == ' ') s++, n--;
  d->first = false;
  d->per_byte = t->kind == MEMRA_TOK_SPM;
  for (size_t i = 0; i < n; i++) {
    uint8_t b = (uint8_t)s[i];
    if (d->n_pending == 0 && b < 0x80) { /* the common case: ASCII goes straight out */
      put(s + i, 1, out, cap, &o);
      continue;
    }
    d->pending[d->n_pending++] = (char)b;
    drain(d, out, cap, &o);
  }
  if (cap) out[o] = '\0';
  return o;
}

size_t memra_detok_flush(memra_detok *d, char *out, size_t cap) {
  size_t o = 0;
  if (cap) out[0] = '\0';
  /* An incomplete tail: one U+FFFD, or one per byte for SPM. */
  for (size_t i = 0; i < (d->per_byte ? d->n_pending : d->n_pending ? 1 : 0); i++)
    put("\xEF\xBF\xBD", 3, out, cap, &o);
  d->n_pending = 0;
  if (cap) out[o] = '\0';
  return o;
}
