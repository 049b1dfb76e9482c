/* matmul_q8.cuh — matmul v8 for Q8_0 weights (included by matmul.cu only).
 *
 * Why (docs/PERF.md): Q8_0 ran v3 (one weight row per warp, x re-read from L1 per row) at
 * 37% of its floor end to end. Its 34-byte blocks are only 2-byte aligned, so v3 reads them
 * with 2-byte loads, and on v6's layout (8 rows sharing x) the 2-byte loads made it 3%
 * slower still. v8 never loads a weight narrower than 16 bytes from global memory.
 *
 * Layout: a block of 4 warps owns R consecutive weight rows (rows 16-byte aligned: the
 * caller checks). A row is cut into steps of 32 Q8_0 blocks (1024 elements, 1088 bytes,
 * 68 aligned 16-byte chunks); warp w takes steps w, w + 4, ... Per step the warp copies,
 * with cp.async 16 bytes per lane (coalesced, no registers held while in flight), the
 * step's 1088 bytes of each of its R rows and, at M = 1, the step's 4 KiB of x (16-byte
 * chunks XOR-swizzled so that the LDS.128 below are conflict-free) into its own part of
 * shared memory. Lane l then owns Q8_0 block l of the step: 9 aligned LDS.32 words cover
 * it (the block starts at byte 34 l: 4-aligned for even l, 2 mod 4 for odd l); a funnel
 * shift by 16 (even) or 32 (odd) bits gives its 32 quants as 8 aligned words and its f16 d.
 * Its 32 x values are read once per step and applied to all R rows.
 *
 * Arithmetic per (x row, weight row) (exactness): ggml's weight is d q_i (q_i int8, d f16:
 * the product has at most 19 significant bits, exact in f32). Per Q8_0 block the lane
 * computes S = sum_i q_i x_i, by default as two exact int32 sums over x's 2 x 16-bit split
 * (mq8_split_x, mq8_block_dp: S = s (H + L 2^-15), two roundings), with MEMRA_Q8_DP=0 as an
 * F32 FFMA chain in element order (q_i exact: PRMT under the exponent 0x4B of 2^23 + (q_i +
 * 128), minus 2^23 + 128); then acc = fma(d, S, acc): d is applied per 32-block in F32, as
 * the oracle does (far under the 1e-5 bound either way). acc runs over the lane's
 * blocks in step order, then a butterfly over the warp and the 4 warps' partials in warp
 * order (+ bias). None of it depends on M, R or the other rows: batch invariant; at M > 1
 * x comes from global memory instead of shared memory, the same values in the same order. */
#ifndef MEMRA_CUDA_MATMUL_Q8_CUH
#define MEMRA_CUDA_MATMUL_Q8_CUH

#include "plugins/cuda/dequant.cuh"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_jobs.cuh"
#include "plugins/cuda/mma_sync.cuh"

enum { MQ8_WARPS = 4, MQ8_R = 8, MQ8_SPAN = 32 * 34, MQ8_XSPAN = 1024 * 4 };

/* Shared memory of one warp: x of a step (M = 1 only), then the step's span of R rows. */
__host__ __device__ constexpr int mq8_warp_smem(int M, int R) {
  return (M == 1 ? MQ8_XSPAN : 0) + R * MQ8_SPAN;
}

/* 16-byte chunk c (0..255) of a step's x is kept at chunk c ^ ((c / 8) % 8): lane l reads
 * chunks 8 l .. 8 l + 7, and the 8 lanes of each quarter warp then hit distinct banks. */
__device__ __forceinline__ int mq8_xswz(int c) { return c ^ ((c >> 3) & 7); }

/* acc + d * (sum_i q_i x_i) over one Q8_0 block: q from 8 words (4 quants each), x[32]. */
__device__ __forceinline__ float mq8_block(float acc, const uint32_t q[8], float d,
                                           const float x[32]) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t u = q[k] ^ 0x80808080u; /* int8 -> q + 128 */
#pragma unroll
    for (int i = 0; i < 4; ++i)
      s = fmaf(memra_byte_f(u, i, 128.f), x[4 * k + i], s);
  }
  return fmaf(d, s, acc);
}

