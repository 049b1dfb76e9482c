/* matmul_tc6i.cuh — Q6_K of K <= 4096 (tcq<TC_Q6I>) in the tensor-core GEMV scheme of
 * matmul_tc.cuh on the integer MMA (mma.sync m16n8k32 u8 x u8 -> s32) instead of f16 subnormal
 * pairs. Included by matmul_tc.cuh after the f16 form's tcq<MEMRA_TYPE_Q6_K> (matmul_tc6.cuh),
 * which the rows of K > 4096 keep (docs/PERF.md, eleventh session: with x split by windows per
 * ring stage this form was slower there, 19.2 against 18.3 us).
 *
 * Why (docs/PERF.md, tenth session): the f16 form spends ~5 instructions on the A fragments of
 * every 4 weights (two 16-bit pairs, each a shift and two LOP3) and 16 HMMA a super-block; its
 * consumer is latency-bound at ~540 instructions a super-block a warp. Here a register of A is
 * four q6 bytes as they are (ql nibble | qh bits << 4: ~3 instructions for 4 weights), 8 MMAs a
 * super-block, and the sums are exact integers.
 *
 * Layout. Chunk c = 4 n + k of a super-block (half n, kind k) is 32 weights l = 0..31 of one
 * kind: ql bytes 64 n + 32 (k & 1) + l (low nibble for k < 2, high for k >= 2), qh bytes 32 n + l
 * (bits 2k, 2k + 1), sub-blocks (one scale each) l < 16 and l >= 16: scale 8 n + 2 k + s. The
 * MMA's k index is l. A (16 rows x 32 l): thread (g, t) holds rows g, g + 8 at l = 4t..4t+3
 * (a0, a1) and 16 + 4t.. (a2, a3): the ql / qh words tc6_load already loads (ql[i][2r + h],
 * r = 2 n + (k & 1); qh[i][2 n + h]). B (32 l x 8 columns): column n' = 4 s + p is x's byte
 * digit p (p < 3) of sub-block s and ones for p = 3, zero outside sub-block s, so C[row][4 s + p]
 * is the exact sub-block sum of q u_p and C[row][4 s + 3] that of q. Thread t holds columns 2t,
 * 2t + 1: for t even digits 0 and 1 of sub-block t / 2 (C0 + 256 C1, exact in int32), for t odd
 * digit 2 and the ones (65536 (C2 - 64 C3): the bias 2^22 of u taken out).
 *
 * x: per 32-group (one chunk), es with max |x| 2^es in [2^20, 2^21), u = rint(x 2^es) + 2^22 in
 * (0, 2^23) written as its bytes u0 + 256 u1 + 65536 u2, at group * 96 + 32 p + l (in the prep's
 * K * 4 bytes of xb); xs: (2^-es, X0, X1) with X0, X1 the F32 sums of the group's halves in
 * tc_split8's order.
 *
 * Epilogue per chunk, row and thread: acc += (d sc) (2^-es v) (v the thread's combined sums as
 * F32), and for t even acc += (-32 d sc) X_s: the quad butterfly then sums the four threads.
 * A fixed order, the same for v7 (batches) and v11 (one row): a row's bits are the same alone and
 * in any batch. Other bits than the f16 form (x to 21 bits and a sign, sums exact). */
#ifndef MEMRA_CUDA_MATMUL_TC6I_CUH
#define MEMRA_CUDA_MATMUL_TC6I_CUH

#include <stdint.h>

/* The prep's per-group form for this Q6_K form (tc_prep_bytes: 16 bytes as float4). */
struct tc6i_xs {
  float u, x0, x1, pad;
};

/* 2^-e as a float for e in [-127, 149] (subnormal below 2^-126). */
__device__ __forceinline__ float tc6i_pow2neg(int e) {
  return e <= 126 ? __int_as_float((127 - e) << 23) : __int_as_float(1 << (149 - e));
}

/* One lane quad's share of x (elements e .. e + 7 of a 32-group, lane q = e % 32 / 8) in this
 * form: the three byte digits of each element's u and, from lane 0 of the quad, (u, X0, X1).
 * Overloads tc_split_put (matmul_tc.cuh) for XS = tc6i_xs.
 * u = rint(x 2^es) + 2^22 is the low 23 bits of the float (2^23 + 2^22) + x 2^es, rounded once
 * by an FFMA (x 2^ea exact, |x 2^es| < 2^21 keeps the sum's exponent): two instructions an
 * element, then seven byte permutes a 4 elements' three digit words. */
