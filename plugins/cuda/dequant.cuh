/* dequant.cuh — ggml block formats on the device, 32 elements ("a unit") at a time.
 *
 * Oracle: plugins/quant (memra_dequant_row), itself bit-exact with ggml's dequantizers.
 * A unit is one block of the 32-element formats, or one eighth of a 256-element K-quant
 * block (the K-quants' sub-block, which shares one scale and min). Every format is read
 * with loads no wider than its block's natural alignment, except the float formats and
 * the 16-byte-aligned K-quant blocks (Q4_K 144 B, Q5_K 176 B) when VEC says their rows
 * are 16-byte aligned. Byte offsets are ggml's block_* structs (plugins/quant/blocks.h). */
#ifndef MEMRA_CUDA_DEQUANT_CUH
#define MEMRA_CUDA_DEQUANT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "plugins/include/memra_types.h"

/* True for the types the CUDA kernels decode. */
static inline bool memra_cu_type_supported(int32_t t) {
  switch (t) {
  case MEMRA_TYPE_F32:
  case MEMRA_TYPE_F16:
  case MEMRA_TYPE_BF16:
  case MEMRA_TYPE_Q4_0:
  case MEMRA_TYPE_Q4_1:
  case MEMRA_TYPE_Q5_0:
  case MEMRA_TYPE_Q5_1:
  case MEMRA_TYPE_Q8_0:
  case MEMRA_TYPE_Q4_K:
  case MEMRA_TYPE_Q5_K:
  case MEMRA_TYPE_Q6_K: return true;
  default: return false;
  }
}

__device__ __forceinline__ float memra_h2f(const uint8_t *p) {
  return __half2float(__ushort_as_half(*(const uint16_t *)p));
}
__device__ __forceinline__ float memra_bf2f(uint16_t b) {
  return __uint_as_float((uint32_t)b << 16);
}

/* Byte k (0..11) of the 12 scale bytes held in three words: register selects, so a
 * run-time k never sends the array to local memory. */
__device__ __forceinline__ int memra_k4_byte(uint32_t w0, uint32_t w1, uint32_t w2, int k) {
  const uint32_t w = k < 4 ? w0 : k < 8 ? w1 : w2;
  return (int)((w >> (8 * (k & 3))) & 0xFF);
}

/* 6-bit scale and min of K-quant sub-block j (ggml's get_scale_min_k4). */
__device__ __forceinline__ void memra_k4_scale_min(int j, uint32_t w0, uint32_t w1, uint32_t w2,
                                                   int *sc, int *m) {
  if (j < 4) {
    *sc = memra_k4_byte(w0, w1, w2, j) & 63;
    *m = memra_k4_byte(w0, w1, w2, j + 4) & 63;
  } else {
    const int a = memra_k4_byte(w0, w1, w2, j + 4);
    *sc = (a & 0xF) | ((memra_k4_byte(w0, w1, w2, j - 4) >> 6) << 4);
    *m = (a >> 4) | ((memra_k4_byte(w0, w1, w2, j) >> 6) << 4);
  }
}

/* Copies 32 bytes from p (aligned to A bytes) into b. */
template <int A> __device__ __forceinline__ void memra_load32(const uint8_t *p, uint8_t b[32]) {
  if (A >= 16) {
    uint4 v0 = *(const uint4 *)p, v1 = *(const uint4 *)(p + 16);
    *(uint4 *)b = v0;
    *(uint4 *)(b + 16) = v1;
  } else if (A >= 4) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      ((uint32_t *)b)[i] = ((const uint32_t *)p)[i];
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      ((uint16_t *)b)[i] = ((const uint16_t *)p)[i];
  }
}

/* a * b + c, rounded twice when EXACT (bit-exact with ggml's dequantizers, which the CPU
 * oracle reproduces with -ffp-contract=off), else one fused multiply-add (matmul, whose
 * sum order differs from the oracle's anyway). */
