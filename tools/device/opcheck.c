/* opcheck.c — every op of a plugin under test against a reference plugin (the CPU
 * oracle), on the same seeded random inputs with odd sizes.
 *
 *   opcheck [--quick] [--seed N] REF.so TEST.so
 *
 * For each case both plugins get identical input bytes; outputs are poisoned (0xFF: NaN
 * floats, -1 ints) before the op and followed by guard bytes checked after it. Outputs
 * are compared for NaN/Inf agreement first, then by relative L2 error against a per-op
 * tolerance. The plugin under test is also checked against itself: a row computed alone
 * must be bit-identical to the same row inside a batch (batch invariance), and a
 * captured graph must replay bit-identically to eager execution. A table is printed
 * last; the exit status is non-zero when any case fails. --quick: a short subset (for
 * compute-sanitizer). */
#define _POSIX_C_SOURCE 200112L /* setenv: MEMRA_ATT_FUSE for the attention A/B check */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/quant/fp8.h"
#include "plugins/quant/quant.h"
#include "tools/device/check_report.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

static memra_plug P[2]; /* 0: reference, 1: under test */
static int g_quick;

/* ck_t by pointer, from a ring: enough for the arguments of one call. */
static memra_tensor *TP(const ck_buf *d, int i, int32_t type, int64_t ne0, int64_t ne1) {
  static memra_tensor ring[64];
  static int next;
  memra_tensor *t = &ring[next++ % 64];
  *t = ck_t(d, i, type, ne0, ne1);
  return t;
}

/* TP with a row stride of nb1 bytes. */
static memra_tensor *TPS(const ck_buf *d, int i, int32_t type, int64_t ne0, int64_t ne1,
                         uint64_t nb1) {
  memra_tensor *t = TP(d, i, type, ne0, ne1);
  t->nb1 = nb1;
  return t;
}

/* --- results ------------------------------------------------------------------------ */

/* Compares n floats of d (reference vs test): NaN/Inf agreement, then relative L2. */
static void compare_f32(const char *op, const char *what, const ck_buf *d, int64_t n, double tol) {
  float *a = ck_get(d, 0), *b = ck_get(d, 1);
  int64_t bad = -1;
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    int fa = isfinite(a[i]), fb = isfinite(b[i]);
    if (fa != fb || (!fa && !(isnan(a[i]) && isnan(b[i])) && a[i] != b[i])) {
      if (bad < 0) bad = i;
      continue;
    }
    if (!fa) continue;
    double e = (double)a[i] - (double)b[i];
    num += e * e;
    den += (double)a[i] * a[i];
  }
  double err = den > 0 ? sqrt(num / den) : sqrt(num);
  char note[96] = "";
  int pass = err <= tol && bad < 0 && ck_guard_ok(d);
  if (bad >= 0)
    snprintf(note, sizeof note, "nonfinite mismatch at %" PRId64 " (%g vs %g)", bad, a[bad],
             b[bad]);
  else if (!ck_guard_ok(d))
    snprintf(note, sizeof note, "guard bytes overwritten");
  ck_record(op, what, err, tol, pass, note);
  free(a);
  free(b);
}
/* ABI 1.6 16-bit outputs: each plugin's 16-bit y (d16, n elements of type t) is checked
 * (a) against the reference's, widened, by relative L2 within tol, and (b) bitwise against
 * the same plugin's F32 y (d32) of the same inputs rounded on the host by the memra_op16
 * rule: what a gemm of that plugin would have made of the F32 y. */
static uint16_t host_op16(float v, int32_t t) {
  if (t == MEMRA_TYPE_BF16) return memra_f32_to_bf16(v);
  if (fabsf(v) > 65504.0f) v = copysignf(65504.0f, v);
  return memra_f32_to_fp16(v);
}
static float host_widen(uint16_t h, int32_t t) {
  return t == MEMRA_TYPE_BF16 ? memra_bf16_to_f32(h) : memra_fp16_to_f32(h);
}
static void compare_op16(const char *op, const char *what, const ck_buf *d16, const ck_buf *d32,
                         int64_t n, int32_t t, double tol) {
  uint16_t *h[2] = {ck_get(d16, 0), ck_get(d16, 1)};
  float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
  double num = 0, den = 0;
  int64_t bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    a[i] = host_widen(h[0][i], t);
    b[i] = host_widen(h[1][i], t);
    if (!isfinite(a[i]) || !isfinite(b[i])) {
      if (bad < 0 && !(isnan(a[i]) && isnan(b[i]))) bad = i;
      continue;
    }
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)a[i] * a[i];
  }
  const double err = den > 0 ? sqrt(num / den) : sqrt(num);
  char w2[160];
  snprintf(w2, sizeof w2, "%s %s y vs ref", what, memra_type_info(t).name);
  ck_record(op, w2, err, tol, err <= tol && bad < 0 && ck_guard_ok(d16),
            bad >= 0 ? "nonfinite" : "");
  for (int i = 0; i < 2; ++i) {
    float *y = ck_get(d32, i);
    int64_t diff = 0, first = -1;
    for (int64_t e = 0; e < n; ++e)
      if (host_op16(y[e], t) != h[i][e] && !(isnan(y[e]) && isnan(host_widen(h[i][e], t))))
        diff += 1, first = first < 0 ? e : first;
    char note[96] = "";
    if (diff) snprintf(note, sizeof note, "%" PRId64 " differ, first at %" PRId64, diff, first);
    snprintf(w2, sizeof w2, "  %s: %s y == its F32 y rounded", i ? "test" : "ref",
             memra_type_info(t).name);
    ck_record(op, w2, (double)diff, 0, diff == 0, note);
    free(y);
  }
  free(h[0]);
  free(h[1]);
  free(a);
  free(b);
}

/* Runs status st of both plugins: both OK, or a shared refusal (a skip). 1 = compare. */
static int both_ok(const char *op, const char *what, memra_status s0, memra_status s1) {
  if (s0 == MEMRA_OK && s1 == MEMRA_OK) return 1;
  char note[96];
  if (s0 == MEMRA_E_UNSUPPORTED && s1 == MEMRA_E_UNSUPPORTED) {
    ck_record(op, what, 0, 0, 1, "unsupported by both (skipped)");
    return 0;
  }
  snprintf(note, sizeof note, "status ref %d test %d", (int)s0, (int)s1);
  fprintf(stderr, "  ref: %s\n  test: %s\n", P[0].vt->last_error(P[0].be),
          P[1].vt->last_error(P[1].be));
  ck_record(op, what, 1, 0, 0, note);
  return 0;
}
#define BOTH(op, what, call)                                                                       \
  do {                                                                                             \
    memra_status s_[2];                                                                            \
    for (int i = 0; i < 2; ++i) {                                                                  \
      s_[i] = (call);                                                                              \
      if (s_[i] == MEMRA_OK) s_[i] = P[i].vt->synchronize(P[i].be);                                \
    }                                                                                              \
    ok_ = both_ok(op, what, s_[0], s_[1]);                                                         \
  } while (0)

/* --- the cases ----------------------------------------------------------------------- */

static const int32_t k_types[] = {MEMRA_TYPE_F32,  MEMRA_TYPE_F16,  MEMRA_TYPE_BF16,
                                  MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_0, MEMRA_TYPE_Q4_1,
                                  MEMRA_TYPE_Q5_0, MEMRA_TYPE_Q5_1, MEMRA_TYPE_Q4_K,
                                  MEMRA_TYPE_Q5_K, MEMRA_TYPE_Q6_K};
enum { N_TYPES = sizeof k_types / sizeof k_types[0] };

static int64_t odd_k(int32_t type, int wide) {
  int blck = memra_type_info(type).blck;
  if (blck == 1) return wide ? 4097 : 4096; /* 4096: vector path; 4097: tail */
  return blck == 32 ? 32 * (wide ? 129 : 37) : 256 * (wide ? 17 : 5);
}

static void check_get_rows(void) {
  for (int t = 0; t < N_TYPES; ++t) {
    const int32_t type = k_types[t];
    const int64_t ne0 = odd_k(type, 1), rows = 61, n = 7;
    uint64_t nb;
    void *tab = ck_rand_rows(type, ne0, rows, &nb);
    int32_t ids[7];
    for (int i = 0; i < n; ++i)
      ids[i] = (int32_t)(ck_rnd() % rows);
    ids[3] = (int32_t)rows - 1;
    ck_buf dt = ck_new(nb, tab), di = ck_new(sizeof ids, ids),
           dy = ck_new((uint64_t)n * ne0 * 4, NULL);
    char what[96];
    snprintf(what, sizeof what, "%s [%" PRId64 " of %" PRId64 " x %" PRId64 "]",
             memra_type_info(type).name, n, rows, ne0);
    int ok_;
    BOTH("get_rows", what,
         (P[i].vt->get_rows(P[i].be, TP(&dy, i, 0, ne0, n), TP(&dt, i, type, ne0, rows),
                            TP(&di, i, MEMRA_TYPE_I32, n, 1))));
    if (ok_) compare_f32("get_rows", what, &dy, n * ne0, 1e-7);
    ck_free(&dt);
    ck_free(&di);
    ck_free(&dy);
    free(tab);
  }
}

static void check_matmul(void) {
  static const int64_t ms[] = {1, 3, 8, 13, 7}; /* 7: the 4-row tile over two row groups */
  for (int t = 0; t < N_TYPES; ++t) {
    const int32_t type = k_types[t];
    /* wide 2: N >= 4096 takes the decode GEMV's many-rows-per-block path (M = 1); wide 3
     * (K-quants): N >= 8192, K 4096: whole steps of every warp, 8 rows per block; wide 4
     * (K-quants): K 2048, N 1031: the shortest rows whose Q6_K bytes (8 x 210) are 16-byte
     * aligned, so Q6_K reaches the tensor-core path too (MEMRA_GEMV_Q6=tc; K 1280's 1050-byte
     * rows take v5), Q4_K's v11 a stage of 8 of its 16 super-blocks; wide 5 (K-quants): K 14336,
     * N 263: the down projection's rows, 16-byte aligned in Q6_K too (56 x 210 bytes), v11's
     * stages of 8 super-blocks (Q6_K there under MEMRA_GEMV_Q6=tcall) */
    for (int wide = 0; wide < 6; ++wide) {
      if (g_quick && wide) continue;
      if (wide >= 3 && memra_type_info(type).blck != 256) continue;
      const int64_t K = wide == 3   ? 4096
                        : wide == 4 ? 2048
                        : wide == 5 ? 14336
                                    : odd_k(type, wide == 1);
      const int64_t N = wide == 1   ? 131
                        : wide == 2 ? 4099
                        : wide == 3 ? 8203
                        : wide == 4 ? 1031
                        : wide == 5 ? 263
                                    : 257;
      uint64_t nb;
      void *w = ck_rand_rows(type, K, N, &nb);
      float *bias = ck_frand_vec(N, -1, 1);
      ck_buf dw = ck_new(nb, w), db = ck_new((uint64_t)N * 4, bias);
      for (int mi = 0; mi < (int)(sizeof ms / sizeof ms[0]); ++mi) {
        const int64_t M = ms[mi];
        if (g_quick && M > 3) continue;
        float *x = ck_frand_vec(M * K, -1, 1);
        ck_buf dx = ck_new((uint64_t)M * K * 4, x), dy = ck_new((uint64_t)M * N * 4, NULL);
        const int use_bias = (mi & 1);
        char what[96];
        snprintf(what, sizeof what, "%s M=%" PRId64 " N=%" PRId64 " K=%" PRId64 "%s",
                 memra_type_info(type).name, M, N, K, use_bias ? " +bias" : "");
        int ok_;
        BOTH("matmul", what,
             P[i].vt->matmul(P[i].be, TP(&dy, i, 0, N, M), TP(&dx, i, 0, K, M),
                             TP(&dw, i, type, K, N), use_bias ? TP(&db, i, 0, N, 1) : NULL));
        if (ok_) compare_f32("matmul", what, &dy, M * N, 1e-5);
        if (ok_ && M > 1) { /* batch invariance on the plugin under test */
          float *yb = ck_get(&dy, 1);
          int64_t r = M / 2;
          ck_buf d1 = ck_new((uint64_t)N * 4, NULL);
          memra_tensor xr = ck_t(&dx, 1, 0, K, 1);
          xr.offset = (uint64_t)r * K * 4;
          memra_plug_must(&P[1],
                          P[1].vt->matmul(P[1].be, TP(&d1, 1, 0, N, 1), &xr, TP(&dw, 1, type, K, N),
                                          use_bias ? TP(&db, 1, 0, N, 1) : NULL),
                          "matmul");
          float *y1 = ck_get(&d1, 1);
          int same = memcmp(y1, yb + r * N, (size_t)N * 4) == 0;
          char w2[96];
          snprintf(w2, sizeof w2, "%s row %" PRId64 " alone == in batch of %" PRId64,
                   memra_type_info(type).name, r, M);
          ck_record("invariance", w2, !same, 0, same, same ? "bit-identical" : "differs");
          free(y1);
          free(yb);
          ck_free(&d1);
        }
        ck_free(&dx);
        ck_free(&dy);
        free(x);
      }
      ck_free(&dw);
      ck_free(&db);
      free(w);
      free(bias);
    }
  }
}

/* x's 32-element blocks scaled by 2^e (xmag 1: e cycling over 0, -60, -118, 8, -20 by block;
 * 2: every block 2^-118): the GPU's IDP2A sums split a block's x by the power of two of its
 * largest |x| (matmul_q8.cuh), and below 2^-114 that power is a subnormal. */
static void q8_scale_x(float *x, int64_t M, int64_t K, int xmag) {
  static const int cyc[5] = {0, -60, -118, 8, -20};
  for (int64_t i = 0; xmag && i < M * K; ++i)
    x[i] = ldexpf(x[i], xmag == 2 ? -118 : cyc[((i % K) / 32) % 5]);
}

/* One Q8_0 matmul case of check_matmul_q8: rows nb1 bytes apart (0: packed), M rows of x
 * (magnitudes by xmag, q8_scale_x); against the oracle, and row M / 2 alone bit-identical to the
 * batch (M > 1). */
static void matmul_q8_case_x(int64_t N, int64_t K, int64_t M, uint64_t nb1, int use_bias,
                             int xmag) {
  const int32_t type = MEMRA_TYPE_Q8_0;
  uint64_t nb;
  uint8_t *w = ck_rand_rows(type, K, N, &nb);
  const uint64_t rb = nb / (uint64_t)N, ld = nb1 ? nb1 : rb;
  uint8_t *wp = malloc(ld * (uint64_t)N);
  for (uint64_t i = 0; i < ld * (uint64_t)N; ++i)
    wp[i] = (uint8_t)(ck_rnd() >> 56); /* padding bytes: random, never read as weights */
  for (int64_t n = 0; n < N; ++n)
    memcpy(wp + ld * (uint64_t)n, w + rb * (uint64_t)n, rb);
  float *bias = ck_frand_vec(N, -1, 1), *x = ck_frand_vec(M * K, -1, 1);
  q8_scale_x(x, M, K, xmag);
  if (xmag == 2)
    for (int64_t n = 0; n < N; ++n)
      bias[n] = ldexpf(bias[n], -118); /* the sums' own scale */
  ck_buf dw = ck_new(ld * (uint64_t)N, wp), db = ck_new((uint64_t)N * 4, bias);
  ck_buf dx = ck_new((uint64_t)M * K * 4, x), dy = ck_new((uint64_t)M * N * 4, NULL);
  char what[96];
  snprintf(what, sizeof what, "Q8_0 M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " ld %" PRIu64 "%s%s",
           M, N, K, ld, use_bias ? " +bias" : "",
           xmag == 1   ? " x 2^-118..2^8"
           : xmag == 2 ? " x 2^-118"
                       : "");
  int ok_;
  BOTH("matmul", what,
       P[i].vt->matmul(P[i].be, TP(&dy, i, 0, N, M), TP(&dx, i, 0, K, M),
                       TPS(&dw, i, type, K, N, ld), use_bias ? TP(&db, i, 0, N, 1) : NULL));
  if (ok_) compare_f32("matmul", what, &dy, M * N, 1e-5);
  if (ok_ && M > 1) {
    float *yb = ck_get(&dy, 1);
    const int64_t r = M / 2;
    ck_buf d1 = ck_new((uint64_t)N * 4, NULL);
    memra_tensor xr = ck_t(&dx, 1, 0, K, 1);
    xr.offset = (uint64_t)r * K * 4;
    memra_plug_must(&P[1],
                    P[1].vt->matmul(P[1].be, TP(&d1, 1, 0, N, 1), &xr, TPS(&dw, 1, type, K, N, ld),
                                    use_bias ? TP(&db, 1, 0, N, 1) : NULL),
                    "matmul");
    float *y1 = ck_get(&d1, 1);
    const int same = memcmp(y1, yb + r * N, (size_t)N * 4) == 0;
    char w2[96];
    snprintf(w2, sizeof w2,
             "Q8_0 N=%" PRId64 " K=%" PRId64 " row %" PRId64 " alone == batch of %" PRId64, N, K, r,
             M);
    ck_record("invariance", w2, !same, 0, same, same ? "bit-identical" : "differs");
    free(y1);
    free(yb);
    ck_free(&d1);
  }
  ck_free(&dw);
  ck_free(&db);
  ck_free(&dx);
  ck_free(&dy);
  free(w);
  free(wp);
  free(bias);
  free(x);
}

static void matmul_q8_case(int64_t N, int64_t K, int64_t M, uint64_t nb1, int use_bias) {
  matmul_q8_case_x(N, K, M, nb1, use_bias, 0);
}

/* Q8_0 decode GEMV (v8 / v8b on the GPU plugins: 16-byte-aligned rows) at odd shapes: K of 40 and
 * 136 blocks (a step of 32 blocks plus a partial one), N 1, 7, 257, 4099 (R = 2 and R = 8
 * blocks, rows past N), every M of 1..8; K of 37 blocks for N = 1 (a lone row needs no
 * aligned stride: a partial last 16-byte chunk); padded row strides of 16 (v8) and 2 bytes
 * past the row (2-byte aligned: the v3 fallback). */
