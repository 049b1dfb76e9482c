/* stop.h — stop strings over streamed text: text that might still become the start of a
 * stop string is held back, so a client never sees part of one. */
#ifndef MEMRA_SERVE_STOP_H
#define MEMRA_SERVE_STOP_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* text[0..n) is everything generated so far and released is how much of it was already
 * given out. Returns how far text may now be released; sets *hit when a stop string
 * occurs (the return value is then where the first one starts, and nothing after it
 * is ever released). */
size_t memra_serve_stop_scan(const char *text, size_t n, size_t released, const char (*stop)[256],
                             int n_stop, bool *hit);

#ifdef __cplusplus
}
#endif
#endif
