/* matmul_tc.cuh — matmul v7: Q4_K GEMV on the tensor cores (mma.sync m16n8k16, f16 inputs,
 * f32 accumulation), included by matmul.cu only.
 *
 * Why (docs/PERF.md): v5 spends ~4.3 instructions per weight (nibble -> float, FFMA, the
 * scale algebra) and decodes every weight once per row of x. Here one HMMA consumes 256
 * weights per warp, a nibble reaches the tensor core with one LOP3 per two weights, and the
 * decoded A registers serve up to 16 rows of x. Outcome: 3-5x v5 for 8 rows (with the
 * chunks' MMA chains interleaved, 4.7x: 14336 x 4096 at 8 rows 53.9 us vs v5's 255), so v7 is
 * the batch kernel for Q4_K; one row runs the same arithmetic on v11 (matmul_tc11.cuh), fed by
 * bulk copies. Q6_K (matmul_tc6.cuh) joins through the tcq<T> trait, opt-in.
 *
 * Layout: a block owns 16 weight rows; its TC_WARPS warps take super-blocks (256 weights)
 * warp, warp + TC_WARPS, ... Thread (g = lane / 4, t = lane % 4) loads, of rows g and g + 8,
 * the 16-byte header (d, dmin, scales) and 16 q bytes of each 64-byte chunk c (offset
 * 16 + 64 c + 16 t). Every MMA uses one q word of each row; since a dot product does not care
 * about the order of k, the k index of an A element is simply where that nibble sits:
 *   a0 (row g, k 2t, 2t+1)     = low nibbles of bytes (h, h + 2) of the word (h = 0, 1)
 *   a2 (row g, k 2t+8, 2t+9)   = high nibbles of the same bytes, a1 / a3 the same for g + 8.
 * A nibble masked in place is an f16 subnormal: low q -> q 2^-24, high -> 16 q 2^-24, both
 * exact, and f16 x f16 products are exact in the tensor core.
 *
 * x is split exactly enough for f32, once per matmul (tc_prep_kernel, into the workspace):
 * per 32 elements (one sub-block) a power of two s brings the largest |x| to [2^14, 2^15),
 * xh = f16(s x), xl = f16(s x - xh) (xh + xl = s x to ~2^-22).
 * The eight columns of B separate what must be scaled apart: column n takes part n % 2
 * (0: xh, 1: xl) of the x elements that meet the chunk's four sub-blocks' nibbles of kind
 * n / 2 (0: low nibbles of bytes t < 2, 1: low of t >= 2, 2: high of t < 2, 3: high of
 * t >= 2), zeros elsewhere. After the chunk's 8 MMAs, C[g][2t] + C[g][2t+1] is row g's
 * sum_i q_i x_i over one whole sub-block (kind t), scaled by s 2^-24 (and 16 for high):
 *   row += d1 (C * f) - m1 X,   d1 = d sc, m1 = dmin m (F32-rounded as ggml), f a power of
 *   two, X = sum of the sub-block's x in F32.
 * Rounding: products exact, accumulation in the tensor core's f32 (not IEEE order, but the
 * same for every call), xl's 2^-22 relative split error: well inside opcheck's 1e-5 bound.
 *
 * Batch invariance: M rows of x take M separate B / C sets against the same A registers;
 * a row's MMAs, epilogue and reductions are the same for every M and every blockIdx.y. */
#ifndef MEMRA_CUDA_MATMUL_TC_CUH
#define MEMRA_CUDA_MATMUL_TC_CUH

#include <cuda_fp16.h>

#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_jobs.cuh"

/* EXPERIMENT (a build define; 4: the default): the warps a tile's super-blocks are split over
 * (warp w takes w, w + TC_WARPS, ...) in v7, v11 and matmul_id v3 / v4 alike, so their sums keep
 * one order between them (batch-invariant) while a tile takes fewer steps a warp. 8: another
 * order of the sums (other bits than 4's), twice the consumer warps a v11 block (layer_bench,
 * H100: a tile by 8 warps 1.6 us where 4 take 2.6). H100 (thirty-fifth session, docs/PERF.md):
 * gates PASS, Llama Q4_K_M -4.5%, MoE -7.8%, hybrid -12.7% (K 14336 windows and the experts
 * slower); v11's opt-in tail and rope stores refuse it. For the H200's consumer-bound tiles. */
