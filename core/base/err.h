/* err.h — one-line error messages that travel up beside a memra_status. */
#ifndef MEMRA_ERR_H
#define MEMRA_ERR_H

#include "plugins/include/memra_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_err {
  char msg[512]; /* one line, no trailing newline; empty when nothing failed */
} memra_err;

/* Formats msg into err (err may be NULL) and returns st, so a failing line reads
 * `return memra_errf(err, MEMRA_E_FORMAT, "%s: ...", path);`. Control characters the
 * arguments bring (a newline in a key, a flag, a file name) become spaces: one line always. */
memra_status memra_errf(memra_err *err, memra_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Short name of a status ("invalid argument", "malformed file", ...). */
const char *memra_status_str(memra_status st);

#ifdef __cplusplus
}
#endif
#endif
