/* gemm_check.c — the gemm op of a GPU plugin (tensor-core prefill GEMM) against the CPU
 * plugin's matmul, on seeded random inputs with ragged shapes.
 *
 *   gemm_check [--quick] [--seed N] REF.so TEST.so
 *
 * Per weight type: x has M rows; the reference is REF's matmul over all of them. The
 * plugin under test computes all M rows (y poisoned with NaN first, guard bytes after it),
 * checked against the reference: per row max |err| <= tol * rms(reference row) and the
 * relative L2 error bounded, both set by the operand precision (f16: 4e-3 and 5e-4, 6e-3
 * once quantized weights are rounded to f16 too; bf16: 3e-2 and 3e-3; F32 weights go to
 * matmul: 1e-4 and 1e-5). Then sub-batches of other sizes at other offsets (M in {1, 7,
 * 64, 129, 512}), a strided x and y, and x passed already rounded to the operand type
 * (F16 or BF16) must reproduce the full batch's rows bit for bit: a row's result depends
 * on neither M, nor its place, nor its neighbours (no split-K), whatever tile shape each
 * M gets. Shapes: N and K not multiples of the tiles, K % 8 != 0 for float weights, a
 * large case (2048 x 4400) whose tiles outnumber the SMs, and decoded weights larger than
 * one workspace chunk. gemm_n (ABI 1.5, outputs sharing x in one grouped launch): each
 * output bit-identical to a separate gemm on the same plugin, and within the tolerances of
 * REF's gemm_n (its oracle: matmul per output), for q/k/v- and gate/up-shaped groups, ragged
 * M, biases on some outputs, groups whose decoded weights exceed one workspace chunk in all
 * (one launch up to the 256 MiB group budget, e.g. gate/up of Llama-3.1-8B; one gemm per
 * output beyond it). The staging decode (quantized weights -> f16) of Q8_0 and Q6_K bit for
 * bit against the CPU dequant rounded to f16, through one-hot x. Hostile arguments must fail
 * with their one-line message. One line
 * per case; the exit status is non-zero when any case fails. --quick: small shapes (for
 * compute-sanitizer). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/quant/quant.h"
#include "tools/device/check_report.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

static memra_plug P[2]; /* 0: reference (CPU), 1: under test */
static int g_quick;

/* y (test) against ref: no non-finite values, the worst row's max|err| / rms(reference
 * row) within tol_max and the relative L2 error within tol_l2. */
static void compare_rows(const char *what, const float *ref, const float *y, int64_t m, int64_t n,
                         double tol_max, double tol_l2) {
  double worst = 0, num = 0, den = 0;
  int64_t bad = 0, worst_row = 0;
  for (int64_t r = 0; r < m; ++r) {
    double ss = 0, mx = 0;
    for (int64_t j = 0; j < n; ++j)
      ss += (double)ref[r * n + j] * ref[r * n + j];
    const double rms = sqrt(ss / (double)n);
    for (int64_t j = 0; j < n; ++j) {
      const double a = ref[r * n + j], b = y[r * n + j];
      if (!isfinite(b) || !isfinite(a)) {
        ++bad;
        continue;
      }
      const double e = fabs(a - b);
      if (e > mx) mx = e;
      num += e * e;
      den += a * a;
    }
    const double rel = rms > 0 ? mx / rms : mx;
    if (rel > worst) {
      worst = rel;
      worst_row = r;
    }
  }
  const double l2 = den > 0 ? sqrt(num / den) : sqrt(num);
  ck_line(what, bad == 0 && worst <= tol_max && l2 <= tol_l2,
          "max|err|/rms %.2e (row %" PRId64
          ", tol %.0e), rel L2 %.2e (tol %.0e), non-finite %" PRId64,
          worst, worst_row, tol_max, l2, tol_l2, bad);
}

