/* rope_kv.cu — ABI 1.4 rope_kv_store: rope(q), rope(k) and kv_store(k, v) of a step in one
 * launch. Oracle: plugins/cpu rope_kv.c (the three ops composed); the contract is the
 * three GPU ops' bits: every pair turns through memra_rope_pair (rope_kv.cuh), as in
 * rope_v1_kernel, and the cache gets (T)float of the rotated value, as kv_store_v1_kernel
 * stores it after reading back what rope wrote.
 * ver 1: a thread per work item of a row, the items laid end to end: q pairs, k pairs
 *   (rotated, written back to k and to the k cache), k's unrotated tail dims (partial
 *   rope: copied to the cache), v elements; a row per blockIdx.y. Llama-8B decode: 3584
 *   items in 14 blocks of 256, one launch and one PDL gap instead of three
 *   (3.5 + 2.9 + 3.6 us as separate graph nodes).
 * ver 1b: the position, slots and each pair's (cos, sin) before the PDL wait.  <- vtable */
#include <cuda_fp16.h>
#include <stdio.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/fp8.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/rope_kv.cuh"

struct rope_kv_args {
  float *q, *k;
  const float *v;
  int64_t q_ld, k_ld, v_ld;
  char *kc, *vc;
  uint64_t k_nb1, v_nb1;
  int64_t k_slots, v_slots;
  const int32_t *pos, *seq, *bt;
  int64_t bt_ld;
  int n_seqs, block_size, max_blocks;
  int n_head, n_kv_head, head_dim, n_rot, neox;
  float freq_base, freq_scale;
  const float *ff;
};

/* Before the PDL wait: what no op of this step writes (the row's position, its cache slot, and a
 * pair's angle: cos and sin in double, the longest part of a thread's work), so that after the
 * wait only q / k / v are read, turned and stored (memra_rope_cs then memra_rope_turn is
 * memra_rope_pair: the same bits). */
template <typename TK, typename TV> __global__ void rope_kv_v1_kernel(rope_kv_args a) {
  memra_pdl_trigger();
  const int64_t r = blockIdx.y;
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int D = a.head_dim, half = a.n_rot / 2, tail = D - a.n_rot;
  const int nq = a.n_head * half, nk = a.n_kv_head * half, nt = a.n_kv_head * tail;
  const int32_t p = a.pos[r];
  if (t < nq) { /* q pair */
    const int h = t / half, i = t % half;
    double c, sn;
    memra_rope_cs(p, i, a.n_rot, a.freq_base, a.freq_scale, a.ff, &c, &sn);
    memra_pdl_wait();
    float *xh = a.q + r * a.q_ld + (int64_t)h * D;
    int e0, e1;
    memra_rope_pair_at(i, half, a.neox, &e0, &e1);
    memra_rope_turn(&xh[e0], &xh[e1], c, sn);
    return;
  }
  t -= nq;
  const int64_t ks = memra_kv_slot(r, a.pos, a.seq, a.bt, a.bt_ld, a.n_seqs, a.block_size,
                                   a.max_blocks, a.k_slots);
  TK *kd = (TK *)(a.kc + (uint64_t)(ks < 0 ? 0 : ks) * a.k_nb1);
  if (t < nk) { /* k pair: rotated in place and cached */
    const int h = t / half, i = t % half;
    double c, sn;
    memra_rope_cs(p, i, a.n_rot, a.freq_base, a.freq_scale, a.ff, &c, &sn);
    memra_pdl_wait();
    float *xh = a.k + r * a.k_ld + (int64_t)h * D;
    int e0, e1;
    memra_rope_pair_at(i, half, a.neox, &e0, &e1);
    float x0 = xh[e0], x1 = xh[e1];
    memra_rope_turn(&x0, &x1, c, sn);
    xh[e0] = x0;
    xh[e1] = x1;
    if (ks >= 0) {
      kd[(int64_t)h * D + e0] = (TK)x0;
      kd[(int64_t)h * D + e1] = (TK)x1;
    }
    return;
  }
  t -= nk;
  if (t < nt) { /* k dims past n_rot: unrotated, cached as they are */
    memra_pdl_wait();
    const int64_t e = (int64_t)(t / tail) * D + a.n_rot + t % tail;
    if (ks >= 0) kd[e] = (TK)a.k[r * a.k_ld + e];
    return;
  }
  t -= nt;
  const int64_t vs = t < a.n_kv_head * D ? memra_kv_slot(r, a.pos, a.seq, a.bt, a.bt_ld, a.n_seqs,
                                                         a.block_size, a.max_blocks, a.v_slots)
                                         : -1;
  memra_pdl_wait();
  if (vs >= 0) ((TV *)(a.vc + (uint64_t)vs * a.v_nb1))[t] = (TV)a.v[r * a.v_ld + t]; /* v */
}

