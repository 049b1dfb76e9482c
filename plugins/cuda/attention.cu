/* attention.cu — softmax(scale * q k^T) v over each row's window of its own sequence's
 * paged KV cache (F16 or F32). Oracle: plugins/cpu attention.
 *
 * ver 1: split-KV flash decode. The KV positions are cut into fixed chunks of
 *   ATT_CHUNK; block (chunk, kv head, row) runs an online softmax over its chunk for all
 *   the query heads of one GQA group (each K/V row is read once per group), 4 warps
 *   taking every 4th position, and writes a partial (max, sum, acc[head_dim]); a second
 *   kernel merges a row's partials in chunk order with a log-sum-exp combine.  <- vtable
 * The split count is kv_bucket / ATT_CHUNK (so one graph per bucket). The chunk edges are
 * fixed positions, not a function of the bucket, the batch or the SM count: a row's
 * result is then bit-identical whether it runs alone, in any batch, eagerly or replayed.
 * Prefill rows use the same kernels, in row groups that bound the partials' workspace;
 * a tensor-core prefill kernel is later work. */
#include <cuda_fp16.h>
#include <math.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/device_util.cuh"

enum { ATT_CHUNK = 64, ATT_WARPS = 4, ATT_MAX_D = 256, ATT_DPL = ATT_MAX_D / 32, ATT_MAX_G = 8 };
/* Bound on the partials' workspace per launch group. */
static const uint64_t ATT_WS_MAX = 256ull << 20;

struct att_args {
  float *out;
  int64_t out_ld;
  const float *q;
  int64_t q_ld;
  const char *kc, *vc;
  uint64_t k_nb1, v_nb1;
  int64_t k_slots, v_slots;
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  int64_t bt_ld = 0;
  int n_seqs, block_size, max_blocks;
  int n_head, n_kv_head, head_dim, group, window;
  float scale, softcap;
  int n_split;
  int64_t row0; /* first row of this launch group */
  float *part;  /* [rows][n_head][n_split][2 + head_dim] */
};

template <typename TC>
__device__ __forceinline__ float att_load(const TC *p) {
  return (float)p[0];
}

template <typename TC>
__global__ void __launch_bounds__(ATT_WARPS * 32) attention_split_v1_kernel(att_args a) {
  __shared__ float sm_m[ATT_WARPS][ATT_MAX_G], sm_l[ATT_WARPS][ATT_MAX_G];
  __shared__ float sm_acc[ATT_WARPS][ATT_MAX_G][ATT_MAX_D];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = blockIdx.x, kh = blockIdx.y;
  const int64_t rl = blockIdx.z, r = a.row0 + rl;
  const int G = a.group, D = a.head_dim;
  const int32_t p_last = a.pos[r], s = a.seq[r];
  const int32_t lo = a.window > 0 && p_last - a.window + 1 > 0 ? p_last - a.window + 1 : 0;
  int64_t pb = (int64_t)split * ATT_CHUNK, pe = pb + ATT_CHUNK;
  if (pb < lo) pb = lo;
  if (pe > (int64_t)p_last + 1) pe = (int64_t)p_last + 1;
  if (s < 0 || s >= a.n_seqs) pe = pb; /* a bad sequence id attends to nothing */

  float qv[ATT_MAX_G][ATT_DPL], acc[ATT_MAX_G][ATT_DPL], m[ATT_MAX_G], l[ATT_MAX_G];
#pragma unroll
  for (int g = 0; g < ATT_MAX_G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < ATT_DPL; ++i) {
      const int d = lane + 32 * i;
      acc[g][i] = 0.f;
      qv[g][i] = g < G && d < D ? a.q[r * a.q_ld + (int64_t)(kh * G + g) * D + d] : 0.f;
    }
  }
  for (int64_t p = pb + warp; p < pe; p += ATT_WARPS) {
    if (p / a.block_size >= a.max_blocks) break;
    const int32_t page = a.bt[(int64_t)s * a.bt_ld + p / a.block_size];
    const int64_t slot = (int64_t)page * a.block_size + p % a.block_size;
    if (page < 0 || slot >= a.k_slots || slot >= a.v_slots) continue;
    const TC *kp = (const TC *)(a.kc + (uint64_t)slot * a.k_nb1) + (int64_t)kh * D;
    const TC *vp = (const TC *)(a.vc + (uint64_t)slot * a.v_nb1) + (int64_t)kh * D;
    float kv[ATT_DPL], vv[ATT_DPL];
#pragma unroll
    for (int i = 0; i < ATT_DPL; ++i) {
      const int d = lane + 32 * i;
      kv[i] = d < D ? att_load(kp + d) : 0.f;
      vv[i] = d < D ? att_load(vp + d) : 0.f;
    }
#pragma unroll
    for (int g = 0; g < ATT_MAX_G; ++g) {
      if (g >= G) break;
      float dot = 0.f;
#pragma unroll
      for (int i = 0; i < ATT_DPL; ++i) dot = fmaf(qv[g][i], kv[i], dot);
      float sc = memra_warp_sum(dot) * a.scale;
      if (a.softcap > 0.f) sc = a.softcap * tanhf(sc / a.softcap);
      const float mn = fmaxf(m[g], sc);
      const float corr = m[g] == -INFINITY ? 0.f : expf(m[g] - mn);
      const float pe_ = expf(sc - mn);
      l[g] = l[g] * corr + pe_;
#pragma unroll
      for (int i = 0; i < ATT_DPL; ++i) acc[g][i] = acc[g][i] * corr + pe_ * vv[i];
      m[g] = mn;
    }
  }
  /* Merge the 4 warps in warp order (fixed), then write one partial per head. */