/* The block sums on the integer pipe (MEMRA_Q8_DP, default 1; 0 builds the F32 chain of
 * mq8_block for A/B). A block's 32 x values are written as s (h + l / 2^15), s a power of two
 * with |x| / s < 2^13 (h, l int16: the residual is under 2^-28 of the block's largest |x|,
 * below f32's own rounding), so sum_i q_i x_i = s (H + L / 2^15) with H = sum q_i h_i and
 * L = sum q_i l_i exact int32 sums by IDP2A (two products an instruction, no conversion per
 * weight): one integer op a weight instead of PRMT, FADD and FFMA. H200: Llama-8B Q8_0 tg128
 * @ d512 +3.4% (docs/PERF.md, 2026-12-04 ninth session). */
#ifndef MEMRA_Q8_DP
#define MEMRA_Q8_DP 1
#endif

/* The split of one block's x[32]: h[k] and l[k] hold elements 2k, 2k + 1 as int16 pairs;
 * *s the power of two (NaN when a value is not finite, so the sums are NaN as the oracle's). */
__device__ __forceinline__ void mq8_split_x(const float x[32], uint32_t h[16], uint32_t l[16],
                                            float *s) {
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i)
    asm("max.NaN.f32 %0, %0, %1;" : "+f"(amax) : "f"(fabsf(x[i])));
  const uint32_t ex = __float_as_uint(amax) >> 23; /* amax < 2^(ex - 126) */
  const uint32_t ie = 266u - ex < 254u ? 266u - ex : 254u;
  const float inv = __uint_as_float(ie << 23); /* 2^(139 - ex), at most 2^127: |x| inv < 2^13 */
  /* s = 1 / inv: 2^-127 (subnormal) when every |x| < 2^-114, NaN when one is not finite */
  *s = ex == 255u   ? amax * 0.f
       : ie == 254u ? __uint_as_float(0x00400000u)
                    : __uint_as_float((254u - ie) << 23);
  const float C = 12582912.f; /* 1.5 2^23: t = C + rint(v), rint(v) in t's low 16 bits */
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    uint32_t th[2], tl[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float v = x[2 * k + j] * inv; /* exact: a power of two */
      const float t = v + C, r = v - (t - C);
      th[j] = __float_as_uint(t);
      tl[j] = __float_as_uint(fmaf(r, 32768.f, C));
    }
    h[k] = __byte_perm(th[0], th[1], 0x5410);
    l[k] = __byte_perm(tl[0], tl[1], 0x5410);
  }
}

/* IDP2A reads either half of a word, so a block's quants need no funnel shift: lane l's 9
 * aligned words v[0..8] (mq8_unpack's) hold quant pairs as hi(v0), lo(v1), hi(v1), ...,
 * lo(v8) for even l (the block at byte 34 l, 4-aligned: d in lo(v0)) and lo(v1), hi(v1), ...,
 * hi(v8) for odd l (d in hi(v0)). One instruction sequence serves both: hi(W0), lo/hi(v1..v7),
 * lo(W8), with W0 = v0 and pairs in order for even l, W0 = v8 and pairs rotated by one (pair 15
 * first) for odd l. The integer sums do not depend on the order: the same bits. */
__device__ __forceinline__ void mq8_rot_odd(uint32_t a[16], int lane) {
  if (lane & 1) {
    const uint32_t t = a[15];
#pragma unroll
    for (int j = 15; j > 0; --j)
      a[j] = a[j - 1];
    a[0] = t;
  }
}

/* The lane's 9 words of its block (v[0] replaced by W0, see above) and its d. */
__device__ __forceinline__ void mq8_unpack_dp(const uint8_t *span, int l, uint32_t v[9], float *d) {
  const uint32_t *w = (const uint32_t *)span + ((34 * l) >> 2);
#pragma unroll
  for (int k = 0; k < 9; ++k)
    v[k] = w[k];
  *d = __half2float(__ushort_as_half((uint16_t)(v[0] >> ((l & 1) ? 16u : 0u))));
  v[0] = (l & 1) ? v[8] : v[0];
}

/* acc + d * (sum_i q_i x_i) over one Q8_0 block from its words v (mq8_unpack_dp) and x's split
 * (h, l in the lane's order, s). */
__device__ __forceinline__ float mq8_block_dp(float acc, const uint32_t v[9], float d,
                                              const uint32_t h[16], const uint32_t l[16], float s) {
  int H = __dp2a_hi((int)h[0], (int)v[0], 0), L = __dp2a_hi((int)l[0], (int)v[0], 0);
#pragma unroll
  for (int k = 1; k < 8; ++k) {
    H = __dp2a_lo((int)h[2 * k - 1], (int)v[k], H);
    H = __dp2a_hi((int)h[2 * k], (int)v[k], H);
    L = __dp2a_lo((int)l[2 * k - 1], (int)v[k], L);
    L = __dp2a_hi((int)l[2 * k], (int)v[k], L);
  }
  H = __dp2a_lo((int)h[15], (int)v[8], H);
  L = __dp2a_lo((int)l[15], (int)v[8], L);
  return fmaf(d, fmaf((float)L, 0x1p-15f, (float)H) * s, acc);
}

