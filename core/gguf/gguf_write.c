/* gguf_write.c — builds a GGUF v3 (or v2) file: kvs and tensors are collected in memory,
 * then serialized in one pass, to memory or atomically to disk (temporary file in the
 * same directory + rename, so a failed write never leaves a partial file at the path). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/gguf/gguf_internal.h"
#include "plugins/include/memra_types.h"

typedef struct wkv {
  char *key;
  uint64_t key_len;
  int32_t type;
  uint8_t *val; /* the serialized value after the type field */
  uint64_t val_len;
} wkv;

typedef struct wtensor {
  char *name;
  uint64_t name_len;
  int32_t type, n_dims;
  int64_t ne[4];
  uint8_t *data;
  uint64_t nbytes, offset;
} wtensor;

struct memra_gguf_writer {
  uint32_t alignment, version;
  wkv *kv;
  uint64_t n_kv, cap_kv;
  wtensor *t;
  uint64_t n_t, cap_t;
  memra_err last;
};

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

memra_gguf_writer *memra_gguf_writer_new(uint32_t alignment) {
  if (alignment == 0) alignment = 32;
  if (alignment & (alignment - 1)) return NULL;
  memra_gguf_writer *w = memra_calloc(1, sizeof *w);
  if (!w) return NULL;
  w->alignment = alignment;
  w->version = 3;
  if (alignment != 32 && memra_gguf_writer_set_u32(w, "general.alignment", alignment)) {
    memra_gguf_writer_free(w);
    return NULL;
  }
  return w;
}

void memra_gguf_writer_free(memra_gguf_writer *w) {
  if (!w) return;
  for (uint64_t i = 0; i < w->n_kv; ++i)
    memra_free(w->kv[i].key), memra_free(w->kv[i].val);
  for (uint64_t i = 0; i < w->n_t; ++i)
    memra_free(w->t[i].name), memra_free(w->t[i].data);
  memra_free(w->kv);
  memra_free(w->t);
  memra_free(w);
}

const char *memra_gguf_writer_error(const memra_gguf_writer *w) { return w->last.msg; }

memra_status memra_gguf_writer_set_version(memra_gguf_writer *w, uint32_t version) {
  if (version != 2 && version != 3)
    return memra_errf(&w->last, MEMRA_E_INVALID,
                      "gguf writer: version %" PRIu32 " cannot be written (2 or 3)", version);
  w->version = version;
  return MEMRA_OK;
}

/* Grows *arr (of *cap elements of sz bytes) to hold one more. */
static bool grow(void **arr, uint64_t *cap, uint64_t n, size_t sz) {
  if (n < *cap) return true;
  uint64_t nc = *cap ? *cap * 2 : 8;
  void *p = memra_malloc((size_t)(nc * sz));
  if (!p) return false;
  if (n) memcpy(p, *arr, (size_t)(n * sz));
  memra_free(*arr);
  *arr = p;
  *cap = nc;
  return true;
}

/* Adds key with an already-serialized value (takes ownership of val on success and
 * frees it on failure). */
static memra_status add_kv(memra_gguf_writer *w, const char *key, int32_t type, uint8_t *val,
                           uint64_t val_len) {
  if (!key) {
    memra_free(val);
    return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: NULL key");
  }
  size_t kl = strlen(key);
  for (uint64_t i = 0; i < w->n_kv; ++i)
    if (w->kv[i].key_len == kl && memcmp(w->kv[i].key, key, kl) == 0) {
      memra_free(val);
      return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: duplicate key '%s'", key);
    }
  uint32_t align = w->alignment;
  if (strcmp(key, "general.alignment") == 0) { /* it decides the layout: keep them in step */
    uint32_t a = 0;
    if (type == MEMRA_GGUF_U32) memcpy(&a, val, 4);
    if (type != MEMRA_GGUF_U32 || a == 0 || (a & (a - 1))) {
      memra_free(val);
      return memra_errf(&w->last, MEMRA_E_INVALID,
                        "gguf writer: general.alignment must be a u32 power of two");
    }
    align = a;
  }
  char *k = memra_strndup(key, kl);
  if (!k || !grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
    memra_free(k);
    memra_free(val);
    return memra_errf(&w->last, MEMRA_E_OOM, "gguf writer: out of memory adding key '%s'", key);
  }
  w->kv[w->n_kv++] = (wkv){k, kl, type, val, val_len};
  w->alignment = align;
  w->last.msg[0] = 0;
  return MEMRA_OK;
}

