/* gguf_touch.c — see gguf_touch.h. Checks that lookups agree with the tables as it goes. */
#include "tools/fuzz/gguf_touch.h"

#include <math.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf_dump.h"

static uint64_t mix(uint64_t h, const void *p, uint64_t n) {
  const uint8_t *b = p;
  for (uint64_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* A NUL-terminated copy of s, or NULL when s holds a NUL (no C string can name it). */
static char *cstr(memra_str s) {
  if (s.len && memchr(s.ptr, 0, (size_t)s.len)) return NULL;
  return memra_strndup(s.ptr, (size_t)s.len);
}

static uint64_t touch_kv(const memra_gguf *g, const memra_gguf_kv *kv, uint64_t h, int *bad) {
  h = mix(h, kv->key.ptr, kv->key.len);
  char *key = cstr(kv->key);
  if (key) {
    /* With duplicates rejected at open, the lookup must find this very kv. */
    if (memra_gguf_kv_find(g, key) != kv) *bad = 1;
    memra_err err;
    uint32_t u;
    int64_t i;
    float f;
    bool b;
    memra_str s;
    uint64_t n;
    const memra_gguf_kv *akv;
    if (memra_gguf_get_u32(g, key, &u, &err) == MEMRA_OK) h = mix(h, &u, 4);
    if (memra_gguf_get_i64(g, key, &i, &err) == MEMRA_OK) h = mix(h, &i, 8);
    if (memra_gguf_get_f32(g, key, &f, &err) == MEMRA_OK) h = mix(h, &f, 4);
    if (memra_gguf_get_bool(g, key, &b, &err) == MEMRA_OK) h = mix(h, &b, 1);
    if (memra_gguf_get_str(g, key, &s, &err) == MEMRA_OK) h = mix(h, s.ptr, s.len);
    if (memra_gguf_get_arr(g, key, -1, &n, &akv, &err) == MEMRA_OK && (akv != kv || n != kv->v.arr.n))
      *bad = 1;
    memra_free(key);
  }
  if (kv->type == MEMRA_GGUF_STRING) h = mix(h, kv->v.str.ptr, kv->v.str.len);
  if (kv->type != MEMRA_GGUF_ARRAY) return mix(h, &kv->v, sizeof kv->v);
  for (uint64_t j = 0; j < kv->v.arr.n; ++j) {
    if (kv->v.arr.elem_type == MEMRA_GGUF_STRING) {
      memra_str s = memra_gguf_arr_str(g, kv, j);
      h = mix(h, s.ptr, s.len);
    } else {
      double d = memra_gguf_arr_f64(kv, j);
      int64_t i = memra_gguf_arr_i64(kv, j);
      h = mix(h, &i, 8);
      if (!isnan(d)) h = mix(h, &d, 8);
    }
  }
  return h;
}

uint64_t memra_gguf_fuzz_touch(const memra_gguf *g, FILE *sink) {
  uint64_t h = 0xcbf29ce484222325ull;
  int bad = 0;
  for (uint64_t i = 0; i < memra_gguf_n_kv(g); ++i) h = touch_kv(g, memra_gguf_kv_at(g, i), h, &bad);
  if (memra_gguf_kv_at(g, memra_gguf_n_kv(g)) != NULL) bad = 1;
  const uint8_t *lo = memra_gguf_base(g), *hi = lo + memra_gguf_size(g);
  for (uint64_t i = 0; i < memra_gguf_n_tensors(g); ++i) {
    const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
    h = mix(h, t->name.ptr, t->name.len);
    h = mix(h, t->ne, sizeof t->ne);
    if (t->nbytes) {
      const uint8_t *d = t->data;
      if (d < lo || d > hi || t->nbytes > (uint64_t)(hi - d)) bad = 1;
      else h = mix(h, d, t->nbytes); /* ASan flags any byte outside the input */
    }
    char *name = cstr(t->name);
    if (name && memra_gguf_tensor_find(g, name) != t) bad = 1;
    memra_free(name);
  }
  if (sink && memra_gguf_dump(g, sink, true) != MEMRA_OK) bad = 1;
  return bad ? 0 : (h | 1);
}