#pragma unroll
  for (int g = 0; g < ATT_MAX_G; ++g) {
    if (g >= G) break;
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
#pragma unroll
    for (int i = 0; i < ATT_DPL; ++i) {
      const int d = lane + 32 * i;
      if (d < D) sm_acc[warp][g][d] = acc[g][i];
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < G * (D + 2); t += blockDim.x) {
    const int g = t / (D + 2), c = t % (D + 2);
    float M = -INFINITY;
    for (int w = 0; w < ATT_WARPS; ++w) M = fmaxf(M, sm_m[w][g]);
    float v = 0.f;
    if (c == 0) {
      v = M;
    } else {
      for (int w = 0; w < ATT_WARPS; ++w) {
        if (sm_m[w][g] == -INFINITY) continue;
        const float f = expf(sm_m[w][g] - M);
        v += f * (c == 1 ? sm_l[w][g] : sm_acc[w][g][c - 2]);
      }
    }
    const int h = kh * G + g;
    a.part[((rl * a.n_head + h) * a.n_split + split) * (int64_t)(D + 2) + c] = v;
  }
}

/* out[r, h] = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s, splits in order. */
__global__ void attention_combine_v1_kernel(att_args a) {
  const int h = blockIdx.x;
  const int64_t rl = blockIdx.y, r = a.row0 + rl;
  const int D = a.head_dim;
  const float *pr = a.part + (rl * a.n_head + h) * (int64_t)a.n_split * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < a.n_split; ++s) M = fmaxf(M, pr[(int64_t)s * (D + 2)]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.f, den = 0.f;
    for (int s = 0; s < a.n_split; ++s) {
      const float *ps = pr + (int64_t)s * (D + 2);
      if (ps[0] == -INFINITY) continue;
      const float f = expf(ps[0] - M);
      den += f * ps[1];
      num += f * ps[2 + d];
    }
    /* A row that attended to nothing (bad ids) gets NaN, not a silent zero. */
    a.out[r * a.out_ld + (int64_t)h * D + d] = den > 0.f ? num / den : __int_as_float(0x7fc00000);
  }
}