#ifndef MEMRA_TC_WARPS
#define MEMRA_TC_WARPS 4
#endif
enum { TC_WARPS = MEMRA_TC_WARPS, TC_ROWS = 16 };
/* EXPERIMENT (a build define; TC_WARPS by default): the warps a tile of the dense kernels, v7 and
 * v11, for rows of K <= 4096 (matmul_id keeps TC_WARPS). A property of the matrix, so v7 and v11
 * still agree on every row's bits. 8: twice the consumer warps an SM where the H200's Q4_K tiles
 * wait on their consumers (q/k/v, o, gate/up, the output matrix) while the down projections keep
 * four (with eight their x windows took 8-30% longer: thirty-fifth session's cw8). */
#ifndef MEMRA_TC_WARPS_4K
#define MEMRA_TC_WARPS_4K MEMRA_TC_WARPS
#endif
constexpr int TC_WARPS_4K = MEMRA_TC_WARPS_4K;
static_assert(TC_WARPS_4K == 4 || TC_WARPS_4K == 8, "four or eight warps a tile");
/* The warps a tile of v7 and v11 for rows of K columns (by the macros: nvcc's host pass makes
 * enum constants of TC_WARPS_4K and TC_WARPS, which -Wenum-compare then refuses to mix). */
__host__ __device__ constexpr int tc_dense_warps(int64_t K) {
  return K <= 4096 ? MEMRA_TC_WARPS_4K : MEMRA_TC_WARPS;
}
/* EXPERIMENT (a build define; 0: the default): Q4_K on the integer MMA (matmul_tc4i.cuh) in every
 * tensor-core kernel instead of the f16 form: other bits, the same in v7, v11 and matmul_id. */
#ifndef MEMRA_TC_Q4I
#define MEMRA_TC_Q4I 0
#endif
/* tcq's key for Q6_K matrices of K <= 4096 (the output matrices, attn_v, the experts): the
 * integer-MMA form (matmul_tc6i.cuh); longer rows (the down projections, x by windows on v11)
 * keep the f16 form, tcq<MEMRA_TYPE_Q6_K>. A property of the matrix alone, so v11 (one row) and
 * v7 (batches) agree on every row's bits. */
enum { TC_Q6I = 0x100 + MEMRA_TYPE_Q6_K };
static inline int tc_q6_key(int64_t K) { return K <= 4096 ? (int)TC_Q6I : (int)MEMRA_TYPE_Q6_K; }

