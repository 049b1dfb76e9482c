#include "core/text/strmap.h"

#include <string.h>

#include "core/base/alloc.h"

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

static size_t cap_for(size_t n) {
  size_t c = 16;
  while (c < 2 * n + 2)
    c *= 2;
  return c;
}

int memra_strmap_init(memra_strmap *m, size_t n) {
  memset(m, 0, sizeof *m);
  m->cap = cap_for(n);
  m->keys = memra_calloc(m->cap, sizeof *m->keys);
  m->klen = memra_calloc(m->cap, sizeof *m->klen);
  m->vals = memra_calloc(m->cap, sizeof *m->vals);
  if (!m->keys || !m->klen || !m->vals) {
    memra_strmap_free(m);
    return -1;
  }
  return 0;
}

void memra_strmap_free(memra_strmap *m) {
  memra_free(m->keys);
  memra_free(m->klen);
  memra_free(m->vals);
  memset(m, 0, sizeof *m);
}

void memra_strmap_put(memra_strmap *m, const char *k, size_t len, int32_t v) {
  size_t i = fnv1a(k, len) & (m->cap - 1);
  while (m->keys[i]) {
    if (m->klen[i] == len && memcmp(m->keys[i], k, len) == 0) return;
    i = (i + 1) & (m->cap - 1);
  }
  m->keys[i] = k ? k : "";
  m->klen[i] = (uint32_t)len;
  m->vals[i] = v;
}

int32_t memra_strmap_get(const memra_strmap *m, const char *k, size_t len) {
  if (!m->cap) return -1;
  size_t i = fnv1a(k, len) & (m->cap - 1);
  while (m->keys[i]) {
    if (m->klen[i] == len && memcmp(m->keys[i], k, len) == 0) return m->vals[i];
    i = (i + 1) & (m->cap - 1);
  }
  return -1;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

int memra_pairmap_init(memra_pairmap *m, size_t n) {
  memset(m, 0, sizeof *m);
  m->cap = cap_for(n);
  m->keys = memra_malloc(m->cap * sizeof *m->keys);
  m->vals = memra_calloc(m->cap, sizeof *m->vals);
  if (!m->keys || !m->vals) {
    memra_pairmap_free(m);
    return -1;
  }
  memset(m->keys, 0xFF, m->cap * sizeof *m->keys);
  return 0;
}

void memra_pairmap_free(memra_pairmap *m) {
  memra_free(m->keys);
  memra_free(m->vals);
  memset(m, 0, sizeof *m);
}

void memra_pairmap_put(memra_pairmap *m, int32_t a, int32_t b, int32_t v) {
  uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
  size_t i = mix(k) & (m->cap - 1);
  while (m->keys[i] != UINT64_MAX) {
    if (m->keys[i] == k) return;
    i = (i + 1) & (m->cap - 1);
  }
  m->keys[i] = k;
  m->vals[i] = v;
}

int32_t memra_pairmap_get(const memra_pairmap *m, int32_t a, int32_t b) {
  if (!m->cap) return -1;
  uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
  size_t i = mix(k) & (m->cap - 1);
  while (m->keys[i] != UINT64_MAX) {
    if (m->keys[i] == k) return m->vals[i];
    i = (i + 1) & (m->cap - 1);
  }
  return -1;
}
