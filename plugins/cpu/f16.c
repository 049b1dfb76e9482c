/* f16.c — F16 rows of the KV cache widened to float32. Widening is exact (every half is
 * a float), so the F16C path and memra_fp16_to_f32 give identical bits for every
 * non-NaN half (tests/cpu/attention_test checks all 65536); F16C just does eight at a
 * time, which matters because attention widens the whole cache prefix every step. */
#include "plugins/cpu/cpu_backend.h"
#include "plugins/quant/quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx,f16c"))) static void widen_f16c(const uint16_t *src, float *dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; ++i)
    dst[i] = memra_fp16_to_f32(src[i]);
}
#endif

void cpu_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("f16c")) {
    widen_f16c(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i)
    dst[i] = memra_fp16_to_f32(src[i]);
}
