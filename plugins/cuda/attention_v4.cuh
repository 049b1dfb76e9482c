/* attention_v4.cuh — split-KV decode attention ver 4 (included by attention.cu, which holds
 * att_args and the launch).
 *
 * Why: v2 cut every row into fixed chunks of 32 positions, so a bucket of 8192 made 256
 * splits per head (half of them empty at L = 4097), 2048 blocks of 16 KB each, and a
 * combine that walked 256 partials per output in dependent steps of 4: ~30 us per layer
 * at L = 4096 against a 3.9 us floor. v4:
 *  - at most AT4_SPLITS (32) splits per row. A row's chunk is a function of its own
 *    attended length n alone (att4_chunk: ceil(n / 32) rounded up to 32 positions), read
 *    from device memory like its position, never of the bucket or of the other rows: the
 *    row's bits are the same alone, in any batch, eager or replayed. The bucket only
 *    bounds the grid (min(32, bucket / 32) splits); blocks past a row's splits exit;
 *  - one block per (split, KV head, row) serves the whole GQA group, so K and V are read
 *    once per group; q stays in registers (8 dimensions per lane per head);
 *  - lanes across the head dimension (16-byte K and V loads: a 128-dim F16 row is 16
 *    lanes), "groups" of lanes across positions: a tile's K and V of all P positions of a
 *    group are loaded together before any score is needed, the next tile's block-table
 *    entries are in flight meanwhile; each group keeps its own online softmax (m, l,
 *    acc), the groups merge at the block's end in a fixed order;
 *  - the combine reads at most 32 partials per output with all loads in flight at once.
 * FP8 e4m3 is widened by cvt.rn.f16x2.e4m3x2 (exact: every e4m3 value is an f16). */
#ifndef MEMRA_CUDA_ATTENTION_V4_CUH
#define MEMRA_CUDA_ATTENTION_V4_CUH

#include <cuda_fp16.h>
#include <stdint.h>

enum {
  AT4_SPLITS = 32, /* most splits of one row */
  AT4_ALIGN = 32,  /* chunks are multiples of this many positions */
  AT4_THREADS = 128,
  AT4_WARPS = AT4_THREADS / 32,
  AT4_E = 8 /* head dimensions per lane */
};

/* Positions per split of a row attending to n >= 1 positions: at most AT4_SPLITS splits. */
__host__ __device__ __forceinline__ int32_t att4_chunk(int32_t n) {
  const int32_t c = (n + AT4_SPLITS - 1) / AT4_SPLITS;
  return (c + AT4_ALIGN - 1) / AT4_ALIGN * AT4_ALIGN;
}

/* Grid splits for a bucket: enough for any row with position < bucket. */
static inline int att4_grid_splits(int32_t bucket) {
  int ns = (bucket + AT4_ALIGN - 1) / AT4_ALIGN;
  if (ns > AT4_SPLITS) ns = AT4_SPLITS;
  return ns < 1 ? 1 : ns;
}

/* A row's attended range [lo, lo + n) and its splits, from its position and sequence. */
struct att4_row {
  int32_t lo, n, chunk, ns;
};
template <typename A> __device__ __forceinline__ att4_row att4_row_of(const A &a, int64_t r) {
  att4_row w;
  const int32_t p = a.pos[r], s = a.seq[r];
  w.lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
  /* a bad sequence id or position attends to nothing (NaN out, as v2) */
  w.n = s < 0 || s >= a.n_seqs || p < 0 ? 0 : p - w.lo + 1;
  w.chunk = att4_chunk(w.n > 0 ? w.n : 1);
  w.ns = (w.n + w.chunk - 1) / w.chunk;
  if (w.ns > a.n_split) w.ns = a.n_split; /* a bucket below the position drops the rest */
  return w;
}

/* One lane's AT4_E elements of one cached row, loaded raw and widened at use.
 * VW 8: elements [8 lg, 8 lg + 8) (one 16-byte load of F16, two of F32, 8 bytes of FP8);
 * VW 1: elements lg + LG e, each checked against D. */
