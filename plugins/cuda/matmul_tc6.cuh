/* matmul_tc6.cuh — Q6_K in the tensor-core GEMV scheme of matmul_tc.cuh (v7 batches, v11 one
 * row): what a thread holds of a Q6_K super-block and the per-chunk arithmetic. Included by
 * matmul_tc.cuh only.
 *
 * ggml's Q6_K super-block (210 bytes): ql[128], qh[64], int8 scales[16], f16 d. Weight
 * 128 n + 32 k + l (half n, kind k < 4, l < 32) is d sc[8 n + l / 16 + 2 k] (q - 32), q = a
 * nibble of ql (low for k = 0, 1, high for k = 2, 3; byte 64 n + 32 (k & 1) + l) with bits
 * 2k, 2k + 1 of qh[32 n + l] above it.
 *
 * A chunk (n, j) is l in [16 j, 16 j + 16) of half n: 4 kinds x 16 weights, each kind one
 * sub-block (one scale). Thread (g, t) takes l = 16 j + 4 t + b (b < 4) of rows g and g + 8:
 * one word of each of ql's two 32-byte halves and one of qh. As in v7 the k index of an A
 * element is where its byte sits (pair (b, b + 2) of the word, b = hh < 2), and B's eight
 * columns are (kind, part): four MMAs per chunk, A's k < 8 one kind and k >= 8 another, so
 * C[g][2t] + C[g][2t + 1] is row g's sum over kind t. A holds the 6-bit q as an f16 subnormal,
 * as v7 holds a nibble: kinds 0, 1 (low nibbles) q 2^-24, kinds 2, 3 the high nibble in place,
 * 16 q 2^-24, qh's two bits put above the nibble; one shift and one LOP3 per register (the
 * first form, 1024 + q and an HSUB2 of 1056, cost ~6 instructions a register and lost to v5).
 * Epilogue per chunk and row: acc += (d sc) ((C0 + C1) f) - 32 (d sc) X16, f = u = 2^(24 - es)
 * (/ 16 for kinds 2, 3, whose nibble sits 4 bits up), X16 the F32 sum of the sub-block's 16 x
 * (the prep's X0 / X1), d sc F32-rounded as ggml.
 * x comes in v7's prep layout (tc_prep_bytes), every thread supplying B for its (kind, part). */
#ifndef MEMRA_CUDA_MATMUL_TC6_CUH
#define MEMRA_CUDA_MATMUL_TC6_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

/* 4 bytes at a 2-byte-aligned p: two aligned words, funnel-shifted (the second word stays inside
 * the super-block for every offset read here). */
template <bool G> __device__ __forceinline__ uint32_t tc6_ld32(const uint8_t *p) {
  /* p minus its offset, not the address masked as an integer: the pointer keeps its state space,
   * so a ring stage's words are read by LDS, not by generic loads */
  const uint32_t o = (uint32_t)(uintptr_t)p & 3u;
  const unsigned *a = (const unsigned *)(p - o);
  return __funnelshift_r(tc_ld<G>(a), tc_ld<G>(a + 1), 8u * o);
}

/* Rows g and g + 8 of one super-block, this thread's share: ql words m (bytes 16 m + 4 t),
 * qh words (128 + 16 m + 4 t), the scale pairs (192 + 8 n + 2 t: chunks (n, 0) and (n, 1) of
 * kind t) and d. */
struct tc6_raw {
  uint32_t ql[2][8], qh[2][4], sc[2][2];
  float d[2];
};
/* The word of bytes [off, off + 4) of a super-block at b whose offset from a 4-byte boundary is
 * AL: 0 one word; 2 (known) the two words around it at fixed offsets from b - 2, funnel-shifted
 * by 16 (no per-word offset arithmetic); -1 unknown (tc6_ld32). */
template <bool G, int AL> __device__ __forceinline__ uint32_t tc6_word(const uint8_t *b, int off) {
  if (AL == 0) return tc_ld<G>((const unsigned *)(b + off));
  if (AL == 2) {
    const unsigned *a = (const unsigned *)(b - 2 + off);
    return __funnelshift_r(tc_ld<G>(a), tc_ld<G>(a + 1), 16u);
  }
  return tc6_ld32<G>(b + off);
}
/* What every Q6_K form reads of a super-block pair (rows b0, b1), row by row: the ql words
 * (16 m + 4 t), the qh words (128 + 16 m + 4 t), the form's scales (scales(i, b)), d. AL
 * (tc6_word): b0 and b1 both that far from a 4-byte boundary (a ring stage's super-blocks: 0 and
 * 2 alternately, 210 j), or -1. */
template <bool G, int AL, typename SC>
__device__ __forceinline__ void tc6_load_rows(uint32_t (&ql)[2][8], uint32_t (&qh)[2][4],
                                              float (&d)[2], const uint8_t *b0, const uint8_t *b1,
                                              int t, SC scales) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint8_t *b = i ? b1 : b0;
#pragma unroll
    for (int m = 0; m < 8; ++m)
      ql[i][m] = tc6_word<G, AL>(b, 16 * m + 4 * t);
#pragma unroll
    for (int m = 0; m < 4; ++m)
      qh[i][m] = tc6_word<G, AL>(b, 128 + 16 * m + 4 * t);
    scales(i, b);
    d[i] = __half2float(__ushort_as_half(tc_ld<G>((const unsigned short *)(b + 208))));
  }
}
template <bool G, int AL = -1>
__device__ __forceinline__ void tc6_load(tc6_raw &r, const uint8_t *b0, const uint8_t *b1, int t) {
  tc6_load_rows<G, AL>(r.ql, r.qh, r.d, b0, b1, t, [&](int i, const uint8_t *b) {
#pragma unroll
    for (int n = 0; n < 2; ++n)
      r.sc[i][n] = tc_ld<G>((const unsigned short *)(b + 192 + 8 * n + 2 * t));
  });
}
/* Calls load(AL) with AL (an integral_constant) as b0 and b1 allow: a ring stage's super-blocks
 * (G false: even offsets) alternate 4-byte alignment (210 j), the aligned ones read as words,
 * the others at fixed offsets from the word below (the same bytes, so the same bits). */
