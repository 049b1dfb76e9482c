/* gguf_touch.h — reads everything an opened GGUF exposes, through every accessor, so a
 * fuzzer (and the replay of its finds) catches any pointer the reader got wrong. */
#ifndef MEMRA_FUZZ_GGUF_TOUCH_H
#define MEMRA_FUZZ_GGUF_TOUCH_H

#include <stdint.h>
#include <stdio.h>

#include "core/gguf/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Touches every kv (typed getters, array elements, string-array index), every tensor's
 * bytes and lookup, and dumps to sink (may be NULL). Returns a checksum of what it read
 * (so nothing is optimized away); 0 if an accessor disagreed with the table (a bug). */
uint64_t memra_gguf_fuzz_touch(const memra_gguf *g, FILE *sink);

/* Copies g through the writer (every kv and tensor), reopens the bytes and compares:
 * 1 equal, 0 a difference or a writer failure (a bug), 2 skipped (a key or string holds a
 * NUL, which the writer's C-string API cannot express). */
int memra_gguf_fuzz_rewrite(const memra_gguf *g);

/* One change to make while copying a file (tests of what a loader does with a hostile one). */
typedef struct memra_gguf_edit {
  const char *key;    /* a kv given a new scalar value (NULL: none); added if absent */
  int32_t type;       /* the value's type (any scalar but STRING) */
  uint8_t val[8];     /* its bytes, native layout */
  const char *tensor; /* a tensor given a new shape over the same bytes (NULL: none) */
  int32_t n_dims;
  int64_t ne[4];
} memra_gguf_edit;

/* g copied through the writer with e applied: MEMRA_OK and the file's bytes in *out (from
 * memra_malloc, *size of them), or the writer's refusal (a shape whose bytes differ, a type the
 * writer does not take) as MEMRA_E_INVALID, or MEMRA_E_UNSUPPORTED where g holds a key or string
 * with a NUL, which the writer's C-string API cannot express. */
memra_status memra_gguf_copy_edited(const memra_gguf *g, const memra_gguf_edit *e, uint8_t **out,
                                    uint64_t *size, memra_err *err);

#ifdef __cplusplus
}
#endif
#endif
