/* norm_rope_kv.cu — ABI 1.19 rmsnorm_qk_rope_kv: an attention layer's per-head q / k RMS norms,
 * rope and the KV store of a decode step in one launch. Oracle: plugins/cpu rope_kv.c (rmsnorm_qk,
 * then rope_kv_store). The contract is the two GPU calls' bits:
 *  - a head's norm is rmsnorm_qk's row (rmsnorm.cu rms_row, VEC, rms_threads(true, head_dim)
 *    threads: a float4 a thread, an fmaf chain over it, memra_block_sum over the row's warps),
 *    here by one warp holding the head's float4s: for head_dim <= 128 the block sum is the warp
 *    sum plus the zeros of the second butterfly, for head_dim <= 256 the sum of the two warps'
 *    sums (the second butterfly over lanes 0 and 1), then x * inv * w as rms_row writes it;
 *  - each pair then turns through memra_rope_cs / memra_rope_turn as rope_kv_v1_kernel does
 *    (angles before the PDL wait), the k cache gets (T)float of the turned value, the dims past
 *    n_rot as they are, v as kv_store stores it.
 * Other shapes (head_dim not a multiple of 4 or above 256, rows or weights not 16-byte aligned)
 * take the two calls. Why (docs/PERF.md): the q / k norms and rope_kv_store are two small kernels
 * in a row between the q / k / v projections and the attention, ~2 us a link each in a decode
 * step (chain_bench); one of them carries no work the other could not.
 * ver 1: a warp a (row, q or k head), then warps storing v; 4 warps a block. q's heads may be
 *   read from other rows (q_in: Qwen3-Next's q inside its q + gate projection), as rmsnorm with
 *   y != x reads them.
 * Opt-in (MEMRA_QK_ROPE=1, backend.cu): the same bits as the calls on the H200 (2026-12-05) but
 * slower, MoE tg128 2,188 -> 2,035, hybrid 3,463 -> 3,385: the launch it saves was the window in
 * which the attention's blocks become resident (ABI 1.16's lesson). */
#include <cuda_fp16.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/fp8.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/rope_kv.cuh"

enum { NRK_WARPS = 4, NRK_MAXD = 256, NRK_VW = 256 /* v elements a v warp stores */ };

struct nrk_args {
  float *q, *k;
  const float *v, *wq, *wk, *qin; /* qin: q's source heads (NULL: q in place) */
  int64_t q_ld, k_ld, v_ld, qin_ld;
  float eps;
  char *kc, *vc;
  uint64_t k_nb1, v_nb1;
  int64_t k_slots, v_slots;
  const int32_t *pos, *seq, *bt;
  int64_t bt_ld;
  int n_seqs, block_size, max_blocks;
  int n_head, n_kv_head, head_dim, n_rot, neox, v_warps;
  float freq_base, freq_scale;
  const float *ff;
};

__device__ __forceinline__ float4 nrk_scale(float4 v, float inv, float4 g) {
  return make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
}

