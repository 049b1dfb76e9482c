/* matmul_tc4i.cuh — EXPERIMENT (build define MEMRA_TC_Q4I=1; 0 by default): Q4_K in the tensor-core
 * GEMV scheme of matmul_tc.cuh on the integer MMA (mma.sync m16n8k32 u8 x s8 -> s32) instead of f16
 * subnormal pairs. With the define, this is tcq<MEMRA_TYPE_Q4_K> for every kernel that runs Q4_K on
 * the tensor cores (v7, v11 and its norm / rope / mixed forms, matmul_id v3 / v4), so they keep
 * agreeing on every row's bits. Included by matmul_tc.cuh only.
 *
 * Why (docs/PERF.md, thirty-sixth and thirty-eighth sessions): where nothing waits on DRAM (the
 * H200's Q4_K tiles) the f16 form's super-block loop is bound by the ALU pipe: 251 instructions a
 * super-block a warp, ~158 of them ALU (the nibble pairs' shifts and masks for 16 HMMA, 32 selects
 * building B). Here an A register is a q word masked in place (one LOP3 for four weights, the high
 * nibbles as 16 q), 8 IMMA a super-block, B loaded as it is from shared memory (no selects), the
 * sums exact integers.
 *
 * The weights as tcq<Q4_K> loads them (tc_raw): thread (g, t) holds, of rows g and g + 8, the
 * header and the qs bytes 64 c + 16 t .. + 15 (c = 0, 1): pair P = 2 c + (t >> 1) (sub-blocks 2 P,
 * low nibbles, and 2 P + 1, high), bytes 16 (t & 1) + 4 w of the pair (w = 0..3), i.e. elements 16
 * (t & 1) + 4 w .. + 3. MMA (c, n, h) (n: nibble) takes of each thread words 2 h (its k 4t..4t+3:
 * a0 / a1) and 2 h + 1 (k 16 + 4t..: a2 / a3) masked to nibble n: threads t < 2 ("class 0") bring
 * elements of sub-block 4 c + n, threads t >= 2 (class 1) of 4 c + 2 + n. B's eight columns
 * separate the classes: column 4 s + p is x's signed byte digit p (p < 3) of class s's elements,
 * zero for the other class's k and for p = 3. Two MMAs (h = 0, 1) cover a class's 32 elements,
 * one chain, so C[row][4 s + p] is the exact sum of q x_p over sub-block 4 c + 2 s + n.
 * Thread t holds columns 2t, 2t + 1: class t >> 1, digits (0, 1) for t even (C0 + 256 C1), (2,
 * zero) for t odd (C0 + 256 * 0, worth 65536): i = C0 + 256 C1 in every thread, exact in int32.
 *
 * x (its own prep form, tc4i_xs): per 32-group (one sub-block), es puts the largest |x| 2^es in
 * [2^21, 2^22), v = rint(x 2^es) as three signed byte digits (v = d0 + 256 d1 + 65536 d2, d0 and d1
 * in [-128, 128), |d2| <= 64: the bytes of (v + 0x8080) ^ 0x8080). A group is 128 bytes: 16 chunks
 * of 8; chunk 4 p + e / 8 holds digit p of elements e .. e + 7 (one thread's B pair for one MMA),
 * chunks 12-15 zeros (what a thread of a zero column loads); groups 2 and 3 of every 4 have the
 * chunk index's low bit flipped, so a class 1 group's chunks sit in the banks class 0's leave free
 * (an MMA's B loads are one wavefront). xs: (u, X, 65536 u, 0), u = 2^-es, X the group's F32 sum.
 *
 * Epilogue per chain, row and thread: acc += (d sc) ((float)i f) with f = u (t even) or 65536 u
 * (t odd), then acc += -(dmin m) X' with X' = X (t even) or 0: the quad butterfly sums the four
 * threads. d sc is rounded as ggml's d * (float)sc (sc of a high-nibble sub-block with d / 16,
 * exact). Chains reach acc in the order c, n: the same in v7, v11 and matmul_id (batch-invariant).
 * Other bits than the f16 form (x to 22 bits and a sign, sums exact). */
#ifndef MEMRA_CUDA_MATMUL_TC4I_CUH
#define MEMRA_CUDA_MATMUL_TC4I_CUH

#include <stdint.h>

/* The prep's per-group form (tc_prep_bytes: 16 bytes; a thread reads its half as a float2). */
struct tc4i_xs {
  float u, X, u16, zero;
};

/* A group's chunk L (0..15) at its place: the low bit flipped in groups 2 and 3 of every 4. */
__device__ __forceinline__ int tc4i_chunk(int64_t grp, int L) { return L ^ (int)((grp >> 1) & 1); }