/* The quants and d of lane l's block from the staged span (9 aligned words). */
__device__ __forceinline__ void mq8_unpack(const uint8_t *span, int l, uint32_t q[8], float *d) {
  const uint32_t *w = (const uint32_t *)span + ((34 * l) >> 2);
  uint32_t v[9];
#pragma unroll
  for (int k = 0; k < 9; ++k)
    v[k] = w[k];
  const uint32_t sh = (l & 1) ? 32u : 16u; /* odd l: d in v[0]'s high half, quants aligned */
#pragma unroll
  for (int k = 0; k < 8; ++k)
    q[k] = __funnelshift_rc(v[k], v[k + 1], sh);
  *d = __half2float(__ushort_as_half((uint16_t)(v[0] >> (sh - 16u))));
}

/* The lane's 32 x values of a step from the swizzled stage xs. */
__device__ __forceinline__ void mq8_load_x(float (&xv)[32], const uint8_t *xs, int lane) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 t = *(const float4 *)(xs + 16 * mq8_xswz(8 * lane + i));
    xv[4 * i] = t.x;
    xv[4 * i + 1] = t.y;
    xv[4 * i + 2] = t.z;
    xv[4 * i + 3] = t.w;
  }
}

/* The lane's 32 x values from a row of x in global memory (through L1). */
__device__ __forceinline__ void mq8_ldg_x(float (&xv)[32], const float *xp) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 t = __ldg((const float4 *)xp + i);
    xv[4 * i] = t.x;
    xv[4 * i + 1] = t.y;
    xv[4 * i + 2] = t.z;
    xv[4 * i + 3] = t.w;
  }
}

#if MEMRA_Q8_DP
/* The lane's block of a step's x at xs, split and in the lane's pair order. */
__device__ __forceinline__ void mq8_split_at(const uint8_t *xs, int lane, uint32_t (&h)[16],
                                             uint32_t (&l)[16], float *s) {
  float xv[32];
  mq8_load_x(xv, xs, lane);
  mq8_split_x(xv, h, l, s);
  mq8_rot_odd(h, lane);
  mq8_rot_odd(l, lane);
}

/* All R weight spans at ws (RS bytes apart) against the lane's split block of x. */
template <int R, int RS = MQ8_SPAN>
__device__ __forceinline__ void mq8_rows_dp(float (&acc)[R], const uint32_t (&h)[16],
                                            const uint32_t (&l)[16], float s, const uint8_t *ws,
                                            int lane) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint32_t v[9];
    float d;
    mq8_unpack_dp(ws + RS * r, lane, v, &d);
    acc[r] = mq8_block_dp(acc[r], v, d, h, l, s);
  }
}
#endif

/* One M = 1 step of the lane's block: its 32 x values once from the swizzled stage xs, then
 * all R weight spans at ws, RS bytes apart (v8, v8b and v13 share it: the same arithmetic, the
 * same bits). */
template <int R, int RS = MQ8_SPAN>
__device__ __forceinline__ void mq8_step1(float (&acc)[R], const uint8_t *xs, const uint8_t *ws,
                                          int lane) {
#if MEMRA_Q8_DP
  uint32_t h[16], l[16];
  float s;
  mq8_split_at(xs, lane, h, l, &s);
  mq8_rows_dp<R, RS>(acc, h, l, s, ws, lane);
#else
  float xv[32];
  mq8_load_x(xv, xs, lane);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint32_t q[8];
    float d;
    mq8_unpack(ws + RS * r, lane, q, &d);
    acc[r] = mq8_block(acc[r], q, d, xv);
  }
#endif
}

#if MEMRA_Q8_DP
/* x_once (v13): the lane's block of x split once, in place (its 8 swizzled chunks: h then l),
 * the power of two into ss[lane]; mq8_step1s then reads the split for every tile. */
