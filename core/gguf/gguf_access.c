/* gguf_access.c — lookups and typed getters over an opened (already validated) GGUF. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/gguf/gguf_internal.h"

const char *memra_gguf_vtype_name(int32_t t) {
  switch (t) {
  case MEMRA_GGUF_U8: return "u8";
  case MEMRA_GGUF_I8: return "i8";
  case MEMRA_GGUF_U16: return "u16";
  case MEMRA_GGUF_I16: return "i16";
  case MEMRA_GGUF_U32: return "u32";
  case MEMRA_GGUF_I32: return "i32";
  case MEMRA_GGUF_F32: return "f32";
  case MEMRA_GGUF_BOOL: return "bool";
  case MEMRA_GGUF_STRING: return "string";
  case MEMRA_GGUF_ARRAY: return "array";
  case MEMRA_GGUF_U64: return "u64";
  case MEMRA_GGUF_I64: return "i64";
  case MEMRA_GGUF_F64: return "f64";
  }
  return "unknown";
}

int memra_gguf_name_cmp(const void *a, const void *b) {
  const memra_gguf_name_ix *x = a, *y = b;
  uint64_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
  int c = n ? memcmp(x->name.ptr, y->name.ptr, (size_t)n) : 0;
  if (c) return c;
  return x->name.len < y->name.len ? -1 : x->name.len > y->name.len;
}

uint64_t memra_gguf_name_find(const memra_gguf_name_ix *sorted, uint64_t n, const char *cstr) {
  memra_gguf_name_ix key = {{cstr, strlen(cstr)}, 0};
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    int c = memra_gguf_name_cmp(&sorted[mid], &key);
    if (c == 0) return mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return UINT64_MAX;
}

bool memra_str_eq(memra_str s, const char *cstr) {
  size_t n = strlen(cstr);
  return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}

uint32_t memra_gguf_version(const memra_gguf *g) { return g->version; }
uint64_t memra_gguf_alignment(const memra_gguf *g) { return g->alignment; }
uint64_t memra_gguf_data_offset(const memra_gguf *g) { return g->data_offset; }
const void *memra_gguf_base(const memra_gguf *g) { return g->base; }
uint64_t memra_gguf_size(const memra_gguf *g) { return g->size; }
const char *memra_gguf_name(const memra_gguf *g) { return g->name; }

uint64_t memra_gguf_n_kv(const memra_gguf *g) { return g->n_kv; }
const memra_gguf_kv *memra_gguf_kv_at(const memra_gguf *g, uint64_t i) {
  return i < g->n_kv ? &g->kv[i] : NULL;
}
const memra_gguf_kv *memra_gguf_kv_find(const memra_gguf *g, const char *key) {
  uint64_t i = memra_gguf_name_find(g->kv_sorted, g->n_kv, key);
  return i == UINT64_MAX ? NULL : &g->kv[g->kv_sorted[i].ix];
}

uint64_t memra_gguf_n_tensors(const memra_gguf *g) { return g->n_tensors; }
const memra_gguf_tensor *memra_gguf_tensor_at(const memra_gguf *g, uint64_t i) {
  return i < g->n_tensors ? &g->tensors[i] : NULL;
}
const memra_gguf_tensor *memra_gguf_tensor_find(const memra_gguf *g, const char *name) {
  uint64_t i = memra_gguf_name_find(g->tensors_sorted, g->n_tensors, name);
  return i == UINT64_MAX ? NULL : &g->tensors[g->tensors_sorted[i].ix];
}

static bool is_unsigned(int32_t t) {
  return t == MEMRA_GGUF_U8 || t == MEMRA_GGUF_U16 || t == MEMRA_GGUF_U32 || t == MEMRA_GGUF_U64;
}
static bool is_signed(int32_t t) {
  return t == MEMRA_GGUF_I8 || t == MEMRA_GGUF_I16 || t == MEMRA_GGUF_I32 || t == MEMRA_GGUF_I64;
}

/* The kv named key, or NOT_FOUND. */
static memra_status find(const memra_gguf *g, const char *key, const memra_gguf_kv **kv,
                         memra_err *err) {
  *kv = memra_gguf_kv_find(g, key);
  if (!*kv) return memra_errf(err, MEMRA_E_NOT_FOUND, "%s: no key '%s'", g->name, key);
  return MEMRA_OK;
}