memra_status memra_cu_rope_kv_check(memra_backend *be, const char *what, const memra_tensor *q,
                                    const memra_tensor *k, const memra_tensor *v,
                                    const memra_tensor *k_cache, const memra_tensor *v_cache,
                                    const memra_batch *batch, const memra_rope_params *p,
                                    const int32_t **pos, const int32_t **seq, const int32_t **bt,
                                    int64_t *bt_ld, const float **ff) {
  memra_status st;
  const int32_t *pp = NULL;
  char w[48];
  if (!q || !p) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: q and params are required", what);
  if ((st = memra_cu_kv_store_check(be, what, k_cache, v_cache, k, v, batch, pos, seq, bt,
                                    bt_ld)) != MEMRA_OK)
    return st;
  if (p->head_dim <= 0 || k->ne0 % p->head_dim)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: k rows have %lld elements, not a multiple of head_dim %d", what,
                         (long long)k->ne0, p->head_dim);
  if (q->ne1 != batch->n_rows || k->ne1 != batch->n_rows)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: q, k, v have %lld, %lld, %lld rows, batch %d",
                         what, (long long)q->ne1, (long long)k->ne1, (long long)v->ne1,
                         batch->n_rows);
  memra_rope_params pk = *p;
  pk.n_head = (int32_t)(k->ne0 / p->head_dim);
  snprintf(w, sizeof w, "%s: q", what);
  if ((st = memra_cu_rope_check(be, w, q, &batch->pos, p, &pp, ff)) != MEMRA_OK) return st;
  snprintf(w, sizeof w, "%s: k", what);
  if ((st = memra_cu_rope_check(be, w, k, &batch->pos, &pk, &pp, ff)) != MEMRA_OK) return st;
  /* in-place rotation of shared bytes would race */
  if (memra_cu_overlap(q, k) || memra_cu_overlap(q, v) || memra_cu_overlap(k, v))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: q, k and v must not overlap", what);
  return MEMRA_OK;
}

memra_status memra_cu_rope_kv_store(memra_backend *be, const memra_tensor *q, const memra_tensor *k,
                                    const memra_tensor *v, const memra_tensor *k_cache,
                                    const memra_tensor *v_cache, const memra_batch *batch,
                                    const memra_rope_params *p) {
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  const float *ff = NULL;
  int64_t bt_ld = 0;
  const memra_status st = memra_cu_rope_kv_check(be, "rope_kv_store", q, k, v, k_cache, v_cache,
                                                 batch, p, &pos, &seq, &bt, &bt_ld, &ff);
  if (st) return st;
  if (batch->n_rows == 0) return MEMRA_OK;
  const int32_t kv_heads = (int32_t)(k->ne0 / p->head_dim);
  rope_kv_args a;
  a.q = (float *)memra_cu_ptr(q);
  a.k = (float *)memra_cu_ptr(k);
  a.v = (const float *)memra_cu_ptr(v);
  a.q_ld = (int64_t)(q->nb1 / 4);
  a.k_ld = (int64_t)(k->nb1 / 4);
  a.v_ld = (int64_t)(v->nb1 / 4);
  memra_cu_fill_paged(&a, k_cache, v_cache, batch, pos, seq, bt, bt_ld);
  a.n_head = p->n_head;
  a.n_kv_head = kv_heads;
  a.head_dim = p->head_dim;
  a.n_rot = p->n_rot;
  a.neox = p->mode == MEMRA_ROPE_NEOX;
  a.freq_base = p->freq_base;
  a.freq_scale = p->freq_scale;
  a.ff = ff;
  const int64_t items = (int64_t)p->n_head * (p->n_rot / 2) +
                        (int64_t)kv_heads * (p->head_dim - p->n_rot / 2) + k->ne0;
  const int threads = 256;
  if (items > (int64_t)threads * 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED,
                         "rope_kv_store: %lld elements per row, at most %d", (long long)items,
                         threads * 65535);
  const dim3 grid((unsigned)((items + threads - 1) / threads), (unsigned)batch->n_rows);
  const bool kh = k_cache->type == MEMRA_TYPE_F16, vh = v_cache->type == MEMRA_TYPE_F16;
  if (k_cache->type == MEMRA_TYPE_F8_E4M3) /* both FP8 (checked) */
    (void)memra_cu_launch(be, rope_kv_v1_kernel<memra_f8, memra_f8>, grid, dim3(threads), 0, a);
  else if (kh && vh)
    (void)memra_cu_launch(be, rope_kv_v1_kernel<__half, __half>, grid, dim3(threads), 0, a);
  else if (kh)
    (void)memra_cu_launch(be, rope_kv_v1_kernel<__half, float>, grid, dim3(threads), 0, a);
  else if (vh)
    (void)memra_cu_launch(be, rope_kv_v1_kernel<float, __half>, grid, dim3(threads), 0, a);
  else
    (void)memra_cu_launch(be, rope_kv_v1_kernel<float, float>, grid, dim3(threads), 0, a);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