static void check_matmul_q8(void) {
  static const int64_t ks[] = {1280, 4352}, ns[] = {1, 7, 257, 4099};
  for (int ki = 0; ki < 2; ++ki)
    for (int ni = 0; ni < 4; ++ni)
      for (int64_t M = 1; M <= 8; ++M) {
        if (g_quick && (M > 3 || ni == 3)) continue;
        matmul_q8_case(ns[ni], ks[ki], M, 0, (int)(M & 1));
      }
  for (int64_t M = 1; M <= 8; M += g_quick ? 7 : 1)
    matmul_q8_case(1, 32 * 37, M, 0, 1);
  for (int64_t M = 1; M <= 3; M += 2) {
    matmul_q8_case(257, 1280, M, 40 * 34 + 16, 1);
    matmul_q8_case(257, 1280, M, 40 * 34 + 2, 0);
  }
  /* Batched decode at Llama's gate/up shape (v8b: two groups of 4 rows; row 4 alone: the
   * ring kernel, one step per warp and weight block). K of 453 blocks (15 steps, the last of
   * 5 blocks: 3-4 steps per warp through the ring at M = 1), R = 2 and R = 8, alone and in
   * batches of 5 (a group with 3 rows past the batch). */
  matmul_q8_case(14336, 4096, 8, 0, 0);
  for (int64_t M = 1; M <= 5; M += 4) {
    matmul_q8_case(257, 32 * 453, M, 0, 1);
    if (!g_quick) matmul_q8_case(4099, 32 * 453, M, 0, 0);
  }
  /* GEMV v13 (one row, K % 256 == 0, K >= 4096; batches on v8b): K of 456 blocks (4 stages a
   * row, the last of 2 steps and 8 blocks), rows past N, a padded row stride of 16 bytes more,
   * each alone against the oracle and inside a batch of 5 (bitwise). */
  for (int64_t M = 1; M <= 5; M += 4) {
    matmul_q8_case(4099, 32 * 456, M, 0, (int)(M & 1));
    matmul_q8_case(257, 4352, M, 136 * 34 + 16, 1);
  }
  /* x's magnitudes far apart across blocks, and every block below 2^-114 (the split's
   * subnormal power of two): v13 at K 4096 (x split once) and 14336 (per tile), v8b batches */
  for (int xmag = 1; xmag <= 2; ++xmag)
    for (int64_t M = 1; M <= 5; M += 4) {
      matmul_q8_case_x(257, 4096, M, 0, 1, xmag);
      if (!g_quick) matmul_q8_case_x(263, 14336, M, 0, 0, xmag);
    }
}

/* matmul_n (ABI 1.3) on plugin i: y[j] = x . w[j]^T (+ bias[j], absent for j == 1). */
static memra_status call_matmul_n(int i, const ck_buf *dy, const ck_buf *dx, const ck_buf *dw,
                                  const ck_buf *db, int32_t type, const int64_t *ns, int64_t K,
                                  int64_t M, int use_bias) {
  if (!P[i].vt->matmul_n) return MEMRA_E_UNSUPPORTED;
  memra_tensor ys[3], ws[3], bs[3];
  for (int j = 0; j < 3; ++j) {
    ys[j] = ck_t(&dy[j], i, 0, ns[j], M);
    ws[j] = ck_t(&dw[j], i, type, K, ns[j]);
    bs[j] = j == 1 ? ck_none() : ck_t(&db[j], i, 0, ns[j], 1);
  }
  memra_tensor xt = ck_t(dx, i, 0, K, M);
  return P[i].vt->matmul_n(P[i].be, 3, ys, &xt, ws, use_bias ? bs : NULL);
}

/* The fused q, k, v matmul: against the oracle, and bit-identical to matmul on the plugin
 * under test (the slot's contract); Q4_0 and Q8_0 with 2-byte-aligned rows take the unfused
 * fallback (v3). */
static void check_matmul_n(void) {
  /* K 0: odd_k; Q8_0 also at K = 1280 (40 blocks: 16-byte-aligned rows, GEMV v8, fused),
   * K = 4352 (136 blocks: v13 at M = 1, 2 stages a row, its jobs picked per tile) and K = 4096
   * (v13 with a warp's x copied once for all its tiles); F32 on v6 (jobs, fused) */
  static const struct {
    int32_t type;
    int64_t k;
  } types[] = {{MEMRA_TYPE_F16, 0},     {MEMRA_TYPE_BF16, 0},    {MEMRA_TYPE_Q8_0, 0},
               {MEMRA_TYPE_Q8_0, 1280}, {MEMRA_TYPE_Q8_0, 4352}, {MEMRA_TYPE_Q8_0, 4096},
               {MEMRA_TYPE_Q4_K, 0},    {MEMRA_TYPE_Q6_K, 0},    {MEMRA_TYPE_Q4_0, 0},
               {MEMRA_TYPE_F32, 0}};
  for (int t = 0; t < (int)(sizeof types / sizeof types[0]); ++t) {
    const int32_t type = types[t].type;
    for (int big = 0; big < 2; ++big) {
      if (g_quick && big) continue;
      const int64_t K = types[t].k ? types[t].k : odd_k(type, 0);
      const int64_t ns[3] = {big ? 4099 : 257, big ? 1031 : 67, big ? 1031 : 67};
      ck_buf dw[3], db[3];
      void *w[3];
      float *bias[3];
      for (int j = 0; j < 3; ++j) {
        uint64_t nb;
        w[j] = ck_rand_rows(type, K, ns[j], &nb);
        bias[j] = ck_frand_vec(ns[j], -1, 1);
        dw[j] = ck_new(nb, w[j]);
        db[j] = ck_new((uint64_t)ns[j] * 4, bias[j]);
      }
      for (int64_t M = 1; M <= 3; M += 2) {
        const int use_bias = M == 3;
        float *x = ck_frand_vec(M * K, -1, 1);
        ck_buf dx = ck_new((uint64_t)M * K * 4, x), dy[3], dr[3];
        for (int j = 0; j < 3; ++j) {
          dy[j] = ck_new((uint64_t)M * ns[j] * 4, NULL);
          dr[j] = ck_new((uint64_t)M * ns[j] * 4, NULL);
        }
        char what[96];
        snprintf(what, sizeof what,
                 "%s M=%" PRId64 " N=%" PRId64 "+%" PRId64 "+%" PRId64 " K=%" PRId64 "%s",
                 memra_type_info(type).name, M, ns[0], ns[1], ns[2], K, use_bias ? " +bias" : "");
        int ok_;
        BOTH("matmul_n", what, call_matmul_n(i, dy, &dx, dw, db, type, ns, K, M, use_bias));
        for (int j = 0; ok_ && j < 3; ++j) {
          compare_f32("matmul_n",
                      j == 0   ? "  y[0]"
                      : j == 1 ? "  y[1]"
                               : "  y[2]",
                      &dy[j], M * ns[j], 1e-5);
          memra_tensor xt = ck_t(&dx, 1, 0, K, M), bt = ck_t(&db[j], 1, 0, ns[j], 1);
          memra_plug_must(&P[1],
                          P[1].vt->matmul(P[1].be, TP(&dr[j], 1, 0, ns[j], M), &xt,
                                          TP(&dw[j], 1, type, K, ns[j]),
                                          use_bias && j != 1 ? &bt : NULL),
                          "matmul");
          float *a = ck_get(&dy[j], 1), *b = ck_get(&dr[j], 1);
          const int same = memcmp(a, b, (size_t)(M * ns[j]) * 4) == 0;
          char w2[96];
          snprintf(w2, sizeof w2, "%s M=%" PRId64 " y[%d] fused == matmul",
                   memra_type_info(type).name, M, j);
          ck_record("invariance", w2, !same, 0, same, same ? "bit-identical" : "differs");
          free(a);
          free(b);
        }
        for (int j = 0; j < 3; ++j) {
          ck_free(&dy[j]);
          ck_free(&dr[j]);
        }
        ck_free(&dx);
        free(x);
      }
      for (int j = 0; j < 3; ++j) {
        ck_free(&dw[j]);
        ck_free(&db[j]);
        free(w[j]);
        free(bias[j]);
      }
    }
  }
}

/* ffn_glu (ABI 1.12) on plugin i: gate and up of x into h and u, glu into h, down into y. */
static memra_status call_ffn_glu(int i, const ck_buf *dy, const ck_buf *dh, const ck_buf *du,
                                 const ck_buf *dx, uint64_t x_off, const ck_buf *dw, int32_t type,
                                 int64_t D, int64_t F, int64_t M, int32_t act) {
  if (!P[i].vt->ffn_glu) return MEMRA_E_UNSUPPORTED;
  memra_tensor x = ck_t(dx, i, 0, D, M);
  x.offset = x_off;
  return P[i].vt->ffn_glu(P[i].be, TP(dy, i, 0, D, M), TP(dh, i, 0, F, M), TP(du, i, 0, F, M), &x,
                          TP(&dw[0], i, type, D, F), TP(&dw[1], i, type, D, F),
                          TP(&dw[2], i, type, F, D), act);
}

static void record_bitwise(const char *what, const ck_buf *got, const ck_buf *want, uint64_t n);

/* The decode FFN in one call: y and h against the oracle; on the plugin under test bit-identical
 * to its composition (matmul_n, glu in place, matmul), again on a second call (the GPU's fused
 * launch resets its grid-wide count), and for M = 3 (the composition) row 1 alone (fused) equals
 * its row of the batch. Q8_0 at Llama-8B's shape and at K of 136 and 144 blocks (2 stages a row),
 * both activations: the GPU's one launch; F 4128 (down's K not whole 256s), Q4_K and F16: the
 * composition. */
static void check_ffn_glu(void) {
  static const struct {
    int32_t type;
    int64_t D, F, M;
    int32_t act;
  } cs[] = {{MEMRA_TYPE_Q8_0, 4096, 14336, 1, MEMRA_ACT_SILU},
            {MEMRA_TYPE_Q8_0, 4352, 4608, 1, MEMRA_ACT_GELU_TANH},
            {MEMRA_TYPE_Q8_0, 4096, 4128, 1, MEMRA_ACT_SILU},
            {MEMRA_TYPE_Q8_0, 4352, 4608, 3, MEMRA_ACT_SILU},
            {MEMRA_TYPE_Q8_0, 8192, 4096, 1, MEMRA_ACT_SILU},
            {MEMRA_TYPE_Q4_K, 2048, 5632, 1, MEMRA_ACT_SILU},
            {MEMRA_TYPE_F16, 1536, 4128, 3, MEMRA_ACT_GELU_TANH}};
  const int n_cases = g_quick ? 4 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int32_t type = cs[c].type, act = cs[c].act;
    const int64_t D = cs[c].D, F = cs[c].F, M = cs[c].M;
    ck_buf dw[3];
    void *w[3];
    for (int j = 0; j < 3; ++j) {
      uint64_t nb;
      w[j] = ck_rand_rows(type, j < 2 ? D : F, j < 2 ? F : D, &nb);
      dw[j] = ck_new(nb, w[j]);
    }
    float *x = ck_frand_vec(M * D, -1, 1);
    ck_buf dx = ck_new((uint64_t)M * D * 4, x), dy = ck_new((uint64_t)M * D * 4, NULL),
           dh = ck_new((uint64_t)M * F * 4, NULL), du = ck_new((uint64_t)M * F * 4, NULL),
           ry = ck_new((uint64_t)M * D * 4, NULL), rh = ck_new((uint64_t)M * F * 4, NULL);
    char what[96];
    snprintf(what, sizeof what, "%s M=%" PRId64 " D=%" PRId64 " F=%" PRId64 " %s",
             memra_type_info(type).name, M, D, F, act == MEMRA_ACT_SILU ? "SILU" : "GELU");
    int ok_;
    BOTH("ffn_glu", what, call_ffn_glu(i, &dy, &dh, &du, &dx, 0, dw, type, D, F, M, act));
    if (ok_) {
      compare_f32("ffn_glu", "  y", &dy, M * D, 1e-5);
      compare_f32("ffn_glu", "  h", &dh, M * F, 1e-5);
      /* the composition on plugin 1, into rh (u reused) and ry */
      memra_tensor ys[2] = {ck_t(&rh, 1, 0, F, M), ck_t(&du, 1, 0, F, M)};
      memra_tensor ws[2] = {ck_t(&dw[0], 1, type, D, F), ck_t(&dw[1], 1, type, D, F)};
      memra_tensor xt = ck_t(&dx, 1, 0, D, M);
      memra_plug_must(&P[1], P[1].vt->matmul_n(P[1].be, 2, ys, &xt, ws, NULL), "matmul_n");
      memra_plug_must(&P[1], P[1].vt->glu(P[1].be, &ys[0], &ys[0], &ys[1], act), "glu");
      memra_plug_must(
          &P[1],
          P[1].vt->matmul(P[1].be, TP(&ry, 1, 0, D, M), &ys[0], TP(&dw[2], 1, type, F, D), NULL),
          "matmul");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      char w2[160];
      snprintf(w2, sizeof w2, "%s y == matmul_n, glu, matmul", what);
      record_bitwise(w2, &dy, &ry, (uint64_t)(M * D) * 4);
      snprintf(w2, sizeof w2, "%s h == matmul_n, glu", what);
      record_bitwise(w2, &dh, &rh, (uint64_t)(M * F) * 4);
      /* again: a second launch from the count the first left */
      memra_plug_must(&P[1], call_ffn_glu(1, &ry, &rh, &du, &dx, 0, dw, type, D, F, M, act),
                      "ffn_glu");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      snprintf(w2, sizeof w2, "%s second call", what);
      record_bitwise(w2, &ry, &dy, (uint64_t)(M * D) * 4);
      if (M > 1) { /* row 1 alone */
        ck_buf d1 = ck_new((uint64_t)D * 4, NULL), h1 = ck_new((uint64_t)F * 4, NULL);
        memra_plug_must(
            &P[1], call_ffn_glu(1, &d1, &h1, &du, &dx, (uint64_t)D * 4, dw, type, D, F, 1, act),
            "ffn_glu");
        memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
        float *a = ck_get(&d1, 1), *b = ck_get(&dy, 1);
        const int same = memcmp(a, b + D, (size_t)D * 4) == 0;
        snprintf(w2, sizeof w2, "%s row 1 alone == batch", what);
        ck_record("invariance", w2, !same, 0, same, same ? "bit-identical" : "differs");
        free(a);
        free(b);
        ck_free(&d1);
        ck_free(&h1);
      }
    }
    ck_buf *bufs[] = {&dx, &dy, &dh, &du, &ry, &rh, &dw[0], &dw[1], &dw[2]};
    for (int j = 0; j < 9; ++j)
      ck_free(bufs[j]);
    for (int j = 0; j < 3; ++j)
      free(w[j]);
    free(x);
  }
}

static void check_rmsnorm(void) {
  struct {
    int64_t rows, ne0;
    int res;
  } cs[] = {{7, 4097, 1},
            {7, 4097, 0},
            {7 * 5, 128, 0},
            {1, 31, 1},
            /* float4 rows: one per thread, 3 per thread, and past the registers kept */
            {3, 4096, 1},
            {5, 4096, 0},
            {2, 8196, 1},
            {1, 20004, 1}};
  for (int c = 0; c < (int)(sizeof cs / sizeof cs[0]); ++c) {
    const int64_t R = cs[c].rows, E = cs[c].ne0;
    float *x = ck_frand_vec(R * E, -2, 2), *res = ck_frand_vec(R * E, -1, 1),
          *w = ck_frand_vec(E, 0.5f, 1.5f);
    ck_buf dx = ck_new((uint64_t)R * E * 4, x), dr = ck_new((uint64_t)R * E * 4, res),
           dw = ck_new((uint64_t)E * 4, w), dy = ck_new((uint64_t)R * E * 4, NULL);
    char what[96];
    snprintf(what, sizeof what, "[%" PRId64 " x %" PRId64 "]%s", R, E, cs[c].res ? " +res" : "");
    int ok_;
    BOTH("rmsnorm", what,
         P[i].vt->rmsnorm(P[i].be, TP(&dy, i, 0, E, R), TP(&dx, i, 0, E, R),
                          cs[c].res ? TP(&dr, i, 0, E, R) : NULL, TP(&dw, i, 0, E, 1), 1e-5f));
    if (ok_) {
      compare_f32("rmsnorm", what, &dy, R * E, 1e-5);
      if (cs[c].res) compare_f32("rmsnorm", "  x written back (x + res)", &dx, R * E, 0);
    }
    /* ABI 1.6: y as a 16-bit gemm operand (fresh x: the call above added res into x) */
    for (int t16 = 0; t16 < 2 && !cs[c].res; ++t16) {
      const int32_t t = t16 ? MEMRA_TYPE_BF16 : MEMRA_TYPE_F16;
      ck_buf dh = ck_new((uint64_t)R * E * 2, NULL);
      ck_poison(&dh);
      BOTH("rmsnorm", what,
           P[i].vt->rmsnorm(P[i].be, TP(&dh, i, t, E, R), TP(&dx, i, 0, E, R), NULL,
                            TP(&dw, i, 0, E, 1), 1e-5f));
      if (ok_) compare_op16("rmsnorm", what, &dh, &dy, R * E, t, t16 ? 8e-3 : 1e-3);
      ck_free(&dh);
    }
    ck_free(&dx);
    ck_free(&dr);
    ck_free(&dw);
    ck_free(&dy);
    free(x);
    free(res);
    free(w);
  }
}

static void check_rope(void) {
  struct {
    int mode, n_head, hd, n_rot, ff;
  } cs[] = {{MEMRA_ROPE_NORM, 5, 64, 64, 0},
            {MEMRA_ROPE_NEOX, 5, 64, 64, 0},
            {MEMRA_ROPE_NORM, 3, 128, 128, 1},
            {MEMRA_ROPE_NEOX, 7, 80, 32, 1}};
  for (int c = 0; c < 4; ++c) {
    const int64_t R = 9, E = (int64_t)cs[c].n_head * cs[c].hd;
    float *x = ck_frand_vec(R * E, -1, 1), *ff = ck_frand_vec(cs[c].n_rot / 2, 1, 8);
    int32_t pos[9];
    for (int i = 0; i < R; ++i)
      pos[i] = (int32_t)(ck_rnd() % 5000);
    pos[0] = 0;
    ck_buf dx = ck_new((uint64_t)R * E * 4, x), dp = ck_new(sizeof pos, pos),
           df = ck_new((uint64_t)cs[c].n_rot / 2 * 4, ff);
    char what[96];
    snprintf(what, sizeof what, "%s heads %d dim %d rot %d%s", cs[c].mode ? "NEOX" : "NORM",
             cs[c].n_head, cs[c].hd, cs[c].n_rot, cs[c].ff ? " +freq_factors" : "");
    int ok_;
    BOTH("rope", what, ({
           memra_rope_params p = {cs[c].n_head,
                                  cs[c].hd,
                                  cs[c].n_rot,
                                  cs[c].mode,
                                  500000.f,
                                  1.f,
                                  cs[c].ff ? ck_t(&df, i, 0, cs[c].n_rot / 2, 1) : ck_none()};
           P[i].vt->rope(P[i].be, TP(&dx, i, 0, E, R), TP(&dp, i, MEMRA_TYPE_I32, R, 1), &p);
         }));
    if (ok_) compare_f32("rope", what, &dx, R * E, 1e-6);
    ck_free(&dx);
    ck_free(&dp);
    ck_free(&df);
    free(x);
    free(ff);
  }
}

