/* gguf_touch.c — see gguf_touch.h. Checks that lookups agree with the tables as it goes. */
#include "tools/fuzz/gguf_touch.h"

#include <math.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf_dump.h"

static uint64_t mix(uint64_t h, const void *p, uint64_t n) {
  const uint8_t *b = p;
  for (uint64_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 0x100000001b3ull;
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
    if (memra_gguf_get_arr(g, key, -1, &n, &akv, &err) == MEMRA_OK &&
        (akv != kv || n != kv->v.arr.n))
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
  for (uint64_t i = 0; i < memra_gguf_n_kv(g); ++i)
    h = touch_kv(g, memra_gguf_kv_at(g, i), h, &bad);
  if (memra_gguf_kv_at(g, memra_gguf_n_kv(g)) != NULL) bad = 1;
  const uint8_t *lo = memra_gguf_base(g), *hi = lo + memra_gguf_size(g);
  for (uint64_t i = 0; i < memra_gguf_n_tensors(g); ++i) {
    const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
    h = mix(h, t->name.ptr, t->name.len);
    h = mix(h, t->ne, sizeof t->ne);
    if (t->nbytes) {
      const uint8_t *d = t->data;
      if (d < lo || d > hi || t->nbytes > (uint64_t)(hi - d))
        bad = 1;
      else
        h = mix(h, d, t->nbytes); /* ASan flags any byte outside the input */
    }
    char *name = cstr(t->name);
    if (name && memra_gguf_tensor_find(g, name) != t) bad = 1;
    memra_free(name);
  }
  if (sink && memra_gguf_dump(g, sink, true) != MEMRA_OK) bad = 1;
  return bad ? 0 : (h | 1);
}

static bool has_nul(memra_str s) { return s.len && memchr(s.ptr, 0, (size_t)s.len); }

static int elem_bytes(int32_t t) {
  switch (t) {
  case MEMRA_GGUF_U8:
  case MEMRA_GGUF_I8:
  case MEMRA_GGUF_BOOL: return 1;
  case MEMRA_GGUF_U16:
  case MEMRA_GGUF_I16: return 2;
  case MEMRA_GGUF_U32:
  case MEMRA_GGUF_I32:
  case MEMRA_GGUF_F32: return 4;
  default: return 8;
  }
}

/* Re-packs a widened scalar into its file type (the writer takes native bytes). */
static void narrow(const memra_gguf_kv *kv, uint8_t out[8]) {
  memset(out, 0, 8);
  switch (kv->type) {
  case MEMRA_GGUF_F32: {
    float f = (float)kv->v.f64;
    memcpy(out, &f, 4);
  } break;
  case MEMRA_GGUF_F64: memcpy(out, &kv->v.f64, 8); break;
  default: memcpy(out, &kv->v.u64, 8); break; /* little-endian: low bytes first */
  }
}

static bool copy_kv(const memra_gguf *g, memra_gguf_writer *w, const memra_gguf_kv *kv,
                    const char *key, int *skip) {
  if (kv->type == MEMRA_GGUF_STRING)
    return memra_gguf_writer_set_strn(w, key, kv->v.str.ptr, kv->v.str.len) == MEMRA_OK;
  if (kv->type != MEMRA_GGUF_ARRAY) {
    uint8_t b[8];
    narrow(kv, b);
    return memra_gguf_writer_set_val(w, key, kv->type, b) == MEMRA_OK;
  }
  uint64_t n = kv->v.arr.n;
  if (kv->v.arr.elem_type != MEMRA_GGUF_STRING) {
    if (kv->v.arr.elem_type == MEMRA_GGUF_BOOL)
      for (uint64_t j = 0; j < n; ++j)
        if (kv->v.arr.data[j] > 1) return *skip = 1, true; /* the writer normalizes bools */
    return memra_gguf_writer_set_arr(w, key, kv->v.arr.elem_type, kv->v.arr.data, n) == MEMRA_OK;
  }
  char **strs = memra_calloc((size_t)n, sizeof *strs);
  bool ok = strs != NULL;
  for (uint64_t j = 0; ok && j < n; ++j) {
    memra_str s = memra_gguf_arr_str(g, kv, j);
    if (has_nul(s))
      *skip = 1, ok = false;
    else
      ok = (strs[j] = memra_strndup(s.ptr, (size_t)s.len)) != NULL;
  }
  if (ok) ok = memra_gguf_writer_set_arr_str(w, key, (const char *const *)strs, n) == MEMRA_OK;
  for (uint64_t j = 0; strs && j < n; ++j)
    memra_free(strs[j]);
  memra_free(strs);
  return ok || *skip;
}

static bool same_kv(const memra_gguf *a, const memra_gguf_kv *x, const memra_gguf *b,
                    const memra_gguf_kv *y) {
  if (x->key.len != y->key.len || memcmp(x->key.ptr, y->key.ptr, (size_t)x->key.len) ||
      x->type != y->type)
    return false;
  if (x->type == MEMRA_GGUF_STRING)
    return x->v.str.len == y->v.str.len &&
           !memcmp(x->v.str.ptr, y->v.str.ptr, (size_t)x->v.str.len);
  if (x->type != MEMRA_GGUF_ARRAY) return !memcmp(&x->v, &y->v, sizeof x->v);
  if (x->v.arr.elem_type != y->v.arr.elem_type || x->v.arr.n != y->v.arr.n) return false;
  if (x->v.arr.elem_type != MEMRA_GGUF_STRING)
    return x->v.arr.n == 0 ||
           !memcmp(x->v.arr.data, y->v.arr.data,
                   (size_t)(x->v.arr.n * (uint64_t)elem_bytes(x->v.arr.elem_type)));
  for (uint64_t j = 0; j < x->v.arr.n; ++j) {
    memra_str s = memra_gguf_arr_str(a, x, j), t = memra_gguf_arr_str(b, y, j);
    if (s.len != t.len || (s.len && memcmp(s.ptr, t.ptr, (size_t)s.len))) return false;
  }
  return true;
}

static bool same_tensor(const memra_gguf_tensor *x, const memra_gguf_tensor *y) {
  return x->name.len == y->name.len && !memcmp(x->name.ptr, y->name.ptr, (size_t)x->name.len) &&
         x->type == y->type && x->n_dims == y->n_dims && !memcmp(x->ne, y->ne, sizeof x->ne) &&
         x->nbytes == y->nbytes && (x->nbytes == 0 || !memcmp(x->data, y->data, (size_t)x->nbytes));
}

memra_status memra_gguf_copy_edited(const memra_gguf *g, const memra_gguf_edit *e, uint8_t **out,
                                    uint64_t *size, memra_err *err) {
  *out = NULL, *size = 0;
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  if (!w) return memra_errf(err, MEMRA_E_OOM, "copy: out of memory");
  memra_gguf_writer_set_version(w, memra_gguf_version(g));
  int skip = 0;
  bool ok = true, done = false;
  const memra_gguf_kv *al = memra_gguf_kv_find(g, "general.alignment");
  if (al && al->type != MEMRA_GGUF_U32) skip = 1;
  for (uint64_t i = 0; ok && !skip && i < memra_gguf_n_kv(g); ++i) {
    const memra_gguf_kv *kv = memra_gguf_kv_at(g, i);
    char *key = cstr(kv->key);
    if (!key) {
      skip = 1;
    } else if (e->key && !strcmp(key, e->key)) {
      ok = memra_gguf_writer_set_val(w, key, e->type, e->val) == MEMRA_OK;
      done = true;
    } else {
      ok = copy_kv(g, w, kv, key, &skip);
    }
    memra_free(key);
  }
  if (ok && !skip && e->key && !done)
    ok = memra_gguf_writer_set_val(w, e->key, e->type, e->val) == MEMRA_OK;
  for (uint64_t i = 0; ok && !skip && i < memra_gguf_n_tensors(g); ++i) {
    const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
    char *name = cstr(t->name);
    if (!name) {
      skip = 1;
    } else {
      const bool re = e->tensor && !strcmp(name, e->tensor);
      ok = memra_gguf_writer_add_tensor(w, name, t->type, re ? e->n_dims : t->n_dims,
                                        re ? e->ne : t->ne, t->data, t->nbytes) == MEMRA_OK;
    }
    memra_free(name);
  }
  memra_status st = MEMRA_OK;
  if (skip)
    st = memra_errf(err, MEMRA_E_UNSUPPORTED, "copy: a key or string holds a NUL");
  else if (!ok)
    st = memra_errf(err, MEMRA_E_INVALID, "copy: %s", memra_gguf_writer_error(w));
  else
    st = memra_gguf_writer_to_memory(w, out, size, err);
  memra_gguf_writer_free(w);
  return st;
}

int memra_gguf_fuzz_rewrite(const memra_gguf *g) {
  const memra_gguf_edit none = {0};
  uint8_t *bytes = NULL;
  uint64_t size = 0;
  memra_err err;
  const memra_status st = memra_gguf_copy_edited(g, &none, &bytes, &size, &err);
  if (st == MEMRA_E_UNSUPPORTED) return 2;
  memra_gguf *h = NULL;
  bool ok = st == MEMRA_OK && memra_gguf_open_memory(bytes, size, "rewrite", &h, NULL) == MEMRA_OK;
  if (ok) {
    ok = memra_gguf_n_kv(h) == memra_gguf_n_kv(g) &&
         memra_gguf_n_tensors(h) == memra_gguf_n_tensors(g) &&
         memra_gguf_alignment(h) == memra_gguf_alignment(g) &&
         memra_gguf_version(h) == memra_gguf_version(g);
    for (uint64_t i = 0; ok && i < memra_gguf_n_kv(g); ++i)
      ok = same_kv(g, memra_gguf_kv_at(g, i), h, memra_gguf_kv_at(h, i));
    for (uint64_t i = 0; ok && i < memra_gguf_n_tensors(g); ++i)
      ok = same_tensor(memra_gguf_tensor_at(g, i), memra_gguf_tensor_at(h, i));
  }
  memra_gguf_close(h);
  memra_free(bytes);
  return ok ? 1 : 0;
}
