/* matmul_kq.cuh — matmul v5 for Q4_K, Q5_K and Q6_K weights (included by matmul.cu only).
 *
 * Why (docs/PERF.md): v3 spent ~12 SASS instructions per Q4_K weight (scale decode per 16
 * weights, nibble -> float, dequant FFMA, dot FFMA, an x load per weight row) and every
 * warp re-read all of x from L1 for its one weight row: 4 B of x per 0.56 B of weight.
 *
 * v5 layout: a block of MKQ_WARPS warps owns MKQ_R consecutive weight rows. The row is
 * cut into steps of 1024 elements (4 super-blocks); warp w takes steps w, w + 4, ...
 * Lane = (super-block sbl 0..3, 64-element group g 0..3, half p 0..1) reads 16 q bytes,
 * i.e. 16 elements of sub-block 2g (low nibbles) and 16 of sub-block 2g + 1 (high); for
 * Q6_K 16 ql + 16 qh bytes: quarters g % 2 and g % 2 + 2 of half g / 2 (16 elements each). The
 * lane loads its 32 x values once per step and applies them to all MKQ_R rows (x leaves
 * L1 once per 8 weight rows), and their two 16-element sums X once.
 *
 * Arithmetic per 16-element chunk, row r (exactness):
 *  - v_i = 1/2 + q_i / 2^(B+1) (B = 4, 5 or 6 bits) is built by placing q_i << (7 - B) in
 *    byte 2 under the exponent byte 0x3F: one PRMT per weight, exact (no rounding).
 *  - S' = sum_i v_i x_i: F32 FFMA chain in element order.
 *  - ggml's weight is d1 q_i - m1 (d1 = d sc, m1 = dmin m, both F32-rounded as ggml does).
 *    With q_i = 2^(B+1) v_i - 2^B:  sum_i (d1 q_i - m1) x_i
 *      = (2^(B+1) d1) S' - (2^B d1 + m1) X,   X = sum_i x_i.
 *    Algebraically exact; the rounding differs from a direct dot: S' carries an offset of
 *    1/2 per weight, so its rounding error is at most ~4x that of sum q_i x_i (opcheck's
 *    1e-5 relative bound holds by a wide margin), 2^(B+1) d1 is exact, 2^B d1 + m1 one
 *    rounding. The same sequence runs for every M (only the loop over batch rows m wraps
 *    it), and the cross-warp sum is in warp order: batch invariant. */
#ifndef MEMRA_CUDA_MATMUL_KQ_CUH
#define MEMRA_CUDA_MATMUL_KQ_CUH

#include "plugins/cuda/dequant.cuh"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_jobs.cuh"

enum { MKQ_WARPS = 4, MKQ_R = 8, MKQ_MAX_M = 8 };

/* byte i of a, placed under exponent byte 0x3F (bit 23 clear): 1/2 + byte / 256. */
__device__ __forceinline__ float mkq_half_plus(uint32_t a, int i) {
  return __int_as_float(__byte_perm(a, 0x3F000000u, 0x7044 | (i << 8)));
}

/* x[e .. e + 16) of one activation row into v, and their sum (fixed pairwise order). */
template <bool VEC>
__device__ __forceinline__ float mkq_load_x16(const float *__restrict__ xp, float v[16]) {
  if (VEC) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 a = __ldg((const float4 *)xp + i);
      v[4 * i] = a.x;
      v[4 * i + 1] = a.y;
      v[4 * i + 2] = a.z;
      v[4 * i + 3] = a.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      v[i] = __ldg(xp + i);
  }
  float s[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    s[i] = __fadd_rn(v[2 * i], v[2 * i + 1]);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    s[i] = __fadd_rn(s[2 * i], s[2 * i + 1]);
  return __fadd_rn(__fadd_rn(s[0], s[1]), __fadd_rn(s[2], s[3]));
}

/* sum_i v_i x_i over 16 elements, v from the bytes of 4 words (element order). */
__device__ __forceinline__ float mkq_dot16(const uint32_t b[4], const float x[16]) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i)
    s = fmaf(mkq_half_plus(b[i >> 2], i & 3), x[i], s);
  return s;
}

/* Scales and mins (6-bit) of sub-blocks 2g and 2g + 1 from the 12 scale bytes (words
 * y, z, w): ggml's get_scale_min_k4 for the pair, branch-free. */