template <typename TC, int VW> struct att4_vec {
  float v[AT4_E];
  __device__ __forceinline__ void load(const TC *p, int lg, int LG, int D) {
#pragma unroll
    for (int e = 0; e < AT4_E; ++e) {
      const int d = lg + LG * e;
      v[e] = d < D ? (float)p[d] : 0.f;
    }
  }
  __device__ __forceinline__ void load_s(const TC *p, int lg, int LG, int D) { load(p, lg, LG, D); }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int e = 0; e < AT4_E; ++e)
      v[e] = 0.f;
  }
  __device__ __forceinline__ void get(float f[AT4_E]) const {
#pragma unroll
    for (int e = 0; e < AT4_E; ++e)
      f[e] = v[e];
  }
};
template <> struct att4_vec<__half, 8> {
  uint4 u;
  __device__ __forceinline__ void load(const __half *p, int lg, int, int) {
    u = __ldg((const uint4 *)(p + 8 * lg));
  }
  __device__ __forceinline__ void load_s(const __half *p, int lg, int, int) {
    u = *(const uint4 *)(p + 8 * lg);
  }
  __device__ __forceinline__ void zero() { u = make_uint4(0, 0, 0, 0); }
  __device__ __forceinline__ void get(float f[AT4_E]) const {
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __half22float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
};
template <> struct att4_vec<float, 8> {
  float4 a, b;
  __device__ __forceinline__ void load(const float *p, int lg, int, int) {
    a = __ldg((const float4 *)(p + 8 * lg));
    b = __ldg((const float4 *)(p + 8 * lg) + 1);
  }
  __device__ __forceinline__ void load_s(const float *p, int lg, int, int) {
    a = *(const float4 *)(p + 8 * lg);
    b = *((const float4 *)(p + 8 * lg) + 1);
  }
  __device__ __forceinline__ void zero() { a = b = make_float4(0.f, 0.f, 0.f, 0.f); }
  __device__ __forceinline__ void get(float f[AT4_E]) const {
    f[0] = a.x;
    f[1] = a.y;
    f[2] = a.z;
    f[3] = a.w;
    f[4] = b.x;
    f[5] = b.y;
    f[6] = b.z;
    f[7] = b.w;
  }
};
template <> struct att4_vec<memra_f8, 8> {
  uint2 u;
  __device__ __forceinline__ void load(const memra_f8 *p, int lg, int, int) {
    u = __ldg((const uint2 *)(p + 8 * lg));
  }
  __device__ __forceinline__ void load_s(const memra_f8 *p, int lg, int, int) {
    u = *(const uint2 *)(p + 8 * lg);
  }
  __device__ __forceinline__ void zero() { u = make_uint2(0, 0); }
  __device__ __forceinline__ void get(float f[AT4_E]) const {
    const uint32_t w[2] = {u.x, u.y};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint16_t pair = (uint16_t)(w[i >> 1] >> (16 * (i & 1)));
      uint32_t h2;
      /* low byte (the lower address) -> low half */
      asm("{\n\t.reg .b16 t;\n\tmov.b16 t, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, t;\n\t}"
          : "=r"(h2)
          : "h"(pair));
      const float2 x = __half22float2(*(const __half2 *)&h2);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
};

/* Slot of position p of sequence s, or -1 (no page, or past the caches). */
template <typename A>
__device__ __forceinline__ int32_t att4_page(const A &a, int32_t s, int32_t p, int32_t pe) {
  if (p >= pe) return -1;
  const int32_t b = p / a.block_size;
  return b < a.max_blocks ? a.bt[(int64_t)s * a.bt_ld + b] : -1;
}

/* v4 split: block (split, KV head, row), AT4_THREADS threads; GM >= the group size.
 * Lane lg of a group of LG lanes holds q[g][its dims] for every head g of the group and
 * adds its dims' share of each score; a butterfly over the group gives every lane the
 * whole score (same bits in every lane). Group grp takes positions [t0 + grp P, + P) of
 * each tile of NG P positions. Writes the partial (max, sum, acc[D]) of each head. */
template <typename TC, int VW, int GM>
__global__ void __launch_bounds__(AT4_THREADS) attention_split_v4_kernel(att_args a) {
  /* positions per group per tile: 8 where the registers allow */
  constexpr int P = (GM > 4 || sizeof(TC) == 4 || VW == 1) ? 4 : 8;
  extern __shared__ float sm4_acc[]; /* [AT4_WARPS][G][D] */
  __shared__ float sm4_m[AT4_WARPS][GM], sm4_l[AT4_WARPS][GM];
  memra_pdl_enter_early();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.x, kh = blockIdx.y;
  const int64_t rl = blockIdx.z, r = a.row0 + rl;
  const int G = a.group, D = a.head_dim;
  const att4_row w = att4_row_of(a, r);
  if (split >= w.ns) return; /* the whole block: the combine reads only [0, ns) */
  const int32_t s = a.seq[r];
  const int32_t pb = w.lo + split * w.chunk;
  const int32_t pe = pb + w.chunk < w.lo + w.n ? pb + w.chunk : w.lo + w.n;

  const int nsl = (D + AT4_E - 1) / AT4_E; /* lanes a row needs */
  int LG = 1;
  while (LG < nsl)
    LG <<= 1;
  const int lg = lane & (LG - 1), grp = tid / LG, NG = AT4_THREADS / LG;
  const bool has = VW == 1 || lg < nsl; /* VW 8: D % 8 == 0, lanes past D/8 idle */

  float qv[GM][AT4_E], acc[GM][AT4_E], m[GM], l[GM];
  const float *qr = a.q + r * a.q_ld + (int64_t)kh * G * D;
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < AT4_E; ++e) {
      const int d = VW == 8 ? AT4_E * lg + e : lg + LG * e;
      qv[g][e] = g < G && d < D && has ? qr[(int64_t)g * D + d] : 0.f;
      acc[g][e] = 0.f;
    }
  }
  const int64_t koff = (int64_t)kh * D;
  const int T = NG * P;
  int32_t pg[P];
#pragma unroll
  for (int j = 0; j < P; ++j)
    pg[j] = att4_page(a, s, pb + grp * P + j, pe);

  for (int32_t t0 = pb; t0 < pe; t0 += T) {
    const int32_t p0 = t0 + grp * P;
    int64_t slot[P];
    att4_vec<TC, VW> kr[P], vr[P];
    const int32_t b0 = p0 / a.block_size, o0 = p0 - b0 * a.block_size;
#pragma unroll
    for (int j = 0; j < P; ++j) {
      int32_t o = o0 + j;
      while (o >= a.block_size) /* block_size may be < P */
        o -= a.block_size;
      const int64_t sl = (int64_t)pg[j] * a.block_size + o;
      slot[j] = pg[j] < 0 || sl >= a.k_slots || sl >= a.v_slots ? -1 : sl;
    }
    /* every K and V row of the tile in flight before the first score */
#pragma unroll
    for (int j = 0; j < P; ++j) {
      if (slot[j] >= 0 && has) {
        kr[j].load((const TC *)(a.kc + (uint64_t)slot[j] * a.k_nb1) + koff, lg, LG, D);
        vr[j].load((const TC *)(a.vc + (uint64_t)slot[j] * a.v_nb1) + koff, lg, LG, D);
      } else {
        kr[j].zero();
        vr[j].zero();
      }
    }
    /* the next tile's block-table entries, in flight with this tile's rows */
    if (t0 + T < pe) {
#pragma unroll
      for (int j = 0; j < P; ++j)
        pg[j] = att4_page(a, s, p0 + T + j, pe);
    }

    float sc[GM][P];
#pragma unroll
    for (int j = 0; j < P; ++j) {
      float kf[AT4_E];
      kr[j].get(kf);
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        float x = 0.f;
        if (g < G) {
#pragma unroll
          for (int e = 0; e < AT4_E; ++e)
            x = fmaf(qv[g][e], kf[e], x);
        }
        sc[g][j] = x;
      }
    }
    for (int o = 1; o < LG; o <<= 1) {
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
#pragma unroll
        for (int j = 0; j < P; ++j)
          sc[g][j] += __shfl_xor_sync(0xffffffffu, sc[g][j], o);
      }
    }
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      if (g >= G) break;
      float mt = -INFINITY;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        float x = sc[g][j] * a.scale;
        if (a.softcap > 0.f) x = a.softcap * tanhf(x / a.softcap);
        x = slot[j] >= 0 ? x : -INFINITY;
        sc[g][j] = x;
        mt = fmaxf(mt, x);
      }
      const float mn = fmaxf(m[g], mt);
      if (mn == -INFINITY) continue; /* nothing valid yet in this group */
      const float al = m[g] == -INFINITY ? 0.f : expf(m[g] - mn);
      float ls = l[g] * al;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        sc[g][j] = expf(sc[g][j] - mn); /* -inf -> 0 */
        ls += sc[g][j];
      }
      l[g] = ls;
      m[g] = mn;