/* One weight type at one shape: reference over M rows, then the invariance variants. */
static void check_type(int32_t type, int64_t M, int64_t N, int64_t K, int use_bias) {
  const char *tn = memra_type_info(type).name;
  /* f16 operands: unit roundoff 2^-11 on x and w, so about 2e-4 relative L2 (3e-4 once a
   * quantized weight is rounded to f16 too), and the worst element of a row a few times
   * more; bf16 (2^-8) eight times that; F32 weights run matmul (f32 throughout). */
  const int quant = memra_type_info(type).blck > 1;
  const double tol_max = type == MEMRA_TYPE_F32    ? 1e-4
                         : type == MEMRA_TYPE_BF16 ? 3e-2
                         : quant                   ? 6e-3
                                                   : 4e-3;
  const double tol_l2 = type == MEMRA_TYPE_F32 ? 1e-5 : type == MEMRA_TYPE_BF16 ? 3e-3 : 5e-4;
  uint64_t wbytes;
  void *w = ck_rand_rows(type, K, N, &wbytes);
  float *x = ck_xmalloc((size_t)(M * K) * 4), *bias = ck_xmalloc((size_t)N * 4);
  for (int64_t i = 0; i < M * K; ++i)
    x[i] = ck_frand(-1, 1);
  for (int64_t i = 0; i < N; ++i)
    bias[i] = ck_frand(-1, 1);
  const uint64_t xb = (uint64_t)M * K * 4, yb = (uint64_t)M * N * 4;
  memra_buf *dw[2], *dx[2], *dy[2], *db[2];
  for (int i = 0; i < 2; ++i) {
    dw[i] = ck_alloc(&P[i], wbytes, w);
    dx[i] = ck_alloc(&P[i], xb, x);
    db[i] = ck_alloc(&P[i], (uint64_t)N * 4, bias);
    dy[i] = ck_alloc(&P[i], yb, NULL);
  }
  memra_tensor none;
  memset(&none, 0, sizeof none);
  char what[96];
  snprintf(what, sizeof what, "%s M=%" PRId64 " N=%" PRId64 " K=%" PRId64 "%s%s", tn, M, N, K,
           use_bias ? " +bias" : "", type == MEMRA_TYPE_F32 ? " (matmul)" : "");

  /* reference (matmul on REF) and the full batch (gemm on TEST) */
  for (int i = 0; i < 2; ++i) {
    const memra_tensor ty = ck_tensor(dy[i], 0, MEMRA_TYPE_F32, N, M, 0),
                       tx = ck_tensor(dx[i], 0, MEMRA_TYPE_F32, K, M, 0),
                       tw = ck_tensor(dw[i], 0, type, K, N, 0),
                       tb = ck_tensor(db[i], 0, MEMRA_TYPE_F32, N, 1, 0);
    const memra_tensor *bp = use_bias ? &tb : &none;
    memra_status st = i == 0 ? P[0].vt->matmul(P[0].be, &ty, &tx, &tw, bp)
                             : P[1].vt->gemm(P[1].be, &ty, &tx, &tw, bp);
    if (st == MEMRA_OK) st = P[i].vt->synchronize(P[i].be);
    memra_plug_must(&P[i], st, i == 0 ? "reference matmul" : "gemm");
  }
  float *ref = ck_download(&P[0], dy[0], 0, yb), *full = ck_download(&P[1], dy[1], 0, yb);
  compare_rows(what, ref, full, M, N, tol_max, tol_l2);
  if (!ck_guard_ok1(&P[1], dy[1], yb)) ck_line(what, 0, "wrote past y (guard bytes)");

  /* sub-batches at other offsets: bit-identical to the full batch's rows */
  static const int64_t subs[] = {1, 7, 64, 129, 512};
  for (size_t s = 0; s < sizeof subs / sizeof subs[0]; ++s) {
    const int64_t m = subs[s];
    if (m >= M) continue;
    const int64_t off = (m * 37 + 11) % (M - m + 1);
    ck_poison1(&P[1], dy[1], yb);
    const memra_tensor ty = ck_tensor(dy[1], 0, MEMRA_TYPE_F32, N, m, 0),
                       tx = ck_tensor(dx[1], (uint64_t)off * K * 4, MEMRA_TYPE_F32, K, m, 0),
                       tw = ck_tensor(dw[1], 0, type, K, N, 0),
                       tb = ck_tensor(db[1], 0, MEMRA_TYPE_F32, N, 1, 0);
    memra_status st = P[1].vt->gemm(P[1].be, &ty, &tx, &tw, use_bias ? &tb : &none);
    if (st == MEMRA_OK) st = P[1].vt->synchronize(P[1].be);
    memra_plug_must(&P[1], st, "gemm (sub-batch)");
    float *part = ck_download(&P[1], dy[1], 0, (uint64_t)m * N * 4);
    const int same = memcmp(part, full + off * N, (size_t)(m * N) * 4) == 0;
    char w2[96];
    snprintf(w2, sizeof w2, "%s rows [%" PRId64 ", +%" PRId64 ") of %" PRId64, tn, off, m, M);
    ck_line(w2, same, same ? "bit-identical to the full batch" : "differs from the full batch");
    free(part);
  }

  /* strided x (K + 1 floats apart: no vector loads) and y (N + 3 apart) */
  {
    const int64_t m = M < 129 ? M : 129, off = M - m, xs = K + 1, ys = N + 3;
    float *xh = ck_xmalloc((size_t)(m * xs) * 4);
    for (int64_t r = 0; r < m; ++r) {
      memcpy(xh + r * xs, x + (off + r) * K, (size_t)K * 4);
      xh[r * xs + K] = NAN; /* the gap is never read */
    }
    memra_buf *sx = ck_alloc(&P[1], (uint64_t)(m * xs) * 4, xh),
              *sy = ck_alloc(&P[1], (uint64_t)(m * ys) * 4, NULL);
    const memra_tensor ty = ck_tensor(sy, 0, MEMRA_TYPE_F32, N, m, (uint64_t)ys * 4),
                       tx = ck_tensor(sx, 0, MEMRA_TYPE_F32, K, m, (uint64_t)xs * 4),
                       tw = ck_tensor(dw[1], 0, type, K, N, 0),
                       tb = ck_tensor(db[1], 0, MEMRA_TYPE_F32, N, 1, 0);
    memra_status st = P[1].vt->gemm(P[1].be, &ty, &tx, &tw, use_bias ? &tb : &none);
    if (st == MEMRA_OK) st = P[1].vt->synchronize(P[1].be);
    memra_plug_must(&P[1], st, "gemm (strided)");
    float *ys_h = ck_download(&P[1], sy, 0, (uint64_t)(m * ys) * 4);
    int same = 1;
    for (int64_t r = 0; r < m; ++r)
      same &= memcmp(ys_h + r * ys, full + (off + r) * N, (size_t)N * 4) == 0;
    char w2[96];
    snprintf(w2, sizeof w2, "%s strided x, y (%" PRId64 " rows)", tn, m);
    ck_line(w2, same && ck_guard_ok1(&P[1], sy, (uint64_t)(m * ys) * 4),
            same ? "bit-identical to the full batch" : "differs from the full batch");
    free(ys_h);
    free(xh);
    P[1].vt->buf_free(P[1].be, sx);
    P[1].vt->buf_free(P[1].be, sy);
  }

  /* x already in the operand type (the benchmark's kernel-only path): same bits, since
   * the plugin rounds f32 to nearest even as memra_f32_to_fp16/bf16 do (|x| <= 1 here) */
  if (type != MEMRA_TYPE_F32) {
    const int bf = type == MEMRA_TYPE_BF16;
    const int64_t m = M < 64 ? M : 64, off = M - m;
    uint16_t *xh = ck_xmalloc((size_t)(m * K) * 2);
    for (int64_t i = 0; i < m * K; ++i)
      xh[i] = bf ? memra_f32_to_bf16(x[off * K + i]) : memra_f32_to_fp16(x[off * K + i]);
    const uint64_t stride = (uint64_t)(K + 7) / 8 * 16; /* 16-byte rows, as required */
    uint8_t *xp = ck_xmalloc(stride * m);
    memset(xp, 0, stride * m);
    for (int64_t r = 0; r < m; ++r)
      memcpy(xp + r * stride, xh + r * K, (size_t)K * 2);
    memra_buf *hx = ck_alloc(&P[1], stride * m, xp);
    ck_poison1(&P[1], dy[1], yb);
    const memra_tensor ty = ck_tensor(dy[1], 0, MEMRA_TYPE_F32, N, m, 0),
                       tx = ck_tensor(hx, 0, bf ? MEMRA_TYPE_BF16 : MEMRA_TYPE_F16, K, m, stride),
                       tw = ck_tensor(dw[1], 0, type, K, N, 0),
                       tb = ck_tensor(db[1], 0, MEMRA_TYPE_F32, N, 1, 0);
    memra_status st = P[1].vt->gemm(P[1].be, &ty, &tx, &tw, use_bias ? &tb : &none);
    if (st == MEMRA_OK) st = P[1].vt->synchronize(P[1].be);
    memra_plug_must(&P[1], st, "gemm (16-bit x)");
    float *part = ck_download(&P[1], dy[1], 0, (uint64_t)m * N * 4);
    const int same = memcmp(part, full + off * N, (size_t)(m * N) * 4) == 0;
    char w2[96];
    snprintf(w2, sizeof w2, "%s x given as %s (%" PRId64 " rows)", tn, bf ? "BF16" : "F16", m);
    ck_line(w2, same, same ? "bit-identical to the F32 x path" : "differs from the F32 x path");
    free(part);
    free(xp);
    free(xh);
    P[1].vt->buf_free(P[1].be, hx);
  }

  free(ref);
  free(full);
  for (int i = 0; i < 2; ++i) {
    P[i].vt->buf_free(P[i].be, dw[i]);
    P[i].vt->buf_free(P[i].be, dx[i]);
    P[i].vt->buf_free(P[i].be, dy[i]);
    P[i].vt->buf_free(P[i].be, db[i]);
  }
  free(w);
  free(x);
  free(bias);
}