/* C += A B, m16n8k16, f16 x f16 -> f32. */
__device__ __forceinline__ void tc_mma(float c[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                       uint32_t a3, uint32_t b0, uint32_t b1) {
  /* not volatile: a pure function of its operands, so independent chains may interleave */
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* A load of constant weight bytes: through the read-only path from global memory (G), plain
 * from shared memory. */
template <bool G, typename V> __device__ __forceinline__ V tc_ld(const V *p) {
  return G ? __ldg(p) : *p;
}

#include "plugins/cuda/matmul_tc6.cuh"

/* Q4_K sub-block 4 c + j (j < 4) 6-bit scale and min from the 12 scale bytes (words s0, s1,
 * s2): ggml's get_scale_min_k4, by shifts (j is per thread: no indexed arrays). */
__device__ __forceinline__ void tc_scale_min_k4(int c, uint32_t s0, uint32_t s1, uint32_t s2, int j,
                                                float d, float dmin, float *d1, float *m1) {
  const int sh = 8 * j;
  uint32_t sc, mn;
  if (c == 0) {
    sc = (s0 >> sh) & 63;
    mn = (s1 >> sh) & 63;
  } else {
    sc = ((s2 >> sh) & 0xF) | (((s0 >> sh) >> 6 & 3) << 4);
    mn = ((s2 >> sh) >> 4 & 0xF) | (((s1 >> sh) >> 6 & 3) << 4);
  }
  *d1 = __fmul_rn(d, (float)sc);
  *m1 = __fmul_rn(dmin, (float)mn);
}

/* 2^e as a float, e in [-126, 127]. */
__device__ __forceinline__ float tc_pow2(int e) { return __int_as_float((127 + e) << 23); }

/* The split x, written once per matmul by tc_prep_kernel into the workspace, per row of x:
 * xb: per 16-element segment, per part (xh, xl), 16 halves in the order the MMA reads them
 * (within each 4 elements: 0, 2, 1, 3, so word 2i + h is the pair (4i + h, 4i + h + 2));
 * xs: per 32-element group XS = float2 (X, u): X the F32 sum, u = 2^(24 - es) the unscale of
 * s = 2^es; or (Q6_K, whose sub-blocks are 16) XS = float4 (X, u, X0, X1), X0 and X1 the sums
 * of the group's two halves (X = X0 + X1). Q4_K keeps the float2 form (its v11 block's shared
 * memory and its loads stay as they were). */
template <typename XS> __host__ __device__ static inline uint64_t tc_prep_bytes(int64_t K) {
  return (uint64_t)K * 4 + (uint64_t)K / 32 * sizeof(XS);
}

/* One lane quad's share of the x split: v = elements 8 i .. 8 i + 7 of a 32-group (i = lane % 4,
 * the quad's four lanes active together). h, l: the xh and xl halves in the MMA's order
 * (tc_prep_bytes); xs: the group's (X, u, X0, X1) in lane 0 of the quad (X and u in all four). */
__device__ __forceinline__ void tc_split8(const float v[8], uint4 *h, uint4 *l, float4 *xs) {
  uint32_t mx = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    mx = max(mx, __float_as_uint(v[i]) & 0x7FFFFFFFu);
  mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const int E = (int)(mx >> 23);
  int es = 141 - E;
  es = E == 0 || E == 255 ? 0 : es < -100 ? -100 : es > 100 ? 100 : es;
  const float s = tc_pow2(es);
  uint32_t hw[4], lw[4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float a = __fmul_rn(v[4 * i + h], s), b = __fmul_rn(v[4 * i + h + 2], s);
      const __half2 hv = __floats2half2_rn(a, b);
      const float2 hf = __half22float2(hv);
      const __half2 lv = __floats2half2_rn(__fsub_rn(a, hf.x), __fsub_rn(b, hf.y));
      hw[2 * i + h] = *(const uint32_t *)&hv;
      lw[2 * i + h] = *(const uint32_t *)&lv;
    }
  *h = make_uint4(hw[0], hw[1], hw[2], hw[3]);
  *l = make_uint4(lw[0], lw[1], lw[2], lw[3]);
  float p4[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    p4[i] = __fadd_rn(v[2 * i], v[2 * i + 1]);
  float X = __fadd_rn(__fadd_rn(p4[0], p4[1]), __fadd_rn(p4[2], p4[3]));
  X = __fadd_rn(X, __shfl_xor_sync(0xffffffffu, X, 1)); /* lanes 0, 1: X0; 2, 3: X1 */
  const float Xo = __shfl_xor_sync(0xffffffffu, X, 2);
  *xs = make_float4(__fadd_rn(X, Xo), tc_pow2(24 - es), X, Xo);
}

/* A group's xs entry in its form (tc_prep_bytes) from tc_split8's (X, u, X0, X1). */
__device__ __forceinline__ void tc_xs_put(float2 *p, float4 g) { *p = make_float2(g.x, g.y); }
__device__ __forceinline__ void tc_xs_put(float4 *p, float4 g) { *p = g; }

/* Stores a quad lane's split of elements e .. e + 7 into the prep layout (xb, xs). */
template <typename XS>
__device__ __forceinline__ void tc_store_split(uint4 *xb, XS *xs, int64_t e, uint4 h, uint4 l,
                                               float4 g) {
  const int64_t seg = e >> 4;
  const int half = (int)(e >> 3) & 1;
  xb[4 * seg + half] = h;
  xb[4 * seg + 2 + half] = l;
  if ((threadIdx.x & 3) == 0) tc_xs_put(&xs[e >> 5], g);
}

struct tc6i_xs; /* matmul_tc6i.cuh: its form's tc_split_put, declared before the template */
__device__ __forceinline__ void tc_split_put(const float v[8], uint4 *xb, tc6i_xs *xs, int64_t e);
struct tc4i_xs; /* matmul_tc4i.cuh (MEMRA_TC_Q4I) likewise */
__device__ __forceinline__ void tc_split_put(const float v[8], uint4 *xb, tc4i_xs *xs, int64_t e);
/* A lane quad's share of x split and stored in the prep form XS (matmul_tc6i.cuh overloads it
 * for its own form). */
template <typename XS>
__device__ __forceinline__ void tc_split_put(const float v[8], uint4 *xb, XS *xs, int64_t e) {
  uint4 h, l;
  float4 g;
  tc_split8(v, &h, &l, &g);
  tc_store_split(xb, xs, e, h, l, g);
}

/* Thread i of block (bx, m) takes elements 1024 bx + 8 i .. + 7 of row m (four threads = one
 * 32-group, a lane quad). Per 32-group: s = 2^es brings its largest |x| to [2^14, 2^15)
 * (clamped; zero, inf and NaN groups keep s = 1), xh = f16(s x), xl = f16(s x - xh);
 * X = the group's sum in a fixed order. */
template <bool VEC, typename XS>
__global__ void __launch_bounds__(128)
    tc_prep_kernel(const float *__restrict__ x, int64_t x_ld, int64_t K, uint8_t *__restrict__ ws) {
  memra_pdl_enter();
  const int64_t m = blockIdx.y, e = 1024 * (int64_t)blockIdx.x + 8 * threadIdx.x;
  if (e >= K) return; /* K % 256 == 0: whole lane quads leave together */
  uint4 *xb = (uint4 *)(ws + m * tc_prep_bytes<XS>(K));
  XS *xs = (XS *)(ws + m * tc_prep_bytes<XS>(K) + (uint64_t)K * 4);
  float v[8];
  memra_ldg8<VEC>(x + m * x_ld + e, v);
  tc_split_put(v, xb, xs, e);
}

/* What this thread needs of super-block sb: rows g and g + 8 (header + two q), and for x
 * row 0 its B segment part of both chunks and (X, u) of its sub-blocks. */
struct tc_raw {
  uint4 hd0, hd1, q0[2], q1[2];
};
struct tc_xin {
  uint4 b[2][2];
  float2 xs[2];
};
/* xb, xs: this x row's prep; bseg, bpart: the segment part this thread supplies (active) */
__device__ __forceinline__ void tc_load_x(tc_xin &r, const uint4 *xb, const float2 *xs, int64_t sb,
                                          bool active, int bseg, int bpart, int jsub) {
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const uint4 *p = xb + 4 * (16 * sb + 8 * c + bseg) + 2 * bpart;
    r.b[c][0] = active ? p[0] : make_uint4(0, 0, 0, 0);
    r.b[c][1] = active ? p[1] : make_uint4(0, 0, 0, 0);
    r.xs[c] = xs[8 * sb + 4 * c + jsub];
  }
}

/* The scales of chunk c (sub-block 4 c + jsub) of rows g and g + 8: (d sc, dmin m) each. */
struct tc_scl {
  float sc0, mn0, sc1, mn1;
};
__device__ __forceinline__ tc_scl tc_chunk_scales(const tc_raw &r, int c, int jsub) {
  const float d0 = __half2float(__ushort_as_half((uint16_t)(r.hd0.x & 0xFFFF)));
  const float dm0 = __half2float(__ushort_as_half((uint16_t)(r.hd0.x >> 16)));
  const float d1 = __half2float(__ushort_as_half((uint16_t)(r.hd1.x & 0xFFFF)));
  const float dm1 = __half2float(__ushort_as_half((uint16_t)(r.hd1.x >> 16)));
  tc_scl s;
  tc_scale_min_k4(c, r.hd0.y, r.hd0.z, r.hd0.w, jsub, d0, dm0, &s.sc0, &s.mn0);
  tc_scale_min_k4(c, r.hd1.y, r.hd1.z, r.hd1.w, jsub, d1, dm1, &s.sc1, &s.mn1);
  return s;
}

/* A timing probe only (1: WRONG results; layer_bench's consume mode): both B registers of every
 * MMA take the thread's x word, so the loop has none of its 32 selects: what building each
 * thread's B pair by its role costs the consumers. Never shipped. */
#ifndef MEMRA_TC_PROBE_NOSEL
#define MEMRA_TC_PROBE_NOSEL 0
#endif

/* MMA chains a chunk (NS) by caller: one (8 MMAs deep, the two chunks' chains interleaved) or
 * two (a chunk's MMAs split by h, 4 deep, added at the chunk's end). Other bits, so a matrix
 * keeps one NS in every kernel that may run it: v11 and v7 take two (H100, tg128 @ d512:
 * Llama-8B Q4_K_M +1.9%), matmul_id v3 / v4 one (two there: more registers, hybrid -1.5%;
 * docs/PERF.md, 2026-12-05). */
enum { TC_NS_MM = 2, TC_NS_ID = 1 };

/* Both chunks of the super-block in r . one row of x (xm), 8 MMAs each in a fixed order, the
 * chains interleaved (independent: the tensor pipe holds one of each in flight):
 * cc[c][0] + cc[c][1] is row g's nibble sum of its sub-block in chunk c, cc[c][2] + cc[c][3]
 * row g + 8's (header comment). */
template <int NS>
__device__ __forceinline__ void tc_chunks_mma(float (&cc)[2][4], const tc_raw &r, const tc_xin &xm,
                                              bool lo_b) {
  static_assert(NS == 1 || NS == 2, "one or two chains a chunk");
  float ch[2][NS][4];
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int k = 0; k < NS; ++k)
      ch[c][k][0] = ch[c][k][1] = ch[c][k][2] = ch[c][k][3] = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint4 qa = r.q0[c], qb = r.q1[c];
        const uint32_t wa = i == 0 ? qa.x : i == 1 ? qa.y : i == 2 ? qa.z : qa.w;
        const uint32_t wb = i == 0 ? qb.x : i == 1 ? qb.y : i == 2 ? qb.z : qb.w;
        const uint4 bq = xm.b[c][i >> 1];
        const uint32_t bv = (i & 1) ? (h ? bq.w : bq.z) : (h ? bq.y : bq.x);
        const uint32_t ua = h ? wa >> 8 : wa, ub = h ? wb >> 8 : wb;
        const int k = NS == 1 ? 0 : h;
        tc_mma(ch[c][k], ua & 0x000F000Fu, ub & 0x000F000Fu, ua & 0x00F000F0u, ub & 0x00F000F0u,
               MEMRA_TC_PROBE_NOSEL || lo_b ? bv : 0u, MEMRA_TC_PROBE_NOSEL || !lo_b ? bv : 0u);
      }
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = ch[c][0][e];
#pragma unroll
      for (int k = 1; k < NS; ++k)
        v = __fadd_rn(v, ch[c][k][e]);
      cc[c][e] = v;
    }
}