/* One lane quad's share of x (elements e .. e + 7 of a 32-group, lane q = e % 32 / 8) in this form:
 * the three digit chunks of its eight elements, zero chunk 12 + q and, from lane 0 of the quad,
 * the group's xs. Overloads tc_split_put (matmul_tc.cuh) for XS = tc4i_xs. */
__device__ __forceinline__ void tc_split_put(const float v[8], uint4 *xb, tc4i_xs *xs, int64_t e) {
  uint32_t w[8];
  const int es = tc_digit_scale<22>(v, w); /* 1.5 2^23 + v: below 2^22, the binade holds */
#pragma unroll
  for (int i = 0; i < 8; ++i) /* v + 0x8080: the balanced digits 0, 1 are its bytes XOR 0x80 */
    w[i] += 0x8080u - 0x4B400000u;
  const int64_t grp = e >> 5;
  /* chunk 4 p + q at 4 p + (q ^ flip) (tc4i_chunk: the flip is bit 0 only) */
  uint8_t *base = (uint8_t *)xb + grp * 128 + 8 * tc4i_chunk(grp, (int)(e >> 3) & 3);
#pragma unroll
  for (int p = 0; p < 3; ++p) { /* byte p of each element's word, elements in order */
    const uint32_t s = (uint32_t)p | (uint32_t)(p + 4) << 4; /* byte p of x, then of y */
    const uint32_t lo = __byte_perm(__byte_perm(w[0], w[1], s), __byte_perm(w[2], w[3], s), 0x5410);
    const uint32_t hi = __byte_perm(__byte_perm(w[4], w[5], s), __byte_perm(w[6], w[7], s), 0x5410);
    const uint32_t fl = p < 2 ? 0x80808080u : 0u; /* the balanced digits' bytes */
    *(uint2 *)(base + 32 * p) = make_uint2(lo ^ fl, hi ^ fl);
  }
  *(uint2 *)(base + 96) = make_uint2(0u, 0u);
  float p4[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    p4[i] = __fadd_rn(v[2 * i], v[2 * i + 1]);
  float X = __fadd_rn(__fadd_rn(p4[0], p4[1]), __fadd_rn(p4[2], p4[3]));
  X = __fadd_rn(X, __shfl_xor_sync(0xffffffffu, X, 1));
  X = __fadd_rn(X, __shfl_xor_sync(0xffffffffu, X, 2));
  if ((threadIdx.x & 3) == 0) {
    tc4i_xs g;
    g.u = tc6i_pow2neg(es);
    g.X = X;
    g.u16 = tc6i_pow2neg(es - 16);
    g.zero = 0.f;
    xs[grp] = g;
  }
}

/* C (4 x s32) = A (16 x 32 u8) B (32 x 8 s8) + C. */
__device__ __forceinline__ void tc4i_mma(int c[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint2 b) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y));
}

/* x of super-block sb for this thread: its B pair of each MMA (c, n, h) and its epilogue's
 * (f, X') of chain (c, n). */
struct tc4i_xin {
  uint2 b[2][2][2];
  float2 fx[2][2];
};
/* Thread (g, t)'s byte offsets in a chain's class 0 group: its B pair for h = 0, 1 (its class's
 * digit chunk, or a zero chunk of the class 0 group), its xs half. */
struct tc4i_offs {
  int b0, b1, xs;
};
__device__ __forceinline__ tc4i_offs tc4i_offs_of(int g, int t) {
  const int cls = t >> 1, p = g & 3;
  const bool real = (g >> 2) == cls && p < 3;
  tc4i_offs o;
  /* class 1's group is two groups on (its chunk bit flipped: cls) */
  o.b0 = real ? 256 * cls + 8 * ((4 * p + 2 * (t & 1)) ^ cls) : 8 * (12 + 2 * (t & 1));
  o.b1 = real ? 256 * cls + 8 * ((4 * p + 2 * (t & 1) + 1) ^ cls) : 8 * (12 + 2 * (t & 1) + 1);
  o.xs = 32 * cls + 8 * (t & 1);
  return o;
}
__device__ __forceinline__ void tc4i_load_x(tc4i_xin &r, const uint4 *xb, const tc4i_xs *xs,
                                            int64_t sb, int g, int t) {
  const tc4i_offs o = tc4i_offs_of(g, t);
  const uint8_t *xg = (const uint8_t *)xb + sb * 8 * 128;
  const uint8_t *sg = (const uint8_t *)xs + sb * 8 * sizeof(tc4i_xs);
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int g0 = 4 * c + n; /* the chain's class 0 group within the super-block */
      r.b[c][n][0] = *(const uint2 *)(xg + g0 * 128 + o.b0);
      r.b[c][n][1] = *(const uint2 *)(xg + g0 * 128 + o.b1);
      r.fx[c][n] = *(const float2 *)(sg + g0 * (int)sizeof(tc4i_xs) + o.xs);
    }
}

