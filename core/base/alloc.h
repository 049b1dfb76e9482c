/* alloc.h — the core's allocator. Under test, the N-th allocation can be made to fail
 * (SQLite's fault injection) to prove that every failure path is clean and leak-free. */
#ifndef MEMRA_ALLOC_H
#define MEMRA_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *memra_malloc(size_t n);
void *memra_calloc(size_t count, size_t size); /* NULL on count*size overflow */
void *memra_realloc(void *p, size_t n);
void memra_free(void *p);
char *memra_strndup(const char *s, size_t n);

/* Test hooks: fail the n-th allocation from now (0 = never); live allocation count. */
void memra_test_fail_alloc_at(long n);
long memra_test_live_allocs(void);

#ifdef __cplusplus
}
#endif
#endif