/* Hostile arguments: each must fail with its status and a message naming the problem. */
/* gemm_n over n outputs of widths ns (bias on outputs 0 and 2) vs separate gemm calls on
 * TEST (bitwise) and vs REF's gemm_n (tolerances as check_type; skipped when !with_ref). */
static void check_gemm_n(int32_t type, int64_t M, int n, const int64_t *ns, int64_t K,
                         int with_ref) {
  const int quant = memra_type_info(type).blck > 1;
  const double tol_max = type == MEMRA_TYPE_BF16 ? 3e-2 : quant ? 6e-3 : 4e-3;
  const double tol_l2 = type == MEMRA_TYPE_BF16 ? 3e-3 : 5e-4;
  float *x = ck_xmalloc((size_t)(M * K) * 4);
  for (int64_t i = 0; i < M * K; ++i)
    x[i] = ck_frand(-1, 1);
  const int np = with_ref ? 2 : 1;
  memra_buf *dx[2], *dw[2][4], *db[2][4], *dy[2][4], *dsep[4];
  memra_tensor ty[2][4], tw[2][4], tb[2][4], tx[2], tsep[4];
  memra_tensor none;
  memset(&none, 0, sizeof none);
  for (int i = 0; i < np; ++i) {
    const int pi = 1 - i; /* 0: TEST, 1: REF */
    dx[i] = ck_alloc(&P[pi], (uint64_t)M * K * 4, x);
    tx[i] = ck_tensor(dx[i], 0, MEMRA_TYPE_F32, K, M, 0);
  }
  for (int j = 0; j < n; ++j) {
    uint64_t wb;
    void *w = ck_rand_rows(type, K, ns[j], &wb);
    float *bias = ck_xmalloc((size_t)ns[j] * 4);
    for (int64_t e = 0; e < ns[j]; ++e)
      bias[e] = ck_frand(-1, 1);
    for (int i = 0; i < np; ++i) {
      const int pi = 1 - i;
      dw[i][j] = ck_alloc(&P[pi], wb, w);
      db[i][j] = ck_alloc(&P[pi], (uint64_t)ns[j] * 4, bias);
      dy[i][j] = ck_alloc(&P[pi], (uint64_t)M * ns[j] * 4, NULL);
      tw[i][j] = ck_tensor(dw[i][j], 0, type, K, ns[j], 0);
      tb[i][j] = j == 1 ? none : ck_tensor(db[i][j], 0, MEMRA_TYPE_F32, ns[j], 1, 0);
      ty[i][j] = ck_tensor(dy[i][j], 0, MEMRA_TYPE_F32, ns[j], M, 0);
    }
    dsep[j] = ck_alloc(&P[1], (uint64_t)M * ns[j] * 4, NULL);
    tsep[j] = ck_tensor(dsep[j], 0, MEMRA_TYPE_F32, ns[j], M, 0);
    free(w);
    free(bias);
  }
  char what[96];
  snprintf(what, sizeof what, "gemm_n %s M=%" PRId64 " n=%d K=%" PRId64, memra_type_info(type).name,
           M, n, K);
  memra_status st = P[1].vt->gemm_n(P[1].be, n, ty[0], &tx[0], tw[0], tb[0]);
  for (int j = 0; j < n && st == MEMRA_OK; ++j)
    st = P[1].vt->gemm(P[1].be, &tsep[j], &tx[0], &tw[0][j], &tb[0][j]);
  if (st == MEMRA_OK) st = P[1].vt->synchronize(P[1].be);
  memra_plug_must(&P[1], st, "gemm_n / gemm");
  if (with_ref) {
    st = P[0].vt->gemm_n(P[0].be, n, ty[1], &tx[1], tw[1], tb[1]);
    if (st == MEMRA_OK) st = P[0].vt->synchronize(P[0].be);
    memra_plug_must(&P[0], st, "reference gemm_n");
  }
  for (int j = 0; j < n; ++j) {
    const uint64_t yb = (uint64_t)M * ns[j] * 4;
    float *got = ck_download(&P[1], dy[0][j], 0, yb), *sep = ck_download(&P[1], dsep[j], 0, yb);
    int64_t diff = 0;
    for (int64_t e = 0; e < M * ns[j]; ++e)
      diff += memcmp(&got[e], &sep[e], 4) != 0;
    char w2[128];
    snprintf(w2, sizeof w2, "%s: y[%d] (N=%" PRId64 ") == gemm", what, j, ns[j]);
    ck_line(w2, diff == 0 && ck_guard_ok1(&P[1], dy[0][j], yb), "%" PRId64 " elements differ%s",
            diff, ck_guard_ok1(&P[1], dy[0][j], yb) ? "" : ", wrote past y");
    if (with_ref) {
      float *ref = ck_download(&P[0], dy[1][j], 0, yb);
      snprintf(w2, sizeof w2, "%s: y[%d] vs REF", what, j);
      compare_rows(w2, ref, got, M, ns[j], tol_max, tol_l2);
      free(ref);
    }
    free(got);
    free(sep);
  }
  for (int i = 0; i < np; ++i) {
    const int pi = 1 - i;
    P[pi].vt->buf_free(P[pi].be, dx[i]);
    for (int j = 0; j < n; ++j) {
      P[pi].vt->buf_free(P[pi].be, dw[i][j]);
      P[pi].vt->buf_free(P[pi].be, db[i][j]);
      P[pi].vt->buf_free(P[pi].be, dy[i][j]);
    }
  }
  for (int j = 0; j < n; ++j)
    P[1].vt->buf_free(P[1].be, dsep[j]);
  free(x);
}

