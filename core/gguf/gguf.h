/* gguf.h — GGUF v2/v3 reader (mmap, validated) and writer.
 *
 * The reader trusts nothing in the file: every count, length, type and offset is checked
 * against the file size before use, so a truncated or hostile file gives one clear error
 * (MEMRA_E_FORMAT + a message naming the file and the field), never a crash, a hang or
 * an allocation larger than the file justifies. Strings and arrays point into the map. */
#ifndef MEMRA_GGUF_H
#define MEMRA_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum memra_gguf_vtype {
  MEMRA_GGUF_U8 = 0,
  MEMRA_GGUF_I8 = 1,
  MEMRA_GGUF_U16 = 2,
  MEMRA_GGUF_I16 = 3,
  MEMRA_GGUF_U32 = 4,
  MEMRA_GGUF_I32 = 5,
  MEMRA_GGUF_F32 = 6,
  MEMRA_GGUF_BOOL = 7,
  MEMRA_GGUF_STRING = 8,
  MEMRA_GGUF_ARRAY = 9,
  MEMRA_GGUF_U64 = 10,
  MEMRA_GGUF_I64 = 11,
  MEMRA_GGUF_F64 = 12,
} memra_gguf_vtype;

typedef struct memra_str {
  const char *ptr; /* not NUL-terminated: points into the file */
  uint64_t len;
} memra_str;

typedef struct memra_gguf_kv {
  memra_str key;
  int32_t type; /* memra_gguf_vtype */
  union {
    uint64_t u64; /* every unsigned integer and bool, widened */
    int64_t i64;  /* every signed integer, widened */
    double f64;   /* F32 and F64, widened */
    memra_str str;
    struct {
      int32_t elem_type; /* memra_gguf_vtype of the elements (never ARRAY) */
      uint64_t n;
      const uint8_t *data; /* packed elements; strings as (u64 len, bytes) pairs */
    } arr;
  } v;
} memra_gguf_kv;

typedef struct memra_gguf_tensor {
  memra_str name;
  int32_t type;    /* memra_type */
  int32_t n_dims;  /* 1..4 */
  int64_t ne[4];   /* ne[0] is the row length; unused dims are 1 */
  uint64_t offset; /* from the start of the data section */
  uint64_t nbytes;
  const void *data; /* into the map */
} memra_gguf_tensor;

typedef struct memra_gguf memra_gguf;

memra_status memra_gguf_open(const char *path, memra_gguf **out, memra_err *err);
/* Parses a file already in memory (fuzzing, tests); data must outlive the handle. */
memra_status memra_gguf_open_memory(const void *data, uint64_t size, const char *name,
                                    memra_gguf **out, memra_err *err);
void memra_gguf_close(memra_gguf *g);

uint32_t memra_gguf_version(const memra_gguf *g);
uint64_t memra_gguf_alignment(const memra_gguf *g);
uint64_t memra_gguf_data_offset(const memra_gguf *g); /* start of tensor data in the file */
const void *memra_gguf_base(const memra_gguf *g);     /* the whole mapped file */
uint64_t memra_gguf_size(const memra_gguf *g);

uint64_t memra_gguf_n_kv(const memra_gguf *g);
const memra_gguf_kv *memra_gguf_kv_at(const memra_gguf *g, uint64_t i);
const memra_gguf_kv *memra_gguf_kv_find(const memra_gguf *g, const char *key);

/* Typed getters: MEMRA_E_NOT_FOUND if absent, MEMRA_E_FORMAT (message names the key and
 * both types) if present with a type that does not convert. Integers convert between
 * widths when the value fits. */
memra_status memra_gguf_get_u32(const memra_gguf *g, const char *key, uint32_t *out,
                                memra_err *err);
memra_status memra_gguf_get_i64(const memra_gguf *g, const char *key, int64_t *out, memra_err *err);
memra_status memra_gguf_get_f32(const memra_gguf *g, const char *key, float *out, memra_err *err);
memra_status memra_gguf_get_bool(const memra_gguf *g, const char *key, bool *out, memra_err *err);
memra_status memra_gguf_get_str(const memra_gguf *g, const char *key, memra_str *out,
                                memra_err *err);
/* An array: its element type and count; elements through the accessors below. */
memra_status memra_gguf_get_arr(const memra_gguf *g, const char *key, int32_t elem_type,
                                uint64_t *n, const memra_gguf_kv **kv, memra_err *err);