template <typename TK, typename TV>
__global__ void __launch_bounds__(NRK_WARPS * 32) norm_rope_kv_v1_kernel(nrk_args a) {
  __shared__ __align__(16) float hs[NRK_WARPS][NRK_MAXD];
  memra_pdl_trigger(); /* a small kernel: the GEMV behind it may be scheduled (launch.cuh) */
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int64_t r = blockIdx.y;
  const int item = blockIdx.x * NRK_WARPS + w, nh = a.n_head + a.n_kv_head;
  const int D = a.head_dim, n4 = D / 4, half = a.n_rot / 2;
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  if (item < nh) {
    const bool isk = item >= a.n_head;
    const int h = isk ? item - a.n_head : item;
    const float *wn = isk ? a.wk : a.wq;
    /* before the wait, what no op of this step writes: the norm weight, the position, the
     * pairs' angles (double), the k row's cache slot */
    const float4 g0 = lane < n4 ? __ldg((const float4 *)wn + lane) : zero;
    const float4 g1 = lane + 32 < n4 ? __ldg((const float4 *)wn + 32 + lane) : zero;
    const int32_t p = a.pos[r];
    double cs[4], sn[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (lane + 32 * j < half)
        memra_rope_cs(p, lane + 32 * j, a.n_rot, a.freq_base, a.freq_scale, a.ff, &cs[j], &sn[j]);
    const int64_t ks = isk ? memra_kv_slot(r, a.pos, a.seq, a.bt, a.bt_ld, a.n_seqs, a.block_size,
                                           a.max_blocks, a.k_slots)
                           : -1;
    memra_pdl_wait();
    float *xh = (isk ? a.k + r * a.k_ld : a.q + r * a.q_ld) + (int64_t)h * D;
    const float *src = isk || !a.qin ? xh : a.qin + (r * a.n_head + h) * a.qin_ld;
    const float4 v0 = lane < n4 ? ((const float4 *)src)[lane] : zero;
    const float4 v1 = lane + 32 < n4 ? ((const float4 *)src)[32 + lane] : zero;
    const float s0 = memra_warp_sum(memra_sumsq4(v0));
    float ss;
    if (n4 > 32) {
      const float s1 = memra_warp_sum(memra_sumsq4(v1));
      ss = memra_warp_sum(lane == 0 ? s0 : lane == 1 ? s1 : 0.f);
    } else {
      ss = memra_warp_sum(lane == 0 ? s0 : 0.f);
    }
    const float inv = rsqrtf(ss / (float)D + a.eps);
    float *hw = hs[w];
    if (lane < n4) ((float4 *)hw)[lane] = nrk_scale(v0, inv, g0);
    if (lane + 32 < n4) ((float4 *)hw)[32 + lane] = nrk_scale(v1, inv, g1);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = lane + 32 * j;
      if (i >= half) break;
      int e0, e1;
      memra_rope_pair_at(i, half, a.neox, &e0, &e1);
      float x0 = hw[e0], x1 = hw[e1];
      memra_rope_turn(&x0, &x1, cs[j], sn[j]);
      hw[e0] = x0;
      hw[e1] = x1;
    }
    __syncwarp();
    TK *kd = (TK *)(a.kc + (uint64_t)(ks < 0 ? 0 : ks) * a.k_nb1) + (int64_t)h * D;
    for (int e = lane; e < D; e += 32) {
      const float x = hw[e];
      xh[e] = x;
      if (ks >= 0) kd[e] = (TK)x;
    }
    return;
  }
  const int vw = item - nh; /* a v warp: elements [vw NRK_VW, + NRK_VW) of row r's v */
  if (vw >= a.v_warps) return;
  const int64_t vs = memra_kv_slot(r, a.pos, a.seq, a.bt, a.bt_ld, a.n_seqs, a.block_size,
                                   a.max_blocks, a.v_slots);
  memra_pdl_wait();
  if (vs < 0) return;
  const int64_t nv = (int64_t)a.n_kv_head * D, t1 = (int64_t)(vw + 1) * NRK_VW;
  TV *vd = (TV *)(a.vc + (uint64_t)vs * a.v_nb1);
  for (int64_t t = (int64_t)vw * NRK_VW + lane; t < (t1 < nv ? t1 : nv); t += 32)
    vd[t] = (TV)a.v[r * a.v_ld + t];
}

