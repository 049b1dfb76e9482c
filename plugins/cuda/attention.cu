/* attention.cu — softmax(scale * q k^T) v over each row's window of its own sequence's
 * paged KV cache (F16, F32, or FP8 e4m3 dequantized on read). Oracle: plugins/cpu attention.
 *
 * ver 1: split-KV flash decode. The KV positions are cut into fixed chunks of 64;
 *   block (chunk, kv head, row) runs an online softmax over its chunk for all the query
 *   heads of one GQA group (each K/V row is read once per group), 4 warps taking every
 *   4th position, and writes a partial (max, sum, acc[head_dim]); a second kernel
 *   merges a row's partials in chunk order with a log-sum-exp combine.
 *   H200, Llama-8B layer, L=512: 49 us; L=4096: 106 us (1% / 4% of copy bandwidth):
 *   each warp walked its positions one dependent load at a time.
 * ver 2: chunks of 32, three phases (scores, softmax, weighted V) with independent
 *   loads in each; see attention_split_v2_kernel.
 * ver 3: v2's split and combine in one launch: each split block takes a ticket (an atomic
 *   counter per row and KV head in device memory) after writing its partials; the block
 *   that draws the last ticket resets the counter to 0 (so the next launch, eager or a
 *   replayed graph, starts from 0) and runs the combine for its GQA group, with v2's
 *   arithmetic in v2's order: bit-identical (opcheck), graph gate PASS. But slower on the
 *   H200 (tg128 @ d512): 3a, the tail walking the heads one after another, F16 196.2 ->
 *   187.1 tok/s; 3b, weights and sums staged in shared memory and the heads' partials
 *   loaded together, Q4_K_M 293 -> 245.5 (~20 us more per layer, far more than the tail
 *   itself should cost: see docs/PERF.md, engineer fuse). So v2 stays the default and v3
 *   runs only with MEMRA_ATT_FUSE=1 (read per call, so opcheck compares both in one
 *   process), for launch groups of at most ATT_TICKETS rows x KV heads whose splits x
 *   group fit the tail's shared memory (group 4: buckets up to 8192).
 * ver 4 (attention_v4.cuh): at most 32 splits per row, sized from the row's own attended
 *   length (read on the device), K/V tiles loaded 16 bytes a lane before the scores need
 *   them, q in registers, a one-round-trip combine. H200, L 512 B 1: 13.4 us per layer,
 *   almost all of it latency (241 registers, i-cache misses, two launches).
 * ver 5 (attention_v5.cuh) is in the vtable: split and combine in one launch, the splits of
 *   a (KV head, row) one thread-block cluster that combines through distributed shared
 *   memory; at most 16 splits (8 on the sm120a family) from the row's own length, 8 warps
 *   of a compact step loop, q in shared memory. MEMRA_ATT=4 / MEMRA_ATT=2 (read per call,
 *   for A/B timing and opcheck) run ver 4 / ver 2, MEMRA_ATT=5 ver 5 where v6 is the default,
 *   MEMRA_ATT_FUSE=1 ver 3; a device that cannot hold v5's clusters runs ver 4.
 *   v5 also splits a KV head's q heads over up to group clusters while the launch stays within
 *   one wave of blocks (att5_hsplit: the hybrid's 2 KV heads x 8 q heads went from 16 blocks
 *   to 128; same bits). ABI 1.10 rope_kv_attend runs v5 with rope_kv_store's work in its
 *   prologue (RK, opt-in).
 * ver 6 (attention_v6.cuh): v5's one cluster launch with a warp a unit of positions on
 *   mma.sync (q and P in f16 hi + rest), no block merge; head dim 128, groups up to 8, F16 / FP8
 *   caches (an output gate after it, by the caller). The default where it applies on sm_90a
 *   (H100, nineteenth session: Llama-8B tg128 @ d512 Q8_0 +1.5%, Q4_K_M +2.2%, @ d4096 +8.1% /
 *   +11.3%, the MoE +5%); opt-in with MEMRA_ATT=6 on the sm120a family, where it has not run.
 * v2/v3: the split count is kv_bucket / ATT_CHUNK (so one graph per bucket). The chunk
 * edges are fixed positions, not a function of the bucket, the batch or the SM count: a
 * row's result is then bit-identical whether it runs alone, in any batch, eagerly or
 * replayed. v4, v5 and v6 keep that property with chunks that are a function of the row alone.
 * Prefill rows use the same kernels, in row groups that bound the partials' workspace;
 * a tensor-core prefill kernel is later work. */
#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/attention_prefill.h"
#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/families.h"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/fp8.cuh"
#include "plugins/cuda/rope_kv.cuh"

enum {
  ATT_MAX_SPLIT = 65535 /* grid x */,
  ATT_CHUNK = 32,
  ATT_THREADS = 128,
  ATT_TPP = ATT_THREADS / ATT_CHUNK,
  ATT_MAX_D = 256,
  ATT_MAX_G = 8,
  ATT_TICKETS = 16384 /* rows x KV heads of one fused launch */
};
/* v3's tickets: zero at module load, and every fused launch leaves them zero (the last
 * block of each (row, KV head) resets its counter). Launches on one stream never overlap
 * (each waits for its predecessor), so the counters are never shared. */
__device__ unsigned int att_tickets[ATT_TICKETS];
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
  int64_t row0;   /* first row of this launch group */
  float *part;    /* [rows][n_head][n_split][2 + head_dim] */
  int fused = 0;  /* v3: combine in the last block (att_tickets [rows][n_kv_head]) */
  int hsplit = 1; /* v5: a KV head's q heads over this many clusters (group = q heads each) */
  /* v5: the rows are of distinct sequences (MEMRA_BATCH_DISTINCT): K/V below a row's position
   * are older than this step, read before the PDL wait */
  int early = 0;
  /* v5 with rope_kv_store's work (RK, ABI 1.10 rope_kv_attend): the step's unrotated k and
   * its v, and rope's parameters */
  const float *kin = NULL, *vin = NULL;
  int64_t kin_ld = 0, vin_ld = 0;
  int n_rot = 0, neox = 0;
  float freq_base = 0.f, freq_scale = 0.f;
  const float *ff = NULL;
  /* v5 GATE (ABI 1.11 attention_gate): out *= sigmoid(gate), gate a per-head view */
  const float *gate = NULL;
  int64_t gate_ld = 0;
};

