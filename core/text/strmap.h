/* strmap.h — open-addressing hash maps for vocabularies: bytes -> id and (id,id) -> rank. */
#ifndef MEMRA_TEXT_STRMAP_H
#define MEMRA_TEXT_STRMAP_H

#include <stddef.h>
#include <stdint.h>

/* Maps byte strings (owned elsewhere, must outlive the map) to int32 values. */
typedef struct memra_strmap {
  const char **keys;
  uint32_t *klen;
  int32_t *vals;
  size_t cap; /* power of two, at least twice the entries */
} memra_strmap;

int memra_strmap_init(memra_strmap *m, size_t n_expected); /* 0 on success, -1 OOM */
void memra_strmap_free(memra_strmap *m);
/* Inserts unless present (the first value for a key wins). */
void memra_strmap_put(memra_strmap *m, const char *k, size_t len, int32_t v);
int32_t memra_strmap_get(const memra_strmap *m, const char *k, size_t len); /* -1 absent */

/* Maps a pair of 32-bit ids to an int32 value. */
typedef struct memra_pairmap {
  uint64_t *keys; /* UINT64_MAX: empty */
  int32_t *vals;
  size_t cap;
} memra_pairmap;

int memra_pairmap_init(memra_pairmap *m, size_t n_expected);
void memra_pairmap_free(memra_pairmap *m);
void memra_pairmap_put(memra_pairmap *m, int32_t a, int32_t b, int32_t v);
int32_t memra_pairmap_get(const memra_pairmap *m, int32_t a, int32_t b); /* -1 absent */

#endif
