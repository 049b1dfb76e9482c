#include "core/sched/kv_pages.h"

#include <string.h>

#include "core/base/alloc.h"

memra_status memra_kv_pages_init(memra_kv_pages *kv, int32_t n_pages, int32_t block_size,
                                 int32_t max_blocks, int32_t n_seq_max, memra_err *err) {
  memset(kv, 0, sizeof *kv);
  if (n_pages < 1 || block_size < 1 || max_blocks < 1 || n_seq_max < 1)
    return memra_errf(err, MEMRA_E_INVALID,
                      "kv cache: pages %d, block size %d, blocks %d, "
                      "sequences %d must all be positive",
                      n_pages, block_size, max_blocks, n_seq_max);
  kv->n_pages = n_pages;
  kv->block_size = block_size;
  kv->max_blocks = max_blocks;
  kv->n_seq_max = n_seq_max;
  kv->free_pages = memra_malloc((size_t)n_pages * sizeof(int32_t));
  kv->tables = memra_calloc((size_t)n_seq_max * (size_t)max_blocks, sizeof(int32_t));
  kv->n_blocks = memra_calloc((size_t)n_seq_max, sizeof(int32_t));
  if (!kv->free_pages || !kv->tables || !kv->n_blocks) {
    memra_kv_pages_free(kv);
    return memra_errf(err, MEMRA_E_OOM, "kv cache: out of memory for %d pages", n_pages);
  }
  for (int32_t i = 0; i < n_pages; ++i)
    kv->free_pages[i] = n_pages - 1 - i; /* pop 0 first */
  kv->n_free = n_pages;
  kv->dirty = true;
  return MEMRA_OK;
}

void memra_kv_pages_free(memra_kv_pages *kv) {
  memra_free(kv->free_pages);
  memra_free(kv->tables);
  memra_free(kv->n_blocks);
  memset(kv, 0, sizeof *kv);
}

memra_status memra_kv_pages_reserve(memra_kv_pages *kv, int32_t seq, int32_t n_pos,
                                    memra_err *err) {
  if (seq < 0 || seq >= kv->n_seq_max)
    return memra_errf(err, MEMRA_E_INVALID, "kv cache: sequence %d out of range 0..%d", seq,
                      kv->n_seq_max - 1);
  int64_t need = ((int64_t)n_pos + kv->block_size - 1) / kv->block_size;
  if (need > kv->max_blocks)
    return memra_errf(err, MEMRA_E_OOM, "context full: %d positions exceed the context of %d",
                      n_pos, kv->max_blocks * kv->block_size);
  int32_t *held = &kv->n_blocks[seq];
  if (need - *held > kv->n_free)
    return memra_errf(err, MEMRA_E_OOM, "kv cache full: need %lld more pages, %d free",
                      (long long)(need - *held), kv->n_free);
  int32_t *row = kv->tables + (size_t)seq * kv->max_blocks;
  while (*held < need) {
    row[(*held)++] = kv->free_pages[--kv->n_free];
    kv->dirty = true;
  }
  return MEMRA_OK;
}

void memra_kv_pages_release(memra_kv_pages *kv, int32_t seq) {
  if (seq < 0 || seq >= kv->n_seq_max) return;
  int32_t *row = kv->tables + (size_t)seq * kv->max_blocks;
  while (kv->n_blocks[seq] > 0)
    kv->free_pages[kv->n_free++] = row[--kv->n_blocks[seq]];
  kv->dirty = true;
}

int32_t memra_kv_pages_in_use(const memra_kv_pages *kv) { return kv->n_pages - kv->n_free; }
