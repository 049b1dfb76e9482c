/* gguf_dump.h — human-readable listing of an opened GGUF (`memra info FILE`), like
 * gguf-py's gguf-dump: header, every key with its type and value, the tensor table. */
#ifndef MEMRA_GGUF_DUMP_H
#define MEMRA_GGUF_DUMP_H

#include <stdbool.h>
#include <stdio.h>

#include "core/gguf/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Arrays longer than 8 print as `[first 8, ...] (n items)` unless full_arrays. Strings are
 * escaped (\n, \", \xNN) so each kv stays on one line. MEMRA_E_IO if writing out failed. */
memra_status memra_gguf_dump(const memra_gguf *g, FILE *out, bool full_arrays);

#ifdef __cplusplus
}
#endif
#endif