/* gemm_glu (ABI 1.6) on TEST: y = act(x . wg^T) * (x . wu^T), F32 or a 16-bit y (yt), vs
 * TEST's own gemm_n + glu into the same type, bitwise, and vs REF's gemm_n + glu (widened;
 * tolerances below). x is F32 (converted by the op). */
static void check_gemm_glu(int32_t type, int64_t M, int64_t N, int64_t K, int32_t yt, int act) {
  const int quant = memra_type_info(type).blck > 1,
            bf = type == MEMRA_TYPE_BF16 || yt == MEMRA_TYPE_BF16;
  /* max|err| / rms: glu multiplies two products' errors and its rows are heavy-tailed (a
   * large gate times a large up), so the worst element runs 3-4x a single gemm's (seen on
   * the H200: F16 1.1e-2, Q4_K 1.7e-2, BF16 5.7e-2); rel L2 stays within 2x gemm's */
  const double tol_max = 4 * (bf ? 3e-2 : quant ? 6e-3 : 4e-3);
  const double tol_l2 = 2 * (type == MEMRA_TYPE_BF16 || yt == MEMRA_TYPE_BF16 ? 3e-3 : 5e-4);
  const uint64_t esz = yt == MEMRA_TYPE_F32 ? 4 : 2, yb = (uint64_t)M * N * esz;
  float *x = ck_xmalloc((size_t)(M * K) * 4);
  for (int64_t i = 0; i < M * K; ++i)
    x[i] = ck_frand(-1, 1);
  uint64_t wb;
  void *wg = ck_rand_rows(type, K, N, &wb), *wu = ck_rand_rows(type, K, N, &wb);
  memra_buf *dx[2], *dg[2], *du[2], *dgu[2], *dy[2], *dfused;
  memra_tensor none;
  memset(&none, 0, sizeof none);
  for (int i = 0; i < 2; ++i) {
    dx[i] = ck_alloc(&P[i], (uint64_t)M * K * 4, x);
    dg[i] = ck_alloc(&P[i], wb, wg);
    du[i] = ck_alloc(&P[i], wb, wu);
    dgu[i] = ck_alloc(&P[i], 2ull * M * N * 4, NULL);
    dy[i] = ck_alloc(&P[i], yb, NULL);
  }
  dfused = ck_alloc(&P[1], yb, NULL);
  char what[128];
  snprintf(what, sizeof what, "gemm_glu %s M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " y %s %s",
           memra_type_info(type).name, M, N, K, memra_type_info(yt).name, act ? "GELU" : "SILU");
  for (int i = 0; i < 2; ++i) { /* gemm_n + glu on both plugins */
    const memra_tensor tx = ck_tensor(dx[i], 0, MEMRA_TYPE_F32, K, M, 0);
    const memra_tensor tw[2] = {ck_tensor(dg[i], 0, type, K, N, 0),
                                ck_tensor(du[i], 0, type, K, N, 0)};
    const memra_tensor ty[2] = {ck_tensor(dgu[i], 0, MEMRA_TYPE_F32, N, M, 0),
                                ck_tensor(dgu[i], (uint64_t)M * N * 4, MEMRA_TYPE_F32, N, M, 0)};
    const memra_tensor tb[2] = {none, none}, to = ck_tensor(dy[i], 0, yt, N, M, 0);
    memra_status st = P[i].vt->gemm_n(P[i].be, 2, ty, &tx, tw, tb);
    if (st == MEMRA_OK) st = P[i].vt->glu(P[i].be, &to, &ty[0], &ty[1], act);
    if (st == MEMRA_OK && i == 1) {
      const memra_tensor tf = ck_tensor(dfused, 0, yt, N, M, 0);
      st = P[1].vt->gemm_glu(P[1].be, &tf, &tx, &tw[0], &tw[1], act);
    }
    if (st == MEMRA_OK) st = P[i].vt->synchronize(P[i].be);
    memra_plug_must(&P[i], st, i ? "gemm_glu / gemm_n + glu" : "reference gemm_n + glu");
  }
  uint8_t *fused = ck_download(&P[1], dfused, 0, yb), *sep = ck_download(&P[1], dy[1], 0, yb),
          *ref = ck_download(&P[0], dy[0], 0, yb);
  int64_t diff = 0;
  for (int64_t e = 0; e < M * N; ++e)
    diff += memcmp(fused + e * esz, sep + e * esz, esz) != 0;
  char w2[160];
  snprintf(w2, sizeof w2, "%s == gemm_n + glu", what);
  ck_line(w2, diff == 0 && ck_guard_ok1(&P[1], dfused, yb), "%" PRId64 " elements differ%s", diff,
          ck_guard_ok1(&P[1], dfused, yb) ? "" : ", wrote past y");
  float *fr = ck_xmalloc((size_t)(M * N) * 4), *fg = ck_xmalloc((size_t)(M * N) * 4);
  for (int64_t e = 0; e < M * N; ++e) {
    if (esz == 4) {
      memcpy(&fr[e], ref + 4 * e, 4);
      memcpy(&fg[e], fused + 4 * e, 4);
    } else {
      uint16_t a, b;
      memcpy(&a, ref + 2 * e, 2);
      memcpy(&b, fused + 2 * e, 2);
      fr[e] = yt == MEMRA_TYPE_BF16 ? memra_bf16_to_f32(a) : memra_fp16_to_f32(a);
      fg[e] = yt == MEMRA_TYPE_BF16 ? memra_bf16_to_f32(b) : memra_fp16_to_f32(b);
    }
  }
  snprintf(w2, sizeof w2, "%s vs REF", what);
  compare_rows(w2, fr, fg, M, N, tol_max, tol_l2);
  free(fr);
  free(fg);
  free(fused);
  free(sep);
  free(ref);
  for (int i = 0; i < 2; ++i) {
    P[i].vt->buf_free(P[i].be, dx[i]);
    P[i].vt->buf_free(P[i].be, dg[i]);
    P[i].vt->buf_free(P[i].be, du[i]);
    P[i].vt->buf_free(P[i].be, dgu[i]);
    P[i].vt->buf_free(P[i].be, dy[i]);
  }
  P[1].vt->buf_free(P[1].be, dfused);
  free(x);
  free(wg);
  free(wu);
}

