/* attention_prefill.cu — flash-attention for prefill batches on warp-level tensor cores
 * (mma.sync m16n8k16, f16 operands, f32 accumulation), for both GPU plugins; the F16
 * paged KV cache only (attention.cu keeps F32/F8 caches and decode batches on split-KV).
 * Oracle: plugins/cpu attention (tools/device/mma_check.c).
 *
 * ver 1: a CTA takes R = 64 / G consecutive batch rows and one KV head, and stacks the G
 *   query heads of that head's GQA group into the 64 rows of its Q tile (M row = row * G +
 *   head), so every K/V tile is loaded once for the whole group. 4 warps own 16 M rows
 *   each. K/V tiles of 64 positions come from the paged cache by the block table (cp.async,
 *   two stages, rows XOR-swizzled in 16-byte chunks so ldmatrix is conflict-free); S = Q K^T
 *   and O += P V run on mma.sync with an online softmax in f32 (P rounded to f16 for the
 *   second product, as FlashAttention-2 does).
 * Rows are masked one by one: each M row attends to positions [lo, pos] of its own
 *   sequence (lo = pos - window + 1 with a sliding window, else 0), scores pass through the
 *   tanh softcap when set. A tile that holds rows of several sequences makes one pass over
 *   the KV of each sequence, using that sequence's block table; rows of the other sequences
 *   see those positions as masked.
 * Exactness: KV tiles sit on a fixed grid of absolute positions (multiples of 64), walked
 *   in ascending order, and each row's softmax state is its own (quad shuffles inside one
 *   row only); a tile fully masked for a row leaves that row's state unchanged, bit for bit.
 *   So a row's result depends only on its own q and its sequence's cache: chunked prefill
 *   equals one-shot prefill bit for bit, and a row does not depend on the other rows. */
#include <cuda_fp16.h>
#include <math.h>

#include "plugins/cuda/attention_prefill.h"
#include "plugins/cuda/mma_sync.cuh"

enum {
  ATP_BM = 64,  /* M rows (row x head) per CTA */
  ATP_BKV = 64, /* KV positions per tile */
  ATP_THREADS = 128,
  ATP_STAGES = 2,
  ATP_MAX_G = ATP_BM
};

struct atp_args {
  float *out;
  int64_t out_ld;
  const float *q;
  int64_t q_ld;
  const char *kc, *vc;
  uint64_t k_nb1, v_nb1;
  int64_t k_slots, v_slots;
  const int32_t *pos, *seq, *bt;
  int64_t bt_ld;
  int n_rows, n_seqs, block_size, max_blocks;
  int n_kv_head, group, rows_per_cta, window;
  float scale_log2, scale, softcap; /* scale_log2 = scale * log2(e) */
};

/* Element offset of (row, 16-byte chunk) in a [rows][D] f16 tile: the low 3 bits of the
 * chunk are XORed with row % 8, so 8 consecutive rows at one logical chunk hit 8 banks. */
template <int D> __device__ __forceinline__ int atp_swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

template <int D> struct atp_smem {
  uint16_t q[ATP_BM * D];
  uint16_t k[ATP_STAGES][ATP_BKV * D];
  uint16_t v[ATP_STAGES][ATP_BKV * D];
};

/* Issues the cp.async loads of positions [t0, t0 + 64) of sequence s into stage st.
 * Positions outside [kv_lo, kv_hi) or on a missing page are zero-filled and flagged invalid
 * (masked for every row). */