/* A paged-KV fixture: n_seqs sequences, pages shuffled over the cache. */
typedef struct kvfix {
  int n_seqs, block_size, max_blocks, n_pages;
  int32_t *bt;
  ck_buf dbt, dpos, dseq;
} kvfix;

static kvfix kv_fixture(int n_seqs, int block_size, int max_blocks, const int32_t *pos,
                        const int32_t *seq, int n_rows) {
  kvfix f = {n_seqs, block_size, max_blocks, n_seqs * max_blocks,
             NULL,   {{0}, 0},   {{0}, 0},   {{0}, 0}};
  f.bt = ck_xmalloc((size_t)f.n_pages * 4);
  for (int i = 0; i < f.n_pages; ++i)
    f.bt[i] = i;
  for (int i = f.n_pages - 1; i > 0; --i) {
    int j = (int)(ck_rnd() % (uint64_t)(i + 1));
    int32_t t = f.bt[i];
    f.bt[i] = f.bt[j];
    f.bt[j] = t;
  }
  f.dbt = ck_new((uint64_t)f.n_pages * 4, f.bt);
  f.dpos = ck_new((uint64_t)n_rows * 4, pos);
  f.dseq = ck_new((uint64_t)n_rows * 4, seq);
  return f;
}
static memra_batch kv_batch(const kvfix *f, int i, int n_rows, int kv_bucket) {
  memra_batch b;
  memset(&b, 0, sizeof b);
  b.n_rows = n_rows;
  b.n_seqs = f->n_seqs;
  b.block_size = f->block_size;
  b.max_blocks = f->max_blocks;
  b.kv_bucket = kv_bucket;
  b.pos = ck_t(&f->dpos, i, MEMRA_TYPE_I32, n_rows, 1);
  b.seq = ck_t(&f->dseq, i, MEMRA_TYPE_I32, n_rows, 1);
  b.block_table = ck_t(&f->dbt, i, MEMRA_TYPE_I32, f->max_blocks, f->n_seqs);
  return b;
}
static void kv_free(kvfix *f) {
  ck_free(&f->dbt);
  ck_free(&f->dpos);
  ck_free(&f->dseq);
  free(f->bt);
}

static void check_kv_store(void) {
  for (int ct = 0; ct < 3; ++ct) { /* F16, F32, F8_E4M3 (ABI minor 2) */
    const int32_t ctype = ct == 2 ? MEMRA_TYPE_F8_E4M3 : ct ? MEMRA_TYPE_F32 : MEMRA_TYPE_F16;
    const int n_rows = 11, width = 3 * 64;
    int32_t pos[11], seq[11];
    for (int r = 0; r < n_rows; ++r) { /* distinct (seq, pos): no two rows share a slot */
      seq[r] = r % 3;
      pos[r] = r / 3 * 37 + (int32_t)(ck_rnd() % 30);
    }
    kvfix f = kv_fixture(3, 16, 10, pos, seq, n_rows);
    const int64_t slots = (int64_t)f.n_pages * f.block_size;
    uint64_t cb;
    void *kc = ck_rand_rows(ctype, width, slots, &cb), *vc = ck_rand_rows(ctype, width, slots, &cb);
    float *k = ck_frand_vec((int64_t)n_rows * width, -1, 1),
          *v = ck_frand_vec((int64_t)n_rows * width, -1, 1);
    ck_buf dkc = ck_new(cb, kc), dvc = ck_new(cb, vc), dk = ck_new((uint64_t)n_rows * width * 4, k),
           dv = ck_new((uint64_t)n_rows * width * 4, v);
    char what[96];
    snprintf(what, sizeof what, "%s caches, %d rows of %d, 3 seqs, pages shuffled",
             memra_type_info(ctype).name, n_rows, width);
    int ok_;
    BOTH("kv_store", what, ({
           memra_batch b = kv_batch(&f, i, n_rows, 400);
           P[i].vt->kv_store(P[i].be, TP(&dkc, i, ctype, width, slots),
                             TP(&dvc, i, ctype, width, slots), TP(&dk, i, 0, width, n_rows),
                             TP(&dv, i, 0, width, n_rows), &b);
         }));
    if (ok_) { /* whole caches: the rows written and every row not written */
      for (int c = 0; c < 2; ++c) {
        const ck_buf *d = c ? &dvc : &dkc;
        uint8_t *a = ck_get(d, 0), *b = ck_get(d, 1);
        int same = memcmp(a, b, cb) == 0 && ck_guard_ok(d);
        ck_record("kv_store", c ? "  v cache bytes identical" : "  k cache bytes identical", !same,
                  0, same, NULL);
        free(a);
        free(b);
      }
    }
    ck_free(&dkc);
    ck_free(&dvc);
    ck_free(&dk);
    ck_free(&dv);
    free(kc);
    free(vc);
    free(k);
    free(v);
    kv_free(&f);
  }
}

/* An invariance row: got's bytes on the plugin under test equal want's (and got's guards
 * hold). */
static void record_bitwise(const char *what, const ck_buf *got, const ck_buf *want, uint64_t n) {
  uint8_t *a = ck_get(got, 1), *b = ck_get(want, 1);
  const int same = memcmp(a, b, n) == 0 && ck_guard_ok(got);
  ck_record("invariance", what, !same, 0, same, same ? "bit-identical" : "differs");
  free(a);
  free(b);
}

/* rmsnorm_matmul_n / rmsnorm_ffn_glu (ABI 1.14): one row x (+= res) normed into xn with the
 * projections of xn (q, k, v: N K, K / 4, K / 4; the dense FFN of width F, y into res as the core
 * calls it). Against the oracle; on the plugin under test x, xn and every output bit-identical to
 * its composition (rmsnorm, then matmul_n / ffn_glu), twice in a row (the GPU's launch resets the
 * ticket count its last block takes). Q8_0 and Q4_K at K 4096: the GPU's v13 / v11 launch with
 * the norm (with and without res); F32 at K 2048 and 1536: v6 with the norm in its head under
 * MEMRA_V6_NORM=1 (a MoE router's call), the composition otherwise; Q4_K and Q8_0 at 2048 (Qwen3-
 * MoE's q / k) and F16: the composition. --quick: the cases marked q. */
static void check_norm_proj(void) {
  static const struct {
    int32_t type;
    int64_t K, F;
    int res, q;
  } cs[] = {{MEMRA_TYPE_Q8_0, 4096, 14336, 1, 1}, {MEMRA_TYPE_Q4_K, 4096, 14336, 1, 1},
            {MEMRA_TYPE_Q8_0, 4096, 4608, 0, 1},  {MEMRA_TYPE_F32, 2048, 1408, 1, 1},
            {MEMRA_TYPE_F32, 2048, 1408, 0, 1},   {MEMRA_TYPE_Q4_K, 2048, 5632, 1, 1},
            {MEMRA_TYPE_F32, 1536, 896, 1, 0},    {MEMRA_TYPE_Q4_K, 4096, 4608, 0, 0},
            {MEMRA_TYPE_Q8_0, 2048, 5632, 1, 0},  {MEMRA_TYPE_F16, 4096, 4608, 1, 0}};
  for (int c = 0; c < (int)(sizeof cs / sizeof cs[0]); ++c) {
    if (g_quick && !cs[c].q) continue;
    const int32_t type = cs[c].type;
    const int64_t K = cs[c].K, F = cs[c].F, ns[3] = {K, K / 4, K / 4};
    const int has_res = cs[c].res;
    ck_buf dw[3], dg[3];
    void *w[3], *g[3];
    for (int j = 0; j < 3; ++j) {
      uint64_t nb;
      w[j] = ck_rand_rows(type, K, ns[j], &nb);
      dw[j] = ck_new(nb, w[j]);
      g[j] = ck_rand_rows(type, j < 2 ? K : F, j < 2 ? F : K, &nb);
      dg[j] = ck_new(nb, g[j]);
    }
    float *x = ck_frand_vec(K, -2, 2), *r = ck_frand_vec(K, -1, 1), *wn = ck_frand_vec(K, 0.5, 1.5);
    ck_buf dx = ck_new((uint64_t)K * 4, x), dx2 = ck_new((uint64_t)K * 4, x),
           dr = ck_new((uint64_t)K * 4, r), dr2 = ck_new((uint64_t)K * 4, r),
           dwn = ck_new((uint64_t)K * 4, wn), dxn = ck_new((uint64_t)K * 4, NULL),
           dxn2 = ck_new((uint64_t)K * 4, NULL), dh = ck_new((uint64_t)F * 4, NULL),
           dh2 = ck_new((uint64_t)F * 4, NULL), du = ck_new((uint64_t)F * 4, NULL), dy[3], dy2[3];
    for (int j = 0; j < 3; ++j) {
      dy[j] = ck_new((uint64_t)ns[j] * 4, NULL);
      dy2[j] = ck_new((uint64_t)ns[j] * 4, NULL);
    }
    char what[96], w2[160];
    snprintf(what, sizeof what, "%s K=%" PRId64 " F=%" PRId64 "%s", memra_type_info(type).name, K,
             F, has_res ? " +res" : "");
    memra_tensor none = {0};
    int ok_;
    for (int round = 0; round < 2; ++round) { /* the second from the count the first left */
      BOTH("rmsnorm_matmul_n", what,
           P[i].vt->rmsnorm_matmul_n
               ? P[i].vt->rmsnorm_matmul_n(
                     P[i].be, TP(&dxn, i, 0, K, 1), TP(&dx, i, 0, K, 1),
                     has_res ? TP(&dr, i, 0, K, 1) : &none, TP(&dwn, i, 0, K, 1), 1e-5f, 3,
                     (memra_tensor[3]){ck_t(&dy[0], i, 0, ns[0], 1), ck_t(&dy[1], i, 0, ns[1], 1),
                                       ck_t(&dy[2], i, 0, ns[2], 1)},
                     (memra_tensor[3]){ck_t(&dw[0], i, type, K, ns[0]),
                                       ck_t(&dw[1], i, type, K, ns[1]),
                                       ck_t(&dw[2], i, type, K, ns[2])},
                     NULL)
               : MEMRA_E_UNSUPPORTED);
      if (!ok_) break;
      if (round == 0) {
        compare_f32("rmsnorm_matmul_n", "  x", &dx, K, 1e-6);
        compare_f32("rmsnorm_matmul_n", "  xn", &dxn, K, 1e-5);
        for (int j = 0; j < 3; ++j)
          compare_f32("rmsnorm_matmul_n",
                      j == 0   ? "  y[0]"
                      : j == 1 ? "  y[1]"
                               : "  y[2]",
                      &dy[j], ns[j], 1e-5);
      }
      memra_plug_must(&P[1],
                      P[1].vt->rmsnorm(P[1].be, TP(&dxn2, 1, 0, K, 1), TP(&dx2, 1, 0, K, 1),
                                       has_res ? TP(&dr2, 1, 0, K, 1) : &none, TP(&dwn, 1, 0, K, 1),
                                       1e-5f),
                      "rmsnorm");
      memra_plug_must(&P[1],
                      P[1].vt->matmul_n(P[1].be, 3,
                                        (memra_tensor[3]){ck_t(&dy2[0], 1, 0, ns[0], 1),
                                                          ck_t(&dy2[1], 1, 0, ns[1], 1),
                                                          ck_t(&dy2[2], 1, 0, ns[2], 1)},
                                        TP(&dxn2, 1, 0, K, 1),
                                        (memra_tensor[3]){ck_t(&dw[0], 1, type, K, ns[0]),
                                                          ck_t(&dw[1], 1, type, K, ns[1]),
                                                          ck_t(&dw[2], 1, type, K, ns[2])},
                                        NULL),
                      "matmul_n");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      snprintf(w2, sizeof w2, "%s call %d: x == rmsnorm's", what, round + 1);
      record_bitwise(w2, &dx, &dx2, (uint64_t)K * 4);
      snprintf(w2, sizeof w2, "%s call %d: xn == rmsnorm's", what, round + 1);
      record_bitwise(w2, &dxn, &dxn2, (uint64_t)K * 4);
      for (int j = 0; j < 3; ++j) {
        snprintf(w2, sizeof w2, "%s call %d: y[%d] == rmsnorm, matmul_n", what, round + 1, j);
        record_bitwise(w2, &dy[j], &dy2[j], (uint64_t)ns[j] * 4);
      }
    }
    /* the FFN: y into res (read by the norm first), h into dh */
    for (int round = 0; ok_ && round < 2; ++round) {
      BOTH("rmsnorm_ffn_glu", what,
           P[i].vt->rmsnorm_ffn_glu
               ? P[i].vt->rmsnorm_ffn_glu(
                     P[i].be, TP(&dxn, i, 0, K, 1), TP(&dx, i, 0, K, 1),
                     has_res ? TP(&dr, i, 0, K, 1) : &none, TP(&dwn, i, 0, K, 1), 1e-5f,
                     TP(has_res ? &dr : &dy[0], i, 0, K, 1), TP(&dh, i, 0, F, 1),
                     TP(&du, i, 0, F, 1), TP(&dg[0], i, type, K, F), TP(&dg[1], i, type, K, F),
                     TP(&dg[2], i, type, F, K), MEMRA_ACT_SILU)
               : MEMRA_E_UNSUPPORTED);
      if (!ok_) break;
      if (round == 0) {
        compare_f32("rmsnorm_ffn_glu", "  x", &dx, K, 1e-6);
        compare_f32("rmsnorm_ffn_glu", "  h", &dh, F, 1e-5);
        compare_f32("rmsnorm_ffn_glu", "  y", has_res ? &dr : &dy[0], K, 1e-5);
      }
      memra_plug_must(&P[1],
                      P[1].vt->rmsnorm(P[1].be, TP(&dxn2, 1, 0, K, 1), TP(&dx2, 1, 0, K, 1),
                                       has_res ? TP(&dr2, 1, 0, K, 1) : &none, TP(&dwn, 1, 0, K, 1),
                                       1e-5f),
                      "rmsnorm");
      memra_plug_must(
          &P[1],
          P[1].vt->ffn_glu(P[1].be, TP(has_res ? &dr2 : &dy2[0], 1, 0, K, 1), TP(&dh2, 1, 0, F, 1),
                           TP(&du, 1, 0, F, 1), TP(&dxn2, 1, 0, K, 1), TP(&dg[0], 1, type, K, F),
                           TP(&dg[1], 1, type, K, F), TP(&dg[2], 1, type, F, K), MEMRA_ACT_SILU),
          "ffn_glu");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      snprintf(w2, sizeof w2, "%s ffn call %d: x == rmsnorm's", what, round + 1);
      record_bitwise(w2, &dx, &dx2, (uint64_t)K * 4);
      snprintf(w2, sizeof w2, "%s ffn call %d: xn == rmsnorm's", what, round + 1);
      record_bitwise(w2, &dxn, &dxn2, (uint64_t)K * 4);
      snprintf(w2, sizeof w2, "%s ffn call %d: h == rmsnorm, ffn_glu", what, round + 1);
      record_bitwise(w2, &dh, &dh2, (uint64_t)F * 4);
      snprintf(w2, sizeof w2, "%s ffn call %d: y == rmsnorm, ffn_glu", what, round + 1);
      record_bitwise(w2, has_res ? &dr : &dy[0], has_res ? &dr2 : &dy2[0], (uint64_t)K * 4);
    }
    ck_buf *bufs[] = {&dx, &dx2, &dr, &dr2, &dwn, &dxn, &dxn2, &dh, &dh2, &du};
    for (int j = 0; j < 10; ++j)
      ck_free(bufs[j]);
    for (int j = 0; j < 3; ++j) {
      ck_free(&dw[j]);
      ck_free(&dg[j]);
      ck_free(&dy[j]);
      ck_free(&dy2[j]);
      free(w[j]);
      free(g[j]);
    }
    free(x);
    free(r);
    free(wn);
  }
}

/* matmul_rmsnorm (ABI 1.15): y = a w^T (one row, N 4096), then x += y normed into xn, as the core
 * calls it for attention's o and the FFN's down. Against the oracle; on the plugin under test y,
 * x and xn bit-identical to its composition (matmul, then rmsnorm), twice in a row (the GPU's
 * last block resets the ticket count). Q8_0 and Q4_K at K 4096 and 14336: the GPU's v13 / v11
 * launch with the norm at its end; Q6_K and F16: the composition. */
static void check_matmul_rmsnorm(void) {
  static const struct {
    int32_t type;
    int64_t K;
  } cs[] = {{MEMRA_TYPE_Q8_0, 4096},  {MEMRA_TYPE_Q4_K, 4096},  {MEMRA_TYPE_Q8_0, 14336},
            {MEMRA_TYPE_Q4_K, 14336}, {MEMRA_TYPE_Q6_K, 14336}, {MEMRA_TYPE_F16, 4096}};
  const int64_t N = 4096;
  const int n_cases = g_quick ? 3 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int32_t type = cs[c].type;
    const int64_t K = cs[c].K;
    uint64_t nb;
    void *w = ck_rand_rows(type, K, N, &nb);
    float *a = ck_frand_vec(K, -1, 1), *x = ck_frand_vec(N, -2, 2), *wn = ck_frand_vec(N, 0.5, 1.5);
    ck_buf dw = ck_new(nb, w), da = ck_new((uint64_t)K * 4, a), dx = ck_new((uint64_t)N * 4, x),
           dx2 = ck_new((uint64_t)N * 4, x), dwn = ck_new((uint64_t)N * 4, wn),
           dy = ck_new((uint64_t)N * 4, NULL), dy2 = ck_new((uint64_t)N * 4, NULL),
           dxn = ck_new((uint64_t)N * 4, NULL), dxn2 = ck_new((uint64_t)N * 4, NULL);
    char what[96], w2[160];
    snprintf(what, sizeof what, "%s K=%" PRId64 " N=%" PRId64, memra_type_info(type).name, K, N);
    int ok_;
    for (int round = 0; round < 2; ++round) {
      BOTH("matmul_rmsnorm", what,
           P[i].vt->matmul_rmsnorm
               ? P[i].vt->matmul_rmsnorm(P[i].be, TP(&dy, i, 0, N, 1), TP(&da, i, 0, K, 1),
                                         TP(&dw, i, type, K, N), TP(&dxn, i, 0, N, 1),
                                         TP(&dx, i, 0, N, 1), TP(&dwn, i, 0, N, 1), 1e-5f)
               : MEMRA_E_UNSUPPORTED);
      if (!ok_) break;
      if (round == 0) {
        compare_f32("matmul_rmsnorm", "  y", &dy, N, 1e-5);
        compare_f32("matmul_rmsnorm", "  x", &dx, N, 1e-5);
        compare_f32("matmul_rmsnorm", "  xn", &dxn, N, 1e-5);
      }
      memra_tensor none = {0};
      memra_plug_must(&P[1],
                      P[1].vt->matmul(P[1].be, TP(&dy2, 1, 0, N, 1), TP(&da, 1, 0, K, 1),
                                      TP(&dw, 1, type, K, N), &none),
                      "matmul");
      memra_plug_must(&P[1],
                      P[1].vt->rmsnorm(P[1].be, TP(&dxn2, 1, 0, N, 1), TP(&dx2, 1, 0, N, 1),
                                       TP(&dy2, 1, 0, N, 1), TP(&dwn, 1, 0, N, 1), 1e-5f),
                      "rmsnorm");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      snprintf(w2, sizeof w2, "%s call %d: y == matmul's", what, round + 1);
      record_bitwise(w2, &dy, &dy2, (uint64_t)N * 4);
      snprintf(w2, sizeof w2, "%s call %d: x == rmsnorm's", what, round + 1);
      record_bitwise(w2, &dx, &dx2, (uint64_t)N * 4);
      snprintf(w2, sizeof w2, "%s call %d: xn == rmsnorm's", what, round + 1);
      record_bitwise(w2, &dxn, &dxn2, (uint64_t)N * 4);
    }
    ck_buf *bufs[] = {&dw, &da, &dx, &dx2, &dwn, &dy, &dy2, &dxn, &dxn2};
    for (int j = 0; j < 9; ++j)
      ck_free(bufs[j]);
    free(w);
    free(a);
    free(x);
    free(wn);
  }
}

