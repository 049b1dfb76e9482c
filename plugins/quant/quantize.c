/* quantize.c — simple round-to-nearest quantizers for every supported type.
 *
 * For synthetic models and tests, not for quality: each block (or sub-block) gets the
 * scale that maps its range onto the integer grid, K-quant sub-block scales and mins are
 * themselves rounded onto their 4/6/8-bit grids under an fp16 super-scale, and each value
 * goes to the nearest level given the scales as they will be decoded (fp16-rounded), so
 * no error is added twice. Symmetric types map the value of largest magnitude onto the
 * grid's longer end (-8 for Q4_0, -4 for Q3_K, ...), as ggml does. Mins are kept <= 0,
 * which the K formats require (they subtract dmin * m with m >= 0). */
#include <math.h>
#include <string.h>

#include "plugins/quant/blocks.h"
#include "plugins/quant/half.h"
#include "plugins/quant/quant.h"

/* Nearest integer in [lo, hi]; NaN goes to lo, so hostile input stays defined. */
static int nearest(float v, int lo, int hi) {
  if (!(v >= (float)lo)) return lo;
  if (v >= (float)hi) return hi;
  return (int)lrintf(v);
}

static float inv_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/* The value of largest magnitude (keeping its sign). */
static float signed_absmax(const float *x, int n) {
  float amax = 0.0f, v = 0.0f;
  for (int i = 0; i < n; ++i)
    if (fabsf(x[i]) > amax) amax = fabsf(x[i]), v = x[i];
  return v;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
  *mn = x[0], *mx = x[0];
  for (int i = 1; i < n; ++i)
    *mn = fminf(*mn, x[i]), *mx = fmaxf(*mx, x[i]);
}

/* Stores d as fp16 and returns the value it decodes to. */
static float put_half(uint16_t *dst, float d) {
  *dst = memra_f32_to_half(d);
  return memra_half_to_f32(*dst);
}

/* ---- 32-element block types ---------------------------------------------------------- */

static void q_q8_0(const float *x, memra_block_q8_0 *b) {
  float amax = fabsf(signed_absmax(x, 32));
  float id = inv_or_zero(put_half(&b->d, amax / 127.0f));
  for (int j = 0; j < 32; ++j)
    b->qs[j] = (int8_t)nearest(x[j] * id, -128, 127);
}

/* Q4_0 / Q5_0: d = max / -(levels / 2), q = round(x / d) + levels / 2. */
static void q_sym32(const float *x, uint16_t *dh, int bits, uint8_t u[32]) {
  const int half = 1 << (bits - 1);
  float id = inv_or_zero(put_half(dh, signed_absmax(x, 32) / (float)-half));
  for (int j = 0; j < 32; ++j)
    u[j] = (uint8_t)(nearest(x[j] * id, -half, half - 1) + half);
}

/* Q4_1 / Q5_1: m = min, d = (max - min) / (levels - 1), q = round((x - m) / d). */
static void q_asym32(const float *x, uint16_t *dh, uint16_t *mh, int bits, uint8_t u[32]) {
  const int top = (1 << bits) - 1;
  float mn, mx;
  min_max(x, 32, &mn, &mx);
  float id = inv_or_zero(put_half(dh, (mx - mn) / (float)top));
  float m = put_half(mh, mn);
  for (int j = 0; j < 32; ++j)
    u[j] = (uint8_t)nearest((x[j] - m) * id, 0, top);
}

static void pack_nibbles32(const uint8_t u[32], uint8_t qs[16]) {
  for (int j = 0; j < 16; ++j)
    qs[j] = (uint8_t)((u[j] & 0xF) | (u[j + 16] & 0xF) << 4);
}

static void pack_qh32(const uint8_t u[32], uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j)
    h |= (uint32_t)(u[j] >> 4 & 1) << j;
  for (int k = 0; k < 4; ++k)
    qh[k] = (uint8_t)(h >> (8 * k));
}

static void q_q4_0(const float *x, memra_block_q4_0 *b) {
  uint8_t u[32];
  q_sym32(x, &b->d, 4, u);
  pack_nibbles32(u, b->qs);
}

static void q_q4_1(const float *x, memra_block_q4_1 *b) {
  uint8_t u[32];
  q_asym32(x, &b->d, &b->m, 4, u);
  pack_nibbles32(u, b->qs);
}

static void q_q5_0(const float *x, memra_block_q5_0 *b) {
  uint8_t u[32];
  q_sym32(x, &b->d, 5, u);
  pack_nibbles32(u, b->qs);
  pack_qh32(u, b->qh);
}

static void q_q5_1(const float *x, memra_block_q5_1 *b) {
  uint8_t u[32];
  q_asym32(x, &b->d, &b->m, 5, u);
  pack_nibbles32(u, b->qs);
  pack_qh32(u, b->qh);
}

/* ---- K-quants (256 elements, sub-blocks of 16 or 32) ---------------------------------- */