/* One output element of the log-sum-exp combine: sum_s e^(m_s - M) acc_s[d] over
 * sum_s e^(m_s - M) l_s, splits in order, fmaf chains. v2's combine kernel and v3's fused
 * tail both call this, so the two give the same bits. Loads bypass L1 (ld.cg): in v3 the
 * partials were written by other blocks of the same grid. */
__device__ __forceinline__ float att_combine_dim(const float *pr, int n_split, int64_t stride,
                                                 int d, float M) {
  float num = 0.f, den = 0.f;
#pragma unroll 4
  for (int s = 0; s < n_split; ++s) {
    const float *ps = pr + (int64_t)s * stride;
    const float ms = __ldcg(ps);
    const float f = ms == -INFINITY ? 0.f : expf(ms - M);
    den = fmaf(f, __ldcg(ps + 1), den);
    num = fmaf(f, __ldcg(ps + 2 + d), num);
  }
  /* A row that attended to nothing (bad ids) gets NaN, not a silent zero. */
  return den > 0.f ? num / den : __int_as_float(0x7fc00000);
}

/* Loads VW consecutive cache elements as floats (VW 8: one 16-byte load of F16, two of
 * F32; VW 1: one element). */
template <typename TC, int VW> __device__ __forceinline__ void att_load(const TC *p, float v[VW]) {
  if (VW == 8 && sizeof(TC) == 1) { /* FP8: one 8-byte load */
    const uint2 u = __ldg((const uint2 *)p);
    const uint8_t *b = (const uint8_t *)&u;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = memra_fp8_e4m3_to_f32(b[i]);
  } else if (VW == 8 && sizeof(TC) == 2) {
    const uint4 u = __ldg((const uint4 *)p);
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  } else if (VW == 8) {
    const float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
    v[0] = a.x;
    v[1] = a.y;
    v[2] = a.z;
    v[3] = a.w;
    v[4] = b.x;
    v[5] = b.y;
    v[6] = b.z;
    v[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < VW; ++i)
      v[i] = (float)p[i];
  }
}

/* v2: one block per (chunk, kv head, row), 128 threads.
 *  1. scores: 4 threads per position (ATT_TPP), each a strided quarter of the head's
 *     VW-element groups for all G query heads of the group, summed by a fixed butterfly;
 *  2. per head, softmax max and sum over the chunk (one warp per head, fixed order);
 *  3. acc[g][d] = sum_t p[g][t] v[t][d]: a thread per dimension, positions in order.
 * Every K and V row of the chunk is read once for the whole GQA group, and the loads of
 * steps 1 and 3 are independent of each other (bytes in flight), unlike v1's per-position
 * online softmax in each warp. */