__device__ __forceinline__ void mq8_split_in_place(uint8_t *xs, float *ss, int lane) {
  uint32_t h[16], l[16];
  mq8_split_at(xs, lane, h, l, &ss[lane]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    *(uint4 *)(xs + 16 * mq8_xswz(8 * lane + i)) =
        make_uint4(h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]);
    *(uint4 *)(xs + 16 * mq8_xswz(8 * lane + 4 + i)) =
        make_uint4(l[4 * i], l[4 * i + 1], l[4 * i + 2], l[4 * i + 3]);
  }
}

template <int R, int RS = MQ8_SPAN>
__device__ __forceinline__ void mq8_step1s(float (&acc)[R], const uint8_t *xs, const float *ss,
                                           const uint8_t *ws, int lane) {
  uint32_t h[16], l[16];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4 a = *(const uint4 *)(xs + 16 * mq8_xswz(8 * lane + i));
    const uint4 b = *(const uint4 *)(xs + 16 * mq8_xswz(8 * lane + 4 + i));
    h[4 * i] = a.x, h[4 * i + 1] = a.y, h[4 * i + 2] = a.z, h[4 * i + 3] = a.w;
    l[4 * i] = b.x, l[4 * i + 1] = b.y, l[4 * i + 2] = b.z, l[4 * i + 3] = b.w;
  }
  mq8_rows_dp<R, RS>(acc, h, l, ss[lane], ws, lane);
}
#endif

/* The cp.async copies of step s's x (nb of its 32 blocks: 8 nb 16-byte chunks) from xl (the
 * row's element 4 lane) into a warp's 4 KiB at shared address xs, v8's swizzle; `bytes` 16,
 * or 0 to zero-fill (rows past a batch). */
__device__ __forceinline__ void mq8_issue_x(uint32_t xs, const float *xl, int64_t s, int nb,
                                            int lane, int bytes) {
  const uint32_t xo[2] = {16u * (lane ^ (lane >> 3)), 16u * (lane ^ ((lane >> 3) | 4))};
#pragma unroll
  for (int k = 0; k < 8; ++k)
    if (nb == 32 || lane + 32 * k < 8 * nb)
      memra_cp_async16(xs + xo[k & 1] + 512 * k, xl + 1024 * s + 128 * k, bytes);
}