/* Element i of a STRING array (O(1): the reader indexes string arrays at open). */
memra_str memra_gguf_arr_str(const memra_gguf *g, const memra_gguf_kv *kv, uint64_t i);
/* Element i of a numeric array, widened (bool as 0/1, floats truncated toward zero for
 * i64). Out of range or a STRING array: NaN (f64), 0 (i64); arr_str gives {"", 0}. */
double memra_gguf_arr_f64(const memra_gguf_kv *kv, uint64_t i);
int64_t memra_gguf_arr_i64(const memra_gguf_kv *kv, uint64_t i);

uint64_t memra_gguf_n_tensors(const memra_gguf *g);
const memra_gguf_tensor *memra_gguf_tensor_at(const memra_gguf *g, uint64_t i);
const memra_gguf_tensor *memra_gguf_tensor_find(const memra_gguf *g, const char *name);

bool memra_str_eq(memra_str s, const char *cstr);

/* Additions: "u32", "string", ... ("unknown" for ids outside the enum); the name the
 * handle was opened with (used in its messages). get_arr takes elem_type < 0 as "any". */
const char *memra_gguf_vtype_name(int32_t t);
const char *memra_gguf_name(const memra_gguf *g);

/* --- writer: builds a file in memory order, writes it atomically (tmp + rename) --- */
typedef struct memra_gguf_writer memra_gguf_writer;

/* 0: default 32. Another alignment must be a power of two and is recorded as the first
 * kv, `general.alignment` (u32). NULL when out of memory or alignment is not a power of 2. */
memra_gguf_writer *memra_gguf_writer_new(uint32_t alignment);
void memra_gguf_writer_free(memra_gguf_writer *w);
memra_status memra_gguf_writer_set_u32(memra_gguf_writer *w, const char *key, uint32_t v);
memra_status memra_gguf_writer_set_i32(memra_gguf_writer *w, const char *key, int32_t v);
memra_status memra_gguf_writer_set_u64(memra_gguf_writer *w, const char *key, uint64_t v);
memra_status memra_gguf_writer_set_f32(memra_gguf_writer *w, const char *key, float v);
memra_status memra_gguf_writer_set_bool(memra_gguf_writer *w, const char *key, bool v);
memra_status memra_gguf_writer_set_str(memra_gguf_writer *w, const char *key, const char *v);
/* An array of n elements of elem_type packed at data (any type but ARRAY; for STRING, data
 * is a `const char *const *` as in set_arr_str). */
memra_status memra_gguf_writer_set_arr(memra_gguf_writer *w, const char *key, int32_t elem_type,
                                       const void *data, uint64_t n);
memra_status memra_gguf_writer_set_arr_str(memra_gguf_writer *w, const char *key,
                                           const char *const *strs, uint64_t n);
/* Copies nbytes of data (must equal the size the type and shape imply). */
memra_status memra_gguf_writer_add_tensor(memra_gguf_writer *w, const char *name, int32_t type,
                                          int32_t n_dims, const int64_t *ne, const void *data,
                                          uint64_t nbytes);
memra_status memra_gguf_writer_write(memra_gguf_writer *w, const char *path, memra_err *err);
/* The file as bytes (tests): *out from memra_malloc, caller frees with memra_free. */
memra_status memra_gguf_writer_to_memory(memra_gguf_writer *w, uint8_t **out, uint64_t *size,
                                         memra_err *err);
/* Additions. A scalar of any non-STRING, non-ARRAY type, its bytes at *v (native layout). */
memra_status memra_gguf_writer_set_val(memra_gguf_writer *w, const char *key, int32_t type,
                                       const void *v);
/* A string of len bytes (may hold NUL or any byte). */
memra_status memra_gguf_writer_set_strn(memra_gguf_writer *w, const char *key, const char *v,
                                        uint64_t len);
/* File version to write: 3 (default) or 2 (same layout). */
memra_status memra_gguf_writer_set_version(memra_gguf_writer *w, uint32_t version);
/* The one-line reason the last writer_set_* / add_tensor call failed ("" if none):
 * duplicate key or tensor name, bad type, shape, size. */
const char *memra_gguf_writer_error(const memra_gguf_writer *w);

#ifdef __cplusplus
}
#endif
#endif