/* acc (rows g, g + 8) += the chunk's d1 C - m1 X. Chunks reach acc in super-block, then chunk
 * order: that order, not the MMAs', fixes the bits. */
__device__ __forceinline__ void tc_chunk_acc(float acc[2], const float cc[4], int c,
                                             const tc_scl &s, const tc_xin &xm, float hiscale) {
  const float f = __fmul_rn(xm.xs[c].y, hiscale);
  acc[0] = __fmaf_rn(s.sc0, __fmul_rn(__fadd_rn(cc[0], cc[1]), f), acc[0]);
  acc[0] = __fmaf_rn(-s.mn0, xm.xs[c].x, acc[0]);
  acc[1] = __fmaf_rn(s.sc1, __fmul_rn(__fadd_rn(cc[2], cc[3]), f), acc[1]);
  acc[1] = __fmaf_rn(-s.mn1, xm.xs[c].x, acc[1]);
}

/* Thread (g, t)'s roles (header comment): its sub-block in chunk c is 4 c + jsub (high
 * nibbles, x16, for t >= 2); the B segment part it supplies, if active: column g = (kind,
 * part). */
struct tc_role {
  int g, t, jsub, bseg, bpart;
  float hiscale;
  bool active, lo_b;
};
__device__ __forceinline__ tc_role tc_role_of(int g, int t) {
  tc_role r;
  r.g = g;
  r.t = t;
  r.jsub = 2 * (t & 1) + (t >> 1);
  r.hiscale = t >= 2 ? 0.0625f : 1.f;
  const int kind = g >> 1;
  r.bpart = g & 1;
  r.active = (kind & 1) == (t >> 1);
  r.lo_b = kind < 2;
  r.bseg = 4 * (t >> 1) + (t & 1) + 2 * (kind >> 1);
  return r;
}