/* matmul_acc (ABI 1.17): y += a w^T into a random y, as the core calls it for attention's o and
 * the FFN's down. Against the oracle; on the plugin under test y bit-identical to its
 * composition (matmul into t, then add), twice in a row. One row of Q4_K (K 4096: v11; K 14336:
 * v11 by windows), Q6_K (K 4096: the integer form; K 14336: windows), Q8_0 (v13) and F16 (v12) on
 * the GPU's ring kernels that add at their store; three rows of Q4_K and one of Q5_K on kernels
 * that write t for an add; odd N. */
static void check_matmul_acc(void) {
  static const struct {
    int32_t type;
    int64_t K, N, M;
  } cs[] = {{MEMRA_TYPE_Q4_K, 4096, 4096, 1}, {MEMRA_TYPE_Q4_K, 14336, 4096, 1},
            {MEMRA_TYPE_Q8_0, 4096, 1031, 1}, {MEMRA_TYPE_Q6_K, 14336, 4096, 1},
            {MEMRA_TYPE_Q6_K, 4096, 1031, 1}, {MEMRA_TYPE_F16, 4096, 4096, 1},
            {MEMRA_TYPE_Q4_K, 4096, 1031, 3}, {MEMRA_TYPE_Q5_K, 4096, 1031, 1}};
  const int n_cases = g_quick ? 3 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int32_t type = cs[c].type;
    const int64_t K = cs[c].K, N = cs[c].N, M = cs[c].M;
    uint64_t nb;
    void *w = ck_rand_rows(type, K, N, &nb);
    float *a = ck_frand_vec(K * M, -1, 1), *y0 = ck_frand_vec(N * M, -2, 2);
    const uint64_t yb = (uint64_t)N * M * 4;
    ck_buf dw = ck_new(nb, w), da = ck_new((uint64_t)K * M * 4, a), dt = ck_new(yb, NULL),
           dt2 = ck_new(yb, NULL);
    char what[96], w2[160];
    snprintf(what, sizeof what, "%s K=%" PRId64 " N=%" PRId64 " M=%" PRId64,
             memra_type_info(type).name, K, N, M);
    int ok_;
    for (int round = 0; round < 2; ++round) {
      ck_buf dy = ck_new(yb, y0), dy2 = ck_new(yb, y0); /* y afresh each call */
      BOTH("matmul_acc", what,
           P[i].vt->matmul_acc
               ? P[i].vt->matmul_acc(P[i].be, TP(&dy, i, 0, N, M), TP(&dt, i, 0, N, M),
                                     TP(&da, i, 0, K, M), TP(&dw, i, type, K, N))
               : MEMRA_E_UNSUPPORTED);
      if (!ok_) {
        ck_free(&dy);
        ck_free(&dy2);
        break;
      }
      if (round == 0) compare_f32("matmul_acc", "  y", &dy, N * M, 1e-5);
      memra_tensor none = {0};
      memra_plug_must(&P[1],
                      P[1].vt->matmul(P[1].be, TP(&dt2, 1, 0, N, M), TP(&da, 1, 0, K, M),
                                      TP(&dw, 1, type, K, N), &none),
                      "matmul");
      memra_plug_must(
          &P[1],
          P[1].vt->add(P[1].be, TP(&dy2, 1, 0, N, M), TP(&dy2, 1, 0, N, M), TP(&dt2, 1, 0, N, M)),
          "add");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      snprintf(w2, sizeof w2, "%s call %d: y == matmul, then add", what, round + 1);
      record_bitwise(w2, &dy, &dy2, yb);
      ck_free(&dy);
      ck_free(&dy2);
    }
    ck_buf *bufs[] = {&dw, &da, &dt, &dt2};
    for (int j = 0; j < 4; ++j)
      ck_free(bufs[j]);
    free(w);
    free(a);
    free(y0);
  }
}

/* rope_kv_store (ABI 1.4) on plugin i: q, k rotated at the batch's positions, k and v
 * stored in the caches. */
static memra_status call_rope_kv(int i, const ck_buf *d, const kvfix *f, int rows, int qw, int kw,
                                 int32_t ctype, int64_t slots, const memra_rope_params *p) {
  if (!P[i].vt->rope_kv_store) return MEMRA_E_UNSUPPORTED;
  memra_batch b = kv_batch(f, i, rows, 512);
  return P[i].vt->rope_kv_store(P[i].be, TP(&d[0], i, 0, qw, rows), TP(&d[1], i, 0, kw, rows),
                                TP(&d[2], i, 0, kw, rows), TP(&d[3], i, ctype, kw, slots),
                                TP(&d[4], i, ctype, kw, slots), &b, p);
}

/* The fused rope + kv_store: against the oracle (q, k), and on the plugin under test bit
 * for bit the three calls it replaces (rope q, rope k, kv_store): q, k and both caches
 * whole (rows written and rows not). */
static void check_rope_kv(void) {
  struct {
    int mode, n_head, n_kv, hd, n_rot, ff;
    int32_t ctype;
    int rows;
  } cs[] = {
      {MEMRA_ROPE_NORM, 32, 8, 128, 128, 1, MEMRA_TYPE_F16, 1}, /* Llama-3.1-8B decode */
      {MEMRA_ROPE_NEOX, 16, 2, 128, 64, 0, MEMRA_TYPE_F16, 5},  /* partial rope */
      {MEMRA_ROPE_NEOX, 7, 1, 80, 80, 0, MEMRA_TYPE_F32, 3},
      {MEMRA_ROPE_NORM, 9, 3, 64, 32, 1, MEMRA_TYPE_F8_E4M3, 4},
  };
  const int n_cases = g_quick ? 2 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int R = cs[c].rows, qw = cs[c].n_head * cs[c].hd, kw = cs[c].n_kv * cs[c].hd;
    int32_t pos[8], seq[8];
    for (int r = 0; r < R; ++r) { /* distinct slots: rows of one sequence 17 apart */
      seq[r] = r % 2;
      pos[r] = r / 2 * 17 + (int32_t)(ck_rnd() % 15) + (r == 0 ? 100 : 0);
    }
    kvfix f = kv_fixture(2, 16, 10, pos, seq, R);
    const int64_t slots = (int64_t)f.n_pages * f.block_size;
    uint64_t cb;
    void *kc = ck_rand_rows(cs[c].ctype, kw, slots, &cb),
         *vc = ck_rand_rows(cs[c].ctype, kw, slots, &cb);
    float *q = ck_frand_vec((int64_t)R * qw, -1, 1), *k = ck_frand_vec((int64_t)R * kw, -1, 1),
          *v = ck_frand_vec((int64_t)R * kw, -1, 1), *ff = ck_frand_vec(cs[c].n_rot / 2, 1, 8);
    const uint64_t sz[5] = {(uint64_t)R * qw * 4, (uint64_t)R * kw * 4, (uint64_t)R * kw * 4, cb,
                            cb};
    const void *init[5] = {q, k, v, kc, vc};
    ck_buf d[5], e[5]; /* d: the fused call on both plugins; e: the separate calls */
    for (int j = 0; j < 5; ++j) {
      d[j] = ck_new(sz[j], init[j]);
      e[j] = ck_new(sz[j], init[j]);
    }
    ck_buf df = ck_new((uint64_t)cs[c].n_rot / 2 * 4, ff);
    char what[96];
    snprintf(what, sizeof what, "%s h%d/kv%d d%d rot %d%s %s rows %d", cs[c].mode ? "NEOX" : "NORM",
             cs[c].n_head, cs[c].n_kv, cs[c].hd, cs[c].n_rot, cs[c].ff ? " +ff" : "",
             memra_type_info(cs[c].ctype).name, R);
    int ok_;
    BOTH("rope_kv_store", what, ({
           memra_rope_params p = {cs[c].n_head,
                                  cs[c].hd,
                                  cs[c].n_rot,
                                  cs[c].mode,
                                  500000.f,
                                  1.f,
                                  cs[c].ff ? ck_t(&df, i, 0, cs[c].n_rot / 2, 1) : ck_none()};
           call_rope_kv(i, d, &f, R, qw, kw, cs[c].ctype, slots, &p);
         }));
    if (ok_) {
      compare_f32("rope_kv_store", "  q", &d[0], (int64_t)R * qw, 1e-6);
      compare_f32("rope_kv_store", "  k", &d[1], (int64_t)R * kw, 1e-6);
      memra_rope_params p = {cs[c].n_head,
                             cs[c].hd,
                             cs[c].n_rot,
                             cs[c].mode,
                             500000.f,
                             1.f,
                             cs[c].ff ? ck_t(&df, 1, 0, cs[c].n_rot / 2, 1) : ck_none()};
      memra_rope_params pk = p;
      pk.n_head = cs[c].n_kv;
      memra_batch b = kv_batch(&f, 1, R, 512);
      memra_tensor tk = ck_t(&e[1], 1, 0, kw, R), tv = ck_t(&e[2], 1, 0, kw, R);
      memra_plug_must(&P[1], P[1].vt->rope(P[1].be, TP(&e[0], 1, 0, qw, R), &b.pos, &p), "rope");
      memra_plug_must(&P[1], P[1].vt->rope(P[1].be, &tk, &b.pos, &pk), "rope");
      memra_plug_must(&P[1],
                      P[1].vt->kv_store(P[1].be, TP(&e[3], 1, cs[c].ctype, kw, slots),
                                        TP(&e[4], 1, cs[c].ctype, kw, slots), &tk, &tv, &b),
                      "kv_store");
      static const char *names[5] = {"q", "k", "v", "k cache", "v cache"};
      for (int j = 0; j < 5; ++j) {
        if (j == 2) continue; /* v is an input only */
        char w2[96];
        snprintf(w2, sizeof w2, "rope_kv %s %s: fused == rope, rope, kv_store",
                 memra_type_info(cs[c].ctype).name, names[j]);
        record_bitwise(w2, &d[j], &e[j], sz[j]);
      }
    }
    for (int j = 0; j < 5; ++j) {
      ck_free(&d[j]);
      ck_free(&e[j]);
    }
    ck_free(&df);
    free(kc);
    free(vc);
    free(q);
    free(k);
    free(v);
    free(ff);
    kv_free(&f);
  }
}

/* R <= 8 decode rows of a sequence each in pages of 16: random positions below maxpos, the last
 * at maxpos - 1 (and the first at 0 when first_at_zero); *maxp their largest, *bucket the KV
 * bucket (a power of two from 256) that holds it. rope_kv_attend's and attention_gate's. */
static kvfix decode_rows_fixture(int R, int maxpos, int first_at_zero, int *maxp, int *bucket) {
  int32_t pos[8], seq[8];
  *maxp = 0;
  for (int r = 0; r < R; ++r) {
    seq[r] = r;
    pos[r] = first_at_zero && r == 0 ? 0 : (int32_t)(ck_rnd() % (uint64_t)maxpos);
    if (r == R - 1) pos[r] = maxpos - 1;
    if (pos[r] > *maxp) *maxp = pos[r];
  }
  *bucket = 256;
  while (*bucket < *maxp + 1)
    *bucket *= 2;
  const int bs = 16, mb = (*maxp + 1 + bs - 1) / bs + 1;
  return kv_fixture(R, bs, mb, pos, seq, R);
}

/* attention_gate (ABI 1.11): decode rows, the gate a per-head view of wider rows (Qwen3-Next's
 * [q | gate] heads). Against the oracle, and on the plugin under test bit for bit attention then
 * sigmoid_gate. */
static void check_attention_gate(void) {
  struct {
    int n_head, n_kv, hd;
    int32_t ctype;
    int rows, maxpos;
  } cs[] = {
      {16, 2, 256, MEMRA_TYPE_F16, 1, 190},     /* Qwen3-Next */
      {16, 2, 256, MEMRA_TYPE_F16, 3, 3000},    /* the head split off, long rows */
      {32, 4, 128, MEMRA_TYPE_F8_E4M3, 2, 700}, /* Qwen3-30B-A3B-like */
      {6, 3, 64, MEMRA_TYPE_F32, 5, 300},       /* odd heads */
      {4, 4, 36, MEMRA_TYPE_F16, 3, 100},       /* no 16-byte rows: the two launches */
  };
  const int n_cases = g_quick ? 2 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int R = cs[c].rows, hd = cs[c].hd, qw = cs[c].n_head * hd, kw = cs[c].n_kv * hd;
    int maxp, bucket;
    kvfix f = decode_rows_fixture(R, cs[c].maxpos, 0, &maxp, &bucket);
    const int64_t slots = (int64_t)f.n_pages * 16;
    uint64_t cb;
    void *kc = ck_rand_rows(cs[c].ctype, kw, slots, &cb),
         *vc = ck_rand_rows(cs[c].ctype, kw, slots, &cb);
    float *q = ck_frand_vec((int64_t)R * qw, -1, 1), *g = ck_frand_vec((int64_t)R * 2 * qw, -4, 4);
    ck_buf dq = ck_new((uint64_t)R * qw * 4, q), dk = ck_new(cb, kc), dv = ck_new(cb, vc),
           dg = ck_new((uint64_t)R * 2 * qw * 4, g), d = ck_new((uint64_t)R * qw * 4, NULL),
           e = ck_new((uint64_t)R * qw * 4, NULL);
    const memra_attn_params ap = {cs[c].n_head, cs[c].n_kv, hd, 0, 1.0f / sqrtf((float)hd), 0.f};
    char what[96];
    snprintf(what, sizeof what, "h%d/kv%d d%d %s rows %d pos<=%d", cs[c].n_head, cs[c].n_kv, hd,
             memra_type_info(cs[c].ctype).name, R, maxp);
    /* the gate: every other head-sized piece of rows 2 qw wide, from the second */
    int ok_;
    BOTH("attention_gate", what, ({
           memra_batch b = kv_batch(&f, i, R, bucket);
           b.flags = MEMRA_BATCH_DISTINCT; /* rows of distinct sequences: v5's early loads,
                                            * against attention without them below */
           const memra_tensor tg = ck_view(&dg, i, MEMRA_TYPE_F32, hd, (int64_t)R * cs[c].n_head,
                                           2u * (uint64_t)hd * 4, (uint64_t)hd * 4);
           !P[i].vt->attention_gate
               ? MEMRA_E_UNSUPPORTED
               : P[i].vt->attention_gate(P[i].be, TP(&d, i, 0, qw, R), TP(&dq, i, 0, qw, R),
                                         TP(&dk, i, cs[c].ctype, kw, slots),
                                         TP(&dv, i, cs[c].ctype, kw, slots), &b, &ap, &tg);
         }));
    if (ok_) {
      compare_f32("attention_gate", what, &d, (int64_t)R * qw, 2e-5);
      memra_batch b = kv_batch(&f, 1, R, bucket);
      const memra_tensor tg = ck_view(&dg, 1, MEMRA_TYPE_F32, hd, (int64_t)R * cs[c].n_head,
                                      2u * (uint64_t)hd * 4, (uint64_t)hd * 4);
      memra_tensor oh = ck_t(&e, 1, 0, hd, (int64_t)R * cs[c].n_head);
      memra_plug_must(&P[1],
                      P[1].vt->attention(P[1].be, TP(&e, 1, 0, qw, R), TP(&dq, 1, 0, qw, R),
                                         TP(&dk, 1, cs[c].ctype, kw, slots),
                                         TP(&dv, 1, cs[c].ctype, kw, slots), &b, &ap),
                      "attention");
      memra_plug_must(&P[1], P[1].vt->sigmoid_gate(P[1].be, &oh, &oh, &tg), "sigmoid_gate");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      char w2[112];
      snprintf(w2, sizeof w2, "attention_gate %s d%d rows %d: == attention, sigmoid_gate",
               memra_type_info(cs[c].ctype).name, hd, R);
      record_bitwise(w2, &d, &e, (uint64_t)R * qw * 4);
    }
    ck_free(&dq);
    ck_free(&dk);
    ck_free(&dv);
    ck_free(&dg);
    ck_free(&d);
    ck_free(&e);
    free(kc);
    free(vc);
    free(q);
    free(g);
    kv_free(&f);
  }
}

/* rmsnorm_qk_rope_kv (ABI 1.19, opt-in on the GPU plugins: MEMRA_QK_ROPE=1): against the oracle
 * (q, k), and on the plugin under test bit for bit the two calls it replaces (rmsnorm_qk over the
 * per-head views, then rope_kv_store): q, k and both caches whole. Head dims of one warp (64,
 * 128), two warps' sums (160, 256), odd head counts, partial rope, each cache type, and a head
 * dim off the vector path (30: the two calls inside the slot). */