/* Asymmetric sub-blocks (Q2_K, Q4_K, Q5_K): per sub-block a scale (range / top) and a
 * min (<= 0), rounded to nsc-level grids under super-scales d and dmin; then each value
 * to u in [0, top] against the decoded scale and min. */
static void q_k_asym(const float *x, int sub, int top, int sc_top, uint16_t *dh, uint16_t *dminh,
                     uint8_t *ls, uint8_t *lm, uint8_t *u) {
  const int nsub = MEMRA_QK_K / sub;
  float scale[16], negmin[16], smax = 0.0f, mmax = 0.0f;
  for (int s = 0; s < nsub; ++s) {
    float mn, mx;
    min_max(x + s * sub, sub, &mn, &mx);
    mn = fminf(mn, 0.0f);
    scale[s] = (fmaxf(mx, mn) - mn) / (float)top;
    negmin[s] = -mn;
    smax = fmaxf(smax, scale[s]);
    mmax = fmaxf(mmax, negmin[s]);
  }
  float d = put_half(dh, smax / (float)sc_top), dmin = put_half(dminh, mmax / (float)sc_top);
  float id = inv_or_zero(d), idmin = inv_or_zero(dmin);
  for (int s = 0; s < nsub; ++s) {
    ls[s] = (uint8_t)nearest(scale[s] * id, 0, sc_top);
    lm[s] = (uint8_t)nearest(negmin[s] * idmin, 0, sc_top);
    float dl = d * (float)ls[s], ml = dmin * (float)lm[s], idl = inv_or_zero(dl);
    for (int l = 0; l < sub; ++l)
      u[s * sub + l] = (uint8_t)nearest((x[s * sub + l] + ml) * idl, 0, top);
  }
}

/* Symmetric sub-blocks of 16 (Q3_K, Q6_K): sub-block scale = max / -half, signed scales
 * on [-sc_half, sc_half) under d = extreme scale / -sc_half; u = q + half. */
static void q_k_sym16(const float *x, int half, int sc_half, uint16_t *dh, int *ls, uint8_t *u) {
  float scale[16], ext = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scale[s] = signed_absmax(x + 16 * s, 16) / (float)-half;
    if (fabsf(scale[s]) > fabsf(ext)) ext = scale[s];
  }
  float d = put_half(dh, ext / (float)-sc_half), id = inv_or_zero(d);
  for (int s = 0; s < 16; ++s) {
    ls[s] = nearest(scale[s] * id, -sc_half, sc_half - 1);
    float idl = inv_or_zero(d * (float)ls[s]);
    for (int l = 0; l < 16; ++l)
      u[16 * s + l] = (uint8_t)(nearest(x[16 * s + l] * idl, -half, half - 1) + half);
  }
}

/* Element e of a Q2_K/Q3_K block lives in qs[32 * (e / 128) + e % 32], bit pair
 * (e % 128) / 32 (see dequant_block.h). */
static void pack_2bit(const uint8_t *u, uint8_t qs[64]) {
  memset(qs, 0, 64);
  for (int e = 0; e < MEMRA_QK_K; ++e)
    qs[32 * (e / 128) + e % 32] |= (uint8_t)((u[e] & 3) << (2 * ((e % 128) / 32)));
}

static void q_q2_K(const float *x, memra_block_q2_K *b) {
  uint8_t ls[16], lm[16], u[MEMRA_QK_K];
  q_k_asym(x, 16, 3, 15, &b->d, &b->dmin, ls, lm, u);
  for (int s = 0; s < 16; ++s)
    b->scales[s] = (uint8_t)(ls[s] | lm[s] << 4);
  pack_2bit(u, b->qs);
}

static void q_q3_K(const float *x, memra_block_q3_K *b) {
  int ls[16];
  uint8_t u[MEMRA_QK_K];
  q_k_sym16(x, 4, 32, &b->d, ls, u);
  memset(b->scales, 0, sizeof b->scales);
  for (int s = 0; s < 16; ++s) { /* 6-bit ls + 32: nibble in bytes 0-7, top pair in 8-11 */
    int v = ls[s] + 32;
    b->scales[s % 8] |= (uint8_t)((v & 0xF) << (s < 8 ? 0 : 4));
    b->scales[8 + s % 4] |= (uint8_t)((v >> 4) << (2 * (s / 4)));
  }
  pack_2bit(u, b->qs);
  memset(b->hmask, 0, sizeof b->hmask);
  for (int e = 0; e < MEMRA_QK_K; ++e)
    b->hmask[e % 32] |= (uint8_t)((u[e] >> 2) << (e / 32));
}

/* Inverse of memra_k4_scale. */
static void pack_k4_scales(const uint8_t ls[8], const uint8_t lm[8], uint8_t p[12]) {
  for (int j = 0; j < 4; ++j) {
    p[j] = (uint8_t)(ls[j] | (ls[j + 4] >> 4) << 6);
    p[j + 4] = (uint8_t)(lm[j] | (lm[j + 4] >> 4) << 6);
    p[j + 8] = (uint8_t)((ls[j + 4] & 0xF) | (lm[j + 4] & 0xF) << 4);
  }
}