/* The integer digit forms' scaling of a 32-group (this form with TOP 21, matmul_tc4i.cuh's with
 * 22): es puts the group's largest |x| (over the lane quad) in [2^(TOP - 1), 2^TOP), and u[i] = the
 * bits of 1.5 2^23 + rint(x_i 2^es), rounded once by an FFMA (x 2^ea exact). Returns es. */
template <int TOP> __device__ __forceinline__ int tc_digit_scale(const float v[8], uint32_t u[8]) {
  uint32_t mx = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    mx = max(mx, __float_as_uint(v[i]) & 0x7FFFFFFFu);
  mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const int E = (int)(mx >> 23);
  /* max < 2^(E - 126): es = 126 + TOP - E puts it below 2^TOP (E 0: zero or subnormal, as E 1; inf
   * and NaN keep es 0, their digits meaningless: the F32 sums carry them into the result) */
  const int es = E == 255 ? 0 : 126 + TOP - (E == 0 ? 1 : E);
  const int ea = es / 2, eb = es - ea; /* 2^es in two exact steps, each within float range */
  const float sa = tc_pow2(ea), sb = tc_pow2(eb);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    u[i] = __float_as_uint(__fmaf_rn(__fmul_rn(v[i], sa), sb, 12582912.f));
  return es;
}

__device__ __forceinline__ void tc_split_put(const float v[8], uint4 *xb, tc6i_xs *xs, int64_t e) {
  uint32_t u[8];
  const int es = tc_digit_scale<21>(v, u);
  uint32_t w[3][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) { /* bytes p of u[4h .. 4h + 3] into w[p][h] */
    const uint32_t *q = u + 4 * h;
    const uint32_t ab = __byte_perm(q[0], q[1], 0x5140), cd = __byte_perm(q[2], q[3], 0x5140);
    w[0][h] = __byte_perm(ab, cd, 0x5410);
    w[1][h] = __byte_perm(ab, cd, 0x7632);
    w[2][h] = __byte_perm(__byte_perm(q[0], q[1], 0x0062), __byte_perm(q[2], q[3], 0x0062), 0x5410);
  }
  uint8_t *base = (uint8_t *)xb + (e >> 5) * 96 + (e & 31);
#pragma unroll
  for (int p = 0; p < 3; ++p)
    *(uint2 *)(base + 32 * p) = make_uint2(w[p][0], w[p][1]);
  float p4[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    p4[i] = __fadd_rn(v[2 * i], v[2 * i + 1]);
  float X = __fadd_rn(__fadd_rn(p4[0], p4[1]), __fadd_rn(p4[2], p4[3]));
  X = __fadd_rn(X, __shfl_xor_sync(0xffffffffu, X, 1)); /* lanes 0, 1: X0; 2, 3: X1 */
  const float Xo = __shfl_xor_sync(0xffffffffu, X, 2);
  if ((threadIdx.x & 3) == 0) {
    tc6i_xs g;
    g.u = tc6i_pow2neg(es);
    g.x0 = X;
    g.x1 = Xo;
    g.pad = 0.f;
    xs[e >> 5] = g;
  }
}

/* C (4 x s32) = A (16 x 32 u8) B (32 x 8 u8), from zero. */
__device__ __forceinline__ void tc6i_mma(int c[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  const int z = 0;
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(z), "r"(z), "r"(z), "r"(z));
}

/* Four q6 bytes (0..63) of kind k from a ql word (nibble at 4 (k >> 1)) and a qh word (bits
 * 2k, 2k + 1 of each byte). */
__device__ __forceinline__ uint32_t tc6i_q(uint32_t ql, uint32_t qh, int k) {
  return ((ql >> (4 * (k >> 1))) & 0x0F0F0F0Fu) | (((qh >> (2 * k)) & 0x03030303u) << 4);
}

/* What a thread holds of a super-block pair (rows g, g + 8): tc6_load's ql / qh words, the
 * sixteen scale bytes of each row as four words, d. */
struct tc6i_raw {
  uint32_t ql[2][8], qh[2][4], sc[2][4];
  float d[2];
};
template <bool G, int AL>
__device__ __forceinline__ void tc6i_load(tc6i_raw &r, const uint8_t *b0, const uint8_t *b1,
                                          int t) {
  tc6_load_rows<G, AL>(r.ql, r.qh, r.d, b0, b1, t, [&](int i, const uint8_t *b) {
#pragma unroll
    for (int w = 0; w < 4; ++w)
      r.sc[i][w] = tc6_word<G, AL>(b, 192 + 4 * w);
  });
}

/* x of super-block sb for this thread: per chunk its B word (digit g & 3 of sub-block g >> 2, or
 * ones for column 3: the sub-block's sum of q, for the digits' bias), the unscale and its
 * epilogue's sub-block (t >> 1) sum. */
struct tc6i_xin {
  uint32_t w[8];
  float u[8], X[8];
};
__device__ __forceinline__ void tc6i_load_x(tc6i_xin &r, const uint4 *xb, const tc6i_xs *xs,
                                            int64_t sb, int g, int t) {
  const int s = g >> 2, p = g & 3;
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const int64_t grp = 8 * sb + c;
    r.w[c] = p < 3 ? *(const uint32_t *)((const uint8_t *)xb + grp * 96 + 32 * p + 16 * s + 4 * t)
                   : 0x01010101u;
    const tc6i_xs v = xs[grp];
    r.u[c] = v.u;
    r.X[c] = (t >> 1) ? v.x1 : v.x0;
  }
}