template <typename TC, int VW>
__global__ void __launch_bounds__(ATT_THREADS) attention_split_v2_kernel(att_args a) {
  __shared__ float sm_q[ATT_MAX_G][ATT_MAX_D];
  __shared__ float sm_p[ATT_MAX_G][ATT_CHUNK];
  __shared__ float sm_m[ATT_MAX_G], sm_l[ATT_MAX_G];
  __shared__ int64_t sm_slot[ATT_CHUNK];
  memra_pdl_enter_early();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.x, kh = blockIdx.y;
  const int64_t rl = blockIdx.z, r = a.row0 + rl;
  const int G = a.group, D = a.head_dim;
  const int32_t p_last = a.pos[r], s = a.seq[r];
  const int32_t lo = a.window > 0 && p_last - a.window + 1 > 0 ? p_last - a.window + 1 : 0;
  int64_t pb = (int64_t)split * ATT_CHUNK, pe = pb + ATT_CHUNK;
  if (pb < lo) pb = lo;
  if (pe > (int64_t)p_last + 1) pe = (int64_t)p_last + 1;
  if (s < 0 || s >= a.n_seqs) pe = pb; /* a bad sequence id attends to nothing */
  const int npos = pe > pb ? (int)(pe - pb) : 0;

  for (int i = tid; i < G * D; i += ATT_THREADS)
    sm_q[i / D][i % D] = a.q[r * a.q_ld + (int64_t)kh * G * D + i];
  for (int t = tid; t < ATT_CHUNK; t += ATT_THREADS) {
    int64_t slot = -1;
    if (t < npos) {
      const int64_t p = pb + t;
      if (p / a.block_size < a.max_blocks) {
        const int32_t page = a.bt[(int64_t)s * a.bt_ld + p / a.block_size];
        slot = (int64_t)page * a.block_size + p % a.block_size;
        if (page < 0 || slot >= a.k_slots || slot >= a.v_slots) slot = -1;
      }
    }
    sm_slot[t] = slot;
  }
  __syncthreads();

  /* 1. scores */
  {
    const int t = tid / ATT_TPP, quarter = tid % ATT_TPP;
    const int64_t slot = sm_slot[t];
    float sc[ATT_MAX_G];
#pragma unroll
    for (int g = 0; g < ATT_MAX_G; ++g)
      sc[g] = 0.f;
    if (slot >= 0) {
      const TC *kp = (const TC *)(a.kc + (uint64_t)slot * a.k_nb1) + (int64_t)kh * D;
#pragma unroll 4
      for (int d0 = quarter * VW; d0 < D; d0 += ATT_TPP * VW) {
        float kv[VW];
        att_load<TC, VW>(kp + d0, kv);
#pragma unroll
        for (int g = 0; g < ATT_MAX_G; ++g) {
          if (g >= G) break;
          float acc = sc[g];
#pragma unroll
          for (int i = 0; i < VW; ++i)
            acc = fmaf(sm_q[g][d0 + i], kv[i], acc);
          sc[g] = acc;
        }
      }
    }
#pragma unroll
    for (int g = 0; g < ATT_MAX_G; ++g) {
      if (g >= G) break;
      float v = sc[g];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      v *= a.scale;
      if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
      if (quarter == 0) sm_p[g][t] = slot >= 0 ? v : -INFINITY;
    }
  }
  __syncthreads();

  /* 2. softmax over the chunk, one warp per head */
  for (int g = warp; g < G; g += ATT_THREADS / 32) {
    float m = -INFINITY;
    for (int t = lane; t < ATT_CHUNK; t += 32)
      m = fmaxf(m, sm_p[g][t]);
    m = memra_warp_max(m);
    float l = 0.f;
    for (int t = lane; t < ATT_CHUNK; t += 32) {
      const float e = m == -INFINITY ? 0.f : expf(sm_p[g][t] - m);
      sm_p[g][t] = e;
      l += e;
    }
    l = memra_warp_sum(l);
    if (lane == 0) {
      sm_m[g] = m;
      sm_l[g] = l;
    }
  }
  __syncthreads();

  /* 3. weighted sum of V, then the partial (max, sum, acc) per head */
  for (int d = tid; d < D; d += ATT_THREADS) {
    float acc[ATT_MAX_G];
#pragma unroll
    for (int g = 0; g < ATT_MAX_G; ++g)
      acc[g] = 0.f;
      /* Unrolled and branch-free (an invalid slot loads nothing and weighs 0), so the
       * V loads of 8 positions are in flight together rather than one after another. */
#pragma unroll 8
    for (int t = 0; t < npos; ++t) {
      const int64_t slot = sm_slot[t];
      const float v =
          slot >= 0 ? (float)((const TC *)(a.vc + (uint64_t)slot * a.v_nb1))[(int64_t)kh * D + d]
                    : 0.f;
#pragma unroll
      for (int g = 0; g < ATT_MAX_G; ++g)
        if (g < G) acc[g] = fmaf(sm_p[g][t], v, acc[g]);
    }
#pragma unroll
    for (int g = 0; g < ATT_MAX_G; ++g) {
      if (g >= G) break;
      float *pp = a.part + ((rl * a.n_head + kh * G + g) * a.n_split + split) * (int64_t)(D + 2);
      pp[2 + d] = acc[g];
      if (d == 0) {
        pp[0] = sm_m[g];
        pp[1] = sm_l[g];
      }
    }
  }
  if (!a.fused) return;

  /* v3: the last block of this (row, KV head) to finish combines the group's heads. */
  __shared__ unsigned int sm_last;
  __threadfence(); /* this block's partials are visible before its ticket */
  __syncthreads();
  if (tid == 0) {
    unsigned int *t = att_tickets + rl * a.n_kv_head + kh;
    sm_last = atomicAdd(t, 1u) == (unsigned int)a.n_split - 1;
    if (sm_last) atomicExch(t, 0u); /* every block of the group has drawn: reset for reuse */
  }
  __syncthreads();
  if (!sm_last) return;
  __threadfence();
  /* 1. per head (a warp each): m_s and l_s of every split into shared memory (sm_q's
   * space: q is no longer needed), M = max m_s (exact in any order), then the split
   * weights f_s = e^(m_s - M) in place -- the values v2's combine computes per thread. */
  const int NS = a.n_split;
  const int64_t stride = D + 2;
  float *sm_f = &sm_q[0][0], *sm_ls = sm_f + G * NS; /* [G][NS] each */
  for (int g = warp; g < G; g += ATT_THREADS / 32) {
    const float *pr = a.part + (rl * a.n_head + kh * G + g) * (int64_t)NS * stride;
    float M = -INFINITY;
    for (int s2 = lane; s2 < NS; s2 += 32) {
      const float ms = __ldcg(pr + (int64_t)s2 * stride);
      sm_f[g * NS + s2] = ms;
      sm_ls[g * NS + s2] = __ldcg(pr + (int64_t)s2 * stride + 1);
      M = fmaxf(M, ms);
    }
    M = memra_warp_max(M);
    for (int s2 = lane; s2 < NS; s2 += 32) {
      const float ms = sm_f[g * NS + s2];
      sm_f[g * NS + s2] = ms == -INFINITY ? 0.f : expf(ms - M);
    }
  }
  __syncthreads();
  /* 2. out = sum_s f_s acc_s[d] / sum_s f_s l_s, splits in order (v2's fmaf chains), all
   * G heads of the group at once so their loads are in flight together. */
  for (int d = tid; d < D; d += ATT_THREADS) {
    float num[ATT_MAX_G], den[ATT_MAX_G];
#pragma unroll
    for (int g = 0; g < ATT_MAX_G; ++g)
      num[g] = den[g] = 0.f;
    const float *pd = a.part + (rl * a.n_head + kh * G) * (int64_t)NS * stride + 2 + d;
#pragma unroll 8
    for (int s2 = 0; s2 < NS; ++s2) {
#pragma unroll
      for (int g = 0; g < ATT_MAX_G; ++g) {
        if (g >= G) break;
        const float f = sm_f[g * NS + s2];
        den[g] = fmaf(f, sm_ls[g * NS + s2], den[g]);
        num[g] = fmaf(f, __ldcg(pd + ((int64_t)g * NS + s2) * stride), num[g]);
      }
    }
#pragma unroll
    for (int g = 0; g < ATT_MAX_G; ++g) {
      if (g >= G) break;
      /* A row that attended to nothing (bad ids) gets NaN, not a silent zero. */
      a.out[r * a.out_ld + (int64_t)(kh * G + g) * D + d] =
          den[g] > 0.f ? num[g] / den[g] : __int_as_float(0x7fc00000);
    }
  }
}