memra_status memra_gguf_writer_set_val(memra_gguf_writer *w, const char *key, int32_t type,
                                       const void *v) {
  int sz = memra_gguf_scalar_size(type);
  if (sz <= 0)
    return memra_errf(&w->last, MEMRA_E_INVALID,
                      "gguf writer: key '%s': set_val takes a scalar type, not %s",
                      key ? key : "(null)", memra_gguf_vtype_name(type));
  uint8_t *val = memra_malloc((size_t)sz);
  if (!val) return memra_errf(&w->last, MEMRA_E_OOM, "gguf writer: out of memory");
  memcpy(val, v, (size_t)sz);
  if (type == MEMRA_GGUF_BOOL) val[0] = val[0] != 0;
  return add_kv(w, key, type, val, (uint64_t)sz);
}

memra_status memra_gguf_writer_set_u32(memra_gguf_writer *w, const char *key, uint32_t v) {
  return memra_gguf_writer_set_val(w, key, MEMRA_GGUF_U32, &v);
}
memra_status memra_gguf_writer_set_i32(memra_gguf_writer *w, const char *key, int32_t v) {
  return memra_gguf_writer_set_val(w, key, MEMRA_GGUF_I32, &v);
}
memra_status memra_gguf_writer_set_u64(memra_gguf_writer *w, const char *key, uint64_t v) {
  return memra_gguf_writer_set_val(w, key, MEMRA_GGUF_U64, &v);
}
memra_status memra_gguf_writer_set_f32(memra_gguf_writer *w, const char *key, float v) {
  return memra_gguf_writer_set_val(w, key, MEMRA_GGUF_F32, &v);
}
memra_status memra_gguf_writer_set_bool(memra_gguf_writer *w, const char *key, bool v) {
  uint8_t b = v;
  return memra_gguf_writer_set_val(w, key, MEMRA_GGUF_BOOL, &b);
}

memra_status memra_gguf_writer_set_strn(memra_gguf_writer *w, const char *key, const char *v,
                                        uint64_t len) {
  if ((!v && len) || len > SIZE_MAX - 8)
    return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: bad string for key '%s'",
                      key ? key : "(null)");
  uint8_t *val = memra_malloc((size_t)(8 + len));
  if (!val) return memra_errf(&w->last, MEMRA_E_OOM, "gguf writer: out of memory");
  memcpy(val, &len, 8);
  if (len) memcpy(val + 8, v, (size_t)len);
  return add_kv(w, key, MEMRA_GGUF_STRING, val, 8 + len);
}

memra_status memra_gguf_writer_set_str(memra_gguf_writer *w, const char *key, const char *v) {
  if (!v) return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: NULL string");
  return memra_gguf_writer_set_strn(w, key, v, strlen(v));
}

memra_status memra_gguf_writer_set_arr_str(memra_gguf_writer *w, const char *key,
                                           const char *const *strs, uint64_t n) {
  uint64_t len = 4 + 8;
  for (uint64_t i = 0; i < n; ++i) {
    if (!strs[i]) return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: NULL string");
    len += 8 + strlen(strs[i]);
  }
  uint8_t *val = memra_malloc((size_t)len), *p = val;
  if (!val) return memra_errf(&w->last, MEMRA_E_OOM, "gguf writer: out of memory");
  uint32_t et = MEMRA_GGUF_STRING;
  memcpy(p, &et, 4), p += 4;
  memcpy(p, &n, 8), p += 8;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t l = strlen(strs[i]);
    memcpy(p, &l, 8), p += 8;
    memcpy(p, strs[i], (size_t)l), p += l;
  }
  return add_kv(w, key, MEMRA_GGUF_ARRAY, val, len);
}

memra_status memra_gguf_writer_set_arr(memra_gguf_writer *w, const char *key, int32_t elem_type,
                                       const void *data, uint64_t n) {
  if (elem_type == MEMRA_GGUF_STRING)
    return memra_gguf_writer_set_arr_str(w, key, (const char *const *)data, n);
  int sz = memra_gguf_scalar_size(elem_type);
  if (sz <= 0)
    return memra_errf(&w->last, MEMRA_E_INVALID,
                      "gguf writer: key '%s': arrays of %s cannot be written", key ? key : "(null)",
                      memra_gguf_vtype_name(elem_type));
  if (n > (UINT64_MAX - 12) / (uint64_t)sz || (n && !data))
    return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: key '%s': bad array of %" PRIu64,
                      key ? key : "(null)", n);
  uint64_t len = 4 + 8 + n * (uint64_t)sz;
  uint8_t *val = memra_malloc((size_t)len);
  if (!val) return memra_errf(&w->last, MEMRA_E_OOM, "gguf writer: out of memory");
  memcpy(val, &elem_type, 4);
  memcpy(val + 4, &n, 8);
  if (n) memcpy(val + 12, data, (size_t)(n * (uint64_t)sz));
  if (elem_type == MEMRA_GGUF_BOOL)
    for (uint64_t i = 0; i < n; ++i)
      val[12 + i] = val[12 + i] != 0;
  return add_kv(w, key, MEMRA_GGUF_ARRAY, val, len);
}

