/* quant.h — ggml block formats on the CPU: dequantize, dot with F32, quantize.
 *
 * Bit-exact with ggml's block layouts (see blocks.h): dequant_row produces exactly the
 * floats ggml's (and the `gguf` Python package's) dequantizers produce. The dot product
 * is the oracle's: dequantize, then accumulate in F32 over x. Quantizers are simple
 * round-to-nearest ones for synthetic models and tests; any valid block is a valid file. */
#ifndef MEMRA_QUANT_H
#define MEMRA_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "plugins/include/memra_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True for the types below: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K..Q6_K. */
bool memra_quant_supported(int32_t type);

/* dst[0..n) = values of the row src; n a multiple of the type's block, src 2-byte aligned
 * (GGUF data is). An unsupported type fills dst with NaN (and vec_dot returns NaN), so a
 * caller that skipped memra_quant_supported finds out at once. */
void memra_dequant_row(int32_t type, const void *src, float *dst, int64_t n);

/* sum_i dequant(w)[i] * x[i] over n elements, accumulated in F32 block by block.
 * The summation order depends only on n (element i goes to F32 lane i % 16, in order;
 * the 16 lanes are summed in a fixed tree), so for every type
 *   memra_vec_dot(type, w, x, n) == memra_vec_dot(MEMRA_TYPE_F32, dequant(w), x, n)
 * bit for bit: a caller may dequantize a weight row once and reuse it for many x
 * (prefill) and still get the same bits as the fused path (decode). */
float memra_vec_dot(int32_t type, const void *w, const float *x, int64_t n);

/* out[t] = memra_vec_dot(type, w, x + t * x_stride, n) for t in [0, nx), bit for bit, but
 * each block of w is decoded once for all nx vectors (prefill: nx tokens per weight row). */
void memra_vec_dot_n(int32_t type, const void *w, const float *x, int64_t x_stride, int64_t nx,
                     int64_t n, float *out);

/* Encodes n floats as one row of type; false if the type has no quantizer. */
bool memra_quantize_row(int32_t type, const float *src, void *dst, int64_t n);

float memra_fp16_to_f32(uint16_t h);
uint16_t memra_f32_to_fp16(float f); /* round to nearest even */
float memra_bf16_to_f32(uint16_t h);
uint16_t memra_f32_to_bf16(float f); /* round to nearest even */

#ifdef __cplusplus
}
#endif
#endif