/* out[r, h] = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
 * v2: M by a block max; then each thread walks the splits for its dimension with
 * independent loads (unrolled), recomputing the split weight e^(m_s - M) and the
 * denominator in the same fixed order as every other thread (v1 walked the splits with
 * dependent loads: 16 us of the 24 us layer at L=512). Empty splits weigh exactly 0, so
 * the split count (the bucket) never changes a row's bits. */
__global__ void __launch_bounds__(ATT_THREADS) attention_combine_v2_kernel(att_args a) {
  __shared__ float sh[ATT_THREADS / 32];
  memra_pdl_enter_early();
  const int h = blockIdx.x;
  const int64_t rl = blockIdx.y, r = a.row0 + rl;
  const int D = a.head_dim, tid = threadIdx.x;
  const int64_t stride = D + 2;
  const float *pr = a.part + (rl * a.n_head + h) * (int64_t)a.n_split * stride;
  float M = -INFINITY;
  for (int s = tid; s < a.n_split; s += ATT_THREADS)
    M = fmaxf(M, pr[(int64_t)s * stride]);
  M = memra_warp_max(M);
  if ((tid & 31) == 0) sh[tid >> 5] = M;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < ATT_THREADS / 32; ++w)
    M = fmaxf(M, sh[w]);
  for (int d = tid; d < D; d += ATT_THREADS)
    a.out[r * a.out_ld + (int64_t)h * D + d] = att_combine_dim(pr, a.n_split, stride, d, M);
}

#include "plugins/cuda/attention_v4.cuh" /* after att_args */

#include "plugins/cuda/attention_v5.cuh" /* after attention_v4.cuh */
#include "plugins/cuda/attention_v6.cuh" /* after attention_v5.cuh */

/* v5's kernel for a cache type, load width and group (GM 4 or 8), and whether this device
 * can hold a cluster of AT5_SPLITS blocks of it at the largest shared memory a launch asks
 * (set up once per kernel: the shared memory opt-in, clusters above 8; a device that cannot
 * runs v4, a property of the device, not of the batch). */
typedef void (*att5_fn)(att_args);
template <typename TC, int VW, int HD = 0> static att5_fn att5_pick(int G) {
  return G <= 4 ? attention_v5_kernel<TC, VW, 4, false, false, HD>
                : attention_v5_kernel<TC, VW, 8, false, false, HD>;
}
/* The set-up of one kernel asking at most smem bytes; *st caches the answer (0 not yet
 * asked, 1 runs, 2 cannot). */
static att5_fn att5_setup(att5_fn k, size_t smem, int *st, int threads = AT5_THREADS) {
  if (*st == 0) {
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess && AT5_SPLITS > 8)
      e = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(AT5_SPLITS, 1, 1);
    cfg.blockDim = dim3((unsigned)threads);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = AT5_SPLITS;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int n = 0;
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
    if (e != cudaSuccess) (void)cudaGetLastError(); /* a setting or query that failed: v4 */
    *st = e == cudaSuccess && n > 0 ? 1 : 2;
  }
  return *st == 1 ? k : NULL;
}
/* By load kind vi: 0 scalar loads, 1 16-byte loads, 2 16-byte loads at head dim 128 (the kernel
 * compiled for it, HD). */
template <typename TC> static att5_fn att5_pick_kind(int vi, int G) {
  return vi == 2 ? att5_pick<TC, 8, 128>(G) : vi ? att5_pick<TC, 8>(G) : att5_pick<TC, 1>(G);
}
/* 16-byte loads at head dim 128 (Llama, Qwen, Mistral) with a group of 4 or 8 q heads take HD
 * (the group is its GM) unless MEMRA_ATT_HD=0 (A/B). */
static att5_fn att5_ready(int32_t ctype, bool vec, int G, int head_dim) {
  static int state[18]; /* [cache type][load kind][GM 8] */
  static const bool hd_on = !memra_cu_env_is("MEMRA_ATT_HD", "0");
  const int ti = ctype == MEMRA_TYPE_F8_E4M3 ? 0 : ctype == MEMRA_TYPE_F16 ? 1 : 2;
  const int vi = !vec ? 0 : hd_on && head_dim == 128 && (G == 4 || G == 8) ? 2 : 1;
  att5_fn k = ti == 0   ? att5_pick_kind<memra_f8>(vi, G)
              : ti == 1 ? att5_pick_kind<__half>(vi, G)
                        : att5_pick_kind<float>(vi, G);
  return att5_setup(k, AT5_SMEM_MAX, &state[ti * 6 + vi * 2 + (G > 4 ? 1 : 0)]);
}
/* The same for v5 with rope_kv_store's work (RK), 16-byte loads only. */
template <typename TC> static att5_fn att5_pick_rk(int G) {
  return G <= 4 ? attention_v5_kernel<TC, 8, 4, true> : attention_v5_kernel<TC, 8, 8, true>;
}
static att5_fn att5_ready_rk(int32_t ctype, int G) {
  static int state[6]; /* [cache type][GM 8] */
  const int ti = ctype == MEMRA_TYPE_F8_E4M3 ? 0 : ctype == MEMRA_TYPE_F16 ? 1 : 2;
  att5_fn k = ti == 0   ? att5_pick_rk<memra_f8>(G)
              : ti == 1 ? att5_pick_rk<__half>(G)
                        : att5_pick_rk<float>(G);
  return att5_setup(k, AT5_SMEM_MAX + AT5_RK_SMEM, &state[ti * 2 + (G > 4 ? 1 : 0)]);
}

/* The same for v5 with the output gate (GATE, ABI 1.11 attention_gate), 16-byte loads only. */
template <typename TC> static att5_fn att5_pick_gate(int G) {
  return G <= 4 ? attention_v5_kernel<TC, 8, 4, false, true>
                : attention_v5_kernel<TC, 8, 8, false, true>;
}
static att5_fn att5_ready_gate(int32_t ctype, int G) {
  static int state[6]; /* [cache type][GM 8] */
  const int ti = ctype == MEMRA_TYPE_F8_E4M3 ? 0 : ctype == MEMRA_TYPE_F16 ? 1 : 2;
  att5_fn k = ti == 0   ? att5_pick_gate<memra_f8>(G)
              : ti == 1 ? att5_pick_gate<__half>(G)
                        : att5_pick_gate<float>(G);
  return att5_setup(k, AT5_SMEM_MAX, &state[ti * 2 + (G > 4 ? 1 : 0)]);
}