template <bool G, typename L>
__device__ __forceinline__ void tc6_by_align(const uint8_t *b0, const uint8_t *b1, L load) {
  const uint32_t o = ((uint32_t)(uintptr_t)b0 | (uint32_t)(uintptr_t)b1) & 3u;
  if (!G && o == 0)
    load(std::integral_constant<int, 0>());
  else if (!G && o == 2 && (((uint32_t)(uintptr_t)b0 ^ (uint32_t)(uintptr_t)b1) & 3u) == 0)
    load(std::integral_constant<int, 2>());
  else
    load(std::integral_constant<int, -1>());
}

/* What this thread needs of x for super-block sb: for each chunk the pair of words of its B
 * role (kind g >> 1, part g & 1), and for each half n, of its epilogue's kind t: the unscale u
 * and the sums of the two 16-element halves (chunks j = 0, 1). */
struct tc6_xin {
  uint2 w[4];
  float u[2], x16[2][2];
};
__device__ __forceinline__ void tc6_load_x(tc6_xin &r, const uint4 *xb, const float4 *xs,
                                           int64_t sb, int g, int t) {
  const int kind = g >> 1, part = g & 1;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t seg = 16 * sb + 8 * n + 2 * kind + j;
      r.w[2 * n + j] = ((const uint2 *)(xb + 4 * seg + 2 * part + (t >> 1)))[t & 1];
    }
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const float4 v = xs[8 * sb + 4 * n + t];
    r.u[n] = v.y;
    r.x16[n][0] = v.z;
    r.x16[n][1] = v.w;
  }
}

/* q of bytes (hh, hh + 2) of kind k as an f16 subnormal pair: nib holds the ql word (low
 * nibbles for k < 2: q 2^-24; high nibbles in place for k >= 2: 16 q 2^-24), qh the qh word
 * (bits 2k, 2k + 1 of a byte go just above the nibble). */
__device__ __forceinline__ uint32_t tc6_pair(uint32_t nib, uint32_t qh, int k, int hh) {
  const uint32_t n = hh ? nib >> 8 : nib;
  const int s = 8 * hh + 2 * k - (k < 2 ? 4 : 8); /* qh bit 8 hh + 2 k -> 4 (k < 2) or 8 */
  const uint32_t h = s >= 0 ? qh >> s : qh << -s;
  return k < 2 ? (n & 0x000F000Fu) | (h & 0x00300030u) : (n & 0x00F000F0u) | (h & 0x03000300u);
}

/* The four chunks ch = 2 n + j of the super-block . one row of x: 4 MMAs each (kinds (0, 1)
 * then (2, 3), bytes 0/2 then 1/3), the four chains interleaved (independent). */
__device__ __forceinline__ void tc6_chunks_mma(float (&cc)[4][4], const tc6_raw &r,
                                               const tc6_xin &x, int g) {
  const int kind = g >> 1;
#pragma unroll
  for (int ch = 0; ch < 4; ++ch)
    cc[ch][0] = cc[ch][1] = cc[ch][2] = cc[ch][3] = 0.f;
#pragma unroll
  for (int kp = 0; kp < 2; ++kp)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int ch = 0; ch < 4; ++ch) {
        const int n = ch >> 1, j = ch & 1;
        const int k0 = 2 * kp, k1 = 2 * kp + 1; /* A's k < 8: kind k0 (ql low half), k >= 8: k1 */
        const uint32_t bv = hh ? x.w[ch].y : x.w[ch].x;
        tc_mma(cc[ch], tc6_pair(r.ql[0][4 * n + j], r.qh[0][2 * n + j], k0, hh),
               tc6_pair(r.ql[1][4 * n + j], r.qh[1][2 * n + j], k0, hh),
               tc6_pair(r.ql[0][4 * n + 2 + j], r.qh[0][2 * n + j], k1, hh),
               tc6_pair(r.ql[1][4 * n + 2 + j], r.qh[1][2 * n + j], k1, hh), kind == k0 ? bv : 0u,
               kind == k1 ? bv : 0u);
      }
}

/* acc (rows g, g + 8) += chunk ch's C (cc) scaled, minus 32 x the sub-block's x sum: the
 * epilogue of kind t. */
__device__ __forceinline__ void tc6_chunk_acc(float acc[2], const tc6_raw &r, int ch,
                                              const float cc[4], const tc6_xin &x, int t) {
  const int n = ch >> 1, j = ch & 1;
  /* A = q 2^-24 (subnormal) and B = 2^es x: C u = sum q x, u = 2^(24 - es), as v7's f (the
   * first form's A = q - 32 was a normal f16, hence its u 2^-24); high nibbles count 16 q */
  const float f = __fmul_rn(x.u[n], t >= 2 ? 0.0625f : 1.f);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int8_t s = (int8_t)((r.sc[i][n] >> (8 * j)) & 0xFF);
    const float d1 = __fmul_rn(r.d[i], (float)s);
    acc[i] = __fmaf_rn(d1, __fmul_rn(__fadd_rn(cc[2 * i], cc[2 * i + 1]), f), acc[i]);
    acc[i] = __fmaf_rn(__fmul_rn(-32.f, d1), x.x16[n][j], acc[i]);
  }
}

#endif /* MEMRA_CUDA_MATMUL_TC6_CUH */