template <bool EXACT> __device__ __forceinline__ float memra_madd(float a, float b, float c) {
  return EXACT ? __fadd_rn(__fmul_rn(a, b), c) : fmaf(a, b, c);
}

/* w[0..32) = elements [32u, 32u + 32) of the row at `row`. VEC: float rows are 16-byte
 * aligned. The caller guarantees the unit lies inside the row. */
template <int T, bool VEC, bool EXACT = false>
__device__ __forceinline__ void memra_deq32(const uint8_t *__restrict__ row, int64_t u,
                                            float w[32]) {
  if (T == MEMRA_TYPE_F32) {
    const float *p = (const float *)row + 32 * u;
    if (VEC) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        float4 v = __ldg((const float4 *)p + i);
        w[4 * i] = v.x;
        w[4 * i + 1] = v.y;
        w[4 * i + 2] = v.z;
        w[4 * i + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i)
        w[i] = __ldg(p + i);
    }
  } else if (T == MEMRA_TYPE_F16 || T == MEMRA_TYPE_BF16) {
    const uint8_t *p = row + 64 * u;
    alignas(16) uint16_t h[32];
    if (VEC) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        ((uint4 *)h)[i] = __ldg((const uint4 *)p + i);
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i)
        h[i] = ((const uint16_t *)p)[i];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i)
      w[i] = T == MEMRA_TYPE_F16 ? __half2float(__ushort_as_half(h[i])) : memra_bf2f(h[i]);
  } else if (T == MEMRA_TYPE_Q8_0) { /* d f16, qs[32] int8: 34 B */
    const uint8_t *b = row + 34 * u;
    float d = memra_h2f(b);
    alignas(16) uint8_t q[32];
    memra_load32<2>(b + 2, q);
#pragma unroll
    for (int i = 0; i < 32; ++i)
      w[i] = d * (float)(int8_t)q[i];
  } else if (T == MEMRA_TYPE_Q4_0) { /* d f16, qs[16]: 18 B */
    const uint8_t *b = row + 18 * u;
    float d = memra_h2f(b);
    alignas(16) uint16_t q2[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      q2[i] = ((const uint16_t *)(b + 2))[i];
    const uint8_t *q = (const uint8_t *)q2;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      w[i] = d * (float)((q[i] & 0xF) - 8);
      w[i + 16] = d * (float)((q[i] >> 4) - 8);
    }
  } else if (T == MEMRA_TYPE_Q4_1) { /* d, m f16, qs[16]: 20 B */
    const uint8_t *b = row + 20 * u;
    float d = memra_h2f(b), m = memra_h2f(b + 2);
    alignas(16) uint32_t q4[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      q4[i] = ((const uint32_t *)(b + 4))[i];
    const uint8_t *q = (const uint8_t *)q4;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      w[i] = memra_madd<EXACT>(d, (float)(q[i] & 0xF), m);
      w[i + 16] = memra_madd<EXACT>(d, (float)(q[i] >> 4), m);
    }
  } else if (T == MEMRA_TYPE_Q5_0 || T == MEMRA_TYPE_Q5_1) {
    /* Q5_0: d, qh[4], qs[16] (22 B); Q5_1: d, m, qh[4], qs[16] (24 B) */
    const int bytes = T == MEMRA_TYPE_Q5_0 ? 22 : 24, hoff = T == MEMRA_TYPE_Q5_0 ? 2 : 4;
    const uint8_t *b = row + (int64_t)bytes * u;
    float d = memra_h2f(b), m = T == MEMRA_TYPE_Q5_1 ? memra_h2f(b + 2) : 0.f;
    uint32_t qh = (uint32_t)((const uint16_t *)(b + hoff))[0] |
                  ((uint32_t)((const uint16_t *)(b + hoff))[1] << 16);
    alignas(16) uint16_t q2[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      q2[i] = ((const uint16_t *)(b + hoff + 4))[i];
    const uint8_t *q = (const uint8_t *)q2;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      int x0 = (q[i] & 0xF) | (((qh >> i) << 4) & 0x10);
      int x1 = (q[i] >> 4) | ((qh >> (i + 12)) & 0x10);
      if (T == MEMRA_TYPE_Q5_0) {
        w[i] = d * (float)(x0 - 16);
        w[i + 16] = d * (float)(x1 - 16);
      } else {
        w[i] = memra_madd<EXACT>(d, (float)x0, m);
        w[i + 16] = memra_madd<EXACT>(d, (float)x1, m);
      }
    }
  } else if (T == MEMRA_TYPE_Q4_K || T == MEMRA_TYPE_Q5_K) {
    /* Q4_K: d, dmin, scales[12], qs[128] (144 B)
     * Q5_K: d, dmin, scales[12], qh[32], qs[128] (176 B). Sub-block j: nibble j&1 of
     * qs[32 (j/2) ..], 5th bit j of qh[l]. Both sizes are multiples of 16. */
    const int bytes = T == MEMRA_TYPE_Q4_K ? 144 : 176, qoff = T == MEMRA_TYPE_Q4_K ? 16 : 48;
    const int j = (int)(u & 7);
    const uint8_t *b = row + (int64_t)bytes * (u >> 3);
    uint4 hd; /* d, dmin (x), then the 12 scale bytes (y, z, w) */
    if (VEC) {
      hd = __ldg((const uint4 *)b);
    } else {
      const uint16_t *h = (const uint16_t *)b;
      hd.x = h[0] | ((uint32_t)h[1] << 16);
      hd.y = h[2] | ((uint32_t)h[3] << 16);
      hd.z = h[4] | ((uint32_t)h[5] << 16);
      hd.w = h[6] | ((uint32_t)h[7] << 16);
    }
    float d = __half2float(__ushort_as_half((uint16_t)(hd.x & 0xFFFF)));
    float dmin = __half2float(__ushort_as_half((uint16_t)(hd.x >> 16)));
    int sc, mn;
    memra_k4_scale_min(j, hd.y, hd.z, hd.w, &sc, &mn);
    float d1 = d * (float)sc, m1 = dmin * (float)mn;
    alignas(16) uint8_t q[32];
    if (VEC)
      memra_load32<16>(b + qoff + 32 * (j >> 1), q);
    else
      memra_load32<2>(b + qoff + 32 * (j >> 1), q);
    const int shift = 4 * (j & 1);
    if (T == MEMRA_TYPE_Q4_K) {
#pragma unroll
      for (int i = 0; i < 32; ++i)
        w[i] = memra_madd<EXACT>(d1, (float)((q[i] >> shift) & 0xF), -m1);
    } else {
      alignas(16) uint8_t qh[32];
      if (VEC)
        memra_load32<16>(b + 16, qh);
      else
        memra_load32<2>(b + 16, qh);
#pragma unroll
      for (int i = 0; i < 32; ++i)
        w[i] = memra_madd<EXACT>(d1, (float)(((q[i] >> shift) & 0xF) | (((qh[i] >> j) & 1) << 4)),
                                 -m1);
    }
  } else if (T == MEMRA_TYPE_Q6_K) {
    /* ql[128], qh[64], scales[16] int8, d f16: 210 B. Unit j = half n = j/4, quarter k. */
    const int j = (int)(u & 7), n = j >> 2, k = j & 3;
    const uint8_t *b = row + 210 * (u >> 3);
    alignas(16) uint8_t ql[32], qh[32];
    memra_load32<2>(b + 64 * n + 32 * (k & 1), ql);
    memra_load32<2>(b + 128 + 32 * n, qh);
    uint16_t sc2 = *(const uint16_t *)(b + 192 + 8 * n + 2 * k);
    float d = memra_h2f(b + 208);
    float s0 = d * (float)(int8_t)(sc2 & 0xFF), s1 = d * (float)(int8_t)(sc2 >> 8);
    const int lsh = 4 * (k >> 1), hsh = 2 * k;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      int q = (((ql[i] >> lsh) & 0xF) | (((qh[i] >> hsh) & 3) << 4)) - 32;
      w[i] = (i < 16 ? s0 : s1) * (float)q;
    }
  }
}