/* Per weight type (Q4_K, Q6_K): a super-block's bytes, what a thread holds of it (raw) and of x
 * (xin), and the body that applies one super-block to M rows of x in the fixed order every
 * v7 / v11 row takes (xload(m) gives row m's xin, m >= 1). */
template <int T> struct tcq;
/* Rows g, g + 8 of a Q4_K super-block as thread (g, t) holds them in both Q4_K forms: the 16-byte
 * header and q bytes 64 c + 16 t .. + 15 of each (c = 0, 1). */
template <bool G>
__device__ __forceinline__ void tc_load_q4k(tc_raw &r, const uint8_t *b0, const uint8_t *b1,
                                            int t) {
  r.hd0 = tc_ld<G>((const uint4 *)b0);
  r.hd1 = tc_ld<G>((const uint4 *)b1);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    r.q0[c] = tc_ld<G>((const uint4 *)(b0 + 16 + 64 * c + 16 * t));
    r.q1[c] = tc_ld<G>((const uint4 *)(b1 + 16 + 64 * c + 16 * t));
  }
}
#if !MEMRA_TC_Q4I /* else matmul_tc4i.cuh's integer form */
template <> struct tcq<MEMRA_TYPE_Q4_K> {
  static constexpr int SBB = 144;
  typedef tc_raw raw;
  typedef tc_xin xin;
  typedef float2 xs_t; /* the prep's per-group form (tc_prep_bytes) */
  template <bool G>
  static __device__ __forceinline__ void load(raw &r, const uint8_t *b0, const uint8_t *b1,
                                              const tc_role &ro) {
    tc_load_q4k<G>(r, b0, b1, ro.t);
  }
  static __device__ __forceinline__ void load_x(xin &x, const uint4 *xb, const float2 *xs,
                                                int64_t sb, const tc_role &ro) {
    tc_load_x(x, xb, xs, sb, ro.active, ro.bseg, ro.bpart, ro.jsub);
  }
  template <int M, int NS, typename XL>
  static __device__ __forceinline__ void body(float (&acc)[M][2], const raw &cur, const xin &x0,
                                              XL xload, const tc_role &ro) {
    const tc_scl sc[2] = {tc_chunk_scales(cur, 0, ro.jsub), tc_chunk_scales(cur, 1, ro.jsub)};
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const xin xm = m == 0 ? x0 : xload(m);
      float cc[2][4];
      tc_chunks_mma<NS>(cc, cur, xm, ro.lo_b);
#pragma unroll
      for (int c = 0; c < 2; ++c) /* chunk 0 then 1 into row m's acc: the order of the bits */
        tc_chunk_acc(acc[m], cc[c], c, sc[c], xm, ro.hiscale);
    }
  }
};
#endif
template <> struct tcq<MEMRA_TYPE_Q6_K> {
  static constexpr int SBB = 210;
  typedef tc6_raw raw;
  typedef tc6_xin xin;
  typedef float4 xs_t;
  template <bool G>
  static __device__ __forceinline__ void load(raw &r, const uint8_t *b0, const uint8_t *b1,
                                              const tc_role &ro) {
    tc6_by_align<G>(b0, b1, [&](auto al) { tc6_load<G, decltype(al)::value>(r, b0, b1, ro.t); });
  }
  static __device__ __forceinline__ void load_x(xin &x, const uint4 *xb, const float4 *xs,
                                                int64_t sb, const tc_role &ro) {
    tc6_load_x(x, xb, xs, sb, ro.g, ro.t);
  }
  template <int M, int NS, typename XL> /* NS: tcq<Q4_K>'s chains; one form here */
  static __device__ __forceinline__ void body(float (&acc)[M][2], const raw &cur, const xin &x0,
                                              XL xload, const tc_role &ro) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const xin xm = m == 0 ? x0 : xload(m);
      float cc[4][4];
      tc6_chunks_mma(cc, cur, xm, ro.g);
#pragma unroll
      for (int ch = 0; ch < 4; ++ch) /* chunks in order into row m's acc: the order of the bits */
        tc6_chunk_acc(acc[m], cur, ch, cc[ch], xm, ro.t);
    }
  }
};

