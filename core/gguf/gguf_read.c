/* gguf_read.c — opens a GGUF v2/v3 file (mmap or memory) and validates all of it.
 *
 * Every count, length, type and offset is checked against the bytes that back it before
 * it is used or anything is allocated for it, so each allocation is bounded by a small
 * multiple of the file size. Each failure is one line naming the file and the field. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf_internal.h"
#include "plugins/include/memra_types.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

enum {
  HEADER_BYTES = 4 + 4 + 8 + 8,     /* magic, version, n_tensors, n_kv */
  KV_MIN_BYTES = 8 + 4 + 1,         /* empty key, type, one-byte value */
  TI_MIN_BYTES = 8 + 4 + 8 + 4 + 8, /* empty name, n_dims, one dim, type, offset */
  SHOWN_MAX = 64,                   /* longest name quoted in a message */
};

/* A read position in the file plus what error messages need. */
typedef struct cur {
  const uint8_t *p;
  uint64_t size, pos;
  const char *name;
  memra_err *err;
} cur;

/* A name from the file, made safe to print on one line (non-printables -> '?'). */
typedef struct shown {
  char s[SHOWN_MAX + 4];
} shown;

static shown show(memra_str str) {
  shown o;
  uint64_t n = str.len < SHOWN_MAX ? str.len : SHOWN_MAX;
  for (uint64_t i = 0; i < n; ++i) {
    unsigned char ch = (unsigned char)str.ptr[i];
    o.s[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
  }
  if (str.len > SHOWN_MAX) memcpy(o.s + n, "...", 3), n += 3;
  o.s[n] = 0;
  return o;
}

static uint64_t remain(const cur *c) { return c->size - c->pos; }

/* "file: truncated: <what> needs N bytes at byte P, file has S" */
__attribute__((format(printf, 3, 4))) static memra_status truncated(cur *c, uint64_t need,
                                                                    const char *fmt, ...) {
  char what[192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return memra_errf(c->err, MEMRA_E_FORMAT,
                    "%s: truncated: %s needs %" PRIu64 " bytes at byte %" PRIu64
                    ", file has %" PRIu64,
                    c->name, what, need, c->pos, c->size);
}

#define NEED(c, n, ...)                                                                            \
  do {                                                                                             \
    if (remain(c) < (uint64_t)(n)) return truncated((c), (n), __VA_ARGS__);                        \
  } while (0)

static uint32_t get_u32(cur *c) {
  uint32_t v;
  memcpy(&v, c->p + c->pos, 4);
  c->pos += 4;
  return v;
}

static uint64_t get_u64(cur *c) {
  uint64_t v;
  memcpy(&v, c->p + c->pos, 8);
  c->pos += 8;
  return v;
}

/* A length-prefixed string; `what` names it in the message. */
static memra_status read_str(cur *c, memra_str *out, const char *what) {
  NEED(c, 8, "length of %s", what);
  uint64_t len = get_u64(c);
  if (len > remain(c))
    return memra_errf(c->err, MEMRA_E_FORMAT,
                      "%s: %s at byte %" PRIu64 " has length %" PRIu64 ", only %" PRIu64
                      " bytes remain",
                      c->name, what, c->pos - 8, len, remain(c));
  out->ptr = (const char *)c->p + c->pos;
  out->len = len;
  c->pos += len;
  return MEMRA_OK;
}

/* Widens the scalar at p into kv->v (u64 for unsigned and bool, i64 signed, f64 floats). */
static void widen(uint32_t t, const uint8_t *p, memra_gguf_kv *kv) {
  switch (t) {
  case MEMRA_GGUF_U8: kv->v.u64 = p[0]; break;
  case MEMRA_GGUF_BOOL: kv->v.u64 = p[0] != 0; break;
  case MEMRA_GGUF_I8: kv->v.i64 = (int8_t)p[0]; break;
  case MEMRA_GGUF_U16: {
    uint16_t v;
    memcpy(&v, p, 2);
    kv->v.u64 = v;
  } break;
  case MEMRA_GGUF_I16: {
    int16_t v;
    memcpy(&v, p, 2);
    kv->v.i64 = v;
  } break;
  case MEMRA_GGUF_U32: {
    uint32_t v;
    memcpy(&v, p, 4);
    kv->v.u64 = v;
  } break;
  case MEMRA_GGUF_I32: {
    int32_t v;
    memcpy(&v, p, 4);
    kv->v.i64 = v;
  } break;
  case MEMRA_GGUF_F32: {
    float v;
    memcpy(&v, p, 4);
    kv->v.f64 = v;
  } break;
  case MEMRA_GGUF_U64: memcpy(&kv->v.u64, p, 8); break;
  case MEMRA_GGUF_I64: memcpy(&kv->v.i64, p, 8); break;
  case MEMRA_GGUF_F64: memcpy(&kv->v.f64, p, 8); break;
  }
}

static memra_status read_array(cur *c, memra_gguf_kv *kv, uint64_t *n_strs) {
  shown k = show(kv->key);
  NEED(c, 4 + 8, "element type and count of array '%s'", k.s);
  uint32_t et = get_u32(c);
  uint64_t n = get_u64(c);
  if (et == MEMRA_GGUF_ARRAY)
    return memra_errf(c->err, MEMRA_E_FORMAT,
                      "%s: key '%s' is an array of arrays (nested arrays are not supported)",
                      c->name, k.s);
  int esz = memra_gguf_scalar_size(et);
  if (esz < 0)
    return memra_errf(c->err, MEMRA_E_FORMAT,
                      "%s: key '%s' is an array of unknown value type %" PRIu32, c->name, k.s, et);
  kv->v.arr.elem_type = (int32_t)et;
  kv->v.arr.n = n;
  kv->v.arr.data = c->p + c->pos;
  if (et != MEMRA_GGUF_STRING) {
    if (n > remain(c) / (uint64_t)esz)
      return memra_errf(c->err, MEMRA_E_FORMAT,
                        "%s: key '%s' is an array of %" PRIu64 " %s (%d bytes each), only %" PRIu64
                        " bytes remain",
                        c->name, k.s, n, memra_gguf_vtype_name((int32_t)et), esz, remain(c));
    c->pos += n * (uint64_t)esz;
    return MEMRA_OK;
  }
  if (n > remain(c) / 8) /* every string has at least its 8-byte length */
    return memra_errf(c->err, MEMRA_E_FORMAT,
                      "%s: key '%s' is an array of %" PRIu64 " strings, needs at least %" PRIu64
                      " bytes, only %" PRIu64 " remain",
                      c->name, k.s, n, n > UINT64_MAX / 8 ? UINT64_MAX : n * 8, remain(c));
  for (uint64_t i = 0; i < n; ++i) { /* inline: a vocabulary has 10^5 of these */
    NEED(c, 8, "length of string %" PRIu64 " of array '%s'", i, k.s);
    uint64_t len = get_u64(c);
    if (len > remain(c))
      return memra_errf(c->err, MEMRA_E_FORMAT,
                        "%s: string %" PRIu64 " of array '%s' at byte %" PRIu64
                        " has length %" PRIu64 ", only %" PRIu64 " bytes remain",
                        c->name, i, k.s, c->pos - 8, len, remain(c));
    c->pos += len;
  }
  *n_strs += n;
  return MEMRA_OK;
}

static memra_status read_kv(cur *c, uint64_t i, memra_gguf_kv *kv, uint64_t *n_strs) {
  char what[SHOWN_MAX + 64];
  snprintf(what, sizeof what, "key of kv %" PRIu64, i);
  memra_status st = read_str(c, &kv->key, what);
  if (st) return st;
  shown k = show(kv->key);
  NEED(c, 4, "value type of key '%s'", k.s);
  uint32_t t = get_u32(c);
  int sz = memra_gguf_scalar_size(t);
  if (sz < 0)
    return memra_errf(c->err, MEMRA_E_FORMAT, "%s: key '%s' has unknown value type %" PRIu32,
                      c->name, k.s, t);
  kv->type = (int32_t)t;
  if (t == MEMRA_GGUF_ARRAY) return read_array(c, kv, n_strs);
  if (t == MEMRA_GGUF_STRING) {
    snprintf(what, sizeof what, "value of key '%s'", k.s);
    return read_str(c, &kv->v.str, what);
  }
  NEED(c, (uint64_t)sz, "%s value of key '%s'", memra_gguf_vtype_name((int32_t)t), k.s);
  widen(t, c->p + c->pos, kv);
  c->pos += (uint64_t)sz;
  return MEMRA_OK;
}

/* Second pass over the (already validated) string arrays: index each element. */
static void index_strings(memra_gguf *g) {
  uint64_t next = 0;
  for (uint64_t i = 0; i < g->n_kv; ++i) {
    const memra_gguf_kv *kv = &g->kv[i];
    if (kv->type != MEMRA_GGUF_ARRAY || kv->v.arr.elem_type != MEMRA_GGUF_STRING) continue;
    g->str_first[i] = next;
    const uint8_t *p = kv->v.arr.data;
    for (uint64_t j = 0; j < kv->v.arr.n; ++j) {
      uint64_t len;
      memcpy(&len, p, 8);
      g->strs[next].ptr = (const char *)p + 8;
      g->strs[next].len = len;
      ++next;
      p += 8 + len;
    }
  }
}

/* Sorts names and reports the first duplicate. */
static memra_status sort_unique(memra_gguf_name_ix *ix, uint64_t n, const char *file,
                                const char *what, memra_err *err) {
  qsort(ix, (size_t)n, sizeof *ix, memra_gguf_name_cmp);
  for (uint64_t i = 1; i < n; ++i)
    if (memra_gguf_name_cmp(&ix[i - 1], &ix[i]) == 0)
      return memra_errf(err, MEMRA_E_FORMAT, "%s: duplicate %s '%s'", file, what,
                        show(ix[i].name).s);
  return MEMRA_OK;
}

static memra_status read_alignment(memra_gguf *g, memra_err *err) {
  g->alignment = 32;
  uint64_t i = memra_gguf_name_find(g->kv_sorted, g->n_kv, "general.alignment");
  if (i == UINT64_MAX) return MEMRA_OK;
  const memra_gguf_kv *kv = &g->kv[g->kv_sorted[i].ix];
  uint64_t a;
  switch (kv->type) {
  case MEMRA_GGUF_U8:
  case MEMRA_GGUF_U16:
  case MEMRA_GGUF_U32:
  case MEMRA_GGUF_U64: a = kv->v.u64; break;
  case MEMRA_GGUF_I8:
  case MEMRA_GGUF_I16:
  case MEMRA_GGUF_I32:
  case MEMRA_GGUF_I64: a = kv->v.i64 < 0 ? 0 : (uint64_t)kv->v.i64; break;
  default:
    return memra_errf(err, MEMRA_E_FORMAT, "%s: key 'general.alignment' has type %s, expected u32",
                      g->name, memra_gguf_vtype_name(kv->type));
  }
  if (a == 0 || (a & (a - 1)) != 0) {
    bool neg = kv->type == MEMRA_GGUF_I8 || kv->type == MEMRA_GGUF_I16 ||
               kv->type == MEMRA_GGUF_I32 || kv->type == MEMRA_GGUF_I64;
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s: general.alignment is %s%" PRIu64 ", expected a nonzero power of two",
                      g->name, neg && kv->v.i64 < 0 ? "-" : "",
                      neg && kv->v.i64 < 0 ? (uint64_t)0 - (uint64_t)kv->v.i64 : a);
  }
  g->alignment = a;
  return MEMRA_OK;
}

static memra_status read_tensor_info(cur *c, uint64_t i, memra_gguf_tensor *t) {
  char what[SHOWN_MAX + 64];
  snprintf(what, sizeof what, "name of tensor %" PRIu64, i);
  memra_status st = read_str(c, &t->name, what);
  if (st) return st;
  shown nm = show(t->name);
  NEED(c, 4, "dimension count of tensor '%s'", nm.s);
  uint32_t nd = get_u32(c);
  if (nd == 0 || nd > 4)
    return memra_errf(c->err, MEMRA_E_FORMAT,
                      "%s: tensor '%s' has %" PRIu32 " dimensions, expected 1 to 4", c->name, nm.s,
                      nd);
  t->n_dims = (int32_t)nd;
  NEED(c, 8 * (uint64_t)nd, "shape of tensor '%s'", nm.s);
  int64_t elems = 1;
  for (int d = 0; d < 4; ++d) {
    t->ne[d] = 1;
    if ((uint32_t)d >= nd) continue;
    uint64_t u = get_u64(c);
    if (u > (uint64_t)INT64_MAX)
      return memra_errf(c->err, MEMRA_E_FORMAT,
                        "%s: tensor '%s' dimension %d is %" PRId64 ", expected >= 0", c->name, nm.s,
                        d, (int64_t)u);
    t->ne[d] = (int64_t)u;
    if (__builtin_mul_overflow(elems, t->ne[d], &elems))
      return memra_errf(c->err, MEMRA_E_FORMAT,
                        "%s: tensor '%s' has more than 2^63 elements (shape overflows)", c->name,
                        nm.s);
  }
  NEED(c, 4 + 8, "type and offset of tensor '%s'", nm.s);
  uint32_t type = get_u32(c);
  t->offset = get_u64(c);
  memra_type_traits tr = memra_type_info((int32_t)type);
  if (type >= MEMRA_TYPE_COUNT || tr.blck == 0)
    return memra_errf(c->err, MEMRA_E_FORMAT, "%s: tensor '%s' has unknown type %" PRIu32, c->name,
                      nm.s, type);
  t->type = (int32_t)type;
  if (t->ne[0] % tr.blck != 0)
    return memra_errf(c->err, MEMRA_E_FORMAT,
                      "%s: tensor '%s' row length %" PRId64
                      " is not a multiple of the %s block size %d",
                      c->name, nm.s, t->ne[0], tr.name, tr.blck);
  uint64_t nb;
  bool ovf = __builtin_mul_overflow((uint64_t)(t->ne[0] / tr.blck), (uint64_t)tr.size, &nb);
  ovf = ovf || __builtin_mul_overflow(nb, (uint64_t)t->ne[1], &nb);
  ovf = ovf || __builtin_mul_overflow(nb, (uint64_t)t->ne[2], &nb);
  ovf = ovf || __builtin_mul_overflow(nb, (uint64_t)t->ne[3], &nb);
  if (ovf)
    return memra_errf(c->err, MEMRA_E_FORMAT, "%s: tensor '%s' needs more than 2^64 bytes", c->name,
                      nm.s);
  t->nbytes = nb;
  return MEMRA_OK;
}

typedef struct span {
  uint64_t begin, end, ix;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return x->ix < y->ix ? -1 : x->ix > y->ix; /* file order: the message is deterministic */
}

/* Offsets aligned, data inside the file, no two tensors sharing a byte. */
static memra_status check_tensor_data(memra_gguf *g, memra_err *err) {
  uint64_t room = g->size - g->data_offset;
  for (uint64_t i = 0; i < g->n_tensors; ++i) {
    memra_gguf_tensor *t = &g->tensors[i];
    if (t->offset % g->alignment != 0)
      return memra_errf(err, MEMRA_E_FORMAT,
                        "%s: tensor '%s' offset %" PRIu64
                        " is not a multiple of the alignment %" PRIu64,
                        g->name, show(t->name).s, t->offset, g->alignment);
    if (t->offset > room || t->nbytes > room - t->offset) {
      uint64_t end;
      if (__builtin_add_overflow(g->data_offset, t->offset, &end) ||
          __builtin_add_overflow(end, t->nbytes, &end))
        return memra_errf(err, MEMRA_E_FORMAT,
                          "%s: tensor '%s' ends past byte 2^64, file has %" PRIu64, g->name,
                          show(t->name).s, g->size);
      return memra_errf(err, MEMRA_E_FORMAT,
                        "%s: tensor '%s' ends at byte %" PRIu64 ", file has %" PRIu64, g->name,
                        show(t->name).s, end, g->size);
    }
    t->data = g->base + g->data_offset + t->offset;
  }
  if (g->n_tensors < 2) return MEMRA_OK;
  span *s = memra_calloc((size_t)g->n_tensors, sizeof *s);
  if (!s) return memra_errf(err, MEMRA_E_OOM, "%s: out of memory sorting tensors", g->name);
  for (uint64_t i = 0; i < g->n_tensors; ++i)
    s[i] = (span){g->tensors[i].offset, g->tensors[i].offset + g->tensors[i].nbytes, i};
  qsort(s, (size_t)g->n_tensors, sizeof *s, span_cmp);
  memra_status st = MEMRA_OK;
  uint64_t prev = 0; /* the non-empty span reaching furthest so far */
  bool have = false;
  for (uint64_t i = 0; i < g->n_tensors && !st; ++i) {
    if (s[i].begin == s[i].end) continue; /* empty tensors occupy no bytes */
    if (have && s[i].begin < s[prev].end) {
      const memra_gguf_tensor *a = &g->tensors[s[prev].ix], *b = &g->tensors[s[i].ix];
      st = memra_errf(err, MEMRA_E_FORMAT,
                      "%s: tensors '%s' (data bytes %" PRIu64 "..%" PRIu64 ") and '%s' (%" PRIu64
                      "..%" PRIu64 ") overlap",
                      g->name, show(a->name).s, s[prev].begin, s[prev].end, show(b->name).s,
                      s[i].begin, s[i].end);
    }
    if (!have || s[i].end > s[prev].end) prev = i, have = true;
  }
  memra_free(s);
  return st;
}

static memra_status parse(memra_gguf *g, memra_err *err) {
  cur c = {g->base, g->size, 0, g->name, err};
  if (g->size < HEADER_BYTES)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s: file is %" PRIu64 " bytes, too small for a GGUF header (%d bytes)",
                      g->name, g->size, HEADER_BYTES);
  if (memcmp(g->base, "GGUF", 4) != 0) {
    char m[4 * 4 + 1];
    int k = 0;
    for (int i = 0; i < 4; ++i) {
      unsigned ch = g->base[i];
      k += snprintf(m + k, sizeof m - (size_t)k,
                    (ch >= 0x20 && ch < 0x7f && ch != '\\') ? "%c" : "\\x%02x", ch);
    }
    return memra_errf(err, MEMRA_E_FORMAT, "%s: not a GGUF file (magic '%s', expected 'GGUF')",
                      g->name, m);
  }
  c.pos = 4;
  g->version = get_u32(&c);
  if (g->version == 1)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s: GGUF version 1 is not supported (only versions 2 and 3)", g->name);
  if (g->version != 2 && g->version != 3)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s: GGUF version %" PRIu32 " is not supported (only versions 2 and 3%s)",
                      g->name, g->version,
                      (g->version & 0xffff) == 0 ? "; a big-endian file?" : "");
  uint64_t n_tensors = get_u64(&c), n_kv = get_u64(&c);
  /* Each kv and tensor info takes a minimum number of bytes: bound the counts first. */
  if (n_kv > remain(&c) / KV_MIN_BYTES)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s: kv count %" PRIu64 " needs at least %d bytes each, only %" PRIu64
                      " bytes follow the header",
                      g->name, n_kv, KV_MIN_BYTES, remain(&c));
  if (n_tensors > (remain(&c) - n_kv * KV_MIN_BYTES) / TI_MIN_BYTES)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s: tensor count %" PRIu64 " needs at least %d bytes each, only %" PRIu64
                      " bytes follow the header and kvs",
                      g->name, n_tensors, TI_MIN_BYTES, remain(&c) - n_kv * KV_MIN_BYTES);

  g->kv = memra_calloc((size_t)n_kv, sizeof *g->kv);
  g->kv_sorted = memra_calloc((size_t)n_kv, sizeof *g->kv_sorted);
  g->str_first = memra_calloc((size_t)n_kv, sizeof *g->str_first);
  if (!g->kv || !g->kv_sorted || !g->str_first)
    return memra_errf(err, MEMRA_E_OOM, "%s: out of memory for %" PRIu64 " kvs", g->name, n_kv);
  g->n_kv = n_kv;
  uint64_t n_strs = 0;
  for (uint64_t i = 0; i < n_kv; ++i) {
    memra_status st = read_kv(&c, i, &g->kv[i], &n_strs);
    if (st) return st;
    g->kv_sorted[i] = (memra_gguf_name_ix){g->kv[i].key, i};
  }
  memra_status st = sort_unique(g->kv_sorted, n_kv, g->name, "key", err);
  if (st) return st;
  g->strs = memra_calloc((size_t)n_strs, sizeof *g->strs);
  if (!g->strs)
    return memra_errf(err, MEMRA_E_OOM, "%s: out of memory indexing %" PRIu64 " strings", g->name,
                      n_strs);
  g->n_strs = n_strs;
  index_strings(g);
  if ((st = read_alignment(g, err))) return st;

  /* The kvs were smaller or larger than the minimum: re-check against what is left. */
  if (n_tensors > remain(&c) / TI_MIN_BYTES)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s: tensor count %" PRIu64 " needs at least %d bytes each, only %" PRIu64
                      " bytes remain at byte %" PRIu64,
                      g->name, n_tensors, TI_MIN_BYTES, remain(&c), c.pos);
  g->tensors = memra_calloc((size_t)n_tensors, sizeof *g->tensors);
  g->tensors_sorted = memra_calloc((size_t)n_tensors, sizeof *g->tensors_sorted);
  if (!g->tensors || !g->tensors_sorted)
    return memra_errf(err, MEMRA_E_OOM, "%s: out of memory for %" PRIu64 " tensors", g->name,
                      n_tensors);
  g->n_tensors = n_tensors;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    if ((st = read_tensor_info(&c, i, &g->tensors[i]))) return st;
    g->tensors_sorted[i] = (memra_gguf_name_ix){g->tensors[i].name, i};
  }
  if ((st = sort_unique(g->tensors_sorted, n_tensors, g->name, "tensor name", err))) return st;

  uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
  if (pad > remain(&c)) {
    if (n_tensors > 0)
      return memra_errf(err, MEMRA_E_FORMAT,
                        "%s: truncated: the data section would start at byte %" PRIu64
                        " (aligned to %" PRIu64 "), file has %" PRIu64,
                        g->name, c.pos + pad, g->alignment, g->size);
    pad = remain(&c); /* no tensors: nothing lives in the data section */
  }
  g->data_offset = c.pos + pad;
  return check_tensor_data(g, err);
}

