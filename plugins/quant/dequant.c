/* dequant.c — rows of any supported type to F32, and which types are supported. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "plugins/quant/dequant_block.h"
#include "plugins/quant/quant.h"

bool memra_quant_supported(int32_t type) {
  switch (type) {
  case MEMRA_TYPE_F32:
  case MEMRA_TYPE_F16:
  case MEMRA_TYPE_BF16:
  case MEMRA_TYPE_Q4_0:
  case MEMRA_TYPE_Q4_1:
  case MEMRA_TYPE_Q5_0:
  case MEMRA_TYPE_Q5_1:
  case MEMRA_TYPE_Q8_0:
  case MEMRA_TYPE_Q2_K:
  case MEMRA_TYPE_Q3_K:
  case MEMRA_TYPE_Q4_K:
  case MEMRA_TYPE_Q5_K:
  case MEMRA_TYPE_Q6_K: return true;
  default: return false;
  }
}

/* One loop per type so the switch runs once per row, not per block. */
#define MEMRA_DQ_ROW(btype, fn, qk)                                                                \
  do {                                                                                             \
    const btype *b = (const btype *)src;                                                           \
    for (int64_t i = 0; i < n / (qk); ++i)                                                         \
      fn(b + i, dst + i * (qk));                                                                   \
  } while (0)

void memra_dequant_row(int32_t type, const void *src, float *dst, int64_t n) {
  const memra_type_traits tr = memra_type_info(type); /* callers pass whole blocks */
  assert(n >= 0 && (tr.blck <= 0 || n % tr.blck == 0));
  (void)tr;
  switch (type) {
  case MEMRA_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
  case MEMRA_TYPE_F16: {
    const uint16_t *h = (const uint16_t *)src;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = memra_half_to_f32(h[i]);
    return;
  }
  case MEMRA_TYPE_BF16: {
    const uint16_t *h = (const uint16_t *)src;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = memra_bf16_bits_to_f32(h[i]);
    return;
  }
  case MEMRA_TYPE_Q4_0: MEMRA_DQ_ROW(memra_block_q4_0, memra_dq_q4_0, MEMRA_QK4_0); return;
  case MEMRA_TYPE_Q4_1: MEMRA_DQ_ROW(memra_block_q4_1, memra_dq_q4_1, MEMRA_QK4_1); return;
  case MEMRA_TYPE_Q5_0: MEMRA_DQ_ROW(memra_block_q5_0, memra_dq_q5_0, MEMRA_QK5_0); return;
  case MEMRA_TYPE_Q5_1: MEMRA_DQ_ROW(memra_block_q5_1, memra_dq_q5_1, MEMRA_QK5_1); return;
  case MEMRA_TYPE_Q8_0: MEMRA_DQ_ROW(memra_block_q8_0, memra_dq_q8_0, MEMRA_QK8_0); return;
  case MEMRA_TYPE_Q2_K: MEMRA_DQ_ROW(memra_block_q2_K, memra_dq_q2_K, MEMRA_QK_K); return;
  case MEMRA_TYPE_Q3_K: MEMRA_DQ_ROW(memra_block_q3_K, memra_dq_q3_K, MEMRA_QK_K); return;
  case MEMRA_TYPE_Q4_K: MEMRA_DQ_ROW(memra_block_q4_K, memra_dq_q4_K, MEMRA_QK_K); return;
  case MEMRA_TYPE_Q5_K: MEMRA_DQ_ROW(memra_block_q5_K, memra_dq_q5_K, MEMRA_QK_K); return;
  case MEMRA_TYPE_Q6_K: MEMRA_DQ_ROW(memra_block_q6_K, memra_dq_q6_K, MEMRA_QK_K); return;
  default:
    /* Unsupported: NaN, so a caller that skipped memra_quant_supported sees it at once. */
    for (int64_t i = 0; i < n; ++i)
      dst[i] = NAN;
    return;
  }
}