/* Byte i of w (< 256) as an exact float minus `bias`: the exponent trick (2^23 + b) - 2^23,
 * one PRMT and one FADD instead of shift, mask and a quarter-rate I2F. */
__device__ __forceinline__ float memra_byte_f(uint32_t w, int i, float bias) {
  return __int_as_float(__byte_perm(w, 0x4B000000u, 0x7440 + i)) - (8388608.f + bias);
}

__device__ __forceinline__ uint2 memra_load8(const uint8_t *p, bool vec) {
  if (vec) return __ldg((const uint2 *)p);
  const uint16_t *h = (const uint16_t *)p;
  return make_uint2(h[0] | ((uint32_t)h[1] << 16), h[2] | ((uint32_t)h[3] << 16));
}

/* w[0..8) = elements [8 part, 8 part + 8) of unit u (part 0..3): the matmul's per-lane
 * slice, so that the 4 lanes of a unit, and 8 consecutive units across a warp, read
 * contiguous bytes (coalesced). VEC as in memra_deq32. */
template <int T, bool VEC>
__device__ __forceinline__ void memra_deq8(const uint8_t *__restrict__ row, int64_t u, int part,
                                           float w[8]) {
  if (T == MEMRA_TYPE_F32) {
    const float *p = (const float *)row + 32 * u + 8 * part;
    if (VEC) {
      float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
      w[0] = a.x;
      w[1] = a.y;
      w[2] = a.z;
      w[3] = a.w;
      w[4] = b.x;
      w[5] = b.y;
      w[6] = b.z;
      w[7] = b.w;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        w[i] = __ldg(p + i);
    }
  } else if (T == MEMRA_TYPE_F16 || T == MEMRA_TYPE_BF16) {
    const uint8_t *p = row + 64 * u + 16 * part;
    alignas(16) uint16_t h[8];
    if (VEC) {
      *(uint4 *)h = __ldg((const uint4 *)p);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        h[i] = ((const uint16_t *)p)[i];
    }
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w[i] = T == MEMRA_TYPE_F16 ? __half2float(__ushort_as_half(h[i])) : memra_bf2f(h[i]);
  } else if (T == MEMRA_TYPE_Q8_0) {
    const uint8_t *b = row + 34 * u;
    const float d = memra_h2f(b);
    const uint2 q = memra_load8(b + 2 + 8 * part, false);
    const uint32_t q0 = q.x ^ 0x80808080u, q1 = q.y ^ 0x80808080u; /* int8 -> b + 128 */
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = d * memra_byte_f(q0, i, 128.f);
      w[4 + i] = d * memra_byte_f(q1, i, 128.f);
    }
  } else if (T == MEMRA_TYPE_Q4_0 || T == MEMRA_TYPE_Q4_1) {
    /* elements 8p..8p+8: nibble (p >= 2) of qs[8 (p & 1) ..] */
    const int bytes = T == MEMRA_TYPE_Q4_0 ? 18 : 20, qoff = T == MEMRA_TYPE_Q4_0 ? 2 : 4;
    const uint8_t *b = row + (int64_t)bytes * u;
    const float d = memra_h2f(b), m = T == MEMRA_TYPE_Q4_1 ? memra_h2f(b + 2) : 0.f;
    const uint2 q = memra_load8(b + qoff + 8 * (part & 1), false);
    const int sh = 4 * (part >> 1);
    const uint32_t n0 = (q.x >> sh) & 0x0F0F0F0Fu, n1 = (q.y >> sh) & 0x0F0F0F0Fu;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (T == MEMRA_TYPE_Q4_0) {
        w[i] = d * memra_byte_f(n0, i, 8.f);
        w[4 + i] = d * memra_byte_f(n1, i, 8.f);
      } else {
        w[i] = fmaf(d, memra_byte_f(n0, i, 0.f), m);
        w[4 + i] = fmaf(d, memra_byte_f(n1, i, 0.f), m);
      }
    }
  } else if (T == MEMRA_TYPE_Q5_0 || T == MEMRA_TYPE_Q5_1) {
    /* element e: nibble (e >= 16) of qs[e % 16], fifth bit e of qh */
    const int bytes = T == MEMRA_TYPE_Q5_0 ? 22 : 24, hoff = T == MEMRA_TYPE_Q5_0 ? 2 : 4;
    const uint8_t *b = row + (int64_t)bytes * u;
    const float d = memra_h2f(b), m = T == MEMRA_TYPE_Q5_1 ? memra_h2f(b + 2) : 0.f;
    const uint32_t qh = (uint32_t)((const uint16_t *)(b + hoff))[0] |
                        ((uint32_t)((const uint16_t *)(b + hoff))[1] << 16);
    alignas(8) uint16_t q2[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      q2[i] = ((const uint16_t *)(b + hoff + 4 + 8 * (part & 1)))[i];
    const uint8_t *q = (const uint8_t *)q2;
    const int sh = 4 * (part >> 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int e = 8 * part + i;
      const int v = ((q[i] >> sh) & 0xF) | (((qh >> e) & 1) << 4);
      w[i] = T == MEMRA_TYPE_Q5_0 ? d * (float)(v - 16) : fmaf(d, (float)v, m);
    }
  } else if (T == MEMRA_TYPE_Q4_K || T == MEMRA_TYPE_Q5_K) {
    const int bytes = T == MEMRA_TYPE_Q4_K ? 144 : 176, qoff = T == MEMRA_TYPE_Q4_K ? 16 : 48;
    const int j = (int)(u & 7);
    const uint8_t *b = row + (int64_t)bytes * (u >> 3);
    uint4 hd;
    if (VEC) {
      hd = __ldg((const uint4 *)b);
    } else {
      const uint16_t *h = (const uint16_t *)b;
      hd.x = h[0] | ((uint32_t)h[1] << 16);
      hd.y = h[2] | ((uint32_t)h[3] << 16);
      hd.z = h[4] | ((uint32_t)h[5] << 16);
      hd.w = h[6] | ((uint32_t)h[7] << 16);
    }
    const float d = __half2float(__ushort_as_half((uint16_t)(hd.x & 0xFFFF)));
    const float dmin = __half2float(__ushort_as_half((uint16_t)(hd.x >> 16)));
    int sc, mn;
    memra_k4_scale_min(j, hd.y, hd.z, hd.w, &sc, &mn);
    const float d1 = d * (float)sc, m1 = dmin * (float)mn;
    const uint8_t *qp = b + qoff + 32 * (j >> 1) + 8 * part;
    uint2 qv;
    if (VEC) {
      qv = __ldg((const uint2 *)qp);
    } else {
      const uint16_t *h = (const uint16_t *)qp;
      qv.x = h[0] | ((uint32_t)h[1] << 16);
      qv.y = h[2] | ((uint32_t)h[3] << 16);
    }
    uint2 hv = make_uint2(0, 0);
    if (T == MEMRA_TYPE_Q5_K) {
      const uint8_t *hp = b + 16 + 8 * part;
      if (VEC) {
        hv = __ldg((const uint2 *)hp);
      } else {
        const uint16_t *h = (const uint16_t *)hp;
        hv.x = h[0] | ((uint32_t)h[1] << 16);
        hv.y = h[2] | ((uint32_t)h[3] << 16);
      }
    }
    const int sh = 4 * (j & 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t qw = i < 4 ? qv.x : qv.y, hw = i < 4 ? hv.x : hv.y;
      int v = (int)((qw >> (8 * (i & 3) + sh)) & 0xF);
      if (T == MEMRA_TYPE_Q5_K) v |= (int)(((hw >> (8 * (i & 3) + j)) & 1) << 4);
      w[i] = fmaf(d1, (float)v, -m1);
    }
  } else if (T == MEMRA_TYPE_Q6_K) {
    const int j = (int)(u & 7), n = j >> 2, k = j & 3;
    const uint8_t *b = row + 210 * (u >> 3);
    const uint16_t *lp = (const uint16_t *)(b + 64 * n + 32 * (k & 1) + 8 * part);
    const uint16_t *hp = (const uint16_t *)(b + 128 + 32 * n + 8 * part);
    const uint32_t l0 = lp[0] | ((uint32_t)lp[1] << 16), l1 = lp[2] | ((uint32_t)lp[3] << 16);
    const uint32_t h0 = hp[0] | ((uint32_t)hp[1] << 16), h1 = hp[2] | ((uint32_t)hp[3] << 16);
    const float s = memra_h2f(b + 208) * (float)(int8_t)b[192 + 8 * n + 2 * k + (part >> 1)];
    const int lsh = 4 * (k >> 1), hsh = 2 * k;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t lw = i < 4 ? l0 : l1, hw = i < 4 ? h0 : h1;
      const int q =
          (int)((((lw >> (8 * (i & 3) + lsh)) & 0xF) | (((hw >> (8 * (i & 3) + hsh)) & 3) << 4))) -
          32;
      w[i] = s * (float)q;
    }
  }
}