#pragma unroll
      for (int e = 0; e < AT4_E; ++e)
        acc[g][e] *= al;
    }
#pragma unroll
    for (int j = 0; j < P; ++j) {
      float vf[AT4_E];
      vr[j].get(vf);
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
        if (m[g] == -INFINITY) continue;
#pragma unroll
        for (int e = 0; e < AT4_E; ++e)
          acc[g][e] = fmaf(sc[g][j], vf[e], acc[g][e]);
      }
    }
  }

  /* Merge the groups: M = max over groups (exact in any order), each group's share
   * weighted e^(m - M), summed by a butterfly inside the warp, then warps 0..3 in order. */
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    if (g >= G) break;
    float mm = m[g];
    for (int o = LG; o < 32; o <<= 1)
      mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    if (lane == 0) sm4_m[warp][g] = mm;
  }
  __syncthreads();
  float *sacc = sm4_acc + (int64_t)warp * G * D;
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    if (g >= G) break;
    float M = sm4_m[0][g];
#pragma unroll
    for (int w2 = 1; w2 < AT4_WARPS; ++w2)
      M = fmaxf(M, sm4_m[w2][g]);
    const float f = m[g] == -INFINITY ? 0.f : expf(m[g] - M);
    float lf = l[g] * f;
    float x[AT4_E];
