/* kv_store.c — writes each row's k and v into its paged KV slot (see memra_batch):
 * slot = block_table[seq][pos / block_size] * block_size + pos % block_size.
 * Caches are F32, F16 or F8_E4M3 (round to nearest even; FP8 saturates at +-448), one row of
 * n_kv_head * head_dim per slot. Rows are written in order, so if two rows name one slot the later
 * one wins. */
#include <inttypes.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"
#include "plugins/quant/fp8.h"
#include "plugins/quant/quant.h"

static void store_row(const memra_tensor *cache, int64_t slot, const float *src, int64_t n) {
  uint8_t *dst = cpu_row(cache, slot);
  if (cache->type == MEMRA_TYPE_F32) {
    memcpy(dst, src, (size_t)n * sizeof(float));
  } else if (cache->type == MEMRA_TYPE_F8_E4M3) {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = memra_f32_to_fp8_e4m3(src[i]);
  } else {
    uint16_t *h = (uint16_t *)(void *)dst;
    for (int64_t i = 0; i < n; ++i)
      h[i] = memra_f32_to_fp16(src[i]);
  }
}

memra_status cpu_kv_store(memra_backend *be, const memra_tensor *k_cache,
                          const memra_tensor *v_cache, const memra_tensor *k, const memra_tensor *v,
                          const memra_batch *batch) {
  memra_status st;
  if ((st = cpu_batch_check(be, "kv_store", batch)) ||
      (st = cpu_check_shape(be, "kv_store", "k", k, CPU_F32, -1, batch->n_rows)) ||
      (st = cpu_check_shape(be, "kv_store", "v", v, CPU_F32, k->ne0, batch->n_rows)) ||
      (st = cpu_check_shape(be, "kv_store", "k_cache", k_cache, CPU_KV, k->ne0, -1)) ||
      (st = cpu_check_shape(be, "kv_store", "v_cache", v_cache, CPU_KV, k->ne0, -1)))
    return st;
  /* Every slot is checked before any byte is written. */
  int64_t slots = k_cache->ne1 < v_cache->ne1 ? k_cache->ne1 : v_cache->ne1;
  for (int32_t r = 0; r < batch->n_rows; ++r) {
    int32_t pos = cpu_i32_at(&batch->pos, r), seq = cpu_i32_at(&batch->seq, r);
    int64_t slot = cpu_batch_slot(batch, seq, pos);
    if (slot < 0 || slot >= slots)
      return cpu_fail(be, MEMRA_E_INVALID,
                      "kv_store: row %d (sequence %d, position %d) maps to slot %" PRId64
                      ", caches have %" PRId64,
                      r, seq, pos, slot, slots);
  }
  for (int32_t r = 0; r < batch->n_rows; ++r) {
    int64_t slot = cpu_batch_slot(batch, cpu_i32_at(&batch->seq, r), cpu_i32_at(&batch->pos, r));
    store_row(k_cache, slot, cpu_row_f32(k, r), k->ne0);
    store_row(v_cache, slot, cpu_row_f32(v, r), v->ne0);
  }
  return MEMRA_OK;
}