__device__ __forceinline__ void mkq_scales(uint32_t y, uint32_t z, uint32_t w, int g, int *sc0,
                                           int *sc1, int *m0, int *m1) {
  const int sh = 16 * (g & 1);
  y >>= sh;
  z >>= sh;
  w >>= sh;
  const uint32_t sc = g < 2 ? (y & 0x3F3Fu) : ((w & 0x0F0Fu) | ((y >> 2) & 0x3030u));
  const uint32_t mn = g < 2 ? (z & 0x3F3Fu) : (((w >> 4) & 0x0F0Fu) | ((z >> 2) & 0x3030u));
  *sc0 = (int)(sc & 0xFF);
  *sc1 = (int)((sc >> 8) & 0xFF);
  *m0 = (int)(mn & 0xFF);
  *m1 = (int)((mn >> 8) & 0xFF);
}

/* 16 bytes at a 2-byte-aligned address: five aligned words, funnel-shifted. The fifth word
 * ends at most 2 bytes past p + 16, still inside the Q6_K super-block (ql and qh are
 * followed by the scales and d). */
__device__ __forceinline__ uint4 mkq_load16_a2(const uint8_t *p) {
  const uint32_t *a = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
  const uint32_t sh = 8u * (uint32_t)((uintptr_t)p & 3);
  uint32_t v[5];
#pragma unroll
  for (int i = 0; i < 5; ++i)
    v[i] = __ldg(a + i);
  return make_uint4(__funnelshift_r(v[0], v[1], sh), __funnelshift_r(v[1], v[2], sh),
                    __funnelshift_r(v[2], v[3], sh), __funnelshift_r(v[3], v[4], sh));
}

/* The bytes lane (g, p) needs of super-block sb. Q4_K / Q5_K (rows 16-byte aligned, the
 * caller checks): d, dmin and scales (hd), its 16 q bytes, for Q5_K its 16 qh bytes.
 * Q6_K (2-byte aligned): 16 ql bytes, 16 qh bytes, hd = (d bits, scale of the low chunk,
 * scale of the high chunk). */
template <int T>
__device__ __forceinline__ void mkq_load_raw(const uint8_t *__restrict__ row, int64_t sb, int g,
                                             int p, uint4 *hd, uint4 *q, uint4 *qh) {
  if (T == MEMRA_TYPE_Q6_K) { /* half n = g / 2, quarter pair c = g % 2 (quarters c, c + 2) */
    const uint8_t *b = row + (uint64_t)210 * sb;
    const int n = g >> 1, c = g & 1;
    *q = mkq_load16_a2(b + 64 * n + 32 * c + 16 * p);
    *qh = mkq_load16_a2(b + 128 + 32 * n + 16 * p);
    const int si = 192 + 8 * n + 2 * c + p;
    *hd = make_uint4(*(const uint16_t *)(b + 208), b[si], b[si + 4], 0);
    return;
  }
  constexpr int BYTES = T == MEMRA_TYPE_Q4_K ? 144 : 176, QOFF = T == MEMRA_TYPE_Q4_K ? 16 : 48;
  const uint8_t *b = row + (uint64_t)BYTES * sb;
  *hd = __ldg((const uint4 *)b);
  *q = __ldg((const uint4 *)(b + QOFF + 32 * g + 16 * p));
  *qh = T == MEMRA_TYPE_Q5_K ? __ldg((const uint4 *)(b + 16 + 16 * p)) : make_uint4(0, 0, 0, 0);
}

/* Q6_K: acc + this lane's 32 weights . x. ggml's weight is d1 (q - 32), d1 = d sc (F32),
 * q 6 bits; v = 1/2 + q/128 (q << 1 under 0x3F), q - 32 = 128 v - 96:
 * sum d1 (q_i - 32) x_i = (128 d1) S' - (96 d1) X; 128 d1 exact, 96 d1 one rounding. */