template <> struct tcq<TC_Q6I> {
  static constexpr int SBB = 210;
  typedef tc6i_raw raw;
  typedef tc6i_xin xin;
  typedef tc6i_xs xs_t;
  template <bool G>
  static __device__ __forceinline__ void load(raw &r, const uint8_t *b0, const uint8_t *b1,
                                              const tc_role &ro) {
    tc6_by_align<G>(b0, b1, [&](auto al) { tc6i_load<G, decltype(al)::value>(r, b0, b1, ro.t); });
  }
  static __device__ __forceinline__ void load_x(xin &x, const uint4 *xb, const tc6i_xs *xs,
                                                int64_t sb, const tc_role &ro) {
    tc6i_load_x(x, xb, xs, sb, ro.g, ro.t);
  }
  template <int M, int NS, typename XL> /* NS: tcq<Q4_K>'s chains; one form here */
  static __device__ __forceinline__ void body(float (&acc)[M][2], const raw &cur, const xin &x0,
                                              XL xload, const tc_role &ro) {
    const int t = ro.t, st = t >> 1, sbb = ro.g >> 2;
    const bool lo = (t & 1) == 0;
    uint32_t a[8][4];
    float dsc[8][2];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int n = c >> 2, k = c & 3, r = 2 * n + (k & 1);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        a[c][i] = tc6i_q(cur.ql[i][2 * r], cur.qh[i][2 * n], k);
        a[c][2 + i] = tc6i_q(cur.ql[i][2 * r + 1], cur.qh[i][2 * n + 1], k);
        const int si = 8 * n + 2 * k + st; /* the scale of this thread's sub-block */
        const int8_t s8 = (int8_t)((cur.sc[i][si >> 2] >> (8 * (si & 3))) & 0xFFu);
        dsc[c][i] = __fmul_rn(cur.d[i], (float)s8);
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const xin xm = m == 0 ? x0 : xload(m);
#pragma unroll
      for (int c = 0; c < 8; ++c) { /* chunks in order into row m's acc: the order of the bits */
        int cc[4];
        tc6i_mma(cc, a[c][0], a[c][1], a[c][2], a[c][3], sbb == 0 ? xm.w[c] : 0u,
                 sbb == 1 ? xm.w[c] : 0u);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          /* sum q (u - 2^22) = C0 + 256 C1 + 65536 (C2 - 64 C3), C3 = sum q */
          const float v = lo ? __int2float_rn(cc[2 * i] + 256 * cc[2 * i + 1])
                             : __fmul_rn(__int2float_rn(cc[2 * i] - 64 * cc[2 * i + 1]), 65536.f);
          acc[m][i] = __fmaf_rn(dsc[c][i], __fmul_rn(xm.u[c], v), acc[m][i]);
          if (lo) acc[m][i] = __fmaf_rn(__fmul_rn(-32.f, dsc[c][i]), xm.X[c], acc[m][i]);
        }
      }
    }
  }
};

#endif /* MEMRA_CUDA_MATMUL_TC6I_CUH */
