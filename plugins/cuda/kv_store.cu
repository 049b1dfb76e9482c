/* kv_store.cu — writes k, v rows into the paged caches (F16, F32 or F8_E4M3) at each row's slot:
 * block_table[seq][pos / block_size] * block_size + pos % block_size.
 * Oracle: plugins/cpu kv_store. Positions, sequences and page ids are device data the
 * host cannot check without a sync: a row whose slot falls outside the cache is skipped
 * (never written out of bounds). ver 1: one block per row (256 threads; ver 1b: up to 1024,
 * one thread per element).  <- in the vtable
 * The fused rope_kv_store (rope_kv.cu) shares the slot rule and the checks below. */
#include <cuda_fp16.h>
#include <stdio.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/fp8.cuh"
#include "plugins/cuda/rope_kv.cuh"

template <typename TK, typename TV>
__global__ void kv_store_v1_kernel(char *kc, uint64_t k_nb1, char *vc, uint64_t v_nb1,
                                   const float *k, int64_t k_ld, const float *v, int64_t v_ld,
                                   int64_t width, const int32_t *pos, const int32_t *seq,
                                   const int32_t *bt, int64_t bt_ld, int n_seqs, int block_size,
                                   int max_blocks, int64_t k_slots, int64_t v_slots) {
  memra_pdl_enter_early();
  const int64_t r = blockIdx.x;
  const int64_t ks = memra_kv_slot(r, pos, seq, bt, bt_ld, n_seqs, block_size, max_blocks, k_slots);
  const int64_t vs = memra_kv_slot(r, pos, seq, bt, bt_ld, n_seqs, block_size, max_blocks, v_slots);
  TK *kd = (TK *)(kc + (uint64_t)(ks < 0 ? 0 : ks) * k_nb1);
  TV *vd = (TV *)(vc + (uint64_t)(vs < 0 ? 0 : vs) * v_nb1);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    if (ks >= 0) kd[i] = (TK)k[r * k_ld + i];
    if (vs >= 0) vd[i] = (TV)v[r * v_ld + i];
  }
}

memra_status memra_cu_check_batch(memra_backend *be, const memra_batch *b, const char *what,
                                  const int32_t **pos, const int32_t **seq, const int32_t **bt,
                                  int64_t *bt_ld) {
  if (!b) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: batch is NULL", what);
  if (b->n_rows < 0 || b->n_seqs <= 0 || b->block_size <= 0 || b->max_blocks <= 0 ||
      b->kv_bucket <= 0)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: batch n_rows %d, n_seqs %d, block_size %d, max_blocks %d, "
                         "kv_bucket %d: expected positive values",
                         what, b->n_rows, b->n_seqs, b->block_size, b->max_blocks, b->kv_bucket);
  memra_status st;
  char name[96];
  snprintf(name, sizeof name, "%s: batch pos", what);
  if ((st = memra_cu_check_i32_vec(be, &b->pos, b->n_rows, name, pos)) != MEMRA_OK) return st;
  snprintf(name, sizeof name, "%s: batch seq", what);
  if ((st = memra_cu_check_i32_vec(be, &b->seq, b->n_rows, name, seq)) != MEMRA_OK) return st;
  snprintf(name, sizeof name, "%s: batch block_table", what);
  if ((st = memra_cu_check_tensor(be, &b->block_table, name, MEMRA_TYPE_I32)) != MEMRA_OK)
    return st;
  if (b->block_table.ne0 < b->max_blocks || b->block_table.ne1 < b->n_seqs ||
      b->block_table.nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: block_table [%lld, %lld] smaller than [n_seqs %d, max_blocks %d]",
                         what, (long long)b->block_table.ne1, (long long)b->block_table.ne0,
                         b->n_seqs, b->max_blocks);
  *bt = (const int32_t *)memra_cu_ptr(&b->block_table);
  *bt_ld = b->block_table.ne1 > 1 ? (int64_t)(b->block_table.nb1 / 4) : b->max_blocks;
  return MEMRA_OK;
}