/* Whether v6 runs where it applies without MEMRA_ATT=6: on sm_90a, where it was measured. */
#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120)
#define ATT6_DEFAULT 1
#else
#define ATT6_DEFAULT 0
#endif

/* v6 (e: MEMRA_ATT's value, read per call: v6 where it names 6, or names nothing on a device of
 * ATT6_DEFAULT): F16 and FP8 caches of 16-byte aligned rows, head dim 128, groups of at most 8 q
 * heads, q rows 16-byte aligned, pages of a power of two >= 16 positions, cache rows below 4 GB;
 * NULL where it does not apply. */
static att5_fn att6_ready(const char *e, int32_t ctype, bool vec4, const memra_attn_params *p,
                          const float *q, uint64_t q_nb1, int block_size, uint64_t k_nb1,
                          uint64_t v_nb1) {
  const bool want = e ? strcmp(e, "6") == 0 : ATT6_DEFAULT;
  if (!want || !vec4 || p->head_dim != AT6_D || block_size < 16 ||
      (block_size & (block_size - 1)) != 0 || k_nb1 >= (1ull << 32) || v_nb1 >= (1ull << 32) ||
      p->n_head / p->n_kv_head > AT6_GM || memra_cu_align_of(q, q_nb1) < 16 ||
      (ctype != MEMRA_TYPE_F16 && ctype != MEMRA_TYPE_F8_E4M3))
    return NULL;
  static int state[4];                                   /* [cache type][TX] */
  const bool tx = memra_cu_env_is("MEMRA_ATT6_TX", "1"); /* per call (opcheck): the same bits */
  const int ti = ctype == MEMRA_TYPE_F8_E4M3 ? 0 : 1;
  const att5_fn k =
      ti ? (tx ? attention_v6_kernel<__half, true> : attention_v6_kernel<__half, false>)
         : (tx ? attention_v6_kernel<memra_f8, true> : attention_v6_kernel<memra_f8, false>);
  return att5_setup(k, 0, &state[ti * 2 + tx], AT6_THREADS);
}

/* v4's split kernel for a cache type and load width, by the group bound GM (4 or 8). */
template <typename TC, int VW>
static void att4_launch(const memra_backend *be, dim3 grid, size_t smem, const att_args &a) {
  if (a.group <= 4)
    (void)memra_cu_launch(be, attention_split_v4_kernel<TC, VW, 4>, grid, dim3(AT4_THREADS), smem,
                          a);
  else
    (void)memra_cu_launch(be, attention_split_v4_kernel<TC, VW, 8>, grid, dim3(AT4_THREADS), smem,
                          a);
}

/* Blocks of a v5 launch without a head split: splits x KV heads x rows. */
static int64_t att5_blocks(const memra_batch *batch, const memra_attn_params *p) {
  return (int64_t)att5_grid_splits(batch->kv_bucket) * p->n_kv_head * batch->n_rows;
}

/* v5's head split: the q heads of a KV head over hs clusters of group / hs heads each. A
 * head's arithmetic does not change (each block's heads are whole), so neither do its bits
 * (opcheck). hs doubles while the launch stays within one wave of blocks (blocks: those of
 * hs = 1): on the H200 the hybrid's gated attention (2 KV heads of 8 q heads, 16 blocks) went
 * from 2,236 to 2,292 tok/s at hs 8, while Llama-8B's (8 x 4, 128 blocks) lost at hs 2 and 4
 * (334 -> 318 / 304, docs/PERF.md). MEMRA_ATT_HS=n forces n (read per call, as MEMRA_ATT; kept
 * when it divides the group). */
static int att5_hsplit(const memra_backend *be, int group, int64_t blocks) {
  const char *e = getenv("MEMRA_ATT_HS");
  if (e) {
    const int want = atoi(e);
    return want >= 1 && group % want == 0 ? want : 1;
  }
  int hs = 1;
  while (group % (2 * hs) == 0 && blocks * 2 * hs <= be->n_sms)
    hs *= 2;
  return hs;
}

/* att_args from checked tensors (attention's and rope_kv_attend's). */
static void att_fill(att_args *a, const memra_tensor *out, const memra_tensor *q,
                     const memra_tensor *k_cache, const memra_tensor *v_cache,
                     const memra_batch *batch, const memra_attn_params *p, const int32_t *pos,
                     const int32_t *seq, const int32_t *bt, int64_t bt_ld) {
  a->out = (float *)memra_cu_ptr(out);
  a->out_ld = (int64_t)(out->nb1 / 4);
  a->q = (const float *)memra_cu_ptr(q);
  a->q_ld = (int64_t)(q->nb1 / 4);
  memra_cu_fill_paged(a, k_cache, v_cache, batch, pos, seq, bt, bt_ld);
  a->n_head = p->n_head;
  a->n_kv_head = p->n_kv_head;
  a->head_dim = p->head_dim;
  a->group = p->n_head / p->n_kv_head;
  a->window = p->window;
  a->scale = p->scale;
  a->softcap = p->softcap;
}

/* A v5 kernel over rows in launches of at most 65535 rows: grid (a.n_split, heads, rows) in
 * clusters of a.n_split. */
static memra_status att5_launch(memra_backend *be, att5_fn k5, att_args a, int heads,
                                int64_t n_rows, size_t smem) {
  for (int64_t r0 = 0; r0 < n_rows; r0 += 65535) {
    const int64_t nr = n_rows - r0 < 65535 ? n_rows - r0 : 65535;
    a.row0 = r0;
    const dim3 g5((unsigned)a.n_split, (unsigned)heads, (unsigned)nr);
    MEMRA_CU(memra_cu_launch_cluster(be, k5, g5, dim3(AT5_THREADS), smem, (unsigned)a.n_split, a));
  }
  return MEMRA_OK;
}

