/* blocks.h — ggml's quantized block layouts, byte for byte.
 *
 * Shared by the CPU code (C11) and the CUDA plugins (nvcc, C++): plain structs of
 * byte/half fields, no C-only constructs. Half-precision fields are IEEE fp16 bit patterns
 * held as uint16_t (little endian on every target memra runs on); convert them with
 * memra_fp16_to_f32 (quant.h) on the host. Every struct has 2-byte alignment (Q8_K: 4),
 * which is what GGUF's 32-byte aligned tensor data and whole-block rows guarantee.
 *
 * Value of element i of a block (d, dmin: the fp16 fields as floats):
 *   Q4_0  d * (q - 8)            q 4 bits: qs[i % 16] low nibble for i < 16, high for i >= 16
 *   Q4_1  d * q + m
 *   Q5_0  d * (q - 16)           q = 4 bits as Q4_0 | bit i of qh (as a LE uint32) << 4
 *   Q5_1  d * q + m
 *   Q8_0  d * qs[i]
 *   Q2_K  16 sub-blocks of 16:  d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q 2 bits
 *   Q3_K  16 sub-blocks of 16:  d * (sc6[s] - 32) * (q2 - (hmask bit ? 0 : 4))
 *   Q4_K  8 sub-blocks of 32:   d * sc6[s] * q4 - dmin * m6[s]   (scales: see memra_k4_scale)
 *   Q5_K  8 sub-blocks of 32:   d * sc6[s] * q5 - dmin * m6[s]
 *   Q6_K  16 sub-blocks of 16:  d * scales[s] * (q6 - 32)
 * The exact bit positions are spelled out in dequant.c. */
#ifndef MEMRA_QUANT_BLOCKS_H
#define MEMRA_QUANT_BLOCKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Helpers below are callable from CUDA device code too. */
#ifdef __CUDACC__
#define MEMRA_QUANT_HD __host__ __device__
#else
#define MEMRA_QUANT_HD
#endif

/* Elements per block. */
#define MEMRA_QK4_0 32
#define MEMRA_QK4_1 32
#define MEMRA_QK5_0 32
#define MEMRA_QK5_1 32
#define MEMRA_QK8_0 32
#define MEMRA_QK8_1 32
#define MEMRA_QK_K 256
#define MEMRA_K_SCALE_SIZE 12 /* packed 6-bit scales and mins of Q4_K / Q5_K */

typedef struct memra_block_q4_0 {
  uint16_t d;                  /* fp16 scale */
  uint8_t qs[MEMRA_QK4_0 / 2]; /* nibbles: element j low, element j + 16 high */
} memra_block_q4_0;

typedef struct memra_block_q4_1 {
  uint16_t d; /* fp16 scale */
  uint16_t m; /* fp16 offset (the block minimum) */
  uint8_t qs[MEMRA_QK4_1 / 2];
} memra_block_q4_1;

typedef struct memra_block_q5_0 {
  uint16_t d;
  uint8_t qh[4]; /* 5th bit of each element, little-endian uint32 */
  uint8_t qs[MEMRA_QK5_0 / 2];
} memra_block_q5_0;

typedef struct memra_block_q5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[MEMRA_QK5_1 / 2];
} memra_block_q5_1;

typedef struct memra_block_q8_0 {
  uint16_t d;
  int8_t qs[MEMRA_QK8_0];
} memra_block_q8_0;

typedef struct memra_block_q8_1 {
  uint16_t d; /* fp16 scale */
  uint16_t s; /* fp16 of d * sum(qs) */
  int8_t qs[MEMRA_QK8_1];
} memra_block_q8_1;

typedef struct memra_block_q2_K {
  uint8_t scales[MEMRA_QK_K / 16]; /* per sub-block: scale low nibble, min high nibble */
  uint8_t qs[MEMRA_QK_K / 4];      /* 2-bit quants */
  uint16_t d;                      /* fp16 super-scale of the scales */
  uint16_t dmin;                   /* fp16 super-scale of the mins */
} memra_block_q2_K;

typedef struct memra_block_q3_K {
  uint8_t hmask[MEMRA_QK_K / 8]; /* high bit of each quant */
  uint8_t qs[MEMRA_QK_K / 4];    /* low 2 bits */
  uint8_t scales[12];            /* 16 scales of 6 bits, packed */
  uint16_t d;                    /* fp16 super-scale */
} memra_block_q3_K;

typedef struct memra_block_q4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[MEMRA_K_SCALE_SIZE]; /* 8 scales and 8 mins of 6 bits */
  uint8_t qs[MEMRA_QK_K / 2];
} memra_block_q4_K;

typedef struct memra_block_q5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[MEMRA_K_SCALE_SIZE];
  uint8_t qh[MEMRA_QK_K / 8];
  uint8_t qs[MEMRA_QK_K / 2];
} memra_block_q5_K;

typedef struct memra_block_q6_K {
  uint8_t ql[MEMRA_QK_K / 2];     /* low 4 bits */
  uint8_t qh[MEMRA_QK_K / 4];     /* high 2 bits */
  int8_t scales[MEMRA_QK_K / 16]; /* 8-bit signed sub-block scales */
  uint16_t d;
} memra_block_q6_K;

typedef struct memra_block_q8_K {
  float d; /* a float, not fp16 (used for activations) */
  int8_t qs[MEMRA_QK_K];
  int16_t bsums[MEMRA_QK_K / 16]; /* sums of qs per group of 16 */
} memra_block_q8_K;

/* Scale and min j (0..7) of a Q4_K/Q5_K block, 6 bits each. Bytes 0-3 hold scales 0-3
 * (low 6 bits), bytes 4-7 mins 0-3; scales/mins 4-7 keep their low nibbles in bytes 8-11
 * and their top 2 bits in the spare top bits of bytes 0-7. */
static inline MEMRA_QUANT_HD void memra_k4_scale(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/* Sizes must equal memra_type_info()'s (tests check that too). */
#ifdef __cplusplus
#define MEMRA_BLOCK_ASSERT(c, msg) static_assert(c, msg)
#else
#define MEMRA_BLOCK_ASSERT(c, msg) _Static_assert(c, msg)
#endif
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q4_0) == 18, "block_q4_0 size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q4_1) == 20, "block_q4_1 size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q5_0) == 22, "block_q5_0 size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q5_1) == 24, "block_q5_1 size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q8_0) == 34, "block_q8_0 size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q8_1) == 36, "block_q8_1 size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q2_K) == 84, "block_q2_K size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q3_K) == 110, "block_q3_K size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q4_K) == 144, "block_q4_K size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q5_K) == 176, "block_q5_K size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q6_K) == 210, "block_q6_K size");
MEMRA_BLOCK_ASSERT(sizeof(memra_block_q8_K) == 292, "block_q8_K size");
#undef MEMRA_BLOCK_ASSERT

#ifdef __cplusplus
}
#endif
#endif /* MEMRA_QUANT_BLOCKS_H */
