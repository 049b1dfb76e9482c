/* dequant_block.h — one block of each ggml type to floats (private to quant).
 *
 * Shared by dequant.c (whole rows) and vec_dot.c (block into a stack buffer, then dot),
 * so both give the same floats. The arithmetic order follows ggml's reference
 * dequantizers exactly (e.g. Q4_K: (d*sc)*q - (dmin*m), two roundings, no FMA: the
 * package is built with -ffp-contract=off), which is what makes the results bit-exact
 * with ggml and the `gguf` Python package. Loops are written so the compiler vectorizes. */
#ifndef MEMRA_QUANT_DEQUANT_BLOCK_H
#define MEMRA_QUANT_DEQUANT_BLOCK_H

#include <stdint.h>
#include <string.h>

#include "plugins/quant/blocks.h"
#include "plugins/quant/half.h"

static inline void memra_dq_q4_0(const memra_block_q4_0 *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d);
  for (int j = 0; j < 16; ++j) {
    y[j] = (float)((b->qs[j] & 0xF) - 8) * d;
    y[j + 16] = (float)((b->qs[j] >> 4) - 8) * d;
  }
}

static inline void memra_dq_q4_1(const memra_block_q4_1 *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d), m = memra_half_to_f32(b->m);
  for (int j = 0; j < 16; ++j) {
    y[j] = (float)(b->qs[j] & 0xF) * d + m;
    y[j + 16] = (float)(b->qs[j] >> 4) * d + m;
  }
}

/* The 5th bits, as ggml stores them: bit j of a little-endian uint32, spread to 0 or 16
 * per element. A mask per element (not a variable shift) keeps the loop vectorizable. */
static inline void memra_dq_qh32(const uint8_t qh[4], int32_t h[32]) {
  static const uint32_t bit[32] = {
      1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
      1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
      1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
      1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};
  const uint32_t v =
      (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
  for (int j = 0; j < 32; ++j)
    h[j] = (v & bit[j]) ? 16 : 0;
}

static inline void memra_dq_q5_0(const memra_block_q5_0 *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d);
  int32_t h[32];
  memra_dq_qh32(b->qh, h);
  for (int j = 0; j < 16; ++j) {
    y[j] = (float)(((b->qs[j] & 0xF) | h[j]) - 16) * d;
    y[j + 16] = (float)(((b->qs[j] >> 4) | h[j + 16]) - 16) * d;
  }
}

static inline void memra_dq_q5_1(const memra_block_q5_1 *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d), m = memra_half_to_f32(b->m);
  int32_t h[32];
  memra_dq_qh32(b->qh, h);
  for (int j = 0; j < 16; ++j) {
    y[j] = (float)((b->qs[j] & 0xF) | h[j]) * d + m;
    y[j + 16] = (float)((b->qs[j] >> 4) | h[j + 16]) * d + m;
  }
}

static inline void memra_dq_q8_0(const memra_block_q8_0 *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d);
  for (int j = 0; j < 32; ++j)
    y[j] = (float)b->qs[j] * d;
}

/* Q2_K: two halves of 128; in each, byte l of qs[32*half..] holds elements l, l+32,
 * l+64, l+96 in bit pairs 0-1, 2-3, 4-5, 6-7. Sub-block s = element / 16. */
static inline void memra_dq_q2_K(const memra_block_q2_K *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d), dmin = memra_half_to_f32(b->dmin);
  for (int half = 0; half < 2; ++half) {
    const uint8_t *q = b->qs + 32 * half;
    for (int k = 0; k < 4; ++k) {
      for (int g = 0; g < 2; ++g) { /* two sub-blocks of 16 per bit pair */
        const uint8_t sc = b->scales[half * 8 + k * 2 + g];
        const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
        float *yo = y + half * 128 + k * 32 + g * 16;
        for (int l = 0; l < 16; ++l)
          yo[l] = dl * (float)((q[g * 16 + l] >> (2 * k)) & 3) - ml;
      }
    }
  }
}

/* Q3_K's 16 six-bit scales: low nibbles in bytes 0-7 (scales 0-7 low, 8-15 high nibble),
 * top 2 bits in bytes 8-11 (scale s: byte 8 + s % 4, bit pair s / 4). */
static inline void memra_dq_q3_K_scales(const uint8_t p[12], int8_t sc[16]) {
  for (int s = 0; s < 16; ++s) {
    int lo = s < 8 ? (p[s] & 0xF) : (p[s - 8] >> 4);
    int hi = (p[8 + s % 4] >> (2 * (s / 4))) & 3;
    sc[s] = (int8_t)((lo | hi << 4) - 32);
  }
}