static void check_qk_rope_kv(void) {
  if (!P[1].vt->rmsnorm_qk_rope_kv) {
    printf("skip rmsnorm_qk_rope_kv: not in %s's vtable (MEMRA_QK_ROPE=1 opts in)\n",
           P[1].vt->name);
    return;
  }
  struct {
    int mode, n_head, n_kv, hd, n_rot;
    int32_t ctype;
    int rows, qin; /* qin: q's norm reads q + gate rows (Qwen3-Next's projection) */
  } cs[] = {
      {MEMRA_ROPE_NEOX, 32, 4, 128, 128, MEMRA_TYPE_F16, 1, 0}, /* Qwen3-30B-A3B decode */
      {MEMRA_ROPE_NEOX, 16, 2, 256, 64, MEMRA_TYPE_F16, 2, 1},  /* Qwen3-Next's, partial rope */
      {MEMRA_ROPE_NORM, 8, 4, 64, 64, MEMRA_TYPE_F8_E4M3, 3, 0},
      {MEMRA_ROPE_NEOX, 7, 1, 80, 80, MEMRA_TYPE_F32, 3, 1},
      {MEMRA_ROPE_NEOX, 5, 5, 160, 96, MEMRA_TYPE_F16, 2, 0},
      {MEMRA_ROPE_NORM, 4, 2, 30, 30, MEMRA_TYPE_F16, 2, 1}, /* the calls it stands for */
  };
  const int n_cases = g_quick ? 2 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int R = cs[c].rows, hd = cs[c].hd, qw = cs[c].n_head * hd, kw = cs[c].n_kv * hd;
    int32_t pos[8], seq[8];
    for (int r = 0; r < R; ++r) {
      seq[r] = r % 2;
      pos[r] = r / 2 * 17 + (int32_t)(ck_rnd() % 15) + (r == 0 ? 100 : 0);
    }
    kvfix f = kv_fixture(2, 16, 10, pos, seq, R);
    const int64_t slots = (int64_t)f.n_pages * f.block_size;
    uint64_t cb;
    void *kc = ck_rand_rows(cs[c].ctype, kw, slots, &cb),
         *vc = ck_rand_rows(cs[c].ctype, kw, slots, &cb);
    float *q = ck_frand_vec((int64_t)R * qw, -3, 3), *k = ck_frand_vec((int64_t)R * kw, -3, 3),
          *v = ck_frand_vec((int64_t)R * kw, -1, 1), *wq = ck_frand_vec(hd, 0.5f, 1.5f),
          *wk = ck_frand_vec(hd, 0.5f, 1.5f);
    const uint64_t sz[5] = {(uint64_t)R * qw * 4, (uint64_t)R * kw * 4, (uint64_t)R * kw * 4, cb,
                            cb};
    const void *init[5] = {q, k, v, kc, vc};
    ck_buf d[5], e[5]; /* d: the slot on both plugins; e: the two calls on the plugin under test */
    for (int j = 0; j < 5; ++j) {
      d[j] = ck_new(sz[j], init[j]);
      e[j] = ck_new(sz[j], init[j]);
    }
    ck_buf dwq = ck_new((uint64_t)hd * 4, wq), dwk = ck_new((uint64_t)hd * 4, wk);
    float *qg = ck_frand_vec((int64_t)R * 2 * qw, -3, 3);
    ck_buf dqg = ck_new((uint64_t)R * 2 * qw * 4, qg); /* per head [q (hd), gate (hd)] */
    const int64_t nqh = (int64_t)R * cs[c].n_head;
    const uint64_t qg_nb1 = 2u * (uint64_t)hd * 4;
    const memra_rope_params p = {cs[c].n_head, hd,  cs[c].n_rot, cs[c].mode,
                                 1000000.f,    1.f, ck_none()};
    char what[96];
    snprintf(what, sizeof what, "%s h%d/kv%d d%d rot %d %s rows %d%s", cs[c].mode ? "NEOX" : "NORM",
             cs[c].n_head, cs[c].n_kv, hd, cs[c].n_rot, memra_type_info(cs[c].ctype).name, R,
             cs[c].qin ? " q_in" : "");
    int ok_;
    BOTH("rmsnorm_qk_rope_kv", what, ({
           memra_batch b = kv_batch(&f, i, R, 512);
           P[i].vt->rmsnorm_qk_rope_kv(
               P[i].be, TP(&d[0], i, 0, qw, R), cs[c].qin ? TPS(&dqg, i, 0, hd, nqh, qg_nb1) : NULL,
               TP(&dwq, i, 0, hd, 1), TP(&d[1], i, 0, kw, R), TP(&dwk, i, 0, hd, 1), 1e-6f,
               TP(&d[2], i, 0, kw, R), TP(&d[3], i, cs[c].ctype, kw, slots),
               TP(&d[4], i, cs[c].ctype, kw, slots), &b, &p);
         }));
    if (ok_) {
      compare_f32("rmsnorm_qk_rope_kv", "  q", &d[0], (int64_t)R * qw, 1e-6);
      compare_f32("rmsnorm_qk_rope_kv", "  k", &d[1], (int64_t)R * kw, 1e-6);
      memra_batch b = kv_batch(&f, 1, R, 512);
      if (cs[c].qin) { /* rmsnorm from the q + gate rows, then k's in place */
        memra_tensor none = ck_none();
        memra_plug_must(&P[1],
                        P[1].vt->rmsnorm(P[1].be, TP(&e[0], 1, 0, hd, nqh),
                                         TPS(&dqg, 1, 0, hd, nqh, qg_nb1), &none,
                                         TP(&dwq, 1, 0, hd, 1), 1e-6f),
                        "rmsnorm");
        memra_plug_must(&P[1],
                        P[1].vt->rmsnorm(P[1].be, TP(&e[1], 1, 0, hd, (int64_t)R * cs[c].n_kv),
                                         TP(&e[1], 1, 0, hd, (int64_t)R * cs[c].n_kv), &none,
                                         TP(&dwk, 1, 0, hd, 1), 1e-6f),
                        "rmsnorm");
      } else {
        memra_plug_must(&P[1],
                        P[1].vt->rmsnorm_qk(P[1].be, TP(&e[0], 1, 0, hd, nqh),
                                            TP(&dwq, 1, 0, hd, 1),
                                            TP(&e[1], 1, 0, hd, (int64_t)R * cs[c].n_kv),
                                            TP(&dwk, 1, 0, hd, 1), 1e-6f),
                        "rmsnorm_qk");
      }
      memra_plug_must(&P[1],
                      P[1].vt->rope_kv_store(P[1].be, TP(&e[0], 1, 0, qw, R),
                                             TP(&e[1], 1, 0, kw, R), TP(&e[2], 1, 0, kw, R),
                                             TP(&e[3], 1, cs[c].ctype, kw, slots),
                                             TP(&e[4], 1, cs[c].ctype, kw, slots), &b, &p),
                      "rope_kv_store");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      static const char *names[5] = {"q", "k", "v", "k cache", "v cache"};
      for (int j = 0; j < 5; ++j) {
        if (j == 2) continue; /* v is an input only */
        char w2[112];
        snprintf(w2, sizeof w2, "qk_rope_kv d%d %s %s: == rmsnorm_qk, rope_kv_store", hd,
                 memra_type_info(cs[c].ctype).name, names[j]);
        record_bitwise(w2, &d[j], &e[j], sz[j]);
      }
    }
    for (int j = 0; j < 5; ++j) {
      ck_free(&d[j]);
      ck_free(&e[j]);
    }
    ck_free(&dwq);
    ck_free(&dwk);
    ck_free(&dqg);
    free(qg);
    free(kc);
    free(vc);
    free(q);
    free(k);
    free(v);
    free(wq);
    free(wk);
    kv_free(&f);
  }
}

/* rope_kv_attend (ABI 1.10): decode rows of distinct sequences, their earlier positions random
 * cache rows. Against the oracle (out), and on the plugin under test bit for bit the two calls
 * it replaces (rope_kv_store, then attention): out and both caches whole. */
static void check_rope_kv_attend(void) {
  struct {
    int mode, n_head, n_kv, hd, n_rot, ff;
    int32_t ctype;
    int rows, maxpos, window;
    float softcap;
  } cs[] = {
      {MEMRA_ROPE_NORM, 32, 8, 128, 128, 1, MEMRA_TYPE_F16, 1, 600, 0, 0.f}, /* Llama-8B */
      {MEMRA_ROPE_NEOX, 16, 2, 256, 64, 0, MEMRA_TYPE_F16, 1, 190, 0, 0.f},  /* Qwen3-Next */
      {MEMRA_ROPE_NORM, 32, 8, 128, 128, 1, MEMRA_TYPE_F16, 8, 4200, 0, 0.f},
      {MEMRA_ROPE_NEOX, 8, 2, 128, 128, 0, MEMRA_TYPE_F8_E4M3, 3, 900, 0, 0.f},
      {MEMRA_ROPE_NEOX, 6, 3, 64, 32, 1, MEMRA_TYPE_F32, 5, 300, 50, 0.f},
      {MEMRA_ROPE_NORM, 7, 7, 80, 80, 0, MEMRA_TYPE_F16, 4, 1500, 0, 10.f},
      {MEMRA_ROPE_NORM, 4, 4, 36, 36, 0, MEMRA_TYPE_F8_E4M3, 3, 300, 0, 0.f}, /* two calls */
  };
  const int n_cases = g_quick ? 2 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int R = cs[c].rows, hd = cs[c].hd, qw = cs[c].n_head * hd, kw = cs[c].n_kv * hd;
    int maxp, bucket; /* the first row at position 0 when R > 2 */
    kvfix f = decode_rows_fixture(R, cs[c].maxpos, R > 2, &maxp, &bucket);
    const int64_t slots = (int64_t)f.n_pages * 16;
    uint64_t cb;
    void *kc = ck_rand_rows(cs[c].ctype, kw, slots, &cb),
         *vc = ck_rand_rows(cs[c].ctype, kw, slots, &cb);
    float *q = ck_frand_vec((int64_t)R * qw, -1, 1), *k = ck_frand_vec((int64_t)R * kw, -1, 1),
          *v = ck_frand_vec((int64_t)R * kw, -1, 1), *ff = ck_frand_vec(cs[c].n_rot / 2, 1, 8);
    const uint64_t sz[6] = {
        (uint64_t)R * qw * 4, (uint64_t)R * kw * 4, (uint64_t)R * kw * 4, cb, cb,
        (uint64_t)R * qw * 4};
    const void *init[6] = {q, k, v, kc, vc, NULL};
    ck_buf d[6], e[6]; /* d: the fused call on both plugins; e: the two calls */
    for (int j = 0; j < 6; ++j) {
      d[j] = ck_new(sz[j], init[j]);
      e[j] = ck_new(sz[j], init[j]);
    }
    ck_buf df = ck_new((uint64_t)cs[c].n_rot / 2 * 4, ff);
    const memra_attn_params ap = {
        cs[c].n_head, cs[c].n_kv, hd, cs[c].window, 1.0f / sqrtf((float)hd), cs[c].softcap};
    char what[112];
    snprintf(what, sizeof what, "%s h%d/kv%d d%d rot %d%s %s rows %d pos<=%d win%d cap%g",
             cs[c].mode ? "NEOX" : "NORM", cs[c].n_head, cs[c].n_kv, hd, cs[c].n_rot,
             cs[c].ff ? " +ff" : "", memra_type_info(cs[c].ctype).name, R, maxp, cs[c].window,
             cs[c].softcap);
    int ok_;
    BOTH("rope_kv_attend", what, ({
           const memra_rope_params p = {cs[c].n_head,
                                        hd,
                                        cs[c].n_rot,
                                        cs[c].mode,
                                        500000.f,
                                        1.f,
                                        cs[c].ff ? ck_t(&df, i, 0, cs[c].n_rot / 2, 1) : ck_none()};
           memra_batch b = kv_batch(&f, i, R, bucket);
           !P[i].vt->rope_kv_attend
               ? MEMRA_E_UNSUPPORTED
               : P[i].vt->rope_kv_attend(P[i].be, TP(&d[5], i, 0, qw, R), TP(&d[0], i, 0, qw, R),
                                         TP(&d[1], i, 0, kw, R), TP(&d[2], i, 0, kw, R),
                                         TP(&d[3], i, cs[c].ctype, kw, slots),
                                         TP(&d[4], i, cs[c].ctype, kw, slots), &b, &p, &ap);
         }));
    if (ok_) {
      compare_f32("rope_kv_attend", what, &d[5], (int64_t)R * qw, 2e-5);
      const memra_rope_params p = {cs[c].n_head,
                                   hd,
                                   cs[c].n_rot,
                                   cs[c].mode,
                                   500000.f,
                                   1.f,
                                   cs[c].ff ? ck_t(&df, 1, 0, cs[c].n_rot / 2, 1) : ck_none()};
      memra_batch b = kv_batch(&f, 1, R, bucket);
      memra_plug_must(&P[1],
                      P[1].vt->rope_kv_store(P[1].be, TP(&e[0], 1, 0, qw, R),
                                             TP(&e[1], 1, 0, kw, R), TP(&e[2], 1, 0, kw, R),
                                             TP(&e[3], 1, cs[c].ctype, kw, slots),
                                             TP(&e[4], 1, cs[c].ctype, kw, slots), &b, &p),
                      "rope_kv_store");
      memra_plug_must(&P[1],
                      P[1].vt->attention(P[1].be, TP(&e[5], 1, 0, qw, R), TP(&e[0], 1, 0, qw, R),
                                         TP(&e[3], 1, cs[c].ctype, kw, slots),
                                         TP(&e[4], 1, cs[c].ctype, kw, slots), &b, &ap),
                      "attention");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      static const int outs[3] = {5, 3, 4};
      static const char *names[3] = {"out", "k cache", "v cache"};
      for (int j = 0; j < 3; ++j) {
        char w2[112];
        snprintf(w2, sizeof w2, "rope_kv_attend %s d%d rows %d %s: == rope_kv_store, attention",
                 memra_type_info(cs[c].ctype).name, hd, R, names[j]);
        record_bitwise(w2, &d[outs[j]], &e[outs[j]], sz[outs[j]]);
      }
    }
    for (int j = 0; j < 6; ++j) {
      ck_free(&d[j]);
      ck_free(&e[j]);
    }
    ck_free(&df);
    free(kc);
    free(vc);
    free(q);
    free(k);
    free(v);
    free(ff);
    kv_free(&f);
  }
}

/* A value of a KV cache row (F32, F16 or F8_E4M3 bytes) as f32. */
static float cache_value(const uint8_t *row, int32_t ctype, int64_t e) {
  if (ctype == MEMRA_TYPE_F8_E4M3) return memra_fp8_e4m3_to_f32(row[e]);
  if (ctype == MEMRA_TYPE_F16) {
    uint16_t h;
    memcpy(&h, row + 2 * e, 2);
    return memra_fp16_to_f32(h);
  }
  float v;
  memcpy(&v, row + 4 * e, 4);
  return v;
}

/* The cache rows R batch rows wrote (row r at its slot in f's pages), decoded to f32 on both
 * plugins and compared as compare_f32 compares (non-finite agreement, then relative L2). */
static void compare_cache_rows(const char *op, const char *what, const ck_buf *d, const kvfix *f,
                               const int32_t *pos, const int32_t *seq, int R, int32_t ctype,
                               int64_t width, double tol) {
  uint8_t *c[2] = {ck_get(d, 0), ck_get(d, 1)};
  const uint64_t rb = memra_type_row_bytes(ctype, width);
  double num = 0, den = 0;
  int64_t bad = -1;
  for (int r = 0; r < R; ++r) {
    const int64_t slot =
        (int64_t)f->bt[seq[r] * f->max_blocks + pos[r] / f->block_size] * f->block_size +
        pos[r] % f->block_size;
    for (int64_t e = 0; e < width; ++e) {
      const float a = cache_value(c[0] + (uint64_t)slot * rb, ctype, e),
                  b = cache_value(c[1] + (uint64_t)slot * rb, ctype, e);
      if (!isfinite(a) || !isfinite(b)) {
        if (bad < 0 && !(isnan(a) && isnan(b)) && a != b) bad = (int64_t)r * width + e;
        continue;
      }
      num += ((double)a - b) * ((double)a - b);
      den += (double)a * a;
    }
  }
  const double err = den > 0 ? sqrt(num / den) : sqrt(num);
  char note[96] = "";
  if (bad >= 0) snprintf(note, sizeof note, "nonfinite mismatch at %" PRId64, bad);
  ck_record(op, what, err, tol, err <= tol && bad < 0 && ck_guard_ok(d), note);
  free(c[0]);
  free(c[1]);
}

/* matmul_n_rope_kv (ABI 1.16) on plugin i: q, k (and v when n == 3) of x, rotated, k and v
 * stored; d[0..2] q, k, v, d[3] and d[4] the caches, d[5] x, w[0..2] the weights, b[0..2] the
 * biases (k's absent) when use_bias. */
static memra_status call_mn_rope_kv(int i, int n, const ck_buf *d, const ck_buf *dw,
                                    const ck_buf *db, int32_t type, int32_t ctype,
                                    const int64_t *ns, int64_t K, int R, int64_t slots,
                                    int use_bias, const memra_batch *b,
                                    const memra_rope_params *p) {
  if (!P[i].vt->matmul_n_rope_kv) return MEMRA_E_UNSUPPORTED;
  memra_tensor ys[3], ws[3], bs[3];
  for (int j = 0; j < 3; ++j) {
    ys[j] = ck_t(&d[j], i, 0, ns[j], R);
    ws[j] = ck_t(&dw[j], i, type, K, ns[j]);
    bs[j] = j == 1 ? ck_none() : ck_t(&db[j], i, 0, ns[j], 1);
  }
  return P[i].vt->matmul_n_rope_kv(P[i].be, n, ys, TP(&d[5], i, 0, K, R), ws, use_bias ? bs : NULL,
                                   TP(&d[3], i, ctype, ns[1], slots),
                                   TP(&d[4], i, ctype, ns[1], slots), b, p);
}

/* matmul_n_rope_kv (ABI 1.16): a decode step's q, k, v projections (n = 3), or q and k after v
 * was projected by the plugin's own matmul from a weight of another type (n = 2), with their rope
 * and the KV store. Against the oracle (q, k, v within matmul's tolerance; the cache rows written,
 * decoded, within the cache type's rounding), and on the plugin under test bit for bit matmul_n
 * followed by rope_kv_store (q, k, v and both caches whole), twice in a row (the second call from
 * what the first left: the slot recomputes q and k from x, and v is only read). */