/* 2^23 + byte i of w as a float (byte i of w, then 0x00, 0x00, 0x4B). */
__device__ __forceinline__ float tc4i_mag(uint32_t w, int i) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u | (uint32_t)i));
}

/* Row r's (d sc, -(dmin m)) of this thread's four sub-blocks, chain order (c, n): sub-block
 * 4 c + 2 cls + n. The 6-bit values as ggml's get_scale_min_k4, four at a time (bytes 2 cls and
 * 2 cls + 1 of each scale word); d sc = RN(d sc) by one FFMA: (2^23 + sc) d - 2^23 d. */
__device__ __forceinline__ void tc4i_scales(float (&dsc)[2][2], float (&mng)[2][2], uint4 hd,
                                            int cls) {
  const float d = __half2float(__ushort_as_half((uint16_t)(hd.x & 0xFFFF)));
  const float dm = __half2float(__ushort_as_half((uint16_t)(hd.x >> 16)));
  const int sh = 16 * cls;
  const uint32_t a0 = hd.y >> sh, a1 = hd.z >> sh, a2 = hd.w >> sh;
  const uint32_t sc[2] = {a0 & 0x3F3Fu, (a2 & 0x0F0Fu) | ((a0 >> 2) & 0x3030u)};
  const uint32_t mn[2] = {a1 & 0x3F3Fu, ((a2 >> 4) & 0x0F0Fu) | ((a1 >> 2) & 0x3030u)};
  const float d16 = __fmul_rn(d, 0.0625f); /* the high nibbles' 16 q */
  const float dk[2] = {d, d16}, dko[2] = {__fmul_rn(d, -8388608.f), __fmul_rn(d16, -8388608.f)};
  const float dmo = __fmul_rn(dm, 8388608.f);
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      dsc[c][n] = __fmaf_rn(tc4i_mag(sc[c], n), dk[n], dko[n]);
      mng[c][n] = __fmaf_rn(tc4i_mag(mn[c], n), -dm, dmo);
    }
}

template <> struct tcq<MEMRA_TYPE_Q4_K> {
  static constexpr int SBB = 144;
  typedef tc_raw raw;
  typedef tc4i_xin xin;
  typedef tc4i_xs xs_t;
  template <bool G>
  static __device__ __forceinline__ void load(raw &r, const uint8_t *b0, const uint8_t *b1,
                                              const tc_role &ro) {
    tc_load_q4k<G>(r, b0, b1, ro.t);
  }
  static __device__ __forceinline__ void load_x(xin &x, const uint4 *xb, const tc4i_xs *xs,
                                                int64_t sb, const tc_role &ro) {
    tc4i_load_x(x, xb, xs, sb, ro.g, ro.t);
  }
  template <int M, int NS, typename XL> /* NS: the f16 form's chains; one form here */
  static __device__ __forceinline__ void body(float (&acc)[M][2], const raw &cur, const xin &x0,
                                              XL xload, const tc_role &ro) {
    const int cls = ro.t >> 1;
    float dsc[2][2][2], mng[2][2][2]; /* [row][c][n] */
    tc4i_scales(dsc[0], mng[0], cur.hd0, cls);
    tc4i_scales(dsc[1], mng[1], cur.hd1, cls);
    const uint32_t nm[2] = {0x0F0F0F0Fu, 0xF0F0F0F0u};
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const xin xm = m == 0 ? x0 : xload(m);
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int n = 0; n < 2; ++n) { /* chains in order into row m's acc: the order of the bits */
          const uint4 qa = cur.q0[c], qb = cur.q1[c];
          int cc[4] = {0, 0, 0, 0};
          tc4i_mma(cc, qa.x & nm[n], qb.x & nm[n], qa.y & nm[n], qb.y & nm[n], xm.b[c][n][0]);
          tc4i_mma(cc, qa.z & nm[n], qb.z & nm[n], qa.w & nm[n], qb.w & nm[n], xm.b[c][n][1]);
          const float2 fx = xm.fx[c][n];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const float v = __int2float_rn(cc[2 * i] + 256 * cc[2 * i + 1]);
            acc[m][i] = __fmaf_rn(dsc[i][c][n], __fmul_rn(v, fx.x), acc[m][i]);
            acc[m][i] = __fmaf_rn(mng[i][c][n], fx.y, acc[m][i]);
          }
        }
    }
  }
};

#endif /* MEMRA_CUDA_MATMUL_TC4I_CUH */
