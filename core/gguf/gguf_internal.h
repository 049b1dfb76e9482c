/* gguf_internal.h — the reader's handle, shared by gguf_read.c and gguf_access.c only. */
#ifndef MEMRA_GGUF_INTERNAL_H
#define MEMRA_GGUF_INTERNAL_H

#include "core/gguf/gguf.h"

/* A name and the index of its kv or tensor; sorted by name for O(log n) lookup and for
 * duplicate detection that stays O(n log n) whatever names a hostile file picks. */
typedef struct memra_gguf_name_ix {
  memra_str name;
  uint64_t ix;
} memra_gguf_name_ix;

struct memra_gguf {
  const uint8_t *base;
  uint64_t size;
  void *map;  /* non-NULL when we mmap'd the file and must munmap it */
  char *name; /* file name for messages */
  uint32_t version;
  uint64_t alignment;
  uint64_t data_offset;

  uint64_t n_kv;
  memra_gguf_kv *kv;
  memra_gguf_name_ix *kv_sorted;
  uint64_t *str_first; /* per kv: first index into strs of a STRING array's elements */
  memra_str *strs;     /* the elements of every STRING array, in file order */
  uint64_t n_strs;

  uint64_t n_tensors;
  memra_gguf_tensor *tensors;
  memra_gguf_name_ix *tensors_sorted;
};

int memra_gguf_name_cmp(const void *a, const void *b); /* qsort order of memra_gguf_name_ix */
/* Index into sorted[0..n) of the entry named cstr, or UINT64_MAX. */
uint64_t memra_gguf_name_find(const memra_gguf_name_ix *sorted, uint64_t n, const char *cstr);

/* Bytes of one scalar of type t; 0 for STRING/ARRAY; -1 for unknown types. */
static inline int memra_gguf_scalar_size(int32_t t) {
  switch (t) {
  case MEMRA_GGUF_U8:
  case MEMRA_GGUF_I8:
  case MEMRA_GGUF_BOOL: return 1;
  case MEMRA_GGUF_U16:
  case MEMRA_GGUF_I16: return 2;
  case MEMRA_GGUF_U32:
  case MEMRA_GGUF_I32:
  case MEMRA_GGUF_F32: return 4;
  case MEMRA_GGUF_U64:
  case MEMRA_GGUF_I64:
  case MEMRA_GGUF_F64: return 8;
  case MEMRA_GGUF_STRING:
  case MEMRA_GGUF_ARRAY: return 0;
  default: return -1;
  }
}

#endif