static memra_status mismatch(const memra_gguf *g, const memra_gguf_kv *kv, const char *key,
                             const char *want, memra_err *err) {
  if (kv->type == MEMRA_GGUF_ARRAY)
    return memra_errf(err, MEMRA_E_FORMAT, "%s: key '%s' is an array of %s, expected %s", g->name,
                      key, memra_gguf_vtype_name(kv->v.arr.elem_type), want);
  return memra_errf(err, MEMRA_E_FORMAT, "%s: key '%s' has type %s, expected %s", g->name, key,
                    memra_gguf_vtype_name(kv->type), want);
}

memra_status memra_gguf_get_u32(const memra_gguf *g, const char *key, uint32_t *out,
                                memra_err *err) {
  const memra_gguf_kv *kv;
  memra_status st = find(g, key, &kv, err);
  if (st) return st;
  if (is_unsigned(kv->type) && kv->v.u64 <= UINT32_MAX) {
    *out = (uint32_t)kv->v.u64;
    return MEMRA_OK;
  }
  if (is_signed(kv->type) && kv->v.i64 >= 0 && kv->v.i64 <= (int64_t)UINT32_MAX) {
    *out = (uint32_t)kv->v.i64;
    return MEMRA_OK;
  }
  if (is_unsigned(kv->type))
    return memra_errf(err, MEMRA_E_FORMAT, "%s: key '%s' (%s) is %" PRIu64 ", does not fit u32",
                      g->name, key, memra_gguf_vtype_name(kv->type), kv->v.u64);
  if (is_signed(kv->type))
    return memra_errf(err, MEMRA_E_FORMAT, "%s: key '%s' (%s) is %" PRId64 ", does not fit u32",
                      g->name, key, memra_gguf_vtype_name(kv->type), kv->v.i64);
  return mismatch(g, kv, key, "u32", err);
}

memra_status memra_gguf_get_i64(const memra_gguf *g, const char *key, int64_t *out,
                                memra_err *err) {
  const memra_gguf_kv *kv;
  memra_status st = find(g, key, &kv, err);
  if (st) return st;
  if (is_signed(kv->type)) {
    *out = kv->v.i64;
    return MEMRA_OK;
  }
  if (is_unsigned(kv->type)) {
    if (kv->v.u64 > (uint64_t)INT64_MAX)
      return memra_errf(err, MEMRA_E_FORMAT, "%s: key '%s' (%s) is %" PRIu64 ", does not fit i64",
                        g->name, key, memra_gguf_vtype_name(kv->type), kv->v.u64);
    *out = (int64_t)kv->v.u64;
    return MEMRA_OK;
  }
  return mismatch(g, kv, key, "an integer", err);
}

memra_status memra_gguf_get_f32(const memra_gguf *g, const char *key, float *out, memra_err *err) {
  const memra_gguf_kv *kv;
  memra_status st = find(g, key, &kv, err);
  if (st) return st;
  if (kv->type != MEMRA_GGUF_F32 && kv->type != MEMRA_GGUF_F64)
    return mismatch(g, kv, key, "f32", err);
  *out = (float)kv->v.f64;
  return MEMRA_OK;
}

memra_status memra_gguf_get_bool(const memra_gguf *g, const char *key, bool *out, memra_err *err) {
  const memra_gguf_kv *kv;
  memra_status st = find(g, key, &kv, err);
  if (st) return st;
  if (kv->type != MEMRA_GGUF_BOOL) return mismatch(g, kv, key, "bool", err);
  *out = kv->v.u64 != 0;
  return MEMRA_OK;
}

memra_status memra_gguf_get_str(const memra_gguf *g, const char *key, memra_str *out,
                                memra_err *err) {
  const memra_gguf_kv *kv;
  memra_status st = find(g, key, &kv, err);
  if (st) return st;
  if (kv->type != MEMRA_GGUF_STRING) return mismatch(g, kv, key, "string", err);
  *out = kv->v.str;
  return MEMRA_OK;
}