static void check_matmul_n_rope_kv(void) {
  static const struct {
    int32_t type, vtype; /* q, k (and v when n == 3) weights; v's own weight when n == 2 */
    int n;
    int64_t K;
    int mode, n_head, n_kv, hd, n_rot, ff;
    int32_t ctype;
    int rows, bias;
  } cs[] = {
      /* Llama-3.1-8B decode: K 4096, q 4096, k and v 1024, head 128, F16 caches */
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, 3, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F16, 1, 0},
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q6_K, 2, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F16, 1, 0}, /* v first (Q4_K_M's Q6_K v layers) */
      {MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q4_K, 3, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F16, 1, 0},
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, 3, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 64, 0,
       MEMRA_TYPE_F16, 1, 0}, /* partial rope */
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, 3, 4096, MEMRA_ROPE_NEOX, 32, 8, 128, 128, 0,
       MEMRA_TYPE_F16, 1, 0},
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, 3, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F32, 1, 0},
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, 3, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F8_E4M3, 1, 0},
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, 3, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F16, 3, 0}, /* 3 rows of distinct sequences */
      {MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q6_K, 2, 4096, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F16, 3, 0},
      {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, 3, 4352, MEMRA_ROPE_NORM, 32, 8, 128, 128, 1,
       MEMRA_TYPE_F16, 1, 1}, /* odd K (136 blocks), q and v biases (k's absent) */
  };
  static const int32_t row_pos[3] = {517, 1200, 83};
  const int n_cases = g_quick ? 3 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    const int R = cs[c].rows, n = cs[c].n, bias = cs[c].bias;
    const int32_t type = cs[c].type, ctype = cs[c].ctype;
    const int64_t K = cs[c].K, qw = (int64_t)cs[c].n_head * cs[c].hd,
                  kw = (int64_t)cs[c].n_kv * cs[c].hd, ns[3] = {qw, kw, kw};
    int32_t pos[3], seq[3], maxp = 0;
    for (int r = 0; r < R; ++r) {
      pos[r] = row_pos[r];
      seq[r] = r;
      maxp = pos[r] > maxp ? pos[r] : maxp;
    }
    kvfix f = kv_fixture(R, 16, maxp / 16 + 2, pos, seq, R);
    const int64_t slots = (int64_t)f.n_pages * f.block_size;
    uint64_t cb, nb[3];
    void *kc = ck_rand_rows(ctype, kw, slots, &cb), *vc = ck_rand_rows(ctype, kw, slots, &cb),
         *w[3];
    float *x = ck_frand_vec((int64_t)R * K, -1, 1), *ff = ck_frand_vec(cs[c].n_rot / 2, 1, 8),
          *bv[3];
    ck_buf dw[3], db[3];
    for (int j = 0; j < 3; ++j) {
      w[j] = ck_rand_rows(j == 2 ? cs[c].vtype : type, K, ns[j], &nb[j]);
      bv[j] = ck_frand_vec(ns[j], -1, 1);
      dw[j] = ck_new(nb[j], w[j]);
      db[j] = ck_new((uint64_t)ns[j] * 4, bv[j]);
    }
    const uint64_t sz[6] = {
        (uint64_t)R * qw * 4, (uint64_t)R * kw * 4, (uint64_t)R * kw * 4, cb, cb,
        (uint64_t)R * K * 4};
    const void *init[6] = {NULL, NULL, NULL, kc, vc, x};
    ck_buf d[6], e[6]; /* d: the slot on both plugins; e: matmul_n, rope_kv_store */
    for (int j = 0; j < 6; ++j) {
      d[j] = ck_new(sz[j], init[j]);
      e[j] = ck_new(sz[j], init[j]);
    }
    ck_buf df = ck_new((uint64_t)cs[c].n_rot / 2 * 4, ff);
    char what[128];
    snprintf(what, sizeof what,
             "%s n%d K=%" PRId64 " q%" PRId64 " kv%" PRId64 " %s rot %d%s %s rows %d pos %d%s%s%s",
             memra_type_info(type).name, n, K, qw, kw, cs[c].mode ? "NEOX" : "NORM", cs[c].n_rot,
             cs[c].ff ? " +ff" : "", memra_type_info(ctype).name, R, pos[0], n == 2 ? " v " : "",
             n == 2 ? memra_type_info(cs[c].vtype).name : "", bias ? " +bias" : "");
    /* n == 2: v first, by each plugin's own matmul (its bias with it) */
    for (int i = 0; n == 2 && i < 2; ++i)
      for (int t = 0; t < (i ? 2 : 1); ++t) {
        const ck_buf *dv = t ? &e[2] : &d[2];
        memra_tensor none = {0};
        memra_plug_must(&P[i],
                        P[i].vt->matmul(P[i].be, TP(dv, i, 0, kw, R), TP(&d[5], i, 0, K, R),
                                        TP(&dw[2], i, cs[c].vtype, K, kw),
                                        bias ? TP(&db[2], i, 0, kw, 1) : &none),
                        "matmul");
      }
    int ok_;
    BOTH("matmul_n_rope_kv", what, ({
           const memra_rope_params p = {cs[c].n_head,
                                        cs[c].hd,
                                        cs[c].n_rot,
                                        cs[c].mode,
                                        500000.f,
                                        1.f,
                                        cs[c].ff ? ck_t(&df, i, 0, cs[c].n_rot / 2, 1) : ck_none()};
           const memra_batch b = kv_batch(&f, i, R, 2048); /* flags 0, as the core's */
           call_mn_rope_kv(i, n, d, dw, db, type, ctype, ns, K, R, slots, bias, &b, &p);
         }));
    if (ok_) {
      static const char *const names[3] = {NULL, "  k", "  v"}; /* q's line names the case */
      for (int j = 0; j < 3; ++j)
        compare_f32("matmul_n_rope_kv", j ? names[j] : what, &d[j], (int64_t)R * ns[j], 1e-5);
      const double ctol = ctype == MEMRA_TYPE_F8_E4M3 ? 1e-2
                          : ctype == MEMRA_TYPE_F16   ? 1e-4
                                                      : 1e-5;
      compare_cache_rows("matmul_n_rope_kv", "  k cache rows written", &d[3], &f, pos, seq, R,
                         ctype, kw, ctol);
      compare_cache_rows("matmul_n_rope_kv", "  v cache rows written", &d[4], &f, pos, seq, R,
                         ctype, kw, ctol);
      const memra_rope_params p = {cs[c].n_head,
                                   cs[c].hd,
                                   cs[c].n_rot,
                                   cs[c].mode,
                                   500000.f,
                                   1.f,
                                   cs[c].ff ? ck_t(&df, 1, 0, cs[c].n_rot / 2, 1) : ck_none()};
      memra_batch b = kv_batch(&f, 1, R, 2048);
      memra_tensor ys[3], ws[3], bs[3];
      for (int j = 0; j < 3; ++j) {
        ys[j] = ck_t(&e[j], 1, 0, ns[j], R);
        ws[j] = ck_t(&dw[j], 1, type, K, ns[j]);
        bs[j] = j == 1 ? ck_none() : ck_t(&db[j], 1, 0, ns[j], 1);
      }
      memra_plug_must(
          &P[1], P[1].vt->matmul_n(P[1].be, n, ys, TP(&e[5], 1, 0, K, R), ws, bias ? bs : NULL),
          "matmul_n");
      memra_plug_must(&P[1],
                      P[1].vt->rope_kv_store(P[1].be, &ys[0], &ys[1], &ys[2],
                                             TP(&e[3], 1, ctype, kw, slots),
                                             TP(&e[4], 1, ctype, kw, slots), &b, &p),
                      "rope_kv_store");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      static const char *const outs[5] = {"q", "k", "v", "k cache", "v cache"};
      for (int round = 0; round < 2; ++round) {
        if (round == 1) { /* again, from what the first call left */
          memra_plug_must(
              &P[1], call_mn_rope_kv(1, n, d, dw, db, type, ctype, ns, K, R, slots, bias, &b, &p),
              "matmul_n_rope_kv");
          memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
        }
        for (int j = 0; j < 5; ++j) {
          char w2[160];
          snprintf(w2, sizeof w2,
                   "mn_rope_kv %s n%d K%" PRId64 " %s rot%d %s rows %d call %d: %s == matmul_n, "
                   "rope_kv_store",
                   memra_type_info(type).name, n, K, cs[c].mode ? "NEOX" : "NORM", cs[c].n_rot,
                   memra_type_info(ctype).name, R, round + 1, outs[j]);
          record_bitwise(w2, &d[j], &e[j], sz[j]);
        }
      }
    }
    for (int j = 0; j < 6; ++j) {
      ck_free(&d[j]);
      ck_free(&e[j]);
    }
    for (int j = 0; j < 3; ++j) {
      ck_free(&dw[j]);
      ck_free(&db[j]);
      free(w[j]);
      free(bv[j]);
    }
    ck_free(&df);
    free(kc);
    free(vc);
    free(x);
    free(ff);
    kv_free(&f);
  }
}

/* Each of rows [n_rows - nchk, n_rows) of an attention batch alone on the GPU (its own bucket,
 * pos + 1, and MEMRA_BATCH_DISTINCT: the kernels read its older K/V before their wait): how many
 * of the outputs equal the batch's rows ob bitwise. */
static int att_rows_alone_same(const kvfix *f, const int32_t *pos, int n_rows, int nchk,
                               const ck_buf *dq, const ck_buf *dkc, const ck_buf *dvc,
                               int32_t ctype, int width, int64_t slots, int qw,
                               const memra_attn_params *p, const float *ob) {
  int n_same = 0;
  ck_buf d1 = ck_new((uint64_t)qw * 4, NULL);
  for (int k = 0; k < nchk; ++k) {
    const int r = n_rows - 1 - k;
    memra_batch b = kv_batch(f, 1, 1, pos[r] + 1);
    b.flags = MEMRA_BATCH_DISTINCT;
    b.pos.offset = (uint64_t)r * 4;
    b.seq.offset = (uint64_t)r * 4;
    memra_tensor qr = ck_t(dq, 1, 0, qw, 1);
    qr.offset = (uint64_t)r * qw * 4;
    ck_poison(&d1);
    memra_plug_must(&P[1],
                    P[1].vt->attention(P[1].be, TP(&d1, 1, 0, qw, 1), &qr,
                                       TP(dkc, 1, ctype, width, slots),
                                       TP(dvc, 1, ctype, width, slots), &b, p),
                    "attention");
    float *o1 = ck_get(&d1, 1);
    n_same += memcmp(o1, ob + (int64_t)r * qw, (size_t)qw * 4) == 0 && ck_guard_ok(&d1);
    free(o1);
  }
  ck_free(&d1);
  return n_same;
}

static void check_attention(void) {
  struct {
    int32_t ctype;
    int n_head, n_kv, hd, window;
    float softcap;
    int rows, maxpos, quick; /* quick: in --quick too */
  } cs[] = {
      {MEMRA_TYPE_F16, 8, 2, 64, 0, 0.f, 5, 700, 1},
      {MEMRA_TYPE_F32, 8, 2, 64, 0, 0.f, 5, 700, 1},
      {MEMRA_TYPE_F16, 9, 3, 80, 50, 0.f, 4, 300, 0},
      {MEMRA_TYPE_F16, 4, 1, 256, 0, 30.f, 3, 200, 0},
      /* Llama-8B's group (v6: 2-3 steps a unit) */
      {MEMRA_TYPE_F16, 32, 8, 128, 0, 0.f, 2, 4100, 1},
      {MEMRA_TYPE_F32, 6, 6, 96, 0, 0.f, 37, 40, 0}, /* prefill-like: many rows of one seq */
      /* FP8 e4m3 caches (ABI minor 2): the same bytes dequantized on read, so the F16
       * tolerance; 8-wide loads (d 128), and d 36 for the scalar path. */
      {MEMRA_TYPE_F8_E4M3, 32, 8, 128, 0, 0.f, 2, 4100, 1},
      {MEMRA_TYPE_F8_E4M3, 4, 4, 36, 20, 0.f, 5, 300, 0},
      /* attention v4: long rows (4097+: several tiles per split, up to 32 splits) of
       * sequences of different lengths in one batch; group 8 (the GM 8 kernels), F32 and
       * d 256 long, a long window, group 1 with softcap, FP8 on the scalar path long. */
      {MEMRA_TYPE_F16, 32, 8, 128, 0, 0.f, 8, 4400, 0},
      {MEMRA_TYPE_F8_E4M3, 32, 8, 128, 0, 0.f, 8, 4400, 0},
      {MEMRA_TYPE_F16, 16, 2, 128, 0, 0.f, 3, 9000, 0},
      {MEMRA_TYPE_F32, 8, 2, 128, 0, 0.f, 3, 4500, 0},
      {MEMRA_TYPE_F16, 8, 4, 256, 1000, 0.f, 3, 5000, 0},
      {MEMRA_TYPE_F16, 7, 7, 64, 0, 10.f, 4, 1500, 0},
      {MEMRA_TYPE_F8_E4M3, 8, 1, 40, 0, 0.f, 3, 2100, 0},
      /* attention v6 (MEMRA_ATT=6: head dim 128, groups up to 8, F16 / FP8): group 8 (every MMA
       * column a head), group 3 with a window and softcap, group 5 over 5 steps a unit (its L2
       * hints), group 1 in one partial step */
      {MEMRA_TYPE_F16, 16, 2, 128, 0, 0.f, 5, 700, 1},
      {MEMRA_TYPE_F16, 12, 4, 128, 100, 20.f, 4, 300, 1},
      {MEMRA_TYPE_F8_E4M3, 40, 8, 128, 0, 0.f, 5, 9000, 0},
      {MEMRA_TYPE_F16, 8, 8, 128, 0, 0.f, 6, 33, 0},
  };
  const int n_cases = (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n_cases; ++c) {
    if (g_quick && !cs[c].quick) continue;
    const int n_rows = cs[c].rows, width = cs[c].n_kv * cs[c].hd, qw = cs[c].n_head * cs[c].hd;
    int32_t pos[64], seq[64];
    int maxp = 0;
    for (int r = 0; r < n_rows; ++r) {
      if (c == 5) {
        seq[r] = 0;
        pos[r] = 3 + r;
      } else {
        seq[r] = r % 3;
        pos[r] = r == 0 ? 0 : (int32_t)(ck_rnd() % (uint64_t)cs[c].maxpos);
        if (r == n_rows - 1 && n_rows > 1) pos[r] = cs[c].maxpos - 1; /* the longest */
      }
      if (pos[r] > maxp) maxp = pos[r];
    }
    const int bs = 16, mb = (maxp + 1 + bs - 1) / bs + 1;
    kvfix f = kv_fixture(3, bs, mb, pos, seq, n_rows);
    const int64_t slots = (int64_t)f.n_pages * bs;
    uint64_t cb;
    void *kc = ck_rand_rows(cs[c].ctype, width, slots, &cb),
         *vc = ck_rand_rows(cs[c].ctype, width, slots, &cb);
    float *q = ck_frand_vec((int64_t)n_rows * qw, -1, 1);
    ck_buf dkc = ck_new(cb, kc), dvc = ck_new(cb, vc), dq = ck_new((uint64_t)n_rows * qw * 4, q),
           dout = ck_new((uint64_t)n_rows * qw * 4, NULL);
    memra_attn_params p = {
        cs[c].n_head, cs[c].n_kv, cs[c].hd, cs[c].window, 1.0f / sqrtf((float)cs[c].hd),
        cs[c].softcap};
    char what[96];
    snprintf(what, sizeof what, "%s h%d/kv%d d%d win%d cap%g rows %d pos<=%d",
             memra_type_info(cs[c].ctype).name, p.n_head, p.n_kv_head, p.head_dim, p.window,
             p.softcap, n_rows, maxp);
    int ok_;
    BOTH("attention", what, ({
           memra_batch b = kv_batch(&f, i, n_rows, maxp + 1);
           P[i].vt->attention(P[i].be, TP(&dout, i, 0, qw, n_rows), TP(&dq, i, 0, qw, n_rows),
                              TP(&dkc, i, cs[c].ctype, width, slots),
                              TP(&dvc, i, cs[c].ctype, width, slots), &b, &p);
         }));
    if (ok_) compare_f32("attention", what, &dout, (int64_t)n_rows * qw, 2e-5);
    /* the default kernels' output (v6 where it applies on sm_90a, else v5); v5's below */
    float *obd = ok_ ? ck_get(&dout, 1) : NULL;
    /* v4, v2 (MEMRA_ATT=4, =2) against the CPU too, and where v6 applies (head dim 128, groups
     * up to 8, F16 / FP8) v6 (=6), each of its rows alone (own bucket, early K/V) == its batch
     * bitwise, and v5 (=5) */
    static const char *const olds[4] = {"4", "2", "6", "5"};
    const int v6 =
        cs[c].hd == 128 && cs[c].n_head / cs[c].n_kv <= 8 && cs[c].ctype != MEMRA_TYPE_F32;
    float *ob2 = NULL; /* v2's output: v3's reference below (v6 runs after it) */
    float *ob5 = NULL; /* v5's output where v6 applies: the reference of v5's checks below */
    for (int v = 0; ok_ && v < 2 + 2 * v6; ++v) {
      setenv("MEMRA_ATT", olds[v], 1);
      ck_poison1(&P[1], dout.b[1], dout.size); /* the CPU's result stays */
      memra_batch b = kv_batch(&f, 1, n_rows, maxp + 1);
      memra_plug_must(&P[1],
                      P[1].vt->attention(P[1].be, TP(&dout, 1, 0, qw, n_rows),
                                         TP(&dq, 1, 0, qw, n_rows),
                                         TP(&dkc, 1, cs[c].ctype, width, slots),
                                         TP(&dvc, 1, cs[c].ctype, width, slots), &b, &p),
                      "attention");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      char w2[128];
      snprintf(w2, sizeof w2, "v%s %s", olds[v], what);
      compare_f32("attention", w2, &dout, (int64_t)n_rows * qw, 2e-5);
      if (v == 1) ob2 = ck_get(&dout, 1);
      if (v == 3) ob5 = ck_get(&dout, 1);
      if (v == 2 && n_rows > 1) {
        float *ob6 = ck_get(&dout, 1);
        const int nchk = n_rows < 8 ? n_rows : 8;
        const int n_same = att_rows_alone_same(&f, pos, n_rows, nchk, &dq, &dkc, &dvc, cs[c].ctype,
                                               width, slots, qw, &p, ob6);
        snprintf(w2, sizeof w2,
                 "attention v6 %s: %d rows each alone (own bucket, early K/V) == in batch",
                 memra_type_info(cs[c].ctype).name, nchk);
        ck_record("invariance", w2, nchk - n_same, 0, n_same == nchk,
                  n_same == nchk ? "bit-identical" : "differs");
        /* v6's pushes by st.async onto the owners' barriers (MEMRA_ATT6_TX=1): the same bits */
        setenv("MEMRA_ATT6_TX", "1", 1);
        ck_poison1(&P[1], dout.b[1], dout.size);
        memra_plug_must(&P[1],
                        P[1].vt->attention(P[1].be, TP(&dout, 1, 0, qw, n_rows),
                                           TP(&dq, 1, 0, qw, n_rows),
                                           TP(&dkc, 1, cs[c].ctype, width, slots),
                                           TP(&dvc, 1, cs[c].ctype, width, slots), &b, &p),
                        "attention");
        memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
        unsetenv("MEMRA_ATT6_TX");
        float *otx = ck_get(&dout, 1);
        const int same = memcmp(otx, ob6, (size_t)n_rows * qw * 4) == 0 && ck_guard_ok(&dout);
        snprintf(w2, sizeof w2, "attention v6 %s: pushes by st.async (MEMRA_ATT6_TX=1) == v6",
                 memra_type_info(cs[c].ctype).name);
        ck_record("invariance", w2, !same, 0, same, same ? "bit-identical" : "differs");
        free(otx);
        free(ob6);
      }
      unsetenv("MEMRA_ATT");
    }
    if (ok_) { /* the test plugin's one-launch split + combine (attention v3, opt-in with
                * MEMRA_ATT_FUSE=1) against v2's two kernels, then again (its tickets
                * were reset): bit-identical */
      float *ob = ob2;
      ck_buf d2 = ck_new((uint64_t)n_rows * qw * 4, NULL);
      for (int rep = 0; rep < 2; ++rep) {
        ck_poison(&d2);
        setenv("MEMRA_ATT_FUSE", "1", 1);
        memra_batch b = kv_batch(&f, 1, n_rows, maxp + 1);
        memra_plug_must(&P[1],
                        P[1].vt->attention(P[1].be, TP(&d2, 1, 0, qw, n_rows),
                                           TP(&dq, 1, 0, qw, n_rows),
                                           TP(&dkc, 1, cs[c].ctype, width, slots),
                                           TP(&dvc, 1, cs[c].ctype, width, slots), &b, &p),
                        "attention");
        memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
        unsetenv("MEMRA_ATT_FUSE");
        float *o2 = ck_get(&d2, 1);
        const int same = memcmp(o2, ob, (size_t)n_rows * qw * 4) == 0 && ck_guard_ok(&d2);
        char w2[96];
        snprintf(w2, sizeof w2, "attention %s %s", memra_type_info(cs[c].ctype).name,
                 rep ? "v3 fused, again == v2 split + combine" : "v3 fused == v2 split + combine");
        ck_record("invariance", w2, !same, 0, same, same ? "bit-identical" : "differs");
        free(o2);
      }
      free(ob);
      ck_free(&d2);
    }
    /* v5's checks: MEMRA_ATT=5 where v6 would run by default, against v5's own output */
    if (ob5) setenv("MEMRA_ATT", "5", 1);
    const float *obv5 = ob5 ? ob5 : obd;
    if (ok_ && n_rows > 1) { /* v5: each row alone, with its own smaller bucket and a
                              * smaller grid (cluster), and twice: bit-identical to the batch */
      const int nchk = n_rows < 8 ? n_rows : 8;
      const int n_same = att_rows_alone_same(&f, pos, n_rows, nchk, &dq, &dkc, &dvc, cs[c].ctype,
                                             width, slots, qw, &p, obv5);
      const int same = n_same == nchk;
      char w2[128];
      snprintf(w2, sizeof w2,
               "attention %s: %d rows each alone (own bucket, early K/V) == in batch (bucket %d)",
               memra_type_info(cs[c].ctype).name, nchk, maxp + 1);
      ck_record("invariance", w2, nchk - n_same, 0, same, same ? "bit-identical" : "differs");
    }
    const int G = cs[c].n_head / cs[c].n_kv;
    for (int hs = 1; ok_ && hs <= G; hs *= 2) { /* v5's head split (MEMRA_ATT_HS): same bits */
      if (G % hs) continue;
      char hv[8];
      snprintf(hv, sizeof hv, "%d", hs);
      setenv("MEMRA_ATT_HS", hv, 1);
      ck_poison1(&P[1], dout.b[1], dout.size);
      memra_batch b = kv_batch(&f, 1, n_rows, maxp + 1);
      memra_plug_must(&P[1],
                      P[1].vt->attention(P[1].be, TP(&dout, 1, 0, qw, n_rows),
                                         TP(&dq, 1, 0, qw, n_rows),
                                         TP(&dkc, 1, cs[c].ctype, width, slots),
                                         TP(&dvc, 1, cs[c].ctype, width, slots), &b, &p),
                      "attention");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      unsetenv("MEMRA_ATT_HS");
      float *oh = ck_get(&dout, 1);
      const int same = memcmp(oh, obv5, (size_t)n_rows * qw * 4) == 0 && ck_guard_ok(&dout);
      char w2[128];
      snprintf(w2, sizeof w2, "attention %s group %d: v5 over %d clusters a KV head == v5",
               memra_type_info(cs[c].ctype).name, G, hs);
      ck_record("invariance", w2, !same, 0, same, same ? "bit-identical" : "differs");
      free(oh);
    }
    unsetenv("MEMRA_ATT");
    free(obd);
    free(ob5);
    ck_free(&dkc);
    ck_free(&dvc);
    ck_free(&dq);
    ck_free(&dout);
    free(kc);
    free(vc);
    free(q);
    kv_free(&f);
  }
}