memra_status memra_cu_attention(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k_cache, const memra_tensor *v_cache,
                                const memra_batch *batch, const memra_attn_params *p) {
  memra_status st;
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  int64_t bt_ld = 0;
  if (!p) return memra_cu_errf(be, MEMRA_E_INVALID, "attention: params are NULL");
  if ((st = memra_cu_check_batch(be, batch, "attention", &pos, &seq, &bt, &bt_ld)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, out, "attention: out", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, q, "attention: q", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, k_cache, "attention: k_cache", -1)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, v_cache, "attention: v_cache", -1)) != MEMRA_OK ||
      (st = memra_cu_check_same_shape(be, out, q, "attention: out and q")) != MEMRA_OK)
    return st;
  if (p->n_head <= 0 || p->n_kv_head <= 0 || p->n_head % p->n_kv_head || p->head_dim <= 0)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "attention: n_head %d, n_kv_head %d, head_dim %d: expected positive "
                         "values with n_head a multiple of n_kv_head",
                         p->n_head, p->n_kv_head, p->head_dim);
  if (p->head_dim > ATT_MAX_D || p->n_head / p->n_kv_head > ATT_MAX_G)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED,
                         "attention: head_dim %d (max %d) or group %d (max %d) not supported",
                         p->head_dim, ATT_MAX_D, p->n_head / p->n_kv_head, ATT_MAX_G);
  if ((int64_t)p->n_head * p->head_dim != q->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: q rows have %lld elements, expected %d x %d",
                         (long long)q->ne0, p->n_head, p->head_dim);
  if (q->ne1 < batch->n_rows)
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: q has %lld rows, batch %d",
                         (long long)q->ne1, batch->n_rows);
  if (k_cache->type != v_cache->type ||
      (k_cache->type != MEMRA_TYPE_F16 && k_cache->type != MEMRA_TYPE_F32))
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED,
                         "attention: caches are %s and %s, expected both F16 or both F32",
                         memra_type_info(k_cache->type).name, memra_type_info(v_cache->type).name);
  if (k_cache->ne0 != (int64_t)p->n_kv_head * p->head_dim || v_cache->ne0 != k_cache->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: cache rows have %lld/%lld elements, expected %d x %d",
                         (long long)k_cache->ne0, (long long)v_cache->ne0, p->n_kv_head, p->head_dim);
  const uint64_t esz = (uint64_t)memra_type_info(k_cache->type).size;
  if (memra_cu_align_of(memra_cu_ptr(k_cache), k_cache->nb1) < esz ||
      memra_cu_align_of(memra_cu_ptr(v_cache), v_cache->nb1) < esz || q->nb1 % 4 || out->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: misaligned cache, q or out");
  if (p->window < 0 || !(p->softcap >= 0.f))
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: window %d and softcap %g must be >= 0",
                         p->window, p->softcap);
  if (batch->n_rows == 0) return MEMRA_OK;

  att_args a;
  a.out = (float *)memra_cu_ptr(out);
  a.out_ld = (int64_t)(out->nb1 / 4);
  a.q = (const float *)memra_cu_ptr(q);
  a.q_ld = (int64_t)(q->nb1 / 4);
  a.kc = memra_cu_ptr(k_cache);
  a.vc = memra_cu_ptr(v_cache);
  a.k_nb1 = k_cache->nb1;
  a.v_nb1 = v_cache->nb1;
  a.k_slots = k_cache->ne1;
  a.v_slots = v_cache->ne1;
  a.pos = pos;
  a.seq = seq;
  a.bt = bt;
  a.bt_ld = bt_ld;
  a.n_seqs = batch->n_seqs;
  a.block_size = batch->block_size;
  a.max_blocks = batch->max_blocks;
  a.n_head = p->n_head;
  a.n_kv_head = p->n_kv_head;
  a.head_dim = p->head_dim;
  a.group = p->n_head / p->n_kv_head;
  a.window = p->window;
  a.scale = p->scale;
  a.softcap = p->softcap;
  a.n_split = (batch->kv_bucket + ATT_CHUNK - 1) / ATT_CHUNK;
  if (a.n_split > 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "attention: kv_bucket %d too large", batch->kv_bucket);
  const uint64_t per_row = (uint64_t)p->n_head * a.n_split * (p->head_dim + 2) * sizeof(float);
  uint64_t group_rows = ATT_WS_MAX / per_row;
  if (group_rows < 1) group_rows = 1;
  if (group_rows > 65535) group_rows = 65535;
  if (group_rows > (uint64_t)batch->n_rows) group_rows = (uint64_t)batch->n_rows;
  void *ws = NULL;
  if ((st = memra_cu_workspace(be, group_rows * per_row, &ws)) != MEMRA_OK) return st;
  a.part = (float *)ws;
  for (int64_t r0 = 0; r0 < batch->n_rows; r0 += (int64_t)group_rows) {
    const int64_t nr = batch->n_rows - r0 < (int64_t)group_rows ? batch->n_rows - r0 : (int64_t)group_rows;
    a.row0 = r0;
    dim3 g1((unsigned)a.n_split, (unsigned)p->n_kv_head, (unsigned)nr);
    if (k_cache->type == MEMRA_TYPE_F16)
      attention_split_v1_kernel<__half><<<g1, ATT_WARPS * 32, 0, be->stream>>>(a);
    else
      attention_split_v1_kernel<float><<<g1, ATT_WARPS * 32, 0, be->stream>>>(a);
    MEMRA_CU_LAUNCHED();
    dim3 g2((unsigned)p->n_head, (unsigned)nr);
    attention_combine_v1_kernel<<<g2, 128, 0, be->stream>>>(a);
    MEMRA_CU_LAUNCHED();
  }
  return MEMRA_OK;
}