/* K-quant matmul slice: 16 weights of 64-element group u of a row (4 lanes per group,
 * part 0..3): the 8 q bytes a lane reads feed both their low and their high nibbles, so
 * each byte is read once and each scale decoded once per 16 weights. Split into
 * memra_kraw_load (only loads) and memra_kraw_decode (only arithmetic): matmul v4 used
 * the split for a software pipeline (no gain on the H200, reverted; docs/PERF.md). w[0..8) go with
 * x at element *e0, w[8..16) at *e1 (each 8 consecutive elements). */
struct memra_kraw {
  uint4 hd; /* Q4_K/Q5_K: d, dmin, 12 scale bytes; Q6_K: d bits, scale bytes s0, s1 */
  uint2 q;  /* 8 q bytes (Q6_K: ql) */
  uint2 h;  /* Q5_K: 8 qh bytes; Q6_K: 8 qh bytes */
};

template <int T, bool VEC>
__device__ __forceinline__ memra_kraw memra_kraw_load(const uint8_t *__restrict__ row, int64_t u,
                                                      int part) {
  memra_kraw r;
  r.h = make_uint2(0, 0);
  if (T == MEMRA_TYPE_Q4_K || T == MEMRA_TYPE_Q5_K) {
    const int bytes = T == MEMRA_TYPE_Q4_K ? 144 : 176, qoff = T == MEMRA_TYPE_Q4_K ? 16 : 48;
    const int g = (int)(u & 3);
    const uint8_t *b = row + (int64_t)bytes * (u >> 2);
    if (VEC) {
      r.hd = __ldg((const uint4 *)b);
    } else {
      const uint16_t *h = (const uint16_t *)b;
      r.hd = make_uint4(h[0] | ((uint32_t)h[1] << 16), h[2] | ((uint32_t)h[3] << 16),
                        h[4] | ((uint32_t)h[5] << 16), h[6] | ((uint32_t)h[7] << 16));
    }
    r.q = memra_load8(b + qoff + 32 * g + 8 * part, VEC);
    if (T == MEMRA_TYPE_Q5_K) r.h = memra_load8(b + 16 + 8 * part, VEC);
  } else { /* Q6_K */
    const int n = (int)((u >> 1) & 1), c = (int)(u & 1);
    const uint8_t *b = row + 210 * (u >> 2);
    r.q = memra_load8(b + 64 * n + 32 * c + 8 * part, false);
    r.h = memra_load8(b + 128 + 32 * n + 8 * part, false);
    const int si = 8 * n + 2 * c + (part >> 1);
    r.hd = make_uint4(*(const uint16_t *)(b + 208), b[192 + si], b[192 + si + 4], 0);
  }
  return r;
}