static void check_elementwise(void) {
  const int64_t R = 7, E = 4097;
  float *a = ck_frand_vec(R * E, -6, 6), *b = ck_frand_vec(R * E, -2, 2);
  ck_buf da = ck_new((uint64_t)R * E * 4, a), db = ck_new((uint64_t)R * E * 4, b),
         dy = ck_new((uint64_t)R * E * 4, NULL);
  int ok_;
  /* rows of 4097 (scalar path), 4096 (float4 path), one decode row of 14336; 16-bit y
   * (ABI 1.6) beside each F32 y; gate scaled so some products pass the f16 range */
  const int64_t shapes[3][2] = {{7, 4097}, {7, 4096}, {1, 14336}};
  for (int sh = 0; sh < 3; ++sh) {
    const int64_t r = shapes[sh][0], e = shapes[sh][1];
    for (int act = 0; act < 2; ++act) {
      char what[64];
      snprintf(what, sizeof what, "%s [%" PRId64 " x %" PRId64 "]", act ? "GELU_TANH" : "SILU", r,
               e);
      ck_poison(&dy);
      BOTH("glu", what,
           P[i].vt->glu(P[i].be, TP(&dy, i, 0, e, r), TP(&da, i, 0, e, r), TP(&db, i, 0, e, r),
                        act));
      if (ok_) compare_f32("glu", what, &dy, r * e, 1e-6);
      for (int t16 = 0; t16 < 2 && ok_; ++t16) {
        const int32_t t = t16 ? MEMRA_TYPE_BF16 : MEMRA_TYPE_F16;
        ck_buf dh = ck_new((uint64_t)r * e * 2, NULL);
        ck_poison(&dh);
        BOTH("glu", what,
             P[i].vt->glu(P[i].be, TP(&dh, i, t, e, r), TP(&da, i, 0, e, r), TP(&db, i, 0, e, r),
                          act));
        if (ok_) compare_op16("glu", what, &dh, &dy, r * e, t, t16 ? 8e-3 : 1e-3);
        ck_free(&dh);
      }
    }
  }
  { /* saturation: products beyond 65504 become +-65504 in f16 */
    float *big = ck_frand_vec(R * E, -900, 900);
    ck_buf dg = ck_new((uint64_t)R * E * 4, big), dh = ck_new((uint64_t)R * E * 2, NULL);
    ck_poison(&dy);
    BOTH("glu", "SILU x900 [7 x 4096]",
         P[i].vt->glu(P[i].be, TP(&dy, i, 0, 4096, R), TP(&dg, i, 0, 4096, R),
                      TP(&dg, i, 0, 4096, R), 0));
    if (ok_) {
      ck_poison(&dh);
      BOTH("glu", "SILU x900 [7 x 4096]",
           P[i].vt->glu(P[i].be, TP(&dh, i, MEMRA_TYPE_F16, 4096, R), TP(&dg, i, 0, 4096, R),
                        TP(&dg, i, 0, 4096, R), 0));
      if (ok_)
        compare_op16("glu", "SILU x900 [7 x 4096]", &dh, &dy, R * 4096, MEMRA_TYPE_F16, 1e-3);
    }
    ck_free(&dg);
    ck_free(&dh);
    free(big);
  }
  ck_poison(&dy);
  BOTH("add", "[7 x 4097]",
       P[i].vt->add(P[i].be, TP(&dy, i, 0, E, R), TP(&da, i, 0, E, R), TP(&db, i, 0, E, R)));
  if (ok_) compare_f32("add", "[7 x 4097]", &dy, R * E, 0);
  ck_poison(&dy);
  BOTH("scale", "[7 x 4097] x 0.37",
       P[i].vt->scale(P[i].be, TP(&dy, i, 0, E, R), TP(&da, i, 0, E, R), 0.37f));
  if (ok_) compare_f32("scale", "[7 x 4097] x 0.37", &dy, R * E, 0);
  ck_free(&da);
  ck_free(&db);
  ck_free(&dy);
  free(a);
  free(b);

  int32_t v[37];
  for (int i = 0; i < 37; ++i)
    v[i] = (int32_t)(ck_rnd() % 100000) - 50000;
  ck_buf dv = ck_new(sizeof v, v);
  BOTH("add_i32", "[37] += 3", P[i].vt->add_i32(P[i].be, TP(&dv, i, MEMRA_TYPE_I32, 37, 1), 3));
  if (ok_) ck_cmp_i32("add_i32", "[37] += 3", &dv, 37);
  ck_free(&dv);
}

static void check_argmax(void) {
  const int64_t R = 5, V = g_quick ? 1001 : 50001;
  float *x = ck_frand_vec(R * V, -10, 10);
  x[0 * V + 17] = 50.f;
  x[0 * V + 9000 % V] = 50.f; /* tie: lowest index wins */
  x[1 * V + V - 1] = 60.f;    /* max at the end */
  x[2 * V + 0] = 70.f;        /* max at the start */
  x[3 * V + 5] = NAN;
  x[3 * V + 6] = 80.f; /* NaN never wins */
  for (int64_t i = 0; i < V; ++i)
    x[4 * V + i] = NAN; /* only NaN: 0 (every chunk of the device's split reports none) */
  ck_buf dx = ck_new((uint64_t)R * V * 4, x), di = ck_new((uint64_t)R * 4, NULL);
  char what[96];
  snprintf(what, sizeof what, "[%" PRId64 " x %" PRId64 "] ties, ends, NaN, all NaN", R, V);
  int ok_;
  BOTH("argmax", what,
       P[i].vt->argmax(P[i].be, TP(&di, i, MEMRA_TYPE_I32, R, 1), TP(&dx, i, 0, V, R)));
  if (ok_) ck_cmp_i32("argmax", what, &di, R);
  ck_free(&dx);
  ck_free(&di);
  free(x);
}

/* Why may a sampled token of the plugin under test differ from the oracle's? Recomputes
 * the definition (memra_plugin.h) on the host for the draw made from generator state
 * `state` (already advanced) and returns 1 when the difference is explained by rounding:
 * u lies within 1e-5 (of the filtered mass) of a CDF boundary of the oracle's token, a
 * top-p target or the min-p floor lies within 1e-5 of a boundary, or the two tokens' p
 * are within 1e-6 relative (expf differs by an ulp or two between libm and CUDA, which
 * can swap near-equal tokens in the order). */
typedef struct smp_tp {
  float p;
  int32_t id;
} smp_tp;
static int smp_cmp(const void *a, const void *b) {
  const smp_tp *x = a, *y = b;
  if (x->p != y->p) return x->p > y->p ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}
static int sample_diff_explained(const float *x, int64_t n, const memra_sample_params *sp,
                                 uint64_t state, int32_t want, int32_t got) {
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  const double u = (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
  smp_tp *t = ck_xmalloc((size_t)n * sizeof *t);
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] / sp->temperature;
    t[i].p = v != v ? -INFINITY : v;
    t[i].id = (int32_t)i;
    if (t[i].p > m) m = t[i].p;
  }
  float p_want = 0, p_got = 0;
  for (int64_t i = 0; i < n; ++i) {
    t[i].p = t[i].p == m ? 1.0f : expf(t[i].p - m);
    if (i == want) p_want = t[i].p;
    if (i == got) p_got = t[i].p;
  }
  int explained = got >= 0 && got < n && fabsf(p_want - p_got) <= 1e-6f * fmaxf(p_want, p_got);
  qsort(t, (size_t)n, sizeof *t, smp_cmp);
  int64_t keep = sp->top_k > 0 && sp->top_k < n ? sp->top_k : n;
  if (sp->top_p < 1.0f) {
    double mass = 0, cum = 0;
    for (int64_t j = 0; j < keep; ++j)
      mass += t[j].p;
    const double target = (double)sp->top_p * mass;
    int64_t j = 0;
    double before = 0;
    while (j < keep) {
      before = cum;
      cum += t[j++].p;
      if (cum >= target) break;
    }
    /* The cut's own edges: the mass before its last token and with it. */
    if (fabs(before - target) <= 1e-5 * mass || fabs(cum - target) <= 1e-5 * mass) explained = 1;
    keep = j;
  }
  if (sp->min_p > 0.0f) {
    int64_t j = 1;
    while (j < keep && t[j].p >= sp->min_p)
      ++j;
    for (int64_t e = j - 1; e <= j && e < n; ++e)
      if (e >= 0 && fabsf(t[e].p - sp->min_p) <= 1e-5f) explained = 1;
    keep = j;
  }
  if (keep < 1) keep = 1;
  double mass = 0, cum = 0;
  for (int64_t j = 0; j < keep; ++j)
    mass += t[j].p;
  for (int64_t j = 0; j < keep; ++j) { /* the edges of the oracle token's interval */
    const double before = cum;
    cum += t[j].p;
    if (cum > u * mass || j == keep - 1) {
      if (u * mass - before <= 1e-5 * mass || cum - u * mass <= 1e-5 * mass) explained = 1;
      break;
    }
  }
  free(t);
  return explained;
}

/* Sampling on the device (ABI minor 2): the same seeds, logits and filters in both
 * plugins. The kernels sum masses in different orders, so a draw may differ when u * S
 * lies within rounding of a CDF boundary: pass = the generator states identical, every
 * temperature-0 row identical to argmax, at least 99% of the sampled tokens identical
 * (or at most 2 differences in a short run), and every difference explained by rounding
 * (sample_diff_explained). Then the plugin under test alone: a graph of one sample op replayed 3
 * times gives exactly the 3 eager draws from the same seeds (the state advances on the device). */
static void check_sample(void) {
  if (!P[0].vt->sample || !P[1].vt->sample) {
    ck_record("sample", "slot", 0, 0, !P[0].vt->sample, "test plugin has no sample slot");
    return;
  }
  const int64_t R = 16, V = g_quick ? 1003 : 32003;
  const int steps = g_quick ? 3 : 16; /* 256 draws per setting: 99% allows 2 differences */
  const memra_sample_params sp[] = {
      {0.0f, 0, 1.0f, 0.0f}, {1.0f, 0, 1.0f, 0.0f}, {0.8f, 40, 0.95f, 0.05f}, {1.2f, 0, 0.9f, 0.0f},
      {0.7f, 0, 1.0f, 0.1f}, {1.0f, 1, 1.0f, 0.0f}, {1.5f, 5, 0.5f, 0.0f},
  };
  float *x = ck_frand_vec(R * V, -8, 8);
  for (int64_t i = 0; i < V; i += 7) /* exact ties in row 1 */
    x[V + i] = roundf(x[V + i]);
  x[2 * V + 11] = NAN;
  uint64_t seeds[16];
  for (int r = 0; r < R; ++r)
    seeds[r] = ck_rnd();
  ck_buf dx = ck_new((uint64_t)R * V * 4, x), di = ck_new((uint64_t)R * 4, NULL),
         ds = ck_new(sizeof seeds, seeds), da = ck_new((uint64_t)R * 4, NULL);
  int ok_;
  for (size_t c = 0; c < sizeof sp / sizeof sp[0]; ++c) {
    char what[96];
    snprintf(what, sizeof what,
             "[%" PRId64 " x %" PRId64 "] T %.1f k %d p %.2f min_p %.2f, %d steps", R, V,
             sp[c].temperature, sp[c].top_k, sp[c].top_p, sp[c].min_p, steps);
    for (int i = 0; i < 2; ++i)
      memra_plug_must(&P[i], P[i].vt->buf_upload(P[i].be, ds.b[i], 0, seeds, sizeof seeds),
                      "upload");
    int64_t same = 0, total = 0, unexplained = 0;
    ok_ = 1;
    for (int s = 0; s < steps && ok_; ++s) {
      ck_poison(&di);
      BOTH("sample", what,
           P[i].vt->sample(P[i].be, TP(&di, i, MEMRA_TYPE_I32, R, 1), TP(&dx, i, 0, V, R),
                           TP(&ds, i, MEMRA_TYPE_I64, R, 1), &sp[c]));
      if (!ok_) break;
      int32_t *a = ck_get(&di, 0), *b = ck_get(&di, 1);
      for (int64_t r = 0; r < R; ++r) {
        same += a[r] == b[r];
        if (a[r] != b[r] &&
            (sp[c].temperature <= 0.0f ||
             !sample_diff_explained(x + r * V, V, &sp[c],
                                    seeds[r] + (uint64_t)(s + 1) * 0x9E3779B97F4A7C15ull, a[r],
                                    b[r]))) {
          ++unexplained;
          fprintf(stderr, "  sample: row %" PRId64 " step %d: oracle %d, test %d, not rounding\n",
                  r, s, a[r], b[r]);
        }
      }
      total += R;
      free(a);
      free(b);
    }
    if (!ok_) continue;
    uint64_t *sa = ck_get(&ds, 0), *sb = ck_get(&ds, 1);
    const int states = memcmp(sa, sb, sizeof seeds) == 0 && ck_guard_ok(&ds) && ck_guard_ok(&di);
    free(sa);
    free(sb);
    const double agree = (double)same / (double)total;
    char note[96];
    snprintf(note, sizeof note, "%" PRId64 "/%" PRId64 " agree, %" PRId64 " unexplained, states %s",
             same, total, unexplained, states ? "identical" : "DIFFER");
    const int exact = sp[c].temperature <= 0.0f;
    ck_record("sample", what, 1.0 - agree, exact ? 0 : 0.01,
              states && unexplained == 0 &&
                  (exact ? same == total : agree >= 0.99 || total - same <= 2),
              note);
    if (exact) { /* temperature 0 is the argmax op */
      BOTH("sample", "  T 0 == argmax op",
           P[i].vt->argmax(P[i].be, TP(&da, i, MEMRA_TYPE_I32, R, 1), TP(&dx, i, 0, V, R)));
      if (ok_) {
        int32_t *a = ck_get(&da, 1), *b = ck_get(&di, 1);
        const int eq = memcmp(a, b, (size_t)R * 4) == 0;
        ck_record("sample", "  T 0 == argmax op (test plugin)", !eq, 0, eq, NULL);
        free(a);
        free(b);
      }
    }
  }
  /* Graph replay vs eager on the plugin under test. */
  const memra_backend_vt *vt = P[1].vt;
  memra_backend *be = P[1].be;
  if (vt->graph_begin) {
    const memra_sample_params g = {0.9f, 50, 0.9f, 0.02f};
    int32_t ids[2][3][16];
    for (int mode = 0; mode < 2; ++mode) {
      memra_plug_must(&P[1], vt->buf_upload(be, ds.b[1], 0, seeds, sizeof seeds), "upload");
      memra_tensor ti = ck_t(&di, 1, MEMRA_TYPE_I32, R, 1), tx = ck_t(&dx, 1, 0, V, R),
                   ts = ck_t(&ds, 1, MEMRA_TYPE_I64, R, 1);
      memra_graph *gr = NULL;
      if (mode == 1) {
        memra_plug_must(&P[1], vt->graph_begin(be), "graph_begin");
        memra_plug_must(&P[1], vt->sample(be, &ti, &tx, &ts, &g), "sample");
        memra_plug_must(&P[1], vt->graph_end(be, &gr), "graph_end");
      }
      for (int s = 0; s < 3; ++s) {
        if (mode == 1)
          memra_plug_must(&P[1], vt->graph_launch(be, gr), "graph_launch");
        else
          memra_plug_must(&P[1], vt->sample(be, &ti, &tx, &ts, &g), "sample");
        memra_plug_must(&P[1], vt->buf_download(be, di.b[1], 0, ids[mode][s], (uint64_t)R * 4),
                        "download");
      }
      if (gr) vt->graph_free(be, gr);
    }
    const int same = memcmp(ids[0], ids[1], sizeof ids[0]) == 0;
    const int fresh = memcmp(ids[1][0], ids[1][1], sizeof ids[1][0]) != 0;
    ck_record("graph", "sample: 3 replays == 3 eager draws, fresh each step", !(same && fresh), 0,
              same && fresh, same ? (fresh ? "identical" : "replays repeat one draw") : "differs");
  }
  ck_free(&dx);
  ck_free(&di);
  ck_free(&ds);
  ck_free(&da);
  free(x);
}