/* attention's checks, every message; the batch's device vectors come back as from
 * memra_cu_check_batch. */
static memra_status att_check(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                              const memra_tensor *k_cache, const memra_tensor *v_cache,
                              const memra_batch *batch, const memra_attn_params *p,
                              const int32_t **pos, const int32_t **seq, const int32_t **bt,
                              int64_t *bt_ld) {
  memra_status st;
  if (!p) return memra_cu_errf(be, MEMRA_E_INVALID, "attention: params are NULL");
  if ((st = memra_cu_check_batch(be, batch, "attention", pos, seq, bt, bt_ld)) != MEMRA_OK ||
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
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "attention: q rows have %lld elements, expected %d x %d",
                         (long long)q->ne0, p->n_head, p->head_dim);
  if (q->ne1 < batch->n_rows)
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: q has %lld rows, batch %d",
                         (long long)q->ne1, batch->n_rows);
  if (k_cache->type != v_cache->type ||
      (k_cache->type != MEMRA_TYPE_F16 && k_cache->type != MEMRA_TYPE_F32 &&
       k_cache->type != MEMRA_TYPE_F8_E4M3))
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED,
                         "attention: caches are %s and %s, expected both F16, F32 or F8_E4M3",
                         memra_type_info(k_cache->type).name, memra_type_info(v_cache->type).name);
  if (k_cache->ne0 != (int64_t)p->n_kv_head * p->head_dim || v_cache->ne0 != k_cache->ne0)
    return memra_cu_errf(
        be, MEMRA_E_INVALID, "attention: cache rows have %lld/%lld elements, expected %d x %d",
        (long long)k_cache->ne0, (long long)v_cache->ne0, p->n_kv_head, p->head_dim);
  const uint64_t esz = (uint64_t)memra_type_info(k_cache->type).size;
  if (memra_cu_align_of(memra_cu_ptr(k_cache), k_cache->nb1) < esz ||
      memra_cu_align_of(memra_cu_ptr(v_cache), v_cache->nb1) < esz || q->nb1 % 4 || out->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: misaligned cache, q or out");
  if (p->window < 0 || !(p->softcap >= 0.f))
    return memra_cu_errf(be, MEMRA_E_INVALID, "attention: window %d and softcap %g must be >= 0",
                         p->window, p->softcap);
  return MEMRA_OK;
}

/* attention; with gate (attention_gate's, checked; may be NULL) v5 of 16-byte loads applies
 * the output gate at its store and sets *gated, other kernels leave it to the caller (v6 too,
 * so attention_gate keeps attention's bits then sigmoid_gate's where v6 runs). */