/* The staging decode bit for bit: x holds one-hot rows (row i = e_i, exact in f16), so
 * y[i][n] = B[n][i], the decoded weight as the GEMM read it (one product 1 x b: exact in
 * f32). Expected: the CPU dequant (plugins/quant, f32) rounded to f16, nearest even, which
 * is what the decode stores. w starts `off` bytes into its buffer with rows `pad` bytes
 * longer than packed, so rows and tiles start at many alignments mod 16. Only for formats
 * whose GPU decode does the oracle's arithmetic (Q8_0, Q6_K: products only). A -0 weight
 * reads back as +0 after the f32 sum, so values are compared as floats. */
static void check_stage(int32_t type, int64_t N, int64_t K, uint64_t off, uint64_t pad) {
  const uint64_t rb = memra_type_row_bytes(type, K), nb1 = rb + pad, wb = off + nb1 * N;
  uint64_t packed;
  uint8_t *w0 = ck_rand_rows(type, K, N, &packed), *w = ck_xmalloc(wb);
  memset(w, 0x5A, wb);
  for (int64_t n = 0; n < N; ++n)
    memcpy(w + off + nb1 * n, w0 + rb * n, rb);
  const int64_t M = K;
  float *x = ck_xmalloc((size_t)(M * K) * 4), *ref = ck_xmalloc((size_t)K * 4);
  memset(x, 0, (size_t)(M * K) * 4);
  for (int64_t i = 0; i < M; ++i)
    x[i * K + i] = 1.f;
  memra_buf *dw = ck_alloc(&P[1], wb, w), *dx = ck_alloc(&P[1], (uint64_t)(M * K) * 4, x);
  const uint64_t yb = (uint64_t)(M * N) * 4;
  memra_buf *dy = ck_alloc(&P[1], yb, NULL);
  const memra_tensor tw = ck_tensor(dw, off, type, K, N, nb1),
                     tx = ck_tensor(dx, 0, MEMRA_TYPE_F32, K, M, 0),
                     ty = ck_tensor(dy, 0, MEMRA_TYPE_F32, N, M, 0), none = ck_none();
  memra_status st = P[1].vt->gemm(P[1].be, &ty, &tx, &tw, &none);
  if (st == MEMRA_OK) st = P[1].vt->synchronize(P[1].be);
  memra_plug_must(&P[1], st, "gemm (staging decode)");
  float *y = ck_download(&P[1], dy, 0, yb);
  int64_t diff = 0, fn = -1, fk = -1;
  float got = 0, want = 0;
  for (int64_t n = 0; n < N; ++n) {
    memra_dequant_row(type, w0 + rb * n, ref, K);
    for (int64_t k = 0; k < K; ++k) {
      const float e = memra_fp16_to_f32(memra_f32_to_fp16(ref[k])), g = y[k * N + n];
      if (g == e) continue;
      if (diff++ == 0) {
        fn = n;
        fk = k;
        got = g;
        want = e;
      }
    }
  }
  char what[96];
  snprintf(what, sizeof what, "decode %s N=%" PRId64 " K=%" PRId64 " off %d pad %d",
           memra_type_info(type).name, N, K, (int)off, (int)pad);
  const int guard = ck_guard_ok1(&P[1], dy, yb);
  ck_line(what, diff == 0 && guard,
          "%" PRId64 " of %" PRId64 " weights differ from f16(CPU dequant)%s (first: row %" PRId64
          ", k %" PRId64 ": %a, want %a)",
          diff, N * K, guard ? "" : ", wrote past y", fn, fk, (double)got, (double)want);
  P[1].vt->buf_free(P[1].be, dw);
  P[1].vt->buf_free(P[1].be, dx);
  P[1].vt->buf_free(P[1].be, dy);
  free(y);
  free(ref);
  free(x);
  free(w);
  free(w0);
}