template <int D>
__device__ __forceinline__ void atp_load_kv(const atp_args &a, atp_smem<D> *sm, int8_t *valid,
                                            int st, int s, int kh, int64_t t0, int64_t kv_lo,
                                            int64_t kv_hi) {
  constexpr int CPR = D / 8; /* 16-byte chunks per row */
  const int chunk = threadIdx.x % CPR;
  const uint32_t kbase = memra_smem_u32(sm->k[st]), vbase = memra_smem_u32(sm->v[st]);
#pragma unroll
  for (int i = 0; i < ATP_BKV * CPR / ATP_THREADS; ++i) {
    const int row = threadIdx.x / CPR + i * (ATP_THREADS / CPR);
    const int64_t p = t0 + row;
    int64_t slot = -1;
    if (p >= kv_lo && p < kv_hi && p / a.block_size < a.max_blocks) {
      const int32_t page = a.bt[(int64_t)s * a.bt_ld + p / a.block_size];
      slot = (int64_t)page * a.block_size + p % a.block_size;
      if (page < 0 || slot >= a.k_slots || slot >= a.v_slots) slot = -1;
    }
    const int off = atp_swz<D>(row, chunk) * 2;
    const char *kp =
        slot >= 0 ? a.kc + (uint64_t)slot * a.k_nb1 + ((int64_t)kh * D + chunk * 8) * 2 : a.kc;
    const char *vp =
        slot >= 0 ? a.vc + (uint64_t)slot * a.v_nb1 + ((int64_t)kh * D + chunk * 8) * 2 : a.vc;
    memra_cp_async16(kbase + off, kp, slot >= 0 ? 16 : 0);
    memra_cp_async16(vbase + off, vp, slot >= 0 ? 16 : 0);
    if (chunk == 0) valid[st * ATP_BKV + row] = slot >= 0;
  }
}