/* Allocates the handle and parses; on failure frees everything and leaves *out NULL. */
static memra_status open_common(const void *data, uint64_t size, void *map, const char *name,
                                memra_gguf **out, memra_err *err) {
  memra_gguf *g = memra_calloc(1, sizeof *g);
  char *nm = g ? memra_strndup(name, strlen(name)) : NULL;
  if (!g || !nm) {
    memra_free(g);
    if (map) munmap(map, (size_t)size);
    return memra_errf(err, MEMRA_E_OOM, "%s: out of memory opening the file", name);
  }
  g->base = data;
  g->size = size;
  g->map = map;
  g->name = nm;
  memra_status st = parse(g, err);
  if (st) {
    memra_gguf_close(g);
    return st;
  }
  *out = g;
  return MEMRA_OK;
}

memra_status memra_gguf_open_memory(const void *data, uint64_t size, const char *name,
                                    memra_gguf **out, memra_err *err) {
  if (err) err->msg[0] = 0;
  if (!out || (!data && size)) return memra_errf(err, MEMRA_E_INVALID, "gguf: no data to parse");
  *out = NULL;
  return open_common(data, size, NULL, name ? name : "<memory>", out, err);
}

memra_status memra_gguf_open(const char *path, memra_gguf **out, memra_err *err) {
  if (err) err->msg[0] = 0;
  if (!out || !path) return memra_errf(err, MEMRA_E_INVALID, "gguf: no file name given");
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return memra_errf(err, MEMRA_E_IO, "%s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return memra_errf(err, MEMRA_E_IO, "%s: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return memra_errf(err, MEMRA_E_IO, "%s: %s", path,
                      S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file");
  }
  uint64_t size = (uint64_t)sb.st_size;
  void *map = NULL;
  if (size > 0) {
    map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return memra_errf(err, MEMRA_E_IO, "%s: mmap of %" PRIu64 " bytes failed: %s", path, size,
                        strerror(e));
    }
  }
  close(fd); /* the mapping keeps the file alive */
  return open_common(map, size, map, path, out, err);
}

void memra_gguf_close(memra_gguf *g) {
  if (!g) return;
  if (g->map) munmap(g->map, (size_t)g->size);
  memra_free(g->name);
  memra_free(g->kv);
  memra_free(g->kv_sorted);
  memra_free(g->str_first);
  memra_free(g->strs);
  memra_free(g->tensors);
  memra_free(g->tensors_sorted);
  memra_free(g);
}
