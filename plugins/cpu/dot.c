/* dot.c — the one float32 dot product every op uses.
 *
 * Sixteen lanes (two 8-wide vectors), combined by a fixed tree, then the tail in order.
 * The order depends only on n, never on the thread or the batch that asks, so results
 * are bit-identical across thread counts and batch compositions. No FMA contraction
 * (C11 mode: -ffp-contract=off), so every ISA gives the same bits. */
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

typedef float cpu_v8 __attribute__((vector_size(32)));

float cpu_dot_f32(const float *a, const float *b, int64_t n) {
  cpu_v8 s0 = {0}, s1 = {0};
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
  cpu_v8 s = s0 + s1;
  float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; ++i)
    r += a[i] * b[i];
  return r;
}