static void expect_err(const char *what, memra_status want, const char *needle, memra_status got) {
  const char *msg = got == MEMRA_OK ? "(accepted)" : P[1].vt->last_error(P[1].be);
  ck_line(what, got == want && strstr(msg, needle) != NULL, "status %d: %s", (int)got, msg);
}
static void check_errors(void) {
  const int64_t K = 256, N = 40, M = 5;
  uint64_t wb;
  void *w = ck_rand_rows(MEMRA_TYPE_F16, K, N, &wb), *q2 = NULL;
  memra_buf *dw = ck_alloc(&P[1], wb, w), *dx = ck_alloc(&P[1], (uint64_t)M * K * 4, NULL);
  memra_buf *dy = ck_alloc(&P[1], (uint64_t)M * N * 4, NULL);
  /* x holds real floats for the cases that get past the checks */
  float *x = ck_xmalloc((size_t)(M * K) * 4);
  for (int64_t i = 0; i < M * K; ++i)
    x[i] = ck_frand(-1, 1);
  memra_plug_must(&P[1], P[1].vt->buf_upload(P[1].be, dx, 0, x, (uint64_t)M * K * 4), "upload");
  memra_tensor none, ty = ck_tensor(dy, 0, MEMRA_TYPE_F32, N, M, 0),
                     tx = ck_tensor(dx, 0, MEMRA_TYPE_F32, K, M, 0),
                     tw = ck_tensor(dw, 0, MEMRA_TYPE_F16, K, N, 0);
  memset(&none, 0, sizeof none);
  const memra_backend_vt *vt = P[1].vt;
  memra_backend *be = P[1].be;

  memra_tensor t = tx;
  t.type = MEMRA_TYPE_I32;
  expect_err("errors: I32 x", MEMRA_E_INVALID, "gemm: x is I32", vt->gemm(be, &ty, &t, &tw, &none));
  t = tw;
  t.ne0 = K - 32;
  expect_err("errors: K mismatch", MEMRA_E_INVALID, "shapes disagree",
             vt->gemm(be, &ty, &tx, &t, &none));
  t = ty;
  t.ne0 = N + 1;
  t.nb1 = (uint64_t)(N + 1) * 4; /* inside the buffer (guard bytes): only the shape is wrong */
  expect_err("errors: N mismatch", MEMRA_E_INVALID, "shapes disagree",
             vt->gemm(be, &t, &tx, &tw, &none));
  t = tx;
  t.ne1 = 1 << 20;
  expect_err("errors: x past its buffer", MEMRA_E_INVALID, "overrun the buffer",
             vt->gemm(be, &ty, &t, &tw, &none));
  memra_tensor tb = ck_tensor(dy, 0, MEMRA_TYPE_F32, N - 1, 1, 0);
  t = ck_tensor(dx, 0, MEMRA_TYPE_F32, N, M, 0);
  expect_err("errors: bias length", MEMRA_E_INVALID, "bias has 39 elements",
             vt->gemm(be, &t, &tx, &tw, &tb));
  expect_err("errors: y aliases x", MEMRA_E_INVALID, "cannot be computed in place",
             vt->gemm(be, &t, &tx, &tw, &none));
  t = tx;
  t.type = MEMRA_TYPE_BF16;
  t.nb1 = (uint64_t)K * 2;
  expect_err("errors: BF16 x with F16 w", MEMRA_E_INVALID, "expected F32 or F16",
             vt->gemm(be, &ty, &t, &tw, &none));
  t.type = MEMRA_TYPE_F16;
  t.offset = 2;
  t.ne1 = 2;
  memra_tensor y2 = ty;
  y2.ne1 = 2;
  expect_err("errors: unaligned F16 x", MEMRA_E_INVALID, "16-byte aligned",
             vt->gemm(be, &y2, &t, &tw, &none));
  uint64_t qb;
  q2 = ck_xmalloc(memra_type_row_bytes(MEMRA_TYPE_Q2_K, K) * N);
  qb = memra_type_row_bytes(MEMRA_TYPE_Q2_K, K) * N;
  memset(q2, 0x11, qb);
  memra_buf *dq = ck_alloc(&P[1], qb, q2);
  t = ck_tensor(dq, 0, MEMRA_TYPE_Q2_K, K, N, 0);
  expect_err("errors: Q2_K weights", MEMRA_E_UNSUPPORTED, "no CUDA kernel for Q2_K",
             vt->gemm(be, &ty, &tx, &t, &none));
  t = tx;
  t.ne1 = 0;
  memra_tensor y0 = ty;
  y0.ne1 = 0;
  const memra_status s0 = vt->gemm(be, &y0, &t, &tw, &none);
  ck_line("errors: M = 0 is a no-op", s0 == MEMRA_OK, "status %d", (int)s0);
  if (vt->gemm_n) { /* the grouped op's own checks, then each output's, named by index */
    memra_tensor ys[2] = {ty, ty}, ws[2] = {tw, tw}, bs[2] = {none, none};
    expect_err("errors: gemm_n 0 outputs", MEMRA_E_INVALID, "gemm_n: 0 outputs",
               vt->gemm_n(be, 0, ys, &tx, ws, bs));
    expect_err("errors: gemm_n 5 outputs", MEMRA_E_INVALID, "gemm_n: 5 outputs",
               vt->gemm_n(be, 5, ys, &tx, ws, bs));
    ws[1] = ck_tensor(dq, 0, MEMRA_TYPE_Q2_K, K, N, 0);
    expect_err("errors: gemm_n mixed types", MEMRA_E_INVALID,
               "gemm_n: w[1] is Q2_K with K 256, w[0] F16", vt->gemm_n(be, 2, ys, &tx, ws, bs));
    ws[1] = tw;
    ys[1].ne0 = N - 1;
    expect_err("errors: gemm_n y[1] shape", MEMRA_E_INVALID, "gemm_n[1]: y [5, 39] = x",
               vt->gemm_n(be, 2, ys, &tx, ws, bs));
    ys[1].ne0 = N;
    expect_err("errors: gemm_n y[1] overlaps y[0]", MEMRA_E_INVALID, "gemm_n: y[1] overlaps y[0]",
               vt->gemm_n(be, 2, ys, &tx, ws, bs));
  }
  vt->buf_free(be, dq);
  vt->buf_free(be, dw);
  vt->buf_free(be, dx);
  vt->buf_free(be, dy);
  free(q2);
  free(w);
  free(x);
}