template <int T>
__device__ __forceinline__ void memra_kraw_decode(const memra_kraw &r, int64_t u, int part,
                                                  float w[16], int64_t *e0, int64_t *e1) {
  if (T == MEMRA_TYPE_Q4_K || T == MEMRA_TYPE_Q5_K) {
    const int g = (int)(u & 3);
    const float d = __half2float(__ushort_as_half((uint16_t)(r.hd.x & 0xFFFF)));
    const float dmin = __half2float(__ushort_as_half((uint16_t)(r.hd.x >> 16)));
    int sc0, m0, sc1, m1;
    memra_k4_scale_min(2 * g, r.hd.y, r.hd.z, r.hd.w, &sc0, &m0);
    memra_k4_scale_min(2 * g + 1, r.hd.y, r.hd.z, r.hd.w, &sc1, &m1);
    const float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
    const float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
    uint32_t lo0 = r.q.x & 0x0F0F0F0Fu, lo1 = r.q.y & 0x0F0F0F0Fu;
    uint32_t hi0 = (r.q.x >> 4) & 0x0F0F0F0Fu, hi1 = (r.q.y >> 4) & 0x0F0F0F0Fu;
    if (T == MEMRA_TYPE_Q5_K) { /* fifth bits: bit 2g (low) and 2g+1 (high) of qh[l] */
      lo0 |= ((r.h.x >> (2 * g)) & 0x01010101u) << 4;
      lo1 |= ((r.h.y >> (2 * g)) & 0x01010101u) << 4;
      hi0 |= ((r.h.x >> (2 * g + 1)) & 0x01010101u) << 4;
      hi1 |= ((r.h.y >> (2 * g + 1)) & 0x01010101u) << 4;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = fmaf(d0, memra_byte_f(lo0, i, 0.f), -dm0);
      w[4 + i] = fmaf(d0, memra_byte_f(lo1, i, 0.f), -dm0);
      w[8 + i] = fmaf(d1, memra_byte_f(hi0, i, 0.f), -dm1);
      w[12 + i] = fmaf(d1, memra_byte_f(hi1, i, 0.f), -dm1);
    }
    *e0 = 256 * (u >> 2) + 64 * g + 8 * part;
    *e1 = *e0 + 32;
  } else { /* Q6_K: ql low nibble -> quarter c, high -> c + 2; qh bits 2k */
    const int n = (int)((u >> 1) & 1), c = (int)(u & 1);
    const float d = __half2float(__ushort_as_half((uint16_t)r.hd.x));
    const float s0 = d * (float)(int8_t)r.hd.y, s1 = d * (float)(int8_t)r.hd.z;
    const uint32_t lo0 = (r.q.x & 0x0F0F0F0Fu) | (((r.h.x >> (2 * c)) & 0x03030303u) << 4);
    const uint32_t lo1 = (r.q.y & 0x0F0F0F0Fu) | (((r.h.y >> (2 * c)) & 0x03030303u) << 4);
    const uint32_t hi0 =
        ((r.q.x >> 4) & 0x0F0F0F0Fu) | (((r.h.x >> (2 * c + 4)) & 0x03030303u) << 4);
    const uint32_t hi1 =
        ((r.q.y >> 4) & 0x0F0F0F0Fu) | (((r.h.y >> (2 * c + 4)) & 0x03030303u) << 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = s0 * memra_byte_f(lo0, i, 32.f);
      w[4 + i] = s0 * memra_byte_f(lo1, i, 32.f);
      w[8 + i] = s1 * memra_byte_f(hi0, i, 32.f);
      w[12 + i] = s1 * memra_byte_f(hi1, i, 32.f);
    }
    *e0 = 256 * (u >> 2) + 128 * n + 32 * c + 8 * part;
    *e1 = *e0 + 64;
  }
}

template <int T, bool VEC>
__device__ __forceinline__ void memra_deq16k(const uint8_t *__restrict__ row, int64_t u, int part,
                                             float w[16], int64_t *e0, int64_t *e1) {
  memra_kraw_decode<T>(memra_kraw_load<T, VEC>(row, u, part), u, part, w, e0, e1);
}

#endif /* MEMRA_CUDA_DEQUANT_CUH */