#include "plugins/cuda/matmul_tc6i.cuh"
#if MEMRA_TC_Q4I
#include "plugins/cuda/matmul_tc4i.cuh"
#endif
/* Q4_K's prep form per group (the mixed kernel holds it beside TC_Q6I's) */
typedef tcq<MEMRA_TYPE_Q4_K>::xs_t tc4_xs_t;

/* A row's sum over the lane quad t = 0..3 (butterfly: all four lanes get the same bits). */
__device__ __forceinline__ float tc_quad_sum(float v) {
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/* One row of x (K elements) split into the prep layout in shared memory (xb, xs) by the block's
 * first CW warps, XB loads in flight a thread (elements e, e + 1024, ...); K % 256 == 0,
 * so whole warps leave together. The ring kernels (v11, matmul_id v3) call it after the PDL wait.
 */
template <bool VEC, int XB, typename XS, int CW = TC_WARPS>
__device__ __forceinline__ void tc_split_row(const float *__restrict__ x, int64_t K, uint4 *xb,
                                             XS *xs) {
  constexpr int STRIDE = 8 * CW * 32;
  for (int64_t e0 = 8 * (int64_t)threadIdx.x; e0 < K; e0 += STRIDE * XB) {
    float v[XB][8];
#pragma unroll
    for (int i = 0; i < XB; ++i)
      if (e0 + STRIDE * i < K) memra_ldg8<VEC>(x + e0 + STRIDE * i, v[i]);
#pragma unroll
    for (int i = 0; i < XB; ++i) {
      const int64_t e = e0 + STRIDE * i;
      if (e >= K) break;
      tc_split_put(v[i], xb, xs, e);
    }
  }
}

/* Super-block j of a ring stage (16 rows of rowb bytes: rows g and g + 8 of thread (g, t) at
 * g rowb and (g + 8) rowb; the row's super-block sb0 + j) applied to one row of x. */
template <int T, int NS>
__device__ __forceinline__ void tc_sb_apply(float (&acc)[1][2], const uint8_t *stage, int rowb,
                                            int j, int64_t sb0, const uint4 *xb,
                                            const typename tcq<T>::xs_t *xs, const tc_role &ro) {
  typedef tcq<T> Q;
  const uint8_t *b0 = stage + ro.g * rowb + j * Q::SBB;
  typename Q::raw cur;
  typename Q::xin xm;
  Q::template load<false>(cur, b0, b0 + 8 * rowb, ro);
  Q::load_x(xm, xb, xs, sb0 + j, ro);
  Q::template body<1, NS>(
      acc, cur, xm, [](int) { return typename Q::xin(); }, ro);
}

/* A ring stage's nv super-blocks applied to one row of x (the ring kernels' consumer step); warp
 * w takes w, w + CW, ...: v7's sequence, so the same bits as v7 for these rows (NS: the
 * caller's, TC_NS_MM or TC_NS_ID). */
template <int T, int NS, int CW = TC_WARPS>
__device__ __forceinline__ void
tc_stage_apply(float (&acc)[1][2], const uint8_t *stage, int rowb, int64_t nv, int64_t sb0,
               const uint4 *xb, const typename tcq<T>::xs_t *xs, const tc_role &ro, int warp) {
  for (int j = warp; j < nv; j += CW)
    tc_sb_apply<T, NS>(acc, stage, rowb, j, sb0, xb, xs, ro);
}

template <int T, int M, bool VEC, int CW>
__global__ void __launch_bounds__(CW * 32)
    matmul_v7_kernel(const mm_jobs J, const uint8_t *__restrict__ ws, int64_t K, int64_t rows) {
  typedef tcq<T> Q;
  __shared__ float part[CW][M][TC_ROWS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const mm_job jb = mm_pick(J);
  const int64_t N = jb.N, n0 = jb.b * TC_ROWS;
  const int64_t m0 = (int64_t)blockIdx.y * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t nsb = K / 256;
  const uint8_t *w0 = jb.w + (uint64_t)(n0 + g < N ? n0 + g : N - 1) * jb.w_nb1;
  const uint8_t *w1 = jb.w + (uint64_t)(n0 + g + 8 < N ? n0 + g + 8 : N - 1) * jb.w_nb1;
  const tc_role ro = tc_role_of(g, t);
  /* x row m's prep (rows past the batch read row m0's: computed, never stored) */
  typedef typename Q::xs_t XS;
  const uint64_t pb = tc_prep_bytes<XS>(K);
  const uint8_t *ws0 = ws + m0 * pb;
#define TC_XB(m) ((const uint4 *)(ws0 + ((m) < mrows ? (m) : 0) * pb))
#define TC_XS(m) ((const XS *)(ws0 + ((m) < mrows ? (m) : 0) * pb + (uint64_t)K * 4))
  /* Weights are constant: the first super-block's bytes are loaded and the rest fetched into
   * L2 before waiting for x (launch.cuh). */
  int64_t sb = warp;
  typename Q::raw cur;
  typename Q::xin xcur;
  if (sb < nsb) Q::template load<true>(cur, w0 + Q::SBB * sb, w1 + Q::SBB * sb, ro);
  for (int r = 0; r < TC_ROWS; ++r)
    if (n0 + r < N)
      memra_prefetch_l2(jb.w + (uint64_t)(n0 + r) * jb.w_nb1, jb.w_nb1, threadIdx.x, CW * 32, 64);
  memra_pdl_enter();
  if (sb < nsb) Q::load_x(xcur, TC_XB(0), TC_XS(0), sb, ro);
  float acc[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
    acc[m][0] = acc[m][1] = 0.f;

  for (; sb < nsb; sb += CW) {
    typename Q::raw nxt;
    typename Q::xin xnxt;
    if (sb + CW < nsb) {
      Q::template load<true>(nxt, w0 + Q::SBB * (sb + CW), w1 + Q::SBB * (sb + CW), ro);
      Q::load_x(xnxt, TC_XB(0), TC_XS(0), sb + CW, ro);
    }
    Q::template body<M, TC_NS_MM>(
        acc, cur, xcur,
        [&](int m) {
          typename Q::xin xm;
          Q::load_x(xm, TC_XB(m), TC_XS(m), sb, ro);
          return xm;
        },
        ro);
    cur = nxt;
    xcur = xnxt;
  }
#undef TC_XB
#undef TC_XS
  /* rows g, g + 8: sum over t (butterfly: both partners get the same bits), then warps in
   * order, bias last */
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float v = tc_quad_sum(acc[m][r]);
      if (t == 0) part[warp][m][g + 8 * r] = v;
    }
  __syncthreads();
  mm_store_parts<CW, M, TC_ROWS>(part, n0, N, m0, mrows, jb.y, jb.y_ld, jb.bias, mm_conv_in{},
                                 false, J.acc ? MM_ACC_READ : MM_ACC_NONE);
}

/* The prep kernel over x's rows, then the v7 grid over J (TC_ROWS rows per block, mt = 1, 2,
 * 4, 8 or 16 rows of x per block); ws holds
 * rows * tc_prep_bytes(K) (tcq<T>'s form). False when a grid is too large. */
template <int T, bool VEC>
static bool mtc_launch(int mt, const memra_backend *be, mm_jobs J, const float *x, int64_t x_ld,
                       int64_t K, int64_t rows, uint8_t *ws) {
  const int64_t gx = mm_jobs_layout(&J, TC_ROWS);
  if (gx == 0 || rows > 65535) return false;
  (void)memra_cu_launch(be, tc_prep_kernel<VEC, typename tcq<T>::xs_t>,
                        dim3((unsigned)((K + 1023) / 1024), (unsigned)rows), dim3(128), 0, x, x_ld,
                        K, ws);
  const dim3 grid((unsigned)gx, (unsigned)((rows + mt - 1) / mt));
  /* the warps a tile by K (tc_dense_warps: one instance where both are TC_WARPS) */
  const bool w4k = MEMRA_TC_WARPS_4K != MEMRA_TC_WARPS && tc_dense_warps(K) == MEMRA_TC_WARPS_4K;
#define MTC_GO(MM)                                                                                 \
  (void)(w4k ? memra_cu_launch(be, matmul_v7_kernel<T, MM, VEC, TC_WARPS_4K>, grid,                \
                               dim3(TC_WARPS_4K * 32), 0, J, (const uint8_t *)ws, K, rows)         \
             : memra_cu_launch(be, matmul_v7_kernel<T, MM, VEC, TC_WARPS>, grid,                   \
                               dim3(TC_WARPS * 32), 0, J, (const uint8_t *)ws, K, rows))
  switch (mt) {
  case 1: MTC_GO(1); break;
  case 2: MTC_GO(2); break;
  case 4: MTC_GO(4); break;
  case 8: MTC_GO(8); break;
  default: MTC_GO(16); break;
  }
#undef MTC_GO
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_TC_CUH */
