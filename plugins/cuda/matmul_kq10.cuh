/* matmul_kq10.cuh — matmul v10 for Q4_K weights (included by matmul.cu only).
 *
 * Why (docs/PERF.md, 2026-12-01 call 3): under Nsight Compute v5 executes ~6.1 instructions
 * per Q4_K weight at M = 1 (3.17 M warp instructions for 4096 x 4096) and runs at IPC ~2: it
 * is issue-bound, not memory-bound (41-48% of the copy bandwidth on every shape). The SASS
 * shows where: per (row, step) v5 rebuilds the row address from uniform registers with
 * 64-bit multiplies (~10 IMAD), decodes the scales once per 32 weights, and ends each
 * 16-element chunk with its own scale FMAs.
 *
 * v10 layout: a warp owns R consecutive weight rows (a block: 4 warps, 4 R rows) and walks all
 * of K in steps of 8 super-blocks (2048 weights). Lane = (super-block sbl 0..7, group g 0..3)
 * takes, of each row, the 32 q bytes of group g: sub-block 2g (low nibbles) and 2g + 1 (high
 * nibbles), 64 weights under one scale/min decode. Row pointers advance by a constant per
 * step; x (32 values at a time) is loaded once per step and applied to all R rows.
 *
 * Arithmetic per sub-block (32 weights), row r (exactness, as v5's matmul_kq.cuh explains):
 *  v_i = 1/2 + q_i / 32 by one PRMT, S' = sum_i v_i x_i (one FFMA chain in element order),
 *  row += (32 d1) S' - (16 d1 + m1) X with d1 = d sc, m1 = dmin m (F32-rounded as ggml),
 *  X = sum of the sub-block's x (fixed pairwise order). After the steps, the row's 32 lane
 *  sums are added by a fixed butterfly. Batch rows m (M > 1) take the same sequence against the
 *  same weight registers, and R or the grid never enter a row's arithmetic: batch invariant.
 *  (The bits differ from v5's, which cut the sums at 16 elements and across 4 warps;
 *  MEMRA_GEMV=v5 keeps v5 for A/B timing.) */
#ifndef MEMRA_CUDA_MATMUL_KQ10_CUH
#define MEMRA_CUDA_MATMUL_KQ10_CUH

#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_jobs.cuh"
#include "plugins/cuda/matmul_kq.cuh"

enum { MK10_WARPS = 4, MK10_SB = 8 /* super-blocks per step */ };

/* sum_i v_i x_i over 32 weights whose nibbles sit in bits 3..6 of the bytes of b[8]. */
__device__ __forceinline__ float mk10_dot32(const uint32_t b[8], const float x[32]) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i)
    s = fmaf(mkq_half_plus(b[i >> 2], i & 3), x[i], s);
  return s;
}

/* 32 values of x at xp and their sum (two 16-element pairwise sums, then their sum). */
template <bool VEC> __device__ __forceinline__ float mk10_load_x32(const float *xp, float v[32]) {
  const float a = mkq_load_x16<VEC>(xp, v), b = mkq_load_x16<VEC>(xp + 16, v + 16);
  return __fadd_rn(a, b);
}