memra_status memra_gguf_writer_add_tensor(memra_gguf_writer *w, const char *name, int32_t type,
                                          int32_t n_dims, const int64_t *ne, const void *data,
                                          uint64_t nbytes) {
  if (!name) return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: NULL tensor name");
  memra_type_traits tr = memra_type_info(type);
  if (tr.blck == 0)
    return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: tensor '%s': unknown type %d", name,
                      type);
  if (n_dims < 1 || n_dims > 4)
    return memra_errf(&w->last, MEMRA_E_INVALID,
                      "gguf writer: tensor '%s': %d dimensions, expected 1 to 4", name, n_dims);
  int64_t e[4] = {1, 1, 1, 1};
  for (int d = 0; d < n_dims; ++d) {
    if (ne[d] < 0)
      return memra_errf(&w->last, MEMRA_E_INVALID,
                        "gguf writer: tensor '%s': dimension %d is %" PRId64, name, d, ne[d]);
    e[d] = ne[d];
  }
  if (e[0] % tr.blck)
    return memra_errf(&w->last, MEMRA_E_INVALID,
                      "gguf writer: tensor '%s': row length %" PRId64
                      " is not a multiple of the %s block size %d",
                      name, e[0], tr.name, tr.blck);
  uint64_t need;
  bool ovf = __builtin_mul_overflow((uint64_t)(e[0] / tr.blck), (uint64_t)tr.size, &need);
  for (int d = 1; d < 4; ++d)
    ovf = ovf || __builtin_mul_overflow(need, (uint64_t)e[d], &need);
  if (ovf || need != nbytes)
    return memra_errf(&w->last, MEMRA_E_INVALID,
                      "gguf writer: tensor '%s': %" PRIu64 " bytes given, %s [%" PRId64 ", %" PRId64
                      ", %" PRId64 ", %" PRId64 "] needs %" PRIu64,
                      name, nbytes, tr.name, e[0], e[1], e[2], e[3], ovf ? UINT64_MAX : need);
  if (nbytes && !data)
    return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: tensor '%s': NULL data", name);
  size_t nl = strlen(name);
  for (uint64_t i = 0; i < w->n_t; ++i)
    if (w->t[i].name_len == nl && memcmp(w->t[i].name, name, nl) == 0)
      return memra_errf(&w->last, MEMRA_E_INVALID, "gguf writer: duplicate tensor name '%s'", name);
  char *nm = memra_strndup(name, nl);
  uint8_t *copy = memra_malloc((size_t)nbytes);
  if (!nm || !copy || !grow((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t)) {
    memra_free(nm);
    memra_free(copy);
    return memra_errf(&w->last, MEMRA_E_OOM,
                      "gguf writer: out of memory adding tensor '%s' (%" PRIu64 " bytes)", name,
                      nbytes);
  }
  if (nbytes) memcpy(copy, data, (size_t)nbytes);
  wtensor *t = &w->t[w->n_t++];
  *t = (wtensor){nm, nl, type, n_dims, {e[0], e[1], e[2], e[3]}, copy, nbytes, 0};
  w->last.msg[0] = 0;
  return MEMRA_OK;
}

/* Lays out the tensors (their offsets) and returns the total file size. */
static uint64_t layout(memra_gguf_writer *w, uint64_t *data_offset) {
  uint64_t hdr = 4 + 4 + 8 + 8;
  for (uint64_t i = 0; i < w->n_kv; ++i)
    hdr += 8 + w->kv[i].key_len + 4 + w->kv[i].val_len;
  for (uint64_t i = 0; i < w->n_t; ++i)
    hdr += 8 + w->t[i].name_len + 4 + 8 * (uint64_t)w->t[i].n_dims + 4 + 8;
  uint64_t off = 0;
  for (uint64_t i = 0; i < w->n_t; ++i) {
    off = align_up(off, w->alignment);
    w->t[i].offset = off;
    off += w->t[i].nbytes;
  }
  /* No tensors: no data section, so no padding after the header either. */
  *data_offset = w->n_t ? align_up(hdr, w->alignment) : hdr;
  return *data_offset + off; /* no padding after the last tensor */
}

/* Where serialized bytes go: a memory buffer, or a file through a buffer. */
typedef struct sink {
  uint8_t *buf;
  uint64_t cap, used; /* memory: cap = file size; file: a staging buffer */
  uint64_t pos;       /* bytes emitted so far */
  int fd;             /* -1 for memory */
  int err_no;
} sink;