memra_status memra_cu_rmsnorm_qk_rope_kv(memra_backend *be, const memra_tensor *q,
                                         const memra_tensor *q_in, const memra_tensor *wq,
                                         const memra_tensor *k, const memra_tensor *wk, float eps,
                                         const memra_tensor *v, const memra_tensor *k_cache,
                                         const memra_tensor *v_cache, const memra_batch *batch,
                                         const memra_rope_params *p) {
  const char *op = "rmsnorm_qk_rope_kv";
  if (!q || !wq || !k || !wk || !p)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: q, wq, k, wk and params are required", op);
  const int64_t D = p->head_dim;
  if (D < 1 || q->ne0 % D || k->ne0 % D)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: q, k rows of %lld, %lld elements, not whole heads of %lld", op,
                         (long long)q->ne0, (long long)k->ne0, (long long)D);
  if (q->type != MEMRA_TYPE_F32 || k->type != MEMRA_TYPE_F32 ||
      (q->ne1 > 1 && q->nb1 != 4u * (uint64_t)q->ne0) ||
      (k->ne1 > 1 && k->nb1 != 4u * (uint64_t)k->ne0))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: q and k must be F32 with packed rows", op);
  memra_tensor qh = *q, kh = *k; /* rmsnorm_qk's per-head views */
  qh.ne1 *= q->ne0 / D;
  kh.ne1 *= k->ne0 / D;
  qh.ne0 = kh.ne0 = D;
  qh.nb1 = kh.nb1 = 4u * (uint64_t)D;
  memra_status st;
  if ((st = memra_cu_check_tensor(be, &qh, "rmsnorm_qk_rope_kv: q", MEMRA_TYPE_F32)) ||
      (st = memra_cu_check_tensor(be, &kh, "rmsnorm_qk_rope_kv: k", MEMRA_TYPE_F32)) ||
      (st = memra_cu_check_tensor(be, wq, "rmsnorm_qk_rope_kv: wq", MEMRA_TYPE_F32)) ||
      (st = memra_cu_check_tensor(be, wk, "rmsnorm_qk_rope_kv: wk", MEMRA_TYPE_F32)))
    return st;
  if (wq->ne0 != D || wk->ne0 != D)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: wq, wk have %lld, %lld elements, heads %lld", op,
                         (long long)wq->ne0, (long long)wk->ne0, (long long)D);
  if (!(eps >= 0.f)) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: eps %g is negative", op, eps);
  if (q_in) {
    if ((st = memra_cu_check_tensor(be, q_in, "rmsnorm_qk_rope_kv: q_in", MEMRA_TYPE_F32)))
      return st;
    if (q_in->ne0 != D || q_in->ne1 != qh.ne1)
      return memra_cu_errf(
          be, MEMRA_E_INVALID, "%s: q_in has shape [%lld, %lld], expected [%lld, %lld]", op,
          (long long)q_in->ne1, (long long)q_in->ne0, (long long)qh.ne1, (long long)D);
    if (q_in->nb1 % 4 || memra_cu_overlap(q_in, q) || memra_cu_overlap(q_in, k))
      return memra_cu_errf(be, MEMRA_E_INVALID,
                           "%s: q_in overlaps q or k, or its stride is not whole floats", op);
  }
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  const float *ff = NULL;
  int64_t bt_ld = 0;
  if ((st = memra_cu_rope_kv_check(be, op, q, k, v, k_cache, v_cache, batch, p, &pos, &seq, &bt,
                                   &bt_ld, &ff)))
    return st;
  float *qp = (float *)memra_cu_ptr(q), *kp = (float *)memra_cu_ptr(k);
  const float *wqp = (const float *)memra_cu_ptr(wq), *wkp = (const float *)memra_cu_ptr(wk);
  /* one warp a head on rmsnorm_qk's VEC path (its rule: rows and weights 16-byte aligned) */
  const float *qinp = q_in ? (const float *)memra_cu_ptr(q_in) : NULL;
  const bool fits = D % 4 == 0 && D <= NRK_MAXD && p->n_rot <= D &&
                    memra_cu_align_of(qp, 4u * (uint64_t)D) >= 16 &&
                    (!q_in || memra_cu_align_of(qinp, q_in->nb1) >= 16) &&
                    memra_cu_align_of(kp, 4u * (uint64_t)D) >= 16 &&
                    memra_cu_align_of(wqp, 0) >= 16 && memra_cu_align_of(wkp, 0) >= 16;
  if (!fits) { /* the calls it stands for: their bits by definition */
    const memra_tensor none = {};
    if (q_in) {
      if ((st = memra_cu_rmsnorm(be, &qh, q_in, &none, wq, eps)) ||
          (st = memra_cu_rmsnorm(be, &kh, &kh, &none, wk, eps)))
        return st;
    } else if ((st = memra_cu_rmsnorm_qk(be, &qh, wq, &kh, wk, eps))) {
      return st;
    }
    return memra_cu_rope_kv_store(be, q, k, v, k_cache, v_cache, batch, p);
  }
  if (batch->n_rows == 0) return MEMRA_OK;
  nrk_args a;
  a.q = qp;
  a.k = kp;
  a.v = (const float *)memra_cu_ptr(v);
  a.wq = wqp;
  a.wk = wkp;
  a.qin = qinp;
  a.qin_ld = q_in ? (int64_t)(q_in->nb1 / 4) : 0;
  a.q_ld = (int64_t)(q->nb1 / 4);
  a.k_ld = (int64_t)(k->nb1 / 4);
  a.v_ld = (int64_t)(v->nb1 / 4);
  a.eps = eps;
  memra_cu_fill_paged(&a, k_cache, v_cache, batch, pos, seq, bt, bt_ld);
  a.n_head = (int)(q->ne0 / D);
  a.n_kv_head = (int)(k->ne0 / D);
  a.head_dim = (int)D;
  a.n_rot = p->n_rot;
  a.neox = p->mode == MEMRA_ROPE_NEOX;
  a.freq_base = p->freq_base;
  a.freq_scale = p->freq_scale;
  a.ff = ff;
  a.v_warps = (int)((k->ne0 + NRK_VW - 1) / NRK_VW);
  const int64_t warps = (int64_t)a.n_head + a.n_kv_head + a.v_warps;
  if (warps > (int64_t)NRK_WARPS * 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: %lld heads a row", op,
                         (long long)(a.n_head + a.n_kv_head));
  const dim3 grid((unsigned)((warps + NRK_WARPS - 1) / NRK_WARPS), (unsigned)batch->n_rows);
  const bool kh16 = k_cache->type == MEMRA_TYPE_F16, vh16 = v_cache->type == MEMRA_TYPE_F16;
  const dim3 block(NRK_WARPS * 32);
  if (k_cache->type == MEMRA_TYPE_F8_E4M3) /* both FP8 (checked) */
    (void)memra_cu_launch(be, norm_rope_kv_v1_kernel<memra_f8, memra_f8>, grid, block, 0, a);
  else if (kh16 && vh16)
    (void)memra_cu_launch(be, norm_rope_kv_v1_kernel<__half, __half>, grid, block, 0, a);
  else if (kh16)
    (void)memra_cu_launch(be, norm_rope_kv_v1_kernel<__half, float>, grid, block, 0, a);
  else if (vh16)
    (void)memra_cu_launch(be, norm_rope_kv_v1_kernel<float, __half>, grid, block, 0, a);
  else
    (void)memra_cu_launch(be, norm_rope_kv_v1_kernel<float, float>, grid, block, 0, a);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