template <int D>
__global__ void __launch_bounds__(ATP_THREADS) attention_prefill_v1_kernel(atp_args a) {
  extern __shared__ __align__(128) unsigned char atp_raw[];
  atp_smem<D> *sm = (atp_smem<D> *)atp_raw;
  __shared__ int32_t s_pos[ATP_BM], s_seq[ATP_BM], s_lo[ATP_BM];
  __shared__ int32_t s_first[ATP_BM], s_kvlo[ATP_BM], s_kvhi[ATP_BM];
  __shared__ int8_t s_valid[ATP_STAGES * ATP_BKV];
  constexpr int CPR = D / 8, KS = D / 16, DN = D / 8;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = a.group, R = a.rows_per_cta, kh = blockIdx.y;
  const int64_t r0 = (int64_t)blockIdx.x * R;

  /* Row facts: ok rows have a valid sequence id and position. */
  if (tid < R) {
    const int64_t r = r0 + tid;
    int32_t p = -1, s = -1, lo = 0;
    if (r < a.n_rows) {
      p = a.pos[r];
      s = a.seq[r];
      if (s < 0 || s >= a.n_seqs || p < 0) s = -1;
      lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    }
    s_pos[tid] = p;
    s_seq[tid] = s;
    s_lo[tid] = lo;
  }
  /* Q tile as f16, M row m = row * G + head. */
  for (int i = tid; i < ATP_BM * CPR; i += ATP_THREADS) {
    const int m = i / CPR, c = i % CPR, rr = m / G, h = m % G;
    const int64_t r = r0 + rr;
    uint32_t w[4] = {0u, 0u, 0u, 0u};
    if (rr < R && r < a.n_rows) {
      const float *src = a.q + r * a.q_ld + ((int64_t)kh * G + h) * D + c * 8;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[j] = memra_pack_half2(src[2 * j], src[2 * j + 1]);
    }
    *(uint4 *)&sm->q[atp_swz<D>(m, c)] = make_uint4(w[0], w[1], w[2], w[3]);
  }
  __syncthreads();
  /* Per sequence (first row naming it): the KV range its rows of this tile need. */
  if (tid < R) {
    const int32_t s = s_seq[tid];
    int first = s >= 0;
    int32_t lo = 0x7fffffff, hi = 0;
    for (int j = 0; j < R && first; ++j) {
      if (s_seq[j] != s) continue;
      if (j < tid) first = 0;
      lo = min(lo, s_lo[j]);
      hi = max(hi, s_pos[j] + 1);
    }
    s_first[tid] = first;
    s_kvlo[tid] = lo;
    s_kvhi[tid] = hi;
  }

  /* Q fragments of this warp's 16 M rows, kept in registers. */
  uint32_t qf[KS][4];
  {
    const uint32_t qb = memra_smem_u32(sm->q);
    const int row = warp * 16 + (lane & 15);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
      memra_ldmatrix_x4(qf[ks], qb + atp_swz<D>(row, ks * 2 + (lane >> 4)) * 2);
  }
  __syncthreads();

  /* This thread's two M rows: g and g + 8 of the warp's 16. */
  const int g = lane >> 2, t = lane & 3;
  int32_t rpos[2], rlo[2], rseq[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = warp * 16 + g + 8 * h, rr = m / G;
    const bool in = rr < R;
    rpos[h] = in ? s_pos[rr] : -1;
    rlo[h] = in ? s_lo[rr] : 0;
    rseq[h] = in ? s_seq[rr] : -1;
  }

  float acc[DN][4];
#pragma unroll
  for (int j = 0; j < DN; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      acc[j][e] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};

  for (int fi = 0; fi < R; ++fi) {
    if (!s_first[fi]) continue;
    const int s = s_seq[fi];
    const int64_t kv_lo = s_kvlo[fi], kv_hi = s_kvhi[fi];
    const int64_t t_first = kv_lo / ATP_BKV * ATP_BKV;
    const int n_t = (int)((kv_hi - t_first + ATP_BKV - 1) / ATP_BKV);
    atp_load_kv<D>(a, sm, s_valid, 0, s, kh, t_first, kv_lo, kv_hi);
    memra_cp_async_commit();
    for (int it = 0; it < n_t; ++it) {
      const int st = it & 1;
      const int64_t t0 = t_first + (int64_t)it * ATP_BKV;
      if (it + 1 < n_t) atp_load_kv<D>(a, sm, s_valid, st ^ 1, s, kh, t0 + ATP_BKV, kv_lo, kv_hi);
      memra_cp_async_commit();
      memra_cp_async_wait<1>();
      __syncthreads();

      /* Rows of this warp that see any position of the tile (others: an exact no-op). */
      bool live = false;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        live |= rseq[h] == s && rpos[h] >= t0 && rlo[h] < t0 + ATP_BKV;
      if (__any_sync(0xffffffffu, live)) {
        /* S = Q K^T: 16 x 64 per warp, 8 n8 tiles. */
        float sc[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            sc[j][e] = 0.f;
        const uint32_t kb = memra_smem_u32(sm->k[st]), vb = memra_smem_u32(sm->v[st]);
        const int k_row = (lane & 7) + ((lane >> 4) << 3), k_chunk = (lane >> 3) & 1;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
#pragma unroll
          for (int jp = 0; jp < 4; ++jp) {
            uint32_t r[4];
            memra_ldmatrix_x4(r, kb + atp_swz<D>(jp * 16 + k_row, ks * 2 + k_chunk) * 2);
            const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
            memra_mma_16816<0>(sc[2 * jp], qf[ks], b0);
            memra_mma_16816<0>(sc[2 * jp + 1], qf[ks], b1);
          }
        /* Mask, scale (log2 units), softcap; row max over the tile. */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1, col = j * 8 + 2 * t + (e & 1);
            const int64_t p = t0 + col;
            const bool ok =
                rseq[h] == s && p >= rlo[h] && p <= rpos[h] && s_valid[st * ATP_BKV + col];
            float x = sc[j][e];
            if (a.softcap > 0.f)
              x = a.softcap * tanhf(x * a.scale / a.softcap) * 1.4426950408889634f;
            else
              x *= a.scale_log2;
            x = ok ? x : -INFINITY;
            sc[j][e] = x;
            mx[h] = fmaxf(mx[h], x);
          }
        float alpha[2], muse[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
          const float mn = fmaxf(mrow[h], mx[h]);
          muse[h] = mn == -INFINITY ? 0.f : mn; /* all masked so far: stay at the zero state */
          alpha[h] = exp2f(mrow[h] - muse[h]);
          mrow[h] = mn;
        }
        float ls[2] = {0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float pv = exp2f(sc[j][e] - muse[e >> 1]);
            sc[j][e] = pv;
            ls[e >> 1] += pv;
          }
#pragma unroll
        for (int h = 0; h < 2; ++h)
          lrow[h] = lrow[h] * alpha[h] + ls[h];
#pragma unroll
        for (int j = 0; j < DN; ++j) {
          acc[j][0] *= alpha[0];
          acc[j][1] *= alpha[0];
          acc[j][2] *= alpha[1];
          acc[j][3] *= alpha[1];
        }
        /* O += P V: P from the S accumulators (C layout = A layout), V by ldmatrix.trans. */
        const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3), v_chunk = lane >> 4;
#pragma unroll
        for (int kv = 0; kv < ATP_BKV / 16; ++kv) {
          const uint32_t pa[4] = {memra_pack_half2(sc[2 * kv][0], sc[2 * kv][1]),
                                  memra_pack_half2(sc[2 * kv][2], sc[2 * kv][3]),
                                  memra_pack_half2(sc[2 * kv + 1][0], sc[2 * kv + 1][1]),
                                  memra_pack_half2(sc[2 * kv + 1][2], sc[2 * kv + 1][3])};
#pragma unroll
          for (int dp = 0; dp < DN / 2; ++dp) {
            uint32_t r[4];
            memra_ldmatrix_x4_trans(r, vb + atp_swz<D>(kv * 16 + v_row, dp * 2 + v_chunk) * 2);
            const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
            memra_mma_16816<0>(acc[2 * dp], pa, b0);
            memra_mma_16816<0>(acc[2 * dp + 1], pa, b1);
          }
        }
      }
      __syncthreads(); /* stage st is refilled by the next iteration's prefetch */
    }
    memra_cp_async_wait<0>();
  }

  /* out = acc / l (l summed over the row's quad in a fixed order); a row that attended to
   * nothing (bad ids) gets NaN, as the split-KV kernel does. */
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = lrow[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int m = warp * 16 + g + 8 * h, rr = m / G, head = m % G;
    const int64_t r = r0 + rr;
    if (rr >= R || r >= a.n_rows) continue;
    float *o = a.out + r * a.out_ld + ((int64_t)kh * G + head) * D;
    const float inv = l > 0.f ? 1.f / l : __int_as_float(0x7fc00000);
#pragma unroll
    for (int j = 0; j < DN; ++j) {
      o[j * 8 + 2 * t] = acc[j][2 * h] * inv;
      o[j * 8 + 2 * t + 1] = acc[j][2 * h + 1] * inv;
    }
  }
}