template <int M, bool VEC, int R>
__global__ void __launch_bounds__(MK10_WARPS * 32)
    matmul_v10_kernel(const mm_jobs J, const float *__restrict__ x, int64_t x_ld, int64_t K,
                      int64_t rows) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sbl = lane >> 2, g = lane & 3;
  const mm_job jb = mm_pick(J);
  const int64_t n0 = jb.b * (MK10_WARPS * R) + warp * R;
  const uint8_t *wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const uint8_t *row = jb.w + (uint64_t)(n0 + r < jb.N ? n0 + r : jb.N - 1) * jb.w_nb1;
    memra_prefetch_l2(row, jb.w_nb1, lane, 32, 64); /* constant data: before the wait */
    wr[r] = row + 144 * sbl;
  }
  memra_pdl_enter();
  const int64_t m0 = (int64_t)blockIdx.y * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t nsb = K / 256, steps = (nsb + MK10_SB - 1) / MK10_SB;
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;

  for (int64_t s = 0; s < steps; ++s) {
    const int64_t sb = MK10_SB * s + sbl;
    if (sb < nsb) { /* the K tail: lanes past the row idle */
      uint4 hd[R], qa[R], qb[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint8_t *b = wr[r] + (uint64_t)(144 * MK10_SB) * (uint64_t)s;
        hd[r] = __ldg((const uint4 *)b);
        qa[r] = __ldg((const uint4 *)(b + 16 + 32 * g));
        qb[r] = __ldg((const uint4 *)(b + 32 + 32 * g));
      }
      /* per row: the two sub-blocks' 32 d1 and -(16 d1 + m1), as v5 rounds them */
      float a0[R], b0[R], a1[R], b1[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float d = __half2float(__ushort_as_half((uint16_t)(hd[r].x & 0xFFFF)));
        const float dmin = __half2float(__ushort_as_half((uint16_t)(hd[r].x >> 16)));
        int sc0, sc1, mn0, mn1;
        mkq_scales(hd[r].y, hd[r].z, hd[r].w, g, &sc0, &sc1, &mn0, &mn1);
        const float d0 = __fmul_rn(d, (float)sc0), d1 = __fmul_rn(d, (float)sc1);
        const float c0 = __fmul_rn(dmin, (float)mn0), c1 = __fmul_rn(dmin, (float)mn1);
        a0[r] = 32.f * d0;
        b0[r] = -__fadd_rn(16.f * d0, c0);
        a1[r] = 32.f * d1;
        b1[r] = -__fadd_rn(16.f * d1, c1);
      }
      const int64_t e = 256 * sb + 64 * g;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (m >= mrows) break;
        const float *xp = x + (m0 + m) * x_ld + e;
        float xv[32];
        const float Xl = mk10_load_x32<VEC>(xp, xv);
        float sl[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint32_t w[8] = {qa[r].x, qa[r].y, qa[r].z, qa[r].w,
                                 qb[r].x, qb[r].y, qb[r].z, qb[r].w};
          uint32_t lo[8];
#pragma unroll
          for (int k = 0; k < 8; ++k)
            lo[k] = (w[k] << 3) & 0x78787878u;
          sl[r] = mk10_dot32(lo, xv);
        }
        const float Xh = mk10_load_x32<VEC>(xp + 32, xv);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint32_t w[8] = {qa[r].x, qa[r].y, qa[r].z, qa[r].w,
                                 qb[r].x, qb[r].y, qb[r].z, qb[r].w};
          uint32_t hi[8];
#pragma unroll
          for (int k = 0; k < 8; ++k)
            hi[k] = (w[k] >> 1) & 0x78787878u;
          const float sh = mk10_dot32(hi, xv);
          float t = acc[m][r];
          t = fmaf(a0[r], sl[r], t);
          t = fmaf(b0[r], Xl, t);
          t = fmaf(a1[r], sh, t);
          acc[m][r] = fmaf(b1[r], Xh, t);
        }
      }
    }
  }
  float *__restrict__ y = jb.y;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = memra_warp_sum(acc[m][r]);
      const int64_t n = n0 + r;
      if (lane == 0 && m < mrows && n < jb.N)
        y[(m0 + m) * jb.y_ld + n] = jb.bias ? __fadd_rn(v, jb.bias[n]) : v;
    }
}

/* R rows per warp: 2 under 8192 rows in all (twice the warps for the small projections),
 * else 4. R never changes a bit (see above). J.blk0 is filled here. */
template <bool VEC>
static bool mk10_launch(int mt, int64_t n_rows_all, const memra_backend *be, mm_jobs J,
                        const float *x, int64_t x_ld, int64_t K, int64_t rows) {
  const int R = n_rows_all < 8192 ? 2 : 4;
  const int64_t gx = mm_jobs_layout(&J, MK10_WARPS * R);
  if (gx == 0) return false;
  const dim3 grid((unsigned)gx, (unsigned)((rows + mt - 1) / mt));
#define MK10_GO(MM, RR)                                                                            \
  (void)memra_cu_launch(be, matmul_v10_kernel<MM, VEC, RR>, grid, dim3(MK10_WARPS * 32), 0, J, x,  \
                        x_ld, K, rows)
#define MK10_R(MM)                                                                                 \
  if (R == 2)                                                                                      \
    MK10_GO(MM, 2);                                                                                \
  else                                                                                             \
    MK10_GO(MM, 4);
  switch (mt) {
  case 1: MK10_R(1) break;
  case 2: MK10_R(2) break;
  case 4: MK10_R(4) break;
  default: MK10_R(8) break;
  }
#undef MK10_R
#undef MK10_GO
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_KQ10_CUH */