/* Element 64c + l is the low nibble of qs[32c + l], 64c + 32 + l the high one. */
static void pack_k4_nibbles(const uint8_t *u, uint8_t qs[128]) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = (uint8_t)((u[64 * c + l] & 0xF) | (u[64 * c + 32 + l] & 0xF) << 4);
}

static void q_q4_K(const float *x, memra_block_q4_K *b) {
  uint8_t ls[8], lm[8], u[MEMRA_QK_K];
  q_k_asym(x, 32, 15, 63, &b->d, &b->dmin, ls, lm, u);
  pack_k4_scales(ls, lm, b->scales);
  pack_k4_nibbles(u, b->qs);
}

static void q_q5_K(const float *x, memra_block_q5_K *b) {
  uint8_t ls[8], lm[8], u[MEMRA_QK_K];
  q_k_asym(x, 32, 31, 63, &b->d, &b->dmin, ls, lm, u);
  pack_k4_scales(ls, lm, b->scales);
  pack_k4_nibbles(u, b->qs);
  memset(b->qh, 0, sizeof b->qh); /* 5th bit of element e: bit e / 32 of qh[e % 32] */
  for (int e = 0; e < MEMRA_QK_K; ++e)
    b->qh[e % 32] |= (uint8_t)((u[e] >> 4) << (e / 32));
}

static void q_q6_K(const float *x, memra_block_q6_K *b) {
  int ls[16];
  uint8_t u[MEMRA_QK_K];
  q_k_sym16(x, 32, 128, &b->d, ls, u);
  for (int s = 0; s < 16; ++s)
    b->scales[s] = (int8_t)ls[s];
  memset(b->ql, 0, sizeof b->ql);
  memset(b->qh, 0, sizeof b->qh);
  /* Element 128h + 32k + l: low nibble in ql[64h + 32(k & 1) + l] (high nibble if k >= 2),
   * top bits in qh[32h + l] bit pair k. */
  for (int e = 0; e < MEMRA_QK_K; ++e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    b->ql[64 * h + 32 * (k & 1) + l] |= (uint8_t)((u[e] & 0xF) << (k >= 2 ? 4 : 0));
    b->qh[32 * h + l] |= (uint8_t)((u[e] >> 4) << (2 * k));
  }
}

/* ---- rows ----------------------------------------------------------------------------- */

#define MEMRA_Q_ROW(btype, fn, qk)                                                                 \
  do {                                                                                             \
    btype *b = (btype *)dst;                                                                       \
    for (int64_t i = 0; i < n / (qk); ++i)                                                         \
      fn(src + i * (qk), b + i);                                                                   \
  } while (0)

bool memra_quantize_row(int32_t type, const float *src, void *dst, int64_t n) {
  memra_type_traits tr = memra_type_info(type);
  if (!memra_quant_supported(type) || n < 0 || n % tr.blck != 0) return false;
  switch (type) {
  case MEMRA_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
  case MEMRA_TYPE_F16:
    for (int64_t i = 0; i < n; ++i)
      ((uint16_t *)dst)[i] = memra_f32_to_half(src[i]);
    break;
  case MEMRA_TYPE_BF16:
    for (int64_t i = 0; i < n; ++i)
      ((uint16_t *)dst)[i] = memra_f32_to_bf16_bits(src[i]);
    break;
  case MEMRA_TYPE_Q4_0: MEMRA_Q_ROW(memra_block_q4_0, q_q4_0, MEMRA_QK4_0); break;
  case MEMRA_TYPE_Q4_1: MEMRA_Q_ROW(memra_block_q4_1, q_q4_1, MEMRA_QK4_1); break;
  case MEMRA_TYPE_Q5_0: MEMRA_Q_ROW(memra_block_q5_0, q_q5_0, MEMRA_QK5_0); break;
  case MEMRA_TYPE_Q5_1: MEMRA_Q_ROW(memra_block_q5_1, q_q5_1, MEMRA_QK5_1); break;
  case MEMRA_TYPE_Q8_0: MEMRA_Q_ROW(memra_block_q8_0, q_q8_0, MEMRA_QK8_0); break;
  case MEMRA_TYPE_Q2_K: MEMRA_Q_ROW(memra_block_q2_K, q_q2_K, MEMRA_QK_K); break;
  case MEMRA_TYPE_Q3_K: MEMRA_Q_ROW(memra_block_q3_K, q_q3_K, MEMRA_QK_K); break;
  case MEMRA_TYPE_Q4_K: MEMRA_Q_ROW(memra_block_q4_K, q_q4_K, MEMRA_QK_K); break;
  case MEMRA_TYPE_Q5_K: MEMRA_Q_ROW(memra_block_q5_K, q_q5_K, MEMRA_QK_K); break;
  case MEMRA_TYPE_Q6_K: MEMRA_Q_ROW(memra_block_q6_K, q_q6_K, MEMRA_QK_K); break;
  default: return false;
  }
  return true;
}