int memra_cu_attention_prefill_fits(const memra_batch *batch, const memra_tensor *k_cache,
                                    const memra_tensor *v_cache, const memra_attn_params *p) {
  if (!(batch->flags & MEMRA_BATCH_PROMPT)) return 0;
  if (k_cache->type != MEMRA_TYPE_F16 || v_cache->type != MEMRA_TYPE_F16) return 0;
  if (p->head_dim != 64 && p->head_dim != 128) return 0;
  if (p->n_head / p->n_kv_head > ATP_MAX_G || p->n_kv_head > 65535) return 0;
  return memra_cu_align_of(memra_cu_ptr(k_cache), k_cache->nb1) >= 16 &&
         memra_cu_align_of(memra_cu_ptr(v_cache), v_cache->nb1) >= 16;
}

template <int D> static memra_status atp_launch(memra_backend *be, const atp_args &a) {
  const size_t smem = sizeof(atp_smem<D>);
  MEMRA_CU(cudaFuncSetAttribute(attention_prefill_v1_kernel<D>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  dim3 grid((unsigned)((a.n_rows + a.rows_per_cta - 1) / a.rows_per_cta), (unsigned)a.n_kv_head);
  attention_prefill_v1_kernel<D><<<grid, ATP_THREADS, smem, be->stream>>>(a);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

memra_status memra_cu_attention_prefill(memra_backend *be, const memra_tensor *out,
                                        const memra_tensor *q, const memra_tensor *k_cache,
                                        const memra_tensor *v_cache, const memra_batch *batch,
                                        const memra_attn_params *p, const int32_t *pos,
                                        const int32_t *seq, const int32_t *bt, int64_t bt_ld) {
  atp_args a;
  a.out = (float *)memra_cu_ptr(out);
  a.out_ld = (int64_t)(out->nb1 / 4);
  a.q = (const float *)memra_cu_ptr(q);
  a.q_ld = (int64_t)(q->nb1 / 4);
  memra_cu_fill_paged(&a, k_cache, v_cache, batch, pos, seq, bt, bt_ld);
  a.n_rows = batch->n_rows;
  a.n_kv_head = p->n_kv_head;
  a.group = p->n_head / p->n_kv_head;
  a.rows_per_cta = ATP_BM / a.group;
  a.window = p->window;
  a.scale = p->scale;
  a.scale_log2 = p->scale * 1.4426950408889634f;
  a.softcap = p->softcap;
  return p->head_dim == 64 ? atp_launch<64>(be, a) : atp_launch<128>(be, a);
}