template <int M, int R>
__global__ void __launch_bounds__(MQ8_WARPS * 32, M == 1 ? 4 : 1)
    matmul_v8_kernel(const mm_jobs J, const float *__restrict__ x, int64_t x_ld, int64_t K,
                     int64_t rows) {
  extern __shared__ __align__(16) uint8_t mq8_smem[];
  __shared__ float part[MQ8_WARPS][M][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const mm_job jb = mm_pick(J);
  float *__restrict__ y = jb.y;
  const float *__restrict__ bias = jb.bias;
  const int64_t y_ld = jb.y_ld, N = jb.N;
  const int64_t n0 = jb.b * R;
  const int64_t m0 = (int64_t)blockIdx.y * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t nblk = K / 32, steps = (nblk + 31) / 32;
  const uint8_t *wr[R];
  mm_rows_enter<R, MQ8_WARPS * 32>(wr, jb, n0);
  uint8_t *xs = mq8_smem + warp * mq8_warp_smem(M, R);
  uint8_t *ws = xs + (M == 1 ? MQ8_XSPAN : 0);
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;

  /* This lane's copy sources (chunk lane of the warp's first step; chunks lane + 32 k are
   * 512 k bytes on) and destinations, advanced a step at a time below. x chunk c = lane +
   * 32 k goes to swizzled chunk 32 k + (lane ^ ((lane / 8) | 4 (k % 2))). */
  const uint8_t *wl[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    wl[r] = wr[r] + (uint64_t)MQ8_SPAN * warp + 16 * lane;
  const float *xl = x + m0 * x_ld + 1024 * warp + 4 * lane;
  const uint32_t wsl = memra_smem_u32(ws) + 16 * lane;
  const uint32_t xsl[2] = {memra_smem_u32(xs) + 16 * (lane ^ (lane >> 3)),
                           memra_smem_u32(xs) + 16 * (lane ^ ((lane >> 3) | 4))};

  for (int64_t s = warp; s < steps; s += MQ8_WARPS) {
    const int nb = nblk - 32 * s < 32 ? (int)(nblk - 32 * s) : 32; /* blocks in this step */
    const int bytes = 34 * nb, n16 = (bytes + 15) >> 4;
    if (M == 1) { /* 8 nb of the step's 256 x chunks */
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (nb == 32 || lane + 32 * k < 8 * nb)
          memra_cp_async16(xsl[k & 1] + 512 * k, xl + 128 * k, 16);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) { /* n16 <= 68 chunks: lane, lane + 32, lane + 64 */
      if (nb == 32) {             /* whole step: 68 whole chunks */
        memra_cp_async16(wsl + MQ8_SPAN * r, wl[r], 16);
        memra_cp_async16(wsl + MQ8_SPAN * r + 512, wl[r] + 512, 16);
        if (lane < 4) memra_cp_async16(wsl + MQ8_SPAN * r + 1024, wl[r] + 1024, 16);
      } else { /* the row's last step: its last chunk may be partial */
#pragma unroll
        for (int k = 0; k < 3; ++k) {
          const int c = lane + 32 * k, left = bytes - 16 * c;
          if (c < n16)
            memra_cp_async16(wsl + MQ8_SPAN * r + 512 * k, wl[r] + 512 * k, left < 16 ? left : 16);
        }
      }
      wl[r] += (uint64_t)MQ8_SPAN * MQ8_WARPS;
    }
    xl += 1024 * MQ8_WARPS;
    memra_cp_async_commit();
    memra_cp_async_wait<0>();
    __syncwarp();
    if (lane < nb) {
      if (M == 1) { /* x once per step from shared memory, then all R rows */
        mq8_step1<R>(acc[0], xs, ws, lane);
      } else {  /* batch: each weight row unpacked once, x rows from global (L1) */
#if MEMRA_Q8_DP /* x's split once per row of x, then every weight row: mq8_step1's sums */
#pragma unroll
        for (int m = 0; m < M; ++m) {
          if (m >= mrows) break;
          float xv[32];
          mq8_ldg_x(xv, x + (m0 + m) * x_ld + 32 * (32 * s + lane));
          uint32_t h[16], l[16];
          float sx;
          mq8_split_x(xv, h, l, &sx);
          mq8_rot_odd(h, lane);
          mq8_rot_odd(l, lane);
          mq8_rows_dp<R>(acc[m], h, l, sx, ws, lane);
        }
#else
#pragma unroll
        for (int r = 0; r < R; ++r) {
          uint32_t q[8];
          float d;
          mq8_unpack(ws + MQ8_SPAN * r, lane, q, &d);
#pragma unroll
          for (int m = 0; m < M; ++m) {
            if (m >= mrows) break;
            float xv[32];
            mq8_ldg_x(xv, x + (m0 + m) * x_ld + 32 * (32 * s + lane));
            acc[m][r] = mq8_block(acc[m][r], q, d, xv);
          }
        }
#endif
      }
    }
    __syncwarp(); /* every lane is done with the span before the next step's copies */
  }
  mm_reduce_store<MQ8_WARPS>(acc, part, n0, N, m0, mrows, y, y_ld, bias);
}

/* R rows per block as in mkq_launch (2 under 4096 rows in all at M = 1, else 8). Shared
 * memory is dynamic (51,200 bytes at M = 1, R = 8: 4 blocks per SM). Returns false when the
 * grid is too large; *err: the attribute call's error (no launch then). */
static bool mq8_launch(int mt, int R, const memra_backend *be, mm_jobs J, const float *x,
                       int64_t x_ld, int64_t K, int64_t rows, cudaError_t *err) {
  const int64_t gx = mm_jobs_layout(&J, R);
  *err = cudaSuccess;
  if (gx == 0) return false;
  const dim3 grid((unsigned)gx, (unsigned)((rows + mt - 1) / mt));
#define MQ8_GO(MM, RR)                                                                             \
  do {                                                                                             \
    const int smem = MQ8_WARPS * mq8_warp_smem(MM, RR);                                            \
    *err = cudaFuncSetAttribute(matmul_v8_kernel<MM, RR>,                                          \
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem);                \
    if (*err == cudaSuccess)                                                                       \
      (void)memra_cu_launch(be, matmul_v8_kernel<MM, RR>, grid, dim3(MQ8_WARPS * 32), smem, J, x,  \
                            x_ld, K, rows);                                                        \
  } while (0)
  switch (mt) {
  case 1:
    if (R == 2)
      MQ8_GO(1, 2);
    else
      MQ8_GO(1, MQ8_R);
    break;
  case 2: MQ8_GO(2, MQ8_R); break;
  case 4: MQ8_GO(4, MQ8_R); break;
  default: MQ8_GO(8, MQ8_R); break;
  }
#undef MQ8_GO
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_Q8_CUH */