__device__ __forceinline__ float mkq_row_step6(float acc, uint4 hd, uint4 q, uint4 qh, int g,
                                               const float xl[16], const float xh[16], float Xl,
                                               float Xh) {
  const int c = g & 1;
  const float d = __half2float(__ushort_as_half((uint16_t)hd.x));
  const float d0 = __fmul_rn(d, (float)(int8_t)hd.y), d1 = __fmul_rn(d, (float)(int8_t)hd.z);
  const uint32_t qw[4] = {q.x, q.y, q.z, q.w}, hw[4] = {qh.x, qh.y, qh.z, qh.w};
  uint32_t lo[4], hi[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) { /* 6 bits << 1 into bits 1..6 of each byte */
    lo[k] = ((qw[k] << 1) & 0x1E1E1E1Eu) | (((hw[k] >> (2 * c)) & 0x03030303u) << 5);
    hi[k] = ((qw[k] >> 3) & 0x1E1E1E1Eu) | (((hw[k] >> (2 * c + 4)) & 0x03030303u) << 5);
  }
  const float Sl = mkq_dot16(lo, xl), Sh = mkq_dot16(hi, xh);
  acc = fmaf(128.f * d0, Sl, acc);
  acc = fmaf(-__fmul_rn(96.f, d0), Xl, acc);
  acc = fmaf(128.f * d1, Sh, acc);
  return fmaf(-__fmul_rn(96.f, d1), Xh, acc);
}

/* acc + this lane's 32 weights of one row . x (see the header comment for the algebra). */
template <int B>
__device__ __forceinline__ float mkq_row_step(float acc, uint4 hd, uint4 q, uint4 qh, int g,
                                              const float xl[16], const float xh[16], float Xl,
                                              float Xh) {
  const float d = __half2float(__ushort_as_half((uint16_t)(hd.x & 0xFFFF)));
  const float dmin = __half2float(__ushort_as_half((uint16_t)(hd.x >> 16)));
  int sc0, sc1, mn0, mn1;
  mkq_scales(hd.y, hd.z, hd.w, g, &sc0, &sc1, &mn0, &mn1);
  const float d0 = __fmul_rn(d, (float)sc0), d1 = __fmul_rn(d, (float)sc1);
  const float c0 = __fmul_rn(dmin, (float)mn0), c1 = __fmul_rn(dmin, (float)mn1);
  const uint32_t qw[4] = {q.x, q.y, q.z, q.w}, hw[4] = {qh.x, qh.y, qh.z, qh.w};
  uint32_t lo[4], hi[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (B == 4) { /* nibble << 3 into bits 3..6 of each byte */
      lo[k] = (qw[k] << 3) & 0x78787878u;
      hi[k] = (qw[k] >> 1) & 0x78787878u;
    } else { /* 5 bits << 2 into bits 2..6; fifth bit 2g (low), 2g + 1 (high) of qh */
      lo[k] = ((qw[k] << 2) & 0x3C3C3C3Cu) | (((hw[k] >> (2 * g)) & 0x01010101u) << 6);
      hi[k] = ((qw[k] >> 2) & 0x3C3C3C3Cu) | (((hw[k] >> (2 * g + 1)) & 0x01010101u) << 6);
    }
  }
  const float Sl = mkq_dot16(lo, xl), Sh = mkq_dot16(hi, xh);
  constexpr float P1 = (float)(2 << B), P0 = (float)(1 << B); /* 2^(B+1), 2^B */
  acc = fmaf(P1 * d0, Sl, acc);
  acc = fmaf(-__fadd_rn(P0 * d0, c0), Xl, acc);
  acc = fmaf(P1 * d1, Sh, acc);
  return fmaf(-__fadd_rn(P0 * d1, c1), Xh, acc);
}

/* W warps per block: MKQ_WARPS, or 2 when K has at most 2 steps (K <= 2048: the other two
 * warps of a 4-warp block would idle and still hold the SM's block slots). */
