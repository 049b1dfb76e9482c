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

#ifdef __cplusplus
}
#endif
#endif