static bool flush(sink *s) {
  uint64_t done = 0;
  while (done < s->used) {
    ssize_t r = write(s->fd, s->buf + done, (size_t)(s->used - done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      s->err_no = r < 0 ? errno : EIO;
      return false;
    }
    done += (uint64_t)r;
  }
  s->used = 0;
  return true;
}

static void put(sink *s, const void *p, uint64_t n) {
  const uint8_t *b = p;
  while (n && !s->err_no) {
    if (s->fd >= 0 && s->used == s->cap && !flush(s)) return;
    uint64_t k = s->cap - s->used < n ? s->cap - s->used : n;
    memcpy(s->buf + s->used, b, (size_t)k);
    s->used += k, s->pos += k, b += k, n -= k;
  }
}

static void put_u32(sink *s, uint32_t v) { put(s, &v, 4); }
static void put_u64(sink *s, uint64_t v) { put(s, &v, 8); }

static void put_zeros(sink *s, uint64_t n) {
  static const uint8_t z[64];
  while (n) {
    uint64_t k = n < sizeof z ? n : sizeof z;
    put(s, z, k);
    n -= k;
  }
}

static void serialize(memra_gguf_writer *w, sink *s, uint64_t data_offset) {
  put(s, "GGUF", 4);
  put_u32(s, w->version);
  put_u64(s, w->n_t);
  put_u64(s, w->n_kv);
  for (uint64_t i = 0; i < w->n_kv; ++i) {
    put_u64(s, w->kv[i].key_len);
    put(s, w->kv[i].key, w->kv[i].key_len);
    put_u32(s, (uint32_t)w->kv[i].type);
    put(s, w->kv[i].val, w->kv[i].val_len);
  }
  for (uint64_t i = 0; i < w->n_t; ++i) {
    const wtensor *t = &w->t[i];
    put_u64(s, t->name_len);
    put(s, t->name, t->name_len);
    put_u32(s, (uint32_t)t->n_dims);
    for (int d = 0; d < t->n_dims; ++d)
      put_u64(s, (uint64_t)t->ne[d]);
    put_u32(s, (uint32_t)t->type);
    put_u64(s, t->offset);
  }
  put_zeros(s, data_offset - s->pos);
  for (uint64_t i = 0; i < w->n_t; ++i) {
    put_zeros(s, data_offset + w->t[i].offset - s->pos);
    put(s, w->t[i].data, w->t[i].nbytes);
  }
}

memra_status memra_gguf_writer_to_memory(memra_gguf_writer *w, uint8_t **out, uint64_t *size,
                                         memra_err *err) {
  uint64_t data_offset, total = layout(w, &data_offset);
  uint8_t *buf = memra_malloc((size_t)total);
  if (!buf)
    return memra_errf(err, MEMRA_E_OOM, "gguf writer: out of memory for %" PRIu64 " bytes", total);
  sink s = {buf, total, 0, 0, -1, 0};
  serialize(w, &s, data_offset);
  *out = buf;
  *size = total;
  return MEMRA_OK;
}

memra_status memra_gguf_writer_write(memra_gguf_writer *w, const char *path, memra_err *err) {
  enum { STAGE = 1 << 20 };
  size_t pl = strlen(path);
  char *tmp = memra_malloc(pl + 16);
  uint8_t *stage = memra_malloc(STAGE);
  if (!tmp || !stage) {
    memra_free(tmp);
    memra_free(stage);
    return memra_errf(err, MEMRA_E_OOM, "%s: out of memory writing the file", path);
  }
  snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    memra_status st = memra_errf(err, MEMRA_E_IO, "%s: cannot create a temporary file: %s", path,
                                 strerror(errno));
    memra_free(tmp);
    memra_free(stage);
    return st;
  }
  uint64_t data_offset;
  layout(w, &data_offset);
  sink s = {stage, STAGE, 0, 0, fd, 0};
  serialize(w, &s, data_offset);
  if (!s.err_no) flush(&s);
  if (!s.err_no && fchmod(fd, 0644) != 0) s.err_no = errno;
  if (!s.err_no && fsync(fd) != 0) s.err_no = errno;
  if (close(fd) != 0 && !s.err_no) s.err_no = errno;
  if (!s.err_no && rename(tmp, path) != 0) s.err_no = errno;
  memra_status st = MEMRA_OK;
  if (s.err_no) {
    unlink(tmp); /* never leave a partial file behind */
    st = memra_errf(err, MEMRA_E_IO, "%s: write failed: %s", path, strerror(s.err_no));
  }
  memra_free(tmp);
  memra_free(stage);
  return st;
}