template <int T, int M, bool VEC, int R, int W>
__global__ void __launch_bounds__(W * 32, M == 1 ? 16 / W : 1)
    matmul_v5_kernel(const mm_jobs J, const float *__restrict__ x, int64_t x_ld, int64_t K,
                     int64_t rows) {
  constexpr int B = T == MEMRA_TYPE_Q4_K ? 4 : T == MEMRA_TYPE_Q5_K ? 5 : 6;
  __shared__ float part[W][M][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sbl = lane >> 3, g = (lane >> 1) & 3, p = lane & 1;
  const mm_job jb = mm_pick(J);
  float *__restrict__ y = jb.y;
  const float *__restrict__ bias = jb.bias;
  const int64_t y_ld = jb.y_ld, N = jb.N;
  const int64_t n0 = jb.b * R;
  const int64_t m0 = (int64_t)blockIdx.y * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t nsb = K / 256, steps = (nsb + 3) / 4;
  const uint8_t *wr[R];
  mm_rows_enter<R, W * 32>(wr, jb, n0);
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;

  for (int64_t s = warp; s < steps; s += W) {
    const int64_t sb = 4 * s + sbl;
    if (sb >= nsb) continue; /* tail step: this lane's super-block is past the row */
    /* x of the low chunk at e, of the high chunk at e + eh */
    const int64_t e = 256 * sb + (B == 6 ? 128 * (g >> 1) + 32 * (g & 1) : 64 * g) + 16 * p;
    constexpr int eh = B == 6 ? 64 : 32;
    if (M == 1) { /* decode: the raw bytes of all rows first (in flight together), x once */
      uint4 hd[R], q[R], qh[R];
#pragma unroll
      for (int r = 0; r < R; ++r)
        mkq_load_raw<T>(wr[r], sb, g, p, &hd[r], &q[r], &qh[r]);
      const float *xp = x + m0 * x_ld + e;
      float xl[16], xh[16];
      const float Xl = mkq_load_x16<VEC>(xp, xl), Xh = mkq_load_x16<VEC>(xp + eh, xh);
#pragma unroll
      for (int r = 0; r < R; ++r)
        acc[0][r] = B == 6 ? mkq_row_step6(acc[0][r], hd[r], q[r], qh[r], g, xl, xh, Xl, Xh)
                           : mkq_row_step<B>(acc[0][r], hd[r], q[r], qh[r], g, xl, xh, Xl, Xh);
    } else { /* batch: one weight row at a time (registers), x re-read from L1 per row;
              * the same arithmetic per (m, r) as M == 1 */
#pragma unroll
      for (int r = 0; r < R; ++r) {
        uint4 hd, q, qh;
        mkq_load_raw<T>(wr[r], sb, g, p, &hd, &q, &qh);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          if (m >= mrows) break;
          const float *xp = x + (m0 + m) * x_ld + e;
          float xl[16], xh[16];
          const float Xl = mkq_load_x16<VEC>(xp, xl), Xh = mkq_load_x16<VEC>(xp + eh, xh);
          acc[m][r] = B == 6 ? mkq_row_step6(acc[m][r], hd, q, qh, g, xl, xh, Xl, Xh)
                             : mkq_row_step<B>(acc[m][r], hd, q, qh, g, xl, xh, Xl, Xh);
        }
      }
    }
  }
  mm_reduce_store<W>(acc, part, n0, N, m0, mrows, y, y_ld, bias);
}

/* Rows per block R: 8 share each lane's x registers; a decode matmul of fewer than 4096 rows
 * (k, v projections: 1024) takes 2 per block, 4x the blocks (128 would leave SMs idle).
 * A row's arithmetic does not depend on R (its lanes' chains, the butterfly and the
 * warp-order sum are the same), so the choice never changes a bit. W (warps per block) is a
 * function of K alone, the same for every M: 2 when K has at most 2 steps (the sum over 4
 * warps would add two zeros: the same value). J.blk0 is filled here. */
template <int T, bool VEC>
static bool mkq_launch(int mt, int R, const memra_backend *be, mm_jobs J, const float *x,
                       int64_t x_ld, int64_t K, int64_t rows) {
  const int64_t gx = mm_jobs_layout(&J, R);
  if (gx == 0) return false;
  const dim3 grid((unsigned)gx, (unsigned)((rows + mt - 1) / mt));
  const bool w2 = (K / 256 + 3) / 4 <= 2;
#define MKQ_GO(MM, RR)                                                                             \
  (void)(w2 ? memra_cu_launch(be, matmul_v5_kernel<T, MM, VEC, RR, 2>, grid, dim3(64), 0, J, x,    \
                              x_ld, K, rows)                                                       \
            : memra_cu_launch(be, matmul_v5_kernel<T, MM, VEC, RR, MKQ_WARPS>, grid,               \
                              dim3(MKQ_WARPS * 32), 0, J, x, x_ld, K, rows))
  switch (mt) {
  case 1:
    if (R == 2)
      MKQ_GO(1, 2);
    else
      MKQ_GO(1, MKQ_R);
    break;
  case 2: MKQ_GO(2, MKQ_R); break;
  case 4: MKQ_GO(4, MKQ_R); break;
  default: MKQ_GO(8, MKQ_R); break;
  }
#undef MKQ_GO
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_KQ_CUH */
