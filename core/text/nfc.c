/* nfc.c — Unicode NFC (canonical decomposition, canonical ordering, canonical
 * composition; UAX #15), for vocabularies whose normalizer is NFC (Qwen). Bytes that are
 * not valid UTF-8 pass through unchanged and block reordering/composition across them. */
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/text/nfc_tables.h"
#include "core/text/tok_internal.h"
#include "core/text/utf8.h"

#define RAW_BYTE 0x80000000u /* a code point slot holding an invalid byte */
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

enum {
  SBASE = 0xAC00,
  LBASE = 0x1100,
  VBASE = 0x1161,
  TBASE = 0x11A7,
  LCOUNT = 19,
  VCOUNT = 21,
  TCOUNT = 28,
  NCOUNT = VCOUNT * TCOUNT,
  SCOUNT = LCOUNT * NCOUNT
};

static uint8_t ccc_of(uint32_t cp) {
  size_t lo = 0, hi = N_ELEMS(NFC_CCC);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (NFC_CCC[mid].cp == cp) return NFC_CCC[mid].ccc;
    if (NFC_CCC[mid].cp < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

static const nfc_decomp *decomp_of(uint32_t cp) {
  size_t lo = 0, hi = N_ELEMS(NFC_DECOMP);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (NFC_DECOMP[mid].cp == cp) return &NFC_DECOMP[mid];
    if (NFC_DECOMP[mid].cp < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
    return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
  if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
      b < TBASE + TCOUNT)
    return a + (b - TBASE);
  size_t lo = 0, hi = N_ELEMS(NFC_COMP);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const nfc_comp *c = &NFC_COMP[mid];
    if (c->a == a && c->b == b) return c->c;
    if (c->a < a || (c->a == a && c->b < b))
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

static uint8_t ccc_slot(uint32_t v) { return v & RAW_BYTE ? 0 : ccc_of(v); }

memra_status memra_nfc(const char *s, size_t len, char **out, size_t *out_len, memra_err *err) {
  /* A full decomposition is at most 18 code points (U+FDFA is compatibility-only; the
   * canonical maximum is 4), so 4 slots per input byte always suffice. */
  uint32_t *cp = memra_malloc((len ? len : 1) * 4 * sizeof *cp);
  if (!cp) return memra_errf(err, MEMRA_E_OOM, "nfc: out of memory for %zu bytes", len);
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t c;
    size_t l = memra_utf8_valid_len((const uint8_t *)s + i, len - i, &c);
    if (!l) {
      cp[n++] = RAW_BYTE | (uint8_t)s[i++];
      continue;
    }
    i += l;
    if (c >= SBASE && c < SBASE + SCOUNT) {
      uint32_t si = c - SBASE;
      cp[n++] = LBASE + si / NCOUNT;
      cp[n++] = VBASE + (si % NCOUNT) / TCOUNT;
      if (si % TCOUNT) cp[n++] = TBASE + si % TCOUNT;
      continue;
    }
    const nfc_decomp *d = c < 0xC0 ? NULL : decomp_of(c);
    if (!d) {
      cp[n++] = c;
      continue;
    }
    for (int k = 0; k < d->len; k++)
      cp[n++] = NFC_POOL[d->off + k];
  }
  /* Canonical ordering: stable insertion sort of each run of non-starters by class. */
  for (size_t i = 1; i < n; i++) {
    uint8_t ci = ccc_slot(cp[i]);
    if (!ci) continue;
    size_t j = i;
    uint32_t v = cp[i];
    while (j > 0) {
      uint8_t cj = ccc_slot(cp[j - 1]);
      if (cj == 0 || cj <= ci) break;
      cp[j] = cp[j - 1];
      j--;
    }
    cp[j] = v;
  }
  /* Canonical composition: each character joins the last starter unless blocked. */
  size_t w = 0;
  long starter = -1;
  uint8_t last_ccc = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = cp[i];
    uint8_t cc = ccc_slot(c);
    if (starter >= 0 && !(c & RAW_BYTE)) {
      bool blocked = (size_t)starter != w - 1 && (last_ccc == 0 || last_ccc >= cc);
      uint32_t comp = blocked ? 0 : compose(cp[starter], c);
      if (comp) {
        cp[starter] = comp;
        continue;
      }
    }
    if (cc == 0) starter = c & RAW_BYTE ? -1 : (long)w;
    last_ccc = cc;
    cp[w++] = c;
  }
  char *o = memra_malloc(w * 4 + 1); /* excluded composites may stay decomposed: longer */
  if (!o) {
    memra_free(cp);
    return memra_errf(err, MEMRA_E_OOM, "nfc: out of memory for %zu bytes", len);
  }
  size_t ol = 0;
  for (size_t i = 0; i < w; i++) {
    if (cp[i] & RAW_BYTE)
      o[ol++] = (char)(cp[i] & 0xFF);
    else
      ol += memra_utf8_encode(cp[i], o + ol);
  }
  memra_free(cp);
  *out = o, *out_len = ol;
  return MEMRA_OK;
}