/* Q3_K: quants as Q2_K's bit pairs; hmask bit (element / 32) of byte element % 32 set
 * means "no -4 offset". */
static inline void memra_dq_q3_K(const memra_block_q3_K *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d);
  int8_t sc[16];
  memra_dq_q3_K_scales(b->scales, sc);
  for (int half = 0; half < 2; ++half) {
    const uint8_t *q = b->qs + 32 * half;
    for (int k = 0; k < 4; ++k) {
      const int bit = half * 4 + k;
      for (int g = 0; g < 2; ++g) {
        const float dl = d * (float)sc[half * 8 + k * 2 + g];
        float *yo = y + half * 128 + k * 32 + g * 16;
        const uint8_t *hm = b->hmask + g * 16;
        for (int l = 0; l < 16; ++l) {
          int v = ((q[g * 16 + l] >> (2 * k)) & 3) - (((hm[l] >> bit) & 1) ? 0 : 4);
          yo[l] = dl * (float)v;
        }
      }
    }
  }
}

/* Q4_K: four chunks of 64; byte l of chunk c's 32 bytes holds element 64c+l (low nibble)
 * and 64c+32+l (high nibble); sub-blocks 2c and 2c+1. */
static inline void memra_dq_q4_K(const memra_block_q4_K *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d), dmin = memra_half_to_f32(b->dmin);
  for (int c = 0; c < 4; ++c) {
    uint8_t sc0, m0, sc1, m1;
    memra_k4_scale(2 * c, b->scales, &sc0, &m0);
    memra_k4_scale(2 * c + 1, b->scales, &sc1, &m1);
    const float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
    const float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
    const uint8_t *q = b->qs + 32 * c;
    float *yo = y + 64 * c;
    for (int l = 0; l < 32; ++l) {
      yo[l] = d0 * (float)(q[l] & 0xF) - dm0;
      yo[l + 32] = d1 * (float)(q[l] >> 4) - dm1;
    }
  }
}

/* Q5_K: Q4_K plus a 5th bit: bit 2c (low nibble) / 2c+1 (high) of qh[l]. */
static inline void memra_dq_q5_K(const memra_block_q5_K *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d), dmin = memra_half_to_f32(b->dmin);
  for (int c = 0; c < 4; ++c) {
    uint8_t sc0, m0, sc1, m1;
    memra_k4_scale(2 * c, b->scales, &sc0, &m0);
    memra_k4_scale(2 * c + 1, b->scales, &sc1, &m1);
    const float d0 = d * (float)sc0, dm0 = dmin * (float)m0;
    const float d1 = d * (float)sc1, dm1 = dmin * (float)m1;
    const uint8_t *q = b->qs + 32 * c;
    float *yo = y + 64 * c;
    for (int l = 0; l < 32; ++l) {
      int h0 = ((b->qh[l] >> (2 * c)) & 1) << 4, h1 = ((b->qh[l] >> (2 * c + 1)) & 1) << 4;
      yo[l] = d0 * (float)((q[l] & 0xF) | h0) - dm0;
      yo[l + 32] = d1 * (float)((q[l] >> 4) | h1) - dm1;
    }
  }
}

/* Q6_K: two halves of 128. In half h, ql[64h + l] low/high nibbles are elements l / l+64
 * and ql[64h + 32 + l] elements l+32 / l+96; qh[32h + l] bit pairs 0,2,4,6 are the top
 * bits of elements l, l+32, l+64, l+96. Sub-block = element / 16; value (d*sc)*(q-32). */
static inline void memra_dq_q6_K(const memra_block_q6_K *restrict b, float *restrict y) {
  const float d = memra_half_to_f32(b->d);
  for (int h = 0; h < 2; ++h) {
    const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
    const int8_t *sc = b->scales + 8 * h;
    float *yo = y + 128 * h;
    for (int g = 0; g < 2; ++g) { /* l in [16g, 16g+16): one sub-block per quarter */
      const float s0 = d * (float)sc[g], s1 = d * (float)sc[g + 2];
      const float s2 = d * (float)sc[g + 4], s3 = d * (float)sc[g + 6];
      for (int l = 16 * g; l < 16 * g + 16; ++l) {
        int q0 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
        int q1 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
        int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
        int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
        yo[l] = s0 * (float)q0;
        yo[l + 32] = s1 * (float)q1;
        yo[l + 64] = s2 * (float)q2;
        yo[l + 96] = s3 * (float)q3;
      }
    }
  }
}

#endif /* MEMRA_QUANT_DEQUANT_BLOCK_H */
