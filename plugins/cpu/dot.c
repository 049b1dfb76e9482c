/* dot.c — the one float32 dot product every op uses.
 *
 * Sixteen lanes (lane = element index mod 16, tail included), combined by the fixed tree
 * ((0+8)+(4+12)... as t[k] += t[k + w] for w = 8, 4, 2, 1): exactly the order of
 * memra_vec_dot(F32, ...) in plugins/quant, so a weight row dequantized once and dotted
 * here gives the bits of the fused quantized dot (tests/cpu/matmul_test checks both).
 * The order depends only on n, never on the thread or the batch that asks; no FMA
 * contraction (-ffp-contract=off), so the AVX2 clone and the baseline give equal bits. */
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

typedef float cpu_v8 __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CPU_CLONES
#endif

CPU_CLONES float cpu_dot_f32(const float *a, const float *b, int64_t n) {
  cpu_v8 s0 = {0}, s1 = {0}; /* lanes 0..7 and 8..15 */
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    cpu_v8 a0, a1, b0, b1;
    memcpy(&a0, a + i, sizeof a0); /* memcpy: rows need not be 32-byte aligned */
    memcpy(&a1, a + i + 8, sizeof a1);
    memcpy(&b0, b + i, sizeof b0);
    memcpy(&b1, b + i + 8, sizeof b1);
    s0 += a0 * b0;
    s1 += a1 * b1;
  }
  for (int64_t j = i; j < n; ++j) {
    int lane = (int)(j - i);
    if (lane < 8)
      s0[lane] += a[j] * b[j];
    else
      s1[lane - 8] += a[j] * b[j];
  }
  cpu_v8 s = s0 + s1;
  float u0 = s[0] + s[4], u1 = s[1] + s[5], u2 = s[2] + s[6], u3 = s[3] + s[7];
  return (u0 + u2) + (u1 + u3);
}
