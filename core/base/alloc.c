#include "core/base/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown; /* 0: never fail */
static atomic_long live;

static int should_fail(void) {
  long n = atomic_load(&fail_countdown);
  if (n <= 0) return 0;
  return atomic_fetch_sub(&fail_countdown, 1) == 1;
}

void *memra_malloc(size_t n) {
  if (should_fail()) return NULL;
  void *p = malloc(n ? n : 1);
  if (p) atomic_fetch_add(&live, 1);
  return p;
}

void *memra_calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  if (should_fail()) return NULL;
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (p) atomic_fetch_add(&live, 1);
  return p;
}

void *memra_realloc(void *p, size_t n) {
  if (!p) return memra_malloc(n);
  if (should_fail()) return NULL;
  return realloc(p, n ? n : 1);
}

void memra_free(void *p) {
  if (!p) return;
  atomic_fetch_sub(&live, 1);
  free(p);
}

char *memra_strndup(const char *s, size_t n) {
  char *d = memra_malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

void memra_test_fail_alloc_at(long n) { atomic_store(&fail_countdown, n); }
long memra_test_live_allocs(void) { return atomic_load(&live); }