#pragma unroll
    for (int e = 0; e < AT4_E; ++e)
      x[e] = acc[g][e] * f;
    for (int o = LG; o < 32; o <<= 1) {
      lf += __shfl_xor_sync(0xffffffffu, lf, o);
#pragma unroll
      for (int e = 0; e < AT4_E; ++e)
        x[e] += __shfl_xor_sync(0xffffffffu, x[e], o);
    }
    if (lane < LG && has) {
#pragma unroll
      for (int e = 0; e < AT4_E; ++e) {
        const int d = VW == 8 ? AT4_E * lg + e : lg + LG * e;
        if (d < D) sacc[g * D + d] = x[e];
      }
    }
    if (lane == 0) sm4_l[warp][g] = lf;
  }
  __syncthreads();
  for (int i = tid; i < G * D; i += AT4_THREADS) {
    const int g = i / D, d = i - g * D;
    float v = sm4_acc[i];
#pragma unroll
    for (int w2 = 1; w2 < AT4_WARPS; ++w2)
      v += sm4_acc[(int64_t)w2 * G * D + i];
    float *pp = a.part + ((rl * a.n_head + kh * G + g) * a.n_split + split) * (int64_t)(D + 2);
    pp[2 + d] = v;
    if (d == 0) {
      float M = sm4_m[0][g], L = sm4_l[0][g];
#pragma unroll
      for (int w2 = 1; w2 < AT4_WARPS; ++w2) {
        M = fmaxf(M, sm4_m[w2][g]);
        L += sm4_l[w2][g];
      }
      pp[0] = M;
      pp[1] = L;
    }
  }
}

/* v4 combine: block (head, row). out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s over
 * the row's own splits [0, ns) in order; every load of a split issued before the sums. */
__global__ void __launch_bounds__(AT4_THREADS) attention_combine_v4_kernel(att_args a) {
  memra_pdl_enter_early();
  const int h = blockIdx.x;
  const int64_t rl = blockIdx.y, r = a.row0 + rl;
  const int D = a.head_dim, tid = threadIdx.x;
  const int64_t stride = D + 2;
  const int ns = att4_row_of(a, r).ns;
  const float *pr = a.part + (rl * a.n_head + h) * (int64_t)a.n_split * stride;
  float f[AT4_SPLITS], M = -INFINITY;
#pragma unroll
  for (int s = 0; s < AT4_SPLITS; ++s) {
    f[s] = s < ns ? pr[s * stride] : -INFINITY;
    M = fmaxf(M, f[s]);
  }
  float den = 0.f;
#pragma unroll
  for (int s = 0; s < AT4_SPLITS; ++s) {
    f[s] = f[s] == -INFINITY ? 0.f : expf(f[s] - M);
    if (s < ns) den = fmaf(f[s], pr[s * stride + 1], den);
  }
  for (int d = tid; d < D; d += AT4_THREADS) {
    float num = 0.f;
#pragma unroll
    for (int s = 0; s < AT4_SPLITS; ++s)
      if (s < ns) num = fmaf(f[s], pr[s * stride + 2 + d], num);
    /* A row that attended to nothing (bad ids) gets NaN, not a silent zero. */
    a.out[r * a.out_ld + (int64_t)h * D + d] = den > 0.f ? num / den : __int_as_float(0x7fc00000);
  }
}

#endif /* MEMRA_CUDA_ATTENTION_V4_CUH */
