/* half.h — inline fp16/bf16 <-> f32 conversions for the hot loops (private to quant).
 *
 * Branch-light so the dequant loops vectorize; exact for every input: normals,
 * subnormals, zeros, infinities, and NaNs (payload kept on widening). */
#ifndef MEMRA_QUANT_HALF_H
#define MEMRA_QUANT_HALF_H

#include <stdint.h>
#include <string.h>

static inline float memra_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t memra_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* fp16 -> f32. Placing the 15 magnitude bits at float bit 13 makes a float whose
 * exponent is 112 too small (normals) or a float subnormal with the same significand
 * (fp16 subnormals); multiplying by 2^112 is exact in both cases. Inf/NaN keep an
 * all-ones exponent and their payload. */
static inline float memra_half_to_f32(uint16_t h) {
  const uint32_t hw = h; /* all arithmetic in 32 bits: SIMD-friendly, no 16-bit lanes */
  const int32_t mag = (int32_t)((hw & 0x7fffu) << 13);
  const uint32_t fin = memra_f32_bits(memra_bits_f32((uint32_t)mag) * 0x1p112f);
  /* A mask, not a branch or ?:, so that loops over this still vectorize. */
  const uint32_t special = (uint32_t) - (int32_t)(mag >= 0x0f800000); /* exponent all ones */
  const uint32_t r = (fin & ~special) | (((uint32_t)mag | 0x7f800000u) & special);
  return memra_bits_f32(r | ((hw & 0x8000u) << 16));
}

/* f32 -> fp16, round to nearest, ties to even; overflow gives Inf, NaN stays a quiet NaN
 * with the top payload bits. */
static inline uint16_t memra_f32_to_half(float f) {
  uint32_t x = memra_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: rounds to Inf */
  if (ax < 0x38800000u) {
    /* Below 2^-14 the result is subnormal: adding 0.5 puts the fp16 ulp (2^-24) at the
     * float's last bit, so the FPU's own rounding (nearest even) does the work. */
    uint32_t r = memra_f32_bits(memra_bits_f32(ax) + 0.5f) - 0x3f000000u;
    return (uint16_t)(sign | r);
  }
  /* Normal: rebias the exponent and round away the 13 low bits, ties to even; a carry
   * out of the mantissa correctly bumps the exponent. */
  uint32_t odd = (ax >> 13) & 1u;
  ax += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
  return (uint16_t)(sign | (ax >> 13));
}

static inline float memra_bf16_bits_to_f32(uint16_t h) { return memra_bits_f32((uint32_t)h << 16); }

/* f32 -> bf16, round to nearest even; NaN is kept NaN (forced quiet) rather than rounded,
 * which could carry it into Inf. */
static inline uint16_t memra_f32_to_bf16_bits(float f) {
  uint32_t x = memra_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#endif /* MEMRA_QUANT_HALF_H */