memra_status memra_gguf_get_arr(const memra_gguf *g, const char *key, int32_t elem_type,
                                uint64_t *n, const memra_gguf_kv **kv_out, memra_err *err) {
  const memra_gguf_kv *kv;
  memra_status st = find(g, key, &kv, err);
  if (st) return st;
  if (kv->type != MEMRA_GGUF_ARRAY || (elem_type >= 0 && kv->v.arr.elem_type != elem_type)) {
    char want[48];
    snprintf(want, sizeof want, "an array of %s",
             elem_type < 0 ? "any type" : memra_gguf_vtype_name(elem_type));
    return mismatch(g, kv, key, want, err);
  }
  if (n) *n = kv->v.arr.n;
  if (kv_out) *kv_out = kv;
  return MEMRA_OK;
}

memra_str memra_gguf_arr_str(const memra_gguf *g, const memra_gguf_kv *kv, uint64_t i) {
  memra_str none = {"", 0};
  /* kv must be one of ours: compare addresses as integers (no UB for foreign pointers). */
  uintptr_t a = (uintptr_t)kv, lo = (uintptr_t)g->kv, hi = (uintptr_t)(g->kv + g->n_kv);
  if (!kv || a < lo || a >= hi || (a - lo) % sizeof *kv != 0) return none;
  if (kv->type != MEMRA_GGUF_ARRAY || kv->v.arr.elem_type != MEMRA_GGUF_STRING) return none;
  if (i >= kv->v.arr.n) return none;
  return g->strs[g->str_first[(a - lo) / sizeof *kv] + i];
}

/* Raw little-endian bits of element i (sz bytes), through memcpy: elements are unaligned. */
static uint64_t raw(const memra_gguf_kv *kv, uint64_t i, size_t sz) {
  uint64_t v = 0;
  memcpy(&v, kv->v.arr.data + i * sz, sz);
  return v;
}

static double as_f64(const memra_gguf_kv *kv, uint64_t i) {
  if (kv->v.arr.elem_type == MEMRA_GGUF_F32) {
    uint32_t b = (uint32_t)raw(kv, i, 4);
    float f;
    memcpy(&f, &b, 4);
    return f;
  }
  uint64_t b = raw(kv, i, 8);
  double d;
  memcpy(&d, &b, 8);
  return d;
}

double memra_gguf_arr_f64(const memra_gguf_kv *kv, uint64_t i) {
  if (!kv || kv->type != MEMRA_GGUF_ARRAY || i >= kv->v.arr.n) return NAN;
  switch (kv->v.arr.elem_type) {
  case MEMRA_GGUF_F32:
  case MEMRA_GGUF_F64: return as_f64(kv, i);
  case MEMRA_GGUF_U64: return (double)raw(kv, i, 8);
  case MEMRA_GGUF_STRING: return NAN;
  default: return (double)memra_gguf_arr_i64(kv, i);
  }
}

int64_t memra_gguf_arr_i64(const memra_gguf_kv *kv, uint64_t i) {
  if (!kv || kv->type != MEMRA_GGUF_ARRAY || i >= kv->v.arr.n) return 0;
  switch (kv->v.arr.elem_type) {
  case MEMRA_GGUF_U8: return (uint8_t)raw(kv, i, 1);
  case MEMRA_GGUF_I8: return (int8_t)(uint8_t)raw(kv, i, 1);
  case MEMRA_GGUF_BOOL: return raw(kv, i, 1) != 0;
  case MEMRA_GGUF_U16: return (uint16_t)raw(kv, i, 2);
  case MEMRA_GGUF_I16: return (int16_t)(uint16_t)raw(kv, i, 2);
  case MEMRA_GGUF_U32: return (uint32_t)raw(kv, i, 4);
  case MEMRA_GGUF_I32: return (int32_t)(uint32_t)raw(kv, i, 4);
  case MEMRA_GGUF_U64: return (int64_t)raw(kv, i, 8); /* wraps above INT64_MAX */
  case MEMRA_GGUF_I64: return (int64_t)raw(kv, i, 8);
  case MEMRA_GGUF_F32:
  case MEMRA_GGUF_F64: {
    double d = as_f64(kv, i); /* truncates toward zero; NaN and out of range give 0 */
    return d > -9.2e18 && d < 9.2e18 ? (int64_t)d : 0;
  }
  }
  return 0;
}