static memra_status att_run(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                            const memra_tensor *k_cache, const memra_tensor *v_cache,
                            const memra_batch *batch, const memra_attn_params *p,
                            const memra_tensor *gate, bool *gated) {
  memra_status st;
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  int64_t bt_ld = 0;
  if ((st = att_check(be, out, q, k_cache, v_cache, batch, p, &pos, &seq, &bt, &bt_ld))) return st;
  const uint64_t esz = (uint64_t)memra_type_info(k_cache->type).size;
  if (batch->n_rows == 0) return MEMRA_OK;
#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120) /* sm120a family: mma.sync */
  /* Prompt batches (MEMRA_BATCH_PROMPT) on tensor cores: wgmma on sm90a
   * (attention_prefill_wgmma.cu), mma.sync elsewhere (attention_prefill.cu). */
  if (memra_cu_attention_prefill_wgmma_fits(batch, k_cache, v_cache, p))
    return memra_cu_attention_prefill_wgmma(be, out, q, k_cache, v_cache, batch, p, pos, seq, bt,
                                            bt_ld);
#endif
  if (memra_cu_attention_prefill_fits(batch, k_cache, v_cache, p))
    return memra_cu_attention_prefill(be, out, q, k_cache, v_cache, batch, p, pos, seq, bt, bt_ld);

  att_args a;
  att_fill(&a, out, q, k_cache, v_cache, batch, p, pos, seq, bt, bt_ld);
  const char *ver_env = getenv("MEMRA_ATT"), *fuse_env = getenv("MEMRA_ATT_FUSE");
  /* v3 (split + combine in one launch) only with MEMRA_ATT_FUSE=1: slower on the H200. */
  const bool fuse = fuse_env && strcmp(fuse_env, "1") == 0;
  const bool v2 = fuse || (ver_env && strcmp(ver_env, "2") == 0);
  /* 16-byte K loads when every head's row of VW elements starts 16-byte aligned (v4, v5: V
   * too). */
  const bool vec = p->head_dim % 8 == 0 && memra_cu_align_of(a.kc, k_cache->nb1) >= 16 &&
                   (p->head_dim * esz) % 16 == 0;
  const bool vec4 = vec && memra_cu_align_of(a.vc, v_cache->nb1) >= 16;
  /* v6 where it applies and MEMRA_ATT does not name another version (nor MEMRA_ATT_FUSE=1 v3);
   * with a gate too, which the caller then applies */
  const att5_fn k6 = fuse ? NULL
                          : att6_ready(ver_env, k_cache->type, vec4, p, a.q, q->nb1,
                                       batch->block_size, k_cache->nb1, v_cache->nb1);
  if (k6) {
    a.n_split = att6_grid_splits(batch->kv_bucket); /* the cluster size, a power of two */
    a.early = batch->flags & MEMRA_BATCH_DISTINCT ? 1 : 0;
    for (int64_t r0 = 0; r0 < batch->n_rows; r0 += 65535) {
      const int64_t nr = batch->n_rows - r0 < 65535 ? batch->n_rows - r0 : 65535;
      a.row0 = r0;
      const dim3 g6((unsigned)a.n_split, (unsigned)p->n_kv_head, (unsigned)nr);
      MEMRA_CU(memra_cu_launch_cluster(be, k6, g6, dim3(AT6_THREADS), 0, (unsigned)a.n_split, a));
    }
    return MEMRA_OK;
  }
  /* v5 unless MEMRA_ATT names v4 or v2 (or the device cannot run it) */
  const att5_fn k5 =
      v2 || (ver_env && strcmp(ver_env, "4") == 0)
          ? NULL
          : att5_ready(k_cache->type, vec4,
                       a.group / att5_hsplit(be, a.group, att5_blocks(batch, p)), p->head_dim);
  if (k5) {
    a.hsplit = att5_hsplit(be, a.group, att5_blocks(batch, p));
    const att5_fn kg = gate && vec4 ? att5_ready_gate(k_cache->type, a.group / a.hsplit) : NULL;
    if (kg) {
      a.gate = (const float *)memra_cu_ptr(gate);
      a.gate_ld = (int64_t)(gate->nb1 / 4);
      *gated = true;
    }
    a.group /= a.hsplit;
    a.n_split = att5_grid_splits(batch->kv_bucket);                        /* the cluster size */
    static const bool early_on = !memra_cu_env_is("MEMRA_ATT_EARLY", "0"); /* A/B */
    a.early = early_on && (batch->flags & MEMRA_BATCH_DISTINCT) ? 1 : 0;
    a.part = NULL;
    return att5_launch(be, a.gate ? kg : k5, a, p->n_kv_head * a.hsplit, batch->n_rows,
                       att5_smem(a.group, p->head_dim, a.n_split));
  }
  a.n_split =
      v2 ? (batch->kv_bucket + ATT_CHUNK - 1) / ATT_CHUNK : att4_grid_splits(batch->kv_bucket);
  if (a.n_split > ATT_MAX_SPLIT || a.n_split < 1)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED,
                         "attention: kv_bucket %d: expected 1 to %d positions", batch->kv_bucket,
                         ATT_MAX_SPLIT * ATT_CHUNK);
  const uint64_t per_row = (uint64_t)p->n_head * a.n_split * (p->head_dim + 2) * sizeof(float);
  uint64_t group_rows = ATT_WS_MAX / per_row;
  if (group_rows < 1) group_rows = 1;
  if (group_rows > 65535) group_rows = 65535;
  if (group_rows > (uint64_t)batch->n_rows) group_rows = (uint64_t)batch->n_rows;
  void *ws = NULL;
  if ((st = memra_cu_workspace(be, group_rows * per_row, &ws)) != MEMRA_OK) return st;
  a.part = (float *)ws;
  /* v4: the warps' group sums of acc [warps][group][head_dim] */
  const size_t smem4 = (size_t)AT4_WARPS * a.group * p->head_dim * sizeof(float);
  for (int64_t r0 = 0; r0 < batch->n_rows; r0 += (int64_t)group_rows) {
    const int64_t nr =
        batch->n_rows - r0 < (int64_t)group_rows ? batch->n_rows - r0 : (int64_t)group_rows;
    a.row0 = r0;
    dim3 g1((unsigned)a.n_split, (unsigned)p->n_kv_head, (unsigned)nr);
    dim3 g2((unsigned)p->n_head, (unsigned)nr);
    if (!v2) {
      if (k_cache->type == MEMRA_TYPE_F8_E4M3) {
        if (vec4)
          att4_launch<memra_f8, 8>(be, g1, smem4, a);
        else
          att4_launch<memra_f8, 1>(be, g1, smem4, a);
      } else if (k_cache->type == MEMRA_TYPE_F16) {
        if (vec4)
          att4_launch<__half, 8>(be, g1, smem4, a);
        else
          att4_launch<__half, 1>(be, g1, smem4, a);
      } else {
        if (vec4)
          att4_launch<float, 8>(be, g1, smem4, a);
        else
          att4_launch<float, 1>(be, g1, smem4, a);
      }
      MEMRA_CU_LAUNCHED();
      (void)memra_cu_launch(be, attention_combine_v4_kernel, g2, dim3(AT4_THREADS), 0, a);
      MEMRA_CU_LAUNCHED();
      continue;
    }
    /* the tail keeps G x n_split weights and sums in sm_q's space */
    a.fused = fuse && nr * p->n_kv_head <= ATT_TICKETS &&
              a.group * a.n_split * 2 <= ATT_MAX_G * ATT_MAX_D;
    if (k_cache->type == MEMRA_TYPE_F8_E4M3) {
      if (vec)
        (void)memra_cu_launch(be, attention_split_v2_kernel<memra_f8, 8>, g1, dim3(ATT_THREADS), 0,
                              a);
      else
        (void)memra_cu_launch(be, attention_split_v2_kernel<memra_f8, 1>, g1, dim3(ATT_THREADS), 0,
                              a);
    } else if (k_cache->type == MEMRA_TYPE_F16) {
      if (vec)
        (void)memra_cu_launch(be, attention_split_v2_kernel<__half, 8>, g1, dim3(ATT_THREADS), 0,
                              a);
      else
        (void)memra_cu_launch(be, attention_split_v2_kernel<__half, 1>, g1, dim3(ATT_THREADS), 0,
                              a);
    } else {
      if (vec)
        (void)memra_cu_launch(be, attention_split_v2_kernel<float, 8>, g1, dim3(ATT_THREADS), 0, a);
      else
        (void)memra_cu_launch(be, attention_split_v2_kernel<float, 1>, g1, dim3(ATT_THREADS), 0, a);
    }
    MEMRA_CU_LAUNCHED();
    if (a.fused) continue; /* v3: combined by each group's last block */
    (void)memra_cu_launch(be, attention_combine_v2_kernel, g2, dim3(ATT_THREADS), 0, a);
    MEMRA_CU_LAUNCHED();
  }
  return MEMRA_OK;
}

memra_status memra_cu_attention(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k_cache, const memra_tensor *v_cache,
                                const memra_batch *batch, const memra_attn_params *p) {
  bool gated = false;
  return att_run(be, out, q, k_cache, v_cache, batch, p, NULL, &gated);
}

