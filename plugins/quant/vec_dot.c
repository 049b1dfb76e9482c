/* vec_dot.c — dot of one quantized row with an F32 vector: the CPU matmul's inner loop.
 *
 * Each block is dequantized (dequant_block.h, the same floats as memra_dequant_row) into
 * a stack buffer and multiplied into 16 independent F32 accumulator lanes, which the
 * compiler maps onto SIMD registers; the lanes are summed once at the end in a fixed
 * tree. The order of operations depends only on n, never on the caller or the ISA, so a
 * row's dot is reproducible (batch invariance). */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "plugins/quant/dequant_block.h"
#include "plugins/quant/quant.h"

enum { LANES = 16 };

typedef struct lanes {
  float v[LANES];
} lanes;

/* acc[k] += w[i + k] * x[i + k], for n a multiple of LANES: a multiply then an add, two
 * roundings (the package is built with -ffp-contract=off, so never a fused FMA). */
static inline void lanes_muladd(lanes *restrict acc, const float *restrict w,
                                const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i += LANES)
    for (int k = 0; k < LANES; ++k)
      acc->v[k] += w[i + k] * x[i + k];
}

static inline float lanes_sum(const lanes *acc) {
  float t[LANES];
  for (int k = 0; k < LANES; ++k)
    t[k] = acc->v[k];
  for (int w = LANES / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k)
      t[k] += t[k + w];
  return t[0];
}

/* Whole blocks through a stack buffer; the dequantizer is inlined per type. */
#define MEMRA_DOT_BLOCKS(btype, fn, qk)                                                            \
  __attribute__((noinline)) static float dot_##btype(const void *w, const float *x, int64_t n) {   \
    const btype *b = (const btype *)w;                                                             \
    lanes acc = {{0}};                                                                             \
    float buf[qk];                                                                                 \
    for (int64_t i = 0; i < n / (qk); ++i) {                                                       \
      fn(b + i, buf);                                                                              \
      lanes_muladd(&acc, buf, x + i * (qk), (qk));                                                 \
    }                                                                                              \
    return lanes_sum(&acc);                                                                        \
  }