/* Eager vs graph replay on the plugin under test: a little decode step (position
 * advanced on the device, rope, matmul, argmax) run 3 times each way. */
static void check_graph(void) {
  const memra_backend_vt *vt = P[1].vt;
  memra_backend *be = P[1].be;
  if (!vt->graph_begin) {
    ck_record("graph", "capture", 0, 0, 1, "no graph slots (skipped)");
    return;
  }
  const int64_t K = 1024, N = 333;
  uint64_t nb;
  void *w = ck_rand_rows(MEMRA_TYPE_Q4_K, K, N, &nb);
  float *x0 = ck_frand_vec(K, -1, 1);
  int32_t pos0 = 5;
  ck_buf dw = ck_new(nb, w), dx = ck_new((uint64_t)K * 4, x0), dp = ck_new(4, &pos0),
         dy = ck_new((uint64_t)N * 4, NULL), did = ck_new(12, NULL);
  memra_tensor tw = ck_t(&dw, 1, MEMRA_TYPE_Q4_K, K, N), tx = ck_t(&dx, 1, 0, K, 1),
               tp = ck_t(&dp, 1, MEMRA_TYPE_I32, 1, 1), ty = ck_t(&dy, 1, 0, N, 1);
  memra_rope_params rp = {8, 128, 128, MEMRA_ROPE_NORM, 10000.f, 1.f, ck_none()};
  int32_t ids[2][3];
  for (int mode = 0; mode < 2; ++mode) {
    memra_plug_must(&P[1], vt->buf_upload(be, dx.b[1], 0, x0, (uint64_t)K * 4), "upload");
    memra_plug_must(&P[1], vt->buf_upload(be, dp.b[1], 0, &pos0, 4), "upload");
    memra_graph *g = NULL;
    if (mode == 1) memra_plug_must(&P[1], vt->graph_begin(be), "graph_begin");
    for (int step = 0; step < (mode ? 1 : 3); ++step) {
      memra_tensor tid = ck_t(&did, 1, MEMRA_TYPE_I32, 1, 1);
      tid.offset = mode ? 0 : (uint64_t)step * 4;
      memra_plug_must(&P[1], vt->add_i32(be, &tp, 1), "add_i32");
      memra_plug_must(&P[1], vt->rope(be, &tx, &tp, &rp), "rope");
      memra_plug_must(&P[1], vt->matmul(be, &ty, &tx, &tw, NULL), "matmul");
      memra_plug_must(&P[1], vt->argmax(be, &tid, &ty), "argmax");
    }
    if (mode == 1) {
      memra_plug_must(&P[1], vt->graph_end(be, &g), "graph_end");
      for (int step = 0; step < 3; ++step) {
        memra_plug_must(&P[1], vt->graph_launch(be, g), "graph_launch");
        memra_plug_must(&P[1], vt->buf_download(be, did.b[1], 0, &ids[1][step], 4), "download");
      }
      vt->graph_free(be, g);
    } else {
      memra_plug_must(&P[1], vt->buf_download(be, did.b[1], 0, ids[0], 12), "download");
    }
  }
  int same = memcmp(ids[0], ids[1], sizeof ids[0]) == 0;
  char what[96];
  snprintf(what, sizeof what, "3 steps eager %d,%d,%d vs replay %d,%d,%d", ids[0][0], ids[0][1],
           ids[0][2], ids[1][0], ids[1][1], ids[1][2]);
  ck_record("graph", what, !same, 0, same, same ? "identical" : "differs");
  ck_free(&dw);
  ck_free(&dx);
  ck_free(&dp);
  ck_free(&dy);
  ck_free(&did);
  free(w);
  free(x0);
}

/* Hostile arguments: a one-line error, never a crash. */
static void check_errors(void) {
  const memra_backend_vt *vt = P[1].vt;
  memra_backend *be = P[1].be;
  ck_buf d = ck_new(1024, NULL);
  memra_tensor y = ck_t(&d, 1, 0, 64, 8); /* 2048 bytes: overruns the 1024-byte buffer */
  memra_tensor x = ck_t(&d, 1, 0, 64, 2);
  memra_status st = vt->scale(be, &y, &x, 2.f);
  const char *msg = vt->last_error(be);
  /* the GPU plugins say "overruns", the CPU plugin "needs bytes [a, b) but its buffer has n" */
  int ok = st == MEMRA_E_INVALID && (strstr(msg, "overrun") || strstr(msg, "needs bytes")) &&
           !strchr(msg, '\n');
  ck_record("errors", "scale: y overruns its buffer", !ok, 0, ok, NULL);
  fprintf(stderr, "  -> %s\n", msg);
  ck_buf dw = ck_new(1024, NULL), dx = ck_new(1024, NULL), dy = ck_new(1024, NULL);
  memra_tensor w = ck_t(&dw, 1, MEMRA_TYPE_Q2_K, 256, 1);
  memra_tensor x1 = ck_t(&dx, 1, 0, 256, 1), y1 = ck_t(&dy, 1, 0, 1, 1);
  st = vt->matmul(be, &y1, &x1, &w, NULL);
  ck_free(&dw);
  ck_free(&dx);
  ck_free(&dy);
  ok = st == MEMRA_E_UNSUPPORTED || st == MEMRA_OK;
  ck_record("errors", "matmul: Q2_K weights", st != MEMRA_OK && !ok, 0, ok, vt->last_error(be));
  if (!g_quick) { /* the sanitizer reports the refused cudaMalloc as an API error */
    memra_buf *huge = NULL;
    st = vt->buf_alloc(be, 1ull << 50, &huge);
    ok = st == MEMRA_E_OOM && huge == NULL;
    ck_record("errors", "buf_alloc of 1 PiB", !ok, 0, ok, NULL);
  }
  st = vt->synchronize(be);
  ck_record("errors", "synchronize after the refusals", st != MEMRA_OK, 0, st == MEMRA_OK, NULL);
  ck_free(&d);
}

/* rmsnorm_matmul_mixed (ABI 1.23): a row of 4096 (+= res) normed with Q4_K q (4096 rows) and k
 * (1024) and Q6_K v (1024: a Q4_K_M layer's), with and without res, v given first or last.
 * Against the oracle; on the plugin under test x and xn bit-identical to rmsnorm's, q and k to
 * rmsnorm_matmul_n's (their own type's launch), and every y the same bits in a second call and as
 * row 0 of a 3-row call (which the GPU runs as the norm and v7 launches): a row's bits do not
 * depend on its batch. */
static void check_norm_mixed(void) {
  const int64_t K = 4096, M3 = 3;
  const char *op = "rmsnorm_matmul_mixed";
  if (!P[1].vt->rmsnorm_matmul_mixed) {
    ck_record(op, "Q4_K q, k + Q6_K v", INFINITY, 0, 0, "slot missing");
    return;
  }
  for (int c = 0; c < 3; ++c) {
    if (g_quick && c == 2) continue;
    const int has_res = c != 1, vfirst = c == 2;
    int64_t ns[3];
    int32_t ty[3];
    for (int j = 0; j < 3; ++j) {
      const int v = vfirst ? j == 0 : j == 2;
      ty[j] = v ? MEMRA_TYPE_Q6_K : MEMRA_TYPE_Q4_K;
      ns[j] = v || j == (vfirst ? 2 : 1) ? K / 4 : K;
    }
    ck_buf dw[3], dy[3], dy2[3], dy3[3];
    for (int j = 0; j < 3; ++j) {
      uint64_t nb;
      void *w = ck_rand_rows(ty[j], K, ns[j], &nb);
      dw[j] = ck_new(nb, w);
      free(w);
      dy[j] = ck_new((uint64_t)ns[j] * 4, NULL);
      dy2[j] = ck_new((uint64_t)ns[j] * 4, NULL);
      dy3[j] = ck_new((uint64_t)ns[j] * 4 * M3, NULL);
    }
    float *x = ck_frand_vec(K * M3, -2, 2), *r = ck_frand_vec(K * M3, -1, 1),
          *wn = ck_frand_vec(K, 0.5, 1.5);
    ck_buf dx = ck_new((uint64_t)K * 4, x), dx2 = ck_new((uint64_t)K * 4, x),
           dx3 = ck_new((uint64_t)K * 4 * M3, x), dr = ck_new((uint64_t)K * 4 * M3, r),
           dwn = ck_new((uint64_t)K * 4, wn), dxn = ck_new((uint64_t)K * 4, NULL),
           dxn2 = ck_new((uint64_t)K * 4, NULL), dxn3 = ck_new((uint64_t)K * 4 * M3, NULL);
    char what[96], w2[160];
    snprintf(what, sizeof what, "K=4096 %s%s", vfirst ? "v (Q6_K), q, k (Q4_K)" : "q, k, v",
             has_res ? " +res" : "");
    memra_tensor none = {0};
    int ok_ = 1;
    memra_tensor ws[2][3], ys[2][3];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        ws[i][j] = ck_t(&dw[j], i, ty[j], K, ns[j]);
        ys[i][j] = ck_t(&dy[j], i, 0, ns[j], 1);
      }
    BOTH(op, what,
         P[i].vt->rmsnorm_matmul_mixed(P[i].be, TP(&dxn, i, 0, K, 1), TP(&dx, i, 0, K, 1),
                                       has_res ? TP(&dr, i, 0, K, 1) : &none, TP(&dwn, i, 0, K, 1),
                                       1e-5f, 3, ys[i], ws[i], NULL));
    if (ok_) {
      compare_f32(op, "  x", &dx, K, 1e-6);
      compare_f32(op, "  xn", &dxn, K, 1e-5);
      for (int j = 0; j < 3; ++j)
        compare_f32(op, j == 0 ? "  y[0]" : j == 1 ? "  y[1]" : "  y[2]", &dy[j], ns[j], 1e-5);
      /* q and k as rmsnorm_matmul_n computes them, from the same x */
      memra_tensor yq[2], wq[2];
      int nq = 0;
      for (int j = 0; j < 3; ++j)
        if (ty[j] == MEMRA_TYPE_Q4_K) yq[nq] = ck_t(&dy2[j], 1, 0, ns[j], 1), wq[nq++] = ws[1][j];
      memra_plug_must(&P[1],
                      P[1].vt->rmsnorm_matmul_n(P[1].be, TP(&dxn2, 1, 0, K, 1),
                                                TP(&dx2, 1, 0, K, 1),
                                                has_res ? TP(&dr, 1, 0, K, 1) : &none,
                                                TP(&dwn, 1, 0, K, 1), 1e-5f, nq, yq, wq, NULL),
                      "rmsnorm_matmul_n");
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      snprintf(w2, sizeof w2, "%s: x == rmsnorm_matmul_n's", what);
      record_bitwise(w2, &dx, &dx2, (uint64_t)K * 4);
      snprintf(w2, sizeof w2, "%s: xn == rmsnorm_matmul_n's", what);
      record_bitwise(w2, &dxn, &dxn2, (uint64_t)K * 4);
      for (int j = 0; j < 3; ++j)
        if (ty[j] == MEMRA_TYPE_Q4_K) {
          snprintf(w2, sizeof w2, "%s: y[%d] (Q4_K) == rmsnorm_matmul_n's", what, j);
          record_bitwise(w2, &dy2[j], &dy[j], (uint64_t)ns[j] * 4);
        }
      /* a second call from the same x (the GPU's launch left its norm's ticket count) */
      ck_buf dxb = ck_new((uint64_t)K * 4, x), dxnb = ck_new((uint64_t)K * 4, NULL);
      memra_tensor yb[3];
      for (int j = 0; j < 3; ++j)
        yb[j] = ck_t(&dy2[j], 1, 0, ns[j], 1);
      memra_plug_must(
          &P[1],
          P[1].vt->rmsnorm_matmul_mixed(P[1].be, TP(&dxnb, 1, 0, K, 1), TP(&dxb, 1, 0, K, 1),
                                        has_res ? TP(&dr, 1, 0, K, 1) : &none, TP(&dwn, 1, 0, K, 1),
                                        1e-5f, 3, yb, ws[1], NULL),
          op);
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      for (int j = 0; j < 3; ++j) {
        snprintf(w2, sizeof w2, "%s: y[%d] the same in a second call", what, j);
        record_bitwise(w2, &dy2[j], &dy[j], (uint64_t)ns[j] * 4);
      }
      snprintf(w2, sizeof w2, "%s: x the same in a second call", what);
      record_bitwise(w2, &dxb, &dx, (uint64_t)K * 4);
      ck_free(&dxb);
      ck_free(&dxnb);
    }
    if (ok_) { /* three rows, row 0 the one above (its res too) */
      memra_tensor y3[3];
      for (int j = 0; j < 3; ++j)
        y3[j] = ck_t(&dy3[j], 1, 0, ns[j], M3);
      memra_plug_must(
          &P[1],
          P[1].vt->rmsnorm_matmul_mixed(P[1].be, TP(&dxn3, 1, 0, K, M3), TP(&dx3, 1, 0, K, M3),
                                        has_res ? TP(&dr, 1, 0, K, M3) : &none,
                                        TP(&dwn, 1, 0, K, 1), 1e-5f, 3, y3, ws[1], NULL),
          op);
      memra_plug_must(&P[1], P[1].vt->synchronize(P[1].be), "synchronize");
      for (int j = 0; j < 3; ++j) {
        snprintf(w2, sizeof w2, "%s: y[%d] row 0 of 3 == the row alone", what, j);
        record_bitwise(w2, &dy3[j], &dy[j], (uint64_t)ns[j] * 4);
      }
    }
    for (int j = 0; j < 3; ++j) {
      ck_free(&dw[j]);
      ck_free(&dy[j]);
      ck_free(&dy2[j]);
      ck_free(&dy3[j]);
    }
    ck_free(&dx);
    ck_free(&dx2);
    ck_free(&dx3);
    ck_free(&dr);
    ck_free(&dwn);
    ck_free(&dxn);
    ck_free(&dxn2);
    ck_free(&dxn3);
    free(x);
    free(r);
    free(wn);
  }
}

int main(int argc, char **argv) {
  ck_table_style_set(&(ck_table_style){15, 95, 95, 10, 64, 10, 64, "rel err"});
  ck_rng = 0x9E3779B97F4A7C15ull; /* the default seed */
  /* the GPU plugins' opt-in slots are checked too (read when a plugin opens) */
  setenv("MEMRA_ROPE_ATT", "1", 0);
  setenv("MEMRA_FFN_GLU", "1", 0);
  setenv("MEMRA_NORM_MM", "1", 0);
  setenv("MEMRA_MM_NORM", "1", 0);
  setenv("MEMRA_QKV_ROPE", "1", 0);
  setenv("MEMRA_ACC", "1", 0);
  setenv("MEMRA_QKV_MIXED", "1", 0);
  const char *paths[2] = {NULL, NULL};
  if (ck_args(argc, argv, &g_quick, paths, 2) != 2) {
    fprintf(stderr, "usage: opcheck [--quick] [--seed N] REF.so TEST.so\n");
    return 2;
  }
  for (int i = 0; i < 2; ++i)
    if (memra_plug_open(&P[i], paths[i])) return 2;
  ck_use_plugs(P, 2);
  check_get_rows();
  check_matmul();
  check_matmul_q8();
  check_matmul_n();
  check_ffn_glu();
  check_norm_proj();
  check_norm_mixed();
  check_matmul_rmsnorm();
  check_matmul_acc();
  check_rmsnorm();
  check_rope();
  check_kv_store();
  check_rope_kv();
  check_qk_rope_kv();
  check_matmul_n_rope_kv();
  check_attention();
  check_rope_kv_attend();
  check_attention_gate();
  check_elementwise();
  check_argmax();
  check_sample();
  check_graph();
  check_errors();
  char title[256];
  snprintf(title, sizeof title, "opcheck %s vs %s", P[1].vt->name, P[0].vt->name);
  ck_table_print(title);
  for (int i = 0; i < 2; ++i)
    memra_plug_close(&P[i]);
  return ck_table_failed() ? 1 : 0;
}
