/* kv_pages.h — the paged KV cache's bookkeeping on the host: a pool of fixed-size pages
 * and, per sequence, its block table (page id of each block of block_size positions).
 * The device copy of the block tables is what attention reads. */
#ifndef MEMRA_KV_PAGES_H
#define MEMRA_KV_PAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_kv_pages {
  int32_t n_pages;
  int32_t block_size;
  int32_t max_blocks; /* columns of the block table: ceil(n_ctx / block_size) */
  int32_t n_seq_max;
  int32_t *free_pages; /* stack of free page ids */
  int32_t n_free;
  int32_t *tables;   /* [n_seq_max, max_blocks] */
  int32_t *n_blocks; /* [n_seq_max] blocks held by each sequence */
  bool dirty;        /* tables changed since the last upload */
} memra_kv_pages;

memra_status memra_kv_pages_init(memra_kv_pages *kv, int32_t n_pages, int32_t block_size,
                                 int32_t max_blocks, int32_t n_seq_max, memra_err *err);
void memra_kv_pages_free(memra_kv_pages *kv);
/* Makes seq hold pages for positions [0, n_pos). MEMRA_E_OOM when the pool is exhausted
 * or n_pos exceeds the context (nothing changes then). */
memra_status memra_kv_pages_reserve(memra_kv_pages *kv, int32_t seq, int32_t n_pos, memra_err *err);
/* Returns all pages of seq to the pool. */
void memra_kv_pages_release(memra_kv_pages *kv, int32_t seq);
int32_t memra_kv_pages_in_use(const memra_kv_pages *kv);

#ifdef __cplusplus
}
#endif
#endif