MEMRA_DOT_BLOCKS(memra_block_q4_0, memra_dq_q4_0, MEMRA_QK4_0)
MEMRA_DOT_BLOCKS(memra_block_q4_1, memra_dq_q4_1, MEMRA_QK4_1)
MEMRA_DOT_BLOCKS(memra_block_q5_0, memra_dq_q5_0, MEMRA_QK5_0)
MEMRA_DOT_BLOCKS(memra_block_q5_1, memra_dq_q5_1, MEMRA_QK5_1)
MEMRA_DOT_BLOCKS(memra_block_q8_0, memra_dq_q8_0, MEMRA_QK8_0)
MEMRA_DOT_BLOCKS(memra_block_q2_K, memra_dq_q2_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS(memra_block_q3_K, memra_dq_q3_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS(memra_block_q4_K, memra_dq_q4_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS(memra_block_q5_K, memra_dq_q5_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS(memra_block_q6_K, memra_dq_q6_K, MEMRA_QK_K)

/* Several x per weight row: each block is decoded once into buf and fed to every x's own
 * lanes, in the same order as the single dot, so the bits are the same. */
enum { MULTI = 8 };
#define MEMRA_DOT_BLOCKS_N(btype, fn, qk)                                                          \
  __attribute__((noinline)) static void dotn_##btype(const void *w, const float *x, int64_t ldx,   \
                                                     int nx, int64_t n, float *out) {              \
    const btype *b = (const btype *)w;                                                             \
    lanes acc[MULTI];                                                                              \
    memset(acc, 0, sizeof acc);                                                                    \
    float buf[qk];                                                                                 \
    for (int64_t i = 0; i < n / (qk); ++i) {                                                       \
      fn(b + i, buf);                                                                              \
      for (int t = 0; t < nx; ++t)                                                                 \
        lanes_muladd(&acc[t], buf, x + t * ldx + i * (qk), (qk));                                  \
    }                                                                                              \
    for (int t = 0; t < nx; ++t)                                                                   \
      out[t] = lanes_sum(&acc[t]);                                                                 \
  }

MEMRA_DOT_BLOCKS_N(memra_block_q4_0, memra_dq_q4_0, MEMRA_QK4_0)
MEMRA_DOT_BLOCKS_N(memra_block_q4_1, memra_dq_q4_1, MEMRA_QK4_1)
MEMRA_DOT_BLOCKS_N(memra_block_q5_0, memra_dq_q5_0, MEMRA_QK5_0)
MEMRA_DOT_BLOCKS_N(memra_block_q5_1, memra_dq_q5_1, MEMRA_QK5_1)
MEMRA_DOT_BLOCKS_N(memra_block_q8_0, memra_dq_q8_0, MEMRA_QK8_0)
MEMRA_DOT_BLOCKS_N(memra_block_q2_K, memra_dq_q2_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS_N(memra_block_q3_K, memra_dq_q3_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS_N(memra_block_q4_K, memra_dq_q4_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS_N(memra_block_q5_K, memra_dq_q5_K, MEMRA_QK_K)
MEMRA_DOT_BLOCKS_N(memra_block_q6_K, memra_dq_q6_K, MEMRA_QK_K)

/* Element types may have any length: whole lane groups (F16/BF16 converted 32 at a
 * time), then the tail spread over the lanes in order. */
static float dot_f32(const float *w, const float *x, int64_t n) {
  lanes acc = {{0}};
  int64_t m = n - n % LANES;
  lanes_muladd(&acc, w, x, m);
  for (int64_t i = m; i < n; ++i)
    acc.v[i - m] += w[i] * x[i];
  return lanes_sum(&acc);
}

/* F16 and BF16 rows: 32 values converted at a time, then the same lanes. */
#define MEMRA_DOT_HALVES(name, cvt)                                                                \
  __attribute__((noinline)) static float name(const uint16_t *w, const float *x, int64_t n) {      \
    lanes acc = {{0}};                                                                             \
    float buf[32];                                                                                 \
    int64_t i = 0;                                                                                 \
    for (; i + 32 <= n; i += 32) {                                                                 \
      for (int k = 0; k < 32; ++k)                                                                 \
        buf[k] = cvt(w[i + k]);                                                                    \
      lanes_muladd(&acc, buf, x + i, 32);                                                          \
    }                                                                                              \
    for (int64_t k = i; k < n; ++k)                                                                \
      acc.v[(k - i) % LANES] += cvt(w[k]) * x[k];                                                  \
    return lanes_sum(&acc);                                                                        \
  }

MEMRA_DOT_HALVES(dot_f16, memra_half_to_f32)
MEMRA_DOT_HALVES(dot_bf16, memra_bf16_bits_to_f32)

float memra_vec_dot(int32_t type, const void *w, const float *x, int64_t n) {
  const memra_type_traits tr = memra_type_info(type); /* callers pass whole blocks */
  assert(n >= 0 && (tr.blck <= 0 || n % tr.blck == 0));
  (void)tr;
  switch (type) {
  case MEMRA_TYPE_F32: return dot_f32((const float *)w, x, n);
  case MEMRA_TYPE_F16: return dot_f16((const uint16_t *)w, x, n);
  case MEMRA_TYPE_BF16: return dot_bf16((const uint16_t *)w, x, n);
  case MEMRA_TYPE_Q4_0: return dot_memra_block_q4_0(w, x, n);
  case MEMRA_TYPE_Q4_1: return dot_memra_block_q4_1(w, x, n);
  case MEMRA_TYPE_Q5_0: return dot_memra_block_q5_0(w, x, n);
  case MEMRA_TYPE_Q5_1: return dot_memra_block_q5_1(w, x, n);
  case MEMRA_TYPE_Q8_0: return dot_memra_block_q8_0(w, x, n);
  case MEMRA_TYPE_Q2_K: return dot_memra_block_q2_K(w, x, n);
  case MEMRA_TYPE_Q3_K: return dot_memra_block_q3_K(w, x, n);
  case MEMRA_TYPE_Q4_K: return dot_memra_block_q4_K(w, x, n);
  case MEMRA_TYPE_Q5_K: return dot_memra_block_q5_K(w, x, n);
  case MEMRA_TYPE_Q6_K: return dot_memra_block_q6_K(w, x, n);
  default: return NAN; /* unsupported type: see memra_quant_supported */
  }
}

void memra_vec_dot_n(int32_t type, const void *w, const float *x, int64_t x_stride, int64_t nx,
                     int64_t n, float *out) {
  for (int64_t t0 = 0; t0 < nx; t0 += MULTI) {
    const int c = (int)(nx - t0 < MULTI ? nx - t0 : MULTI);
    const float *xc = x + t0 * x_stride;
    float *oc = out + t0;
    switch (type) {
    case MEMRA_TYPE_Q4_0: dotn_memra_block_q4_0(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q4_1: dotn_memra_block_q4_1(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q5_0: dotn_memra_block_q5_0(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q5_1: dotn_memra_block_q5_1(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q8_0: dotn_memra_block_q8_0(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q2_K: dotn_memra_block_q2_K(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q3_K: dotn_memra_block_q3_K(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q4_K: dotn_memra_block_q4_K(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q5_K: dotn_memra_block_q5_K(w, xc, x_stride, c, n, oc); break;
    case MEMRA_TYPE_Q6_K: dotn_memra_block_q6_K(w, xc, x_stride, c, n, oc); break;
    default: /* element types (nothing to share) and unsupported ones (NaN) */
      for (int t = 0; t < c; ++t)
        oc[t] = memra_vec_dot(type, w, xc + t * x_stride, n);
    }
  }
}
