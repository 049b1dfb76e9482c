/* fp8.h — FP8 e4m3 (OCP "e4m3fn", MEMRA_TYPE_F8_E4M3) <-> f32, for the KV cache.
 *
 * Header-only and branch-light so that C (the CPU oracle) and CUDA (the GPU plugins)
 * compile the very same arithmetic: a GPU cache holds the same bytes as the CPU one.
 * Format: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal
 * (m * 2^-9); S.1111.111 is NaN; there is no infinity; the largest finite is 448.
 * Encoding rounds to nearest, ties to even, and saturates: anything of magnitude >= 448
 * (infinity included) becomes +-448; NaN becomes the NaN code of its sign. */
#ifndef MEMRA_QUANT_FP8_H
#define MEMRA_QUANT_FP8_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define MEMRA_FP8_FN __host__ __device__ static inline
#else
#define MEMRA_FP8_FN static inline
#endif

MEMRA_FP8_FN float memra_fp8_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

MEMRA_FP8_FN float memra_fp8_e4m3_to_f32(uint8_t c) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24, e = (c >> 3) & 0xfu, m = c & 7u;
  if (e == 15u && m == 7u) return memra_fp8_bits_f32(sign | 0x7fc00000u);
  if (e == 0u) { /* subnormal: m * 2^-9, exact in float */
    const float v = (float)m * 0.001953125f;
    return sign ? -v : v;
  }
  return memra_fp8_bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

MEMRA_FP8_FN uint8_t memra_f32_to_fp8_e4m3(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint8_t)(sign | 0x7fu);  /* NaN */
  if (ax >= 0x43e00000u) return (uint8_t)(sign | 0x7eu); /* >= 448 (and inf): saturate */
  if (ax < 0x3c800000u) {
    /* Below 2^-6 the code is subnormal, a multiple of 2^-9: scale by 2^9 (exact) and
     * round half to even by hand, so no rounding-mode state is involved. */
    const float s = memra_fp8_bits_f32(ax) * 512.0f; /* in [0, 8) */
    uint32_t q = (uint32_t)s;                        /* floor */
    const float frac = s - (float)q;                 /* exact */
    if (frac > 0.5f || (frac == 0.5f && (q & 1u))) ++q;
    return (uint8_t)(sign | q); /* q == 8 is the smallest normal, code 0x08 */
  }
  /* Normal: rebias 127 -> 7 and round away 20 mantissa bits, ties to even; a carry out
   * of the mantissa bumps the exponent. 448 <= values never get here. */
  const uint32_t odd = (ax >> 20) & 1u;
  ax = ax - (120u << 23) + 0x7ffffu + odd;
  uint32_t c = ax >> 20;
  if (c > 0x7eu) c = 0x7eu; /* (448, 464) rounds down anyway; kept for safety */
  return (uint8_t)(sign | c);
}

#endif /* MEMRA_QUANT_FP8_H */