static int64_t k_for(int32_t type, int odd) {
  const int blck = memra_type_info(type).blck;
  if (blck == 1) return odd ? 1003 : 1000; /* 1000: a K tail inside a 64-block; 1003: % 8 */
  return blck == 32 ? 32 * 35 : 256 * 5;
}

int main(int argc, char **argv) {
  ck_lines_width(44);
  ck_rng = 0x6A09E667F3BCC909ull; /* the default seed */
  const int a = ck_flags(argc, argv, &g_quick, 0);
  if (argc - a != 2) {
    fprintf(stderr, "usage: gemm_check [--quick] [--seed N] REF.so TEST.so\n");
    return 2;
  }
  if (memra_plug_open(&P[0], argv[a]) || memra_plug_open(&P[1], argv[a + 1])) return 2;
  if (!P[1].vt->gemm) {
    fprintf(stderr, "%s: the plugin has no gemm op\n", argv[a + 1]);
    return 2;
  }
  static const int32_t types[] = {MEMRA_TYPE_F16,  MEMRA_TYPE_BF16, MEMRA_TYPE_Q8_0,
                                  MEMRA_TYPE_Q4_0, MEMRA_TYPE_Q4_1, MEMRA_TYPE_Q5_0,
                                  MEMRA_TYPE_Q5_1, MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q5_K,
                                  MEMRA_TYPE_Q6_K, MEMRA_TYPE_F32};
  if (g_quick) {
    check_type(MEMRA_TYPE_F16, 129, 300, 200, 1);
    check_type(MEMRA_TYPE_BF16, 70, 260, 1003, 0);
    check_type(MEMRA_TYPE_Q4_K, 129, 300, 512, 1);
    check_type(MEMRA_TYPE_Q8_0, 7, 130, 96, 0);
    check_type(MEMRA_TYPE_F32, 129, 300, 200, 1); /* F32 routes to matmul: strided x too */
    check_stage(MEMRA_TYPE_Q8_0, 37, 32 * 5, 2, 2);
    check_stage(MEMRA_TYPE_Q6_K, 9, 512, 2, 6);
  } else {
    for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t)
      check_type(types[t], 1000, 1000, k_for(types[t], 0), (int)(t % 2 == 0));
    check_type(MEMRA_TYPE_F16, 1000, 300, k_for(MEMRA_TYPE_F16, 1), 1);
    check_type(MEMRA_TYPE_BF16, 129, 300, k_for(MEMRA_TYPE_BF16, 1), 0);
    /* more tiles than SMs (persistent loop), 128 x 256 tiles for the full batch */
    check_type(MEMRA_TYPE_F16, 2048, 4400, 1000, 1);
    check_type(MEMRA_TYPE_BF16, 2048, 4400, 512, 0);
    check_type(MEMRA_TYPE_Q4_K, 2048, 4400, 1024, 1);
    /* decoded weights beyond one workspace chunk (128 MiB of f16): two GEMMs over N */
    check_type(MEMRA_TYPE_Q8_0, 100, 70000, 1024, 1);
    /* the staging decode bitwise: partial tiles (K not a multiple of 256 or of a 4096-element
     * tile), odd N, rows at every alignment (2-byte offsets and strides) */
    check_stage(MEMRA_TYPE_Q8_0, 1001, 32 * 131, 2, 4);
    check_stage(MEMRA_TYPE_Q8_0, 333, 32 * 67, 0, 0);
    check_stage(MEMRA_TYPE_Q8_0, 1, 32, 6, 0);
    check_stage(MEMRA_TYPE_Q6_K, 77, 256 * 17, 2, 0);
    check_stage(MEMRA_TYPE_Q6_K, 3, 256, 0, 10);
  }
  if (P[1].vt->gemm_n && P[0].vt->gemm_n) {
    const int64_t qkv[3] = {1000, 200, 333}, gu[2] = {1000, 1000}, big[2] = {20000, 20000};
    const int64_t llama_gu[2] = {14336, 14336}, over[3] = {30000, 30000, 30000};
    if (g_quick) {
      check_gemm_n(MEMRA_TYPE_F16, 129, 3, qkv, 200, 1);
      check_gemm_n(MEMRA_TYPE_Q4_K, 7, 2, gu, 512, 1);
    } else {
      static const int64_t ms[] = {1, 77, 512, 1000};
      for (size_t i = 0; i < sizeof ms / sizeof ms[0]; ++i)
        check_gemm_n(MEMRA_TYPE_F16, ms[i], 3, qkv, 1000, 1);
      check_gemm_n(MEMRA_TYPE_BF16, 513, 2, gu, 1003, 1);
      check_gemm_n(MEMRA_TYPE_Q8_0, 512, 3, qkv, 32 * 35, 1);
      check_gemm_n(MEMRA_TYPE_Q4_K, 333, 2, gu, 256 * 5, 1);
      /* decoded f16 over one chunk in all (164 MB: one group), gate/up of Llama-3.1-8B
       * (224 MiB: one group), and beyond the group budget (369 MB: one gemm per output);
       * the bits are gemm's every time */
      check_gemm_n(MEMRA_TYPE_Q8_0, 64, 2, big, 2048, 0);
      check_gemm_n(MEMRA_TYPE_Q8_0, 64, 2, llama_gu, 4096, 0);
      check_gemm_n(MEMRA_TYPE_Q6_K, 64, 2, llama_gu, 4096, 0);
      check_gemm_n(MEMRA_TYPE_Q8_0, 64, 3, over, 2048, 0);
    }
  } else {
    ck_line("gemm_n present in both plugins", 0, "REF %s, TEST %s", P[0].vt->gemm_n ? "yes" : "no",
            P[1].vt->gemm_n ? "yes" : "no");
  }
  if (P[1].vt->gemm_glu) { /* ABI 1.6: ragged N, M 1..1000, both activations, every y type */
    check_gemm_glu(MEMRA_TYPE_F16, 77, 1031, 1000, MEMRA_TYPE_F32, 0);
    check_gemm_glu(MEMRA_TYPE_F16, 512, 1031, 1000, MEMRA_TYPE_F16, 1);
    if (!g_quick) {
      check_gemm_glu(MEMRA_TYPE_F16, 1, 333, 4096, MEMRA_TYPE_F16, 0);
      check_gemm_glu(MEMRA_TYPE_BF16, 513, 1001, 1003, MEMRA_TYPE_BF16, 0);
      check_gemm_glu(MEMRA_TYPE_BF16, 64, 1001, 1003, MEMRA_TYPE_F16, 1);
      check_gemm_glu(MEMRA_TYPE_Q8_0, 512, 2049, 32 * 35, MEMRA_TYPE_F16, 0);
      check_gemm_glu(MEMRA_TYPE_Q4_K, 333, 1031, 256 * 5, MEMRA_TYPE_F16, 0);
      check_gemm_glu(MEMRA_TYPE_Q6_K, 1000, 777, 256 * 3, MEMRA_TYPE_F32, 1);
      /* gate/up of Llama-3.1-8B decoded (2 x 117 MB: one launch within the group budget) */
      check_gemm_glu(MEMRA_TYPE_Q4_K, 64, 14336, 4096, MEMRA_TYPE_F16, 0);
    }
  }
  check_errors();
  printf("gemm_check: %d cases, %d failed\n", ck_lines_passed() + ck_lines_failed(),
         ck_lines_failed());
  memra_plug_close(&P[1]);
  memra_plug_close(&P[0]);
  return ck_lines_failed() ? 1 : 0;
}