/* ABI 1.11 attention_gate: decode rows on v5 (16-byte loads) take the gate at the store, the
 * bits of sigmoid_gate after attention; other paths (prompt batches, v4) make that second
 * launch. */
memra_status memra_cu_attention_gate(memra_backend *be, const memra_tensor *out,
                                     const memra_tensor *q, const memra_tensor *k_cache,
                                     const memra_tensor *v_cache, const memra_batch *batch,
                                     const memra_attn_params *p, const memra_tensor *gate) {
  const char *op = "attention_gate";
  if (!p || !out) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: params or out are NULL", op);
  memra_status st;
  if ((st = memra_cu_check_f(be, op, "out", out, MEMRA_TYPE_F32, -1, -1)) ||
      (st = memra_cu_check_f(be, op, "gate", gate, MEMRA_TYPE_F32, p->head_dim,
                             out->ne1 * p->n_head)))
    return st;
  const uint64_t row = 4u * (uint64_t)p->n_head * (uint64_t)p->head_dim;
  if (out->ne1 > 1 && out->nb1 != row)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: out rows %llu bytes apart (need them packed: %llu)", op,
                         (unsigned long long)out->nb1, (unsigned long long)row);
  if (memra_cu_overlap(out, gate))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: out overlaps gate", op);
  bool gated = false;
  if ((st = att_run(be, out, q, k_cache, v_cache, batch, p, gate, &gated))) return st;
  if (gated) return MEMRA_OK;
  memra_tensor oh = *out;
  oh.ne0 = p->head_dim;
  oh.ne1 = out->ne1 * p->n_head;
  oh.nb1 = 4u * (uint64_t)p->head_dim;
  return memra_cu_sigmoid_gate(be, &oh, &oh, gate);
}

/* ABI 1.10 rope_kv_attend: rope_kv_store, then attention, for decode rows of distinct
 * sequences. v5 with rope_kv_store's work in it (RK: one launch, and the K/V of earlier
 * positions read before the projections finish) where v5 runs with 16-byte loads; the two
 * calls otherwise, and where attention runs v6 (no RK form of it). Same bits either way. In the
 * vtable only with MEMRA_ROPE_ATT=1 (backend.cu); opcheck calls it directly. */
memra_status memra_cu_rope_kv_attend(memra_backend *be, const memra_tensor *out,
                                     const memra_tensor *q, const memra_tensor *k,
                                     const memra_tensor *v, const memra_tensor *k_cache,
                                     const memra_tensor *v_cache, const memra_batch *batch,
                                     const memra_rope_params *rope, const memra_attn_params *p) {
  memra_status st;
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  const float *ff = NULL;
  int64_t bt_ld = 0;
  if ((st = memra_cu_rope_kv_check(be, "rope_kv_attend", q, k, v, k_cache, v_cache, batch, rope,
                                   &pos, &seq, &bt, &bt_ld, &ff)) ||
      (st = att_check(be, out, q, k_cache, v_cache, batch, p, &pos, &seq, &bt, &bt_ld)))
    return st;
  if (batch->flags & MEMRA_BATCH_PROMPT)
    return memra_cu_errf(be, MEMRA_E_INVALID, "rope_kv_attend: decode rows only");
  if (memra_cu_overlap(out, k) || memra_cu_overlap(out, v))
    return memra_cu_errf(be, MEMRA_E_INVALID, "rope_kv_attend: out overlaps k or v");
  if (batch->n_rows == 0) return MEMRA_OK;
  const char *ver_env = getenv("MEMRA_ATT"), *fuse_env = getenv("MEMRA_ATT_FUSE");
  const int D = p->head_dim;
  const uint64_t esz = (uint64_t)memra_type_info(k_cache->type).size;
  const bool fits = !ver_env && !(fuse_env && strcmp(fuse_env, "1") == 0) && rope->head_dim == D &&
                    k->ne0 == (int64_t)p->n_kv_head * D && v->ne0 == k->ne0 && D % 8 == 0 &&
                    (D * esz) % 16 == 0 &&
                    memra_cu_align_of(memra_cu_ptr(k_cache), k_cache->nb1) >= 16 &&
                    memra_cu_align_of(memra_cu_ptr(v_cache), v_cache->nb1) >= 16 &&
                    !att6_ready(ver_env, k_cache->type, true, p, (const float *)memra_cu_ptr(q),
                                q->nb1, batch->block_size, k_cache->nb1, v_cache->nb1);
  const int G = p->n_head / p->n_kv_head, hs = att5_hsplit(be, G, att5_blocks(batch, p));
  const att5_fn k5 = fits ? att5_ready_rk(k_cache->type, G / hs) : NULL;
  if (!k5) {
    if ((st = memra_cu_rope_kv_store(be, q, k, v, k_cache, v_cache, batch, rope))) return st;
    return memra_cu_attention(be, out, q, k_cache, v_cache, batch, p);
  }
  att_args a;
  att_fill(&a, out, q, k_cache, v_cache, batch, p, pos, seq, bt, bt_ld);
  a.group = G / hs;
  a.hsplit = hs;
  a.kin = (const float *)memra_cu_ptr(k);
  a.vin = (const float *)memra_cu_ptr(v);
  a.kin_ld = (int64_t)(k->nb1 / 4);
  a.vin_ld = (int64_t)(v->nb1 / 4);
  a.n_rot = rope->n_rot;
  a.neox = rope->mode == MEMRA_ROPE_NEOX;
  a.freq_base = rope->freq_base;
  a.freq_scale = rope->freq_scale;
  a.ff = ff;
  a.n_split = att5_grid_splits(batch->kv_bucket); /* the cluster size */
  a.part = NULL;
  return att5_launch(be, k5, a, p->n_kv_head * hs, batch->n_rows,
                     att5_smem(a.group, D, a.n_split) + AT5_RK_SMEM);
}