memra_status memra_cu_kv_store_check(memra_backend *be, const char *what,
                                     const memra_tensor *k_cache, const memra_tensor *v_cache,
                                     const memra_tensor *k, const memra_tensor *v,
                                     const memra_batch *batch, const int32_t **pos,
                                     const int32_t **seq, const int32_t **bt, int64_t *bt_ld) {
  memra_status st;
  char nk[96], nv[96], nkc[96], nvc[96], nkv[96];
  snprintf(nk, sizeof nk, "%s: k", what);
  snprintf(nv, sizeof nv, "%s: v", what);
  snprintf(nkc, sizeof nkc, "%s: k_cache", what);
  snprintf(nvc, sizeof nvc, "%s: v_cache", what);
  snprintf(nkv, sizeof nkv, "%s: k and v", what);
  if ((st = memra_cu_check_batch(be, batch, what, pos, seq, bt, bt_ld)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, k, nk, MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, v, nv, MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, k_cache, nkc, -1)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, v_cache, nvc, -1)) != MEMRA_OK ||
      (st = memra_cu_check_same_shape(be, k, v, nkv)) != MEMRA_OK)
    return st;
  if (k->ne1 < batch->n_rows)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: k has %lld rows, batch %d", what,
                         (long long)k->ne1, batch->n_rows);
  for (int i = 0; i < 2; ++i) {
    const memra_tensor *c = i ? v_cache : k_cache;
    if (c->type != MEMRA_TYPE_F16 && c->type != MEMRA_TYPE_F32 && c->type != MEMRA_TYPE_F8_E4M3)
      return memra_cu_errf(be, MEMRA_E_UNSUPPORTED,
                           "%s: %s cache is %s, expected F16, F32 or F8_E4M3", what, i ? "v" : "k",
                           memra_type_info(c->type).name);
    if (c->ne0 != k->ne0)
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %s cache rows have %lld elements, k %lld",
                           what, i ? "v" : "k", (long long)c->ne0, (long long)k->ne0);
    if (memra_cu_align_of(memra_cu_ptr(c), c->nb1) < (uint64_t)memra_type_info(c->type).size)
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %s cache misaligned", what, i ? "v" : "k");
  }
  if (k->nb1 % 4 || v->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: k or v stride not whole floats", what);
  /* FP8 (ABI minor 2): both caches FP8; mixed FP8 caches are refused, as on attention. */
  if ((k_cache->type == MEMRA_TYPE_F8_E4M3) != (v_cache->type == MEMRA_TYPE_F8_E4M3))
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: caches are %s and %s: FP8 needs both", what,
                         memra_type_info(k_cache->type).name, memra_type_info(v_cache->type).name);
  return MEMRA_OK;
}

memra_status memra_cu_kv_store(memra_backend *be, const memra_tensor *k_cache,
                               const memra_tensor *v_cache, const memra_tensor *k,
                               const memra_tensor *v, const memra_batch *batch) {
  memra_status st;
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  int64_t bt_ld = 0;
  if ((st = memra_cu_kv_store_check(be, "kv_store", k_cache, v_cache, k, v, batch, &pos, &seq, &bt,
                                    &bt_ld)) != MEMRA_OK)
    return st;
  if (batch->n_rows == 0) return MEMRA_OK;
  /* A thread per element up to 1024 (a Llama-8B row of 1024: one pass, not four). */
  const int threads = k->ne0 >= 1024 ? 1024 : k->ne0 <= 32 ? 32 : (int)((k->ne0 + 31) / 32 * 32);
  const unsigned grid = (unsigned)batch->n_rows;
#define KV_LAUNCH(TK, TV)                                                                          \
  (void)memra_cu_launch(be, kv_store_v1_kernel<TK, TV>, dim3(grid), dim3(threads), 0,              \
                        memra_cu_ptr(k_cache), k_cache->nb1, memra_cu_ptr(v_cache), v_cache->nb1,  \
                        (const float *)memra_cu_ptr(k), (int64_t)(k->nb1 / 4),                     \
                        (const float *)memra_cu_ptr(v), (int64_t)(v->nb1 / 4), k->ne0, pos, seq,   \
                        bt, bt_ld, batch->n_seqs, batch->block_size, batch->max_blocks,            \
                        k_cache->ne1, v_cache->ne1)
  const bool kh = k_cache->type == MEMRA_TYPE_F16, vh = v_cache->type == MEMRA_TYPE_F16;
  const bool k8 = k_cache->type == MEMRA_TYPE_F8_E4M3, v8 = v_cache->type == MEMRA_TYPE_F8_E4M3;
  if (k8 && v8)
    KV_LAUNCH(memra_f8, memra_f8);
  else if (kh && vh)
    KV_LAUNCH(__half, __half);
  else if (kh)
    KV_LAUNCH(__half, float);
  else if (vh)
    KV_LAUNCH(float, __half);
  else
    KV_LAUNCH(float, float);
#undef KV_LAUNCH
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
