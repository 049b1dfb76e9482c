/* opcheck_families.c — the mixture-of-experts and Gated DeltaNet ops (ABI minor 1) of a
 * plugin under test against a reference plugin (the CPU oracle), and the tiny family
 * fixtures end to end on one plugin.
 *
 *   opcheck_families [--quick] [--seed N] REF.so TEST.so
 *   opcheck_families --e2e PLUGIN.so FIXTURE_DIR [UBATCH PAGE]
 *
 * Ops: both plugins get identical seeded random bytes with odd sizes; outputs start
 * poisoned (NaN, -1) and carry guard bytes checked afterwards. Recurrent ops run a
 * schedule of steps over three sequences of different lengths, rows of sequences
 * interleaved, one sequence restarting at position 0 over a used state, one resuming
 * from a (random) state it never wrote, and an empty step; outputs of every step and the
 * final states are compared. Each case prints its max error (max |a - b| over max |a|),
 * its tolerance and PASS/FAIL; ids and error statuses must agree exactly.
 * E2E: each committed fixture model (tests/families/fixtures) is run on the plugin with
 * an F32 KV cache, prefill in odd chunks and token-by-token decode each against HF
 * transformers' float32 logits (issue 8 bound: 1e-3 relative L2 per position).
 * Exit status: 0 all PASS, 1 a failure, 2 usage, 3 a fatal plugin error. */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf/gguf.h"
#include "core/models/context.h"
#include "core/plugin/loader.h"
#include "plugins/quant/quant.h"
#include "tools/device/check_report.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

static memra_plug P[2]; /* 0: reference, 1: under test */
static int g_quick;

/* --- results ------------------------------------------------------------------------ */

/* Max error of the test plugin's floats [off, off + n) of d against the reference's,
 * relative to the reference's largest magnitude there; NaN must meet NaN. The error is
 * folded into *worst (for a multi-step case) and recorded when what is non-NULL. */
static double cmp_f32(const char *op, const char *what, const ck_buf *d, uint64_t off, int64_t n,
                      double tol, double *worst) {
  float *a = ck_get(d, 0), *b = ck_get(d, 1);
  const float *x = (const float *)((const char *)a + off),
              *y = (const float *)((const char *)b + off);
  int64_t bad = -1;
  double mx = 0, ma = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int fa = isfinite(x[i]), fb = isfinite(y[i]);
    if (fa != fb || (!fa && !(isnan(x[i]) && isnan(y[i])) && x[i] != y[i])) {
      if (bad < 0) bad = i;
      continue;
    }
    if (!fa) continue;
    const double e = fabs((double)x[i] - y[i]);
    mx = e > mx ? e : mx;
    ma = fabs(x[i]) > ma ? fabs(x[i]) : ma;
  }
  double err = ma > 0 ? mx / ma : mx;
  if (bad >= 0) err = INFINITY;
  if (worst && err > *worst) *worst = err;
  if (what) {
    char note[80] = "";
    const int guard = ck_guard_ok(d);
    if (bad >= 0)
      snprintf(note, sizeof note, "nonfinite mismatch at %" PRId64 " (%g vs %g)", bad, x[bad],
               y[bad]);
    else if (!guard)
      snprintf(note, sizeof note, "guard bytes overwritten");
    ck_record(op, what, worst ? *worst : err, tol, (worst ? *worst : err) <= tol && guard, note);
  }
  free(a);
  free(b);
  return err;
}

static int must_ok(int i, memra_status st, const char *what) {
  if (st == MEMRA_OK) return 1;
  char note[80];
  snprintf(note, sizeof note, "%s: status %d: %.50s", P[i].vt->name, (int)st,
           P[i].vt->last_error(P[i].be));
  ck_record(what, "call failed", INFINITY, 0, 0, note);
  return 0;
}

/* Both plugins must refuse a hostile call, with the same status. */
static void expect_refusal(const char *op, const char *what, memra_status s0, memra_status s1,
                           int i_msg) {
  char note[80];
  snprintf(note, sizeof note, "%d/%d: %.60s", (int)s0, (int)s1,
           P[i_msg].vt->last_error(P[i_msg].be));
  ck_record(op, what, s0 == s1 ? 0 : 1, 0, s0 != MEMRA_OK && s0 == s1, note);
}

/* --- moe_route -------------------------------------------------------------------------- */

static void check_route(int64_t n, int64_t ne, int64_t k, int normalize, int ties) {
  float *l = ck_frand_vec(n * ne, -4, 4);
  if (ties) /* few distinct logits: the tie order (lowest index first) decides */
    for (int64_t i = 0; i < n * ne; ++i)
      l[i] = (float)(int)(l[i]) * 0.5f;
  ck_buf dl = ck_new((uint64_t)(n * ne) * 4, l), di = ck_new((uint64_t)(n * k) * 4, NULL),
         dw = ck_new((uint64_t)(n * k) * 4, NULL);
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    memra_tensor ids = ck_view(&di, i, MEMRA_TYPE_I32, k, n, 0, 0),
                 w = ck_view(&dw, i, MEMRA_TYPE_F32, k, n, 0, 0),
                 lg = ck_view(&dl, i, MEMRA_TYPE_F32, ne, n, 0, 0);
    ok &= must_ok(i, P[i].vt->moe_route(P[i].be, &ids, &w, &lg, normalize), "moe_route");
  }
  char what[80];
  snprintf(what, sizeof what, "n %" PRId64 " experts %" PRId64 " k %" PRId64 "%s%s", n, ne, k,
           normalize ? " norm" : "", ties ? " ties" : "");
  if (ok && n > 0) {
    ck_cmp_i32("moe_route ids", what, &di, n * k);
    cmp_f32("moe_route w", what, &dw, 0, n * k, 1e-6, NULL);
  } else if (ok) {
    ck_record("moe_route", what, 0, 0, ck_guard_ok(&di) && ck_guard_ok(&dw), "n_rows 0");
  }
  ck_free(&dl);
  ck_free(&di);
  ck_free(&dw);
  free(l);
}

/* --- matmul_id ---------------------------------------------------------------------- */

static const char *tname(int32_t t) { return memra_type_info(t).name; }

/* Experts of N rows, K columns; n tokens choosing k experts each. shared: x has n rows.
 * bad_id: one id out of range (the test plugin must give that row NaN, the oracle refuses). */
static void check_matmul_id(int32_t type, int64_t n_expert, int64_t N, int64_t K, int64_t n,
                            int64_t k, int shared, int bad_id) {
  uint64_t wbytes;
  void *w = ck_rand_rows(type, K, n_expert * N, &wbytes);
  const int64_t xr = shared ? n : n * k;
  float *x = ck_frand_vec(xr * K, -1, 1);
  int32_t *ids = ck_xmalloc((size_t)(n * k) * 4 + 4);
  for (int64_t r = 0; r < n; ++r) /* distinct experts per token, as the router gives */
    for (int64_t j = 0; j < k; ++j) {
      int32_t e;
      int again;
      do {
        e = (int32_t)(ck_rnd() % (uint64_t)n_expert);
        again = 0;
        for (int64_t i = 0; i < j; ++i)
          again |= ids[r * k + i] == e;
      } while (again);
      ids[r * k + j] = e;
    }
  if (bad_id) ids[(n / 2) * k + k - 1] = (int32_t)n_expert;
  ck_buf dw = ck_new(wbytes, w), dx = ck_new((uint64_t)(xr * K) * 4, x),
         di = ck_new((uint64_t)(n * k) * 4, ids), dy = ck_new((uint64_t)(n * k * N) * 4, NULL);
  memra_status st[2];
  for (int i = 0; i < 2; ++i) {
    memra_tensor tw = ck_view(&dw, i, type, K, n_expert * N, 0, 0),
                 tx = ck_view(&dx, i, MEMRA_TYPE_F32, K, xr, 0, 0),
                 ti = ck_view(&di, i, MEMRA_TYPE_I32, k, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, N, n * k, 0, 0);
    st[i] = P[i].vt->matmul_id(P[i].be, &ty, &tx, &tw, &ti, (int32_t)n_expert);
  }
  char what[80];
  snprintf(what, sizeof what,
           "%s E %" PRId64 " N %" PRId64 " K %" PRId64 " n %" PRId64 " k %" PRId64 "%s%s",
           tname(type), n_expert, N, K, n, k, shared ? " shared-x" : "", bad_id ? " bad id" : "");
  if (bad_id) { /* oracle refuses; test: NaN on the bad row exactly, the rest agree */
    float *b = ck_get(&dy, 1);
    const int64_t bad_row = (n / 2) * k + k - 1;
    int nan_ok = 1;
    for (int64_t rj = 0; rj < n * k; ++rj)
      for (int64_t c = 0; c < N; ++c)
        nan_ok &= (rj == bad_row) == (isnan(b[rj * N + c]) != 0);
    ck_record("matmul_id", what, nan_ok ? 0 : 1, 0,
              st[0] == MEMRA_E_INVALID && st[1] == MEMRA_OK && nan_ok,
              "oracle refuses, device row NaN");
    free(b);
  } else if (must_ok(0, st[0], "matmul_id") && must_ok(1, st[1], "matmul_id")) {
    cmp_f32("matmul_id", what, &dy, 0, n * k * N, 1e-5, NULL);
  }
  ck_free(&dw);
  ck_free(&dx);
  ck_free(&di);
  ck_free(&dy);
  free(w);
  free(x);
  free(ids);
}

/* Records whether plugin i's buffers a (from byte off_a) and b hold the same `bytes` bytes. */
static void record_same_bits(const char *name, const char *what, const ck_buf *a, uint64_t off_a,
                             const ck_buf *b, int i, uint64_t bytes) {
  uint8_t *pa = ck_get(a, i), *pb = ck_get(b, i);
  const int same = !memcmp(pa + off_a, pb, (size_t)bytes);
  ck_record(name, what, same ? 0 : 1, 0, same, "bitwise");
  free(pa);
  free(pb);
}

/* Batch invariance on the test plugin: token t of n, run alone (its ids and x rows as
 * views), gives the same bits as in the batch. */
static void check_matmul_id_alone(int32_t type, int64_t n_expert, int64_t N, int64_t K, int64_t n,
                                  int64_t k, int64_t t) {
  uint64_t wbytes;
  void *w = ck_rand_rows(type, K, n_expert * N, &wbytes);
  float *x = ck_frand_vec(n * K, -1, 1);
  int32_t *ids = ck_xmalloc((size_t)(n * k) * 4);
  for (int64_t i = 0; i < n * k; ++i) /* distinct within a token: a rotation */
    ids[i] = (int32_t)((i / k * 7 + i % k) % n_expert);
  ck_buf dw = ck_new(wbytes, w), dx = ck_new((uint64_t)(n * K) * 4, x),
         di = ck_new((uint64_t)(n * k) * 4, ids), dy = ck_new((uint64_t)(n * k * N) * 4, NULL),
         d1 = ck_new((uint64_t)(k * N) * 4, NULL);
  const int i = 1;
  memra_tensor tw = ck_view(&dw, i, type, K, n_expert * N, 0, 0),
               tx = ck_view(&dx, i, MEMRA_TYPE_F32, K, n, 0, 0),
               ti = ck_view(&di, i, MEMRA_TYPE_I32, k, n, 0, 0),
               ty = ck_view(&dy, i, MEMRA_TYPE_F32, N, n * k, 0, 0),
               tx1 = ck_view(&dx, i, MEMRA_TYPE_F32, K, 1, 0, (uint64_t)(t * K) * 4),
               ti1 = ck_view(&di, i, MEMRA_TYPE_I32, k, 1, 0, (uint64_t)(t * k) * 4),
               ty1 = ck_view(&d1, i, MEMRA_TYPE_F32, N, k, 0, 0);
  const int ok =
      must_ok(i, P[i].vt->matmul_id(P[i].be, &ty, &tx, &tw, &ti, (int32_t)n_expert), "matmul_id") &&
      must_ok(i, P[i].vt->matmul_id(P[i].be, &ty1, &tx1, &tw, &ti1, (int32_t)n_expert),
              "matmul_id");
  char what[80];
  snprintf(what, sizeof what, "%s N %" PRId64 " K %" PRId64 " token %" PRId64 " of %" PRId64,
           tname(type), N, K, t, n);
  if (ok) {
    record_same_bits("matmul_id alone == batched", what, &dy, (uint64_t)(t * k * N) * 4, &d1, i,
                     (uint64_t)(k * N) * 4);
  }
  ck_free(&dw);
  ck_free(&dx);
  ck_free(&di);
  ck_free(&dy);
  ck_free(&d1);
  free(w);
  free(x);
  free(ids);
}

/* ABI 1.7 matmul_id_glu over a fused gate/up stack (per expert N gate rows, then N up
 * rows): against the CPU, and on plugin 1 bitwise against its own matmul_id over the 2 N
 * rows, then glu. */
static void check_matmul_id_glu(int32_t type, int64_t n_expert, int64_t N, int64_t K, int64_t n,
                                int64_t k, int shared) {
  uint64_t wbytes;
  void *w = ck_rand_rows(type, K, n_expert * 2 * N, &wbytes);
  const int64_t rows = n * k, xr = shared ? n : rows;
  float *x = ck_frand_vec(xr * K, -1, 1);
  int32_t *ids = ck_xmalloc((size_t)rows * 4 + 4);
  for (int64_t i = 0; i < rows; ++i) /* distinct within a token: a rotation */
    ids[i] = (int32_t)((i / k * 5 + i % k * 3) % n_expert);
  ck_buf dw = ck_new(wbytes, w), dx = ck_new((uint64_t)(xr * K) * 4, x),
         di = ck_new((uint64_t)rows * 4, ids), dy = ck_new((uint64_t)(rows * N) * 4, NULL),
         dgu = ck_new((uint64_t)(rows * 2 * N) * 4, NULL),
         dy2 = ck_new((uint64_t)(rows * N) * 4, NULL);
  char what[80];
  snprintf(what, sizeof what,
           "%s E %" PRId64 " N %" PRId64 " K %" PRId64 " n %" PRId64 " k %" PRId64 "%s",
           tname(type), n_expert, N, K, n, k, shared ? " shared-x" : "");
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    if (!P[i].vt->matmul_id_glu) {
      ck_record("matmul_id_glu", what, INFINITY, 0, 0, "slot missing");
      ok = 0;
      break;
    }
    memra_tensor tw = ck_view(&dw, i, type, K, n_expert * 2 * N, 0, 0),
                 tx = ck_view(&dx, i, MEMRA_TYPE_F32, K, xr, 0, 0),
                 ti = ck_view(&di, i, MEMRA_TYPE_I32, k, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, N, rows, 0, 0);
    ok &= must_ok(
        i, P[i].vt->matmul_id_glu(P[i].be, &ty, &tx, &tw, &ti, (int32_t)n_expert, MEMRA_ACT_SILU),
        "matmul_id_glu");
  }
  if (ok) {
    cmp_f32("matmul_id_glu", what, &dy, 0, rows * N, 1e-5, NULL);
    memra_tensor tw = ck_view(&dw, 1, type, K, n_expert * 2 * N, 0, 0),
                 tx = ck_view(&dx, 1, MEMRA_TYPE_F32, K, xr, 0, 0),
                 ti = ck_view(&di, 1, MEMRA_TYPE_I32, k, n, 0, 0),
                 tgu = ck_view(&dgu, 1, MEMRA_TYPE_F32, 2 * N, rows, 0, 0),
                 tg = ck_view(&dgu, 1, MEMRA_TYPE_F32, N, rows, (uint64_t)(2 * N) * 4, 0),
                 tu = ck_view(&dgu, 1, MEMRA_TYPE_F32, N, rows, (uint64_t)(2 * N) * 4,
                              (uint64_t)N * 4),
                 ty = ck_view(&dy2, 1, MEMRA_TYPE_F32, N, rows, 0, 0);
    if (must_ok(1, P[1].vt->matmul_id(P[1].be, &tgu, &tx, &tw, &ti, (int32_t)n_expert),
                "matmul_id") &&
        must_ok(1, P[1].vt->glu(P[1].be, &ty, &tg, &tu, MEMRA_ACT_SILU), "glu")) {
      record_same_bits("matmul_id_glu == matmul_id + glu", what, &dy, 0, &dy2, 1,
                       (uint64_t)(rows * N) * 4);
    }
  }
  ck_free(&dw);
  ck_free(&dx);
  ck_free(&di);
  ck_free(&dy);
  ck_free(&dgu);
  ck_free(&dy2);
  free(w);
  free(x);
  free(ids);
}

/* ABI 1.9 matmul_id_combine: against the CPU, and on plugin 1 bitwise against its own
 * matmul_id into [n ke, N] then moe_combine (sh 0) or moe_combine_shexp (sh 1: ke = k + 1,
 * the last id of a token expert n_expert - 1, the shared expert's place). */
static void check_mmid_combine(int32_t type, int64_t n_expert, int64_t N, int64_t K, int64_t n,
                               int64_t k, int sh) {
  const int64_t ke = k + sh, rows = n * ke;
  uint64_t wbytes;
  void *w = ck_rand_rows(type, K, n_expert * N, &wbytes);
  float *x = ck_frand_vec(rows * K, -1, 1), *wt = ck_frand_vec(n * k, 0, 1),
        *g = ck_frand_vec(n + 1, -6, 6);
  int32_t *ids = ck_xmalloc((size_t)rows * 4 + 4);
  for (int64_t i = 0; i < rows; ++i) /* distinct within a token; the shared expert last */
    ids[i] = sh && i % ke == k ? (int32_t)(n_expert - 1)
                               : (int32_t)((i / ke * 5 + i % ke * 3) % (n_expert - sh));
  ck_buf dw = ck_new(wbytes, w), dx = ck_new((uint64_t)(rows * K) * 4, x),
         di = ck_new((uint64_t)rows * 4, ids), dt = ck_new((uint64_t)(n * k) * 4, wt),
         dg = ck_new((uint64_t)(n + 1) * 4, g), dy = ck_new((uint64_t)(n * N) * 4, NULL),
         dd = ck_new((uint64_t)(rows * N) * 4, NULL), dy2 = ck_new((uint64_t)(n * N) * 4, NULL);
  char what[96];
  snprintf(what, sizeof what,
           "%s E %" PRId64 " N %" PRId64 " K %" PRId64 " n %" PRId64 " k %" PRId64 "%s",
           tname(type), n_expert, N, K, n, k, sh ? " + shared" : "");
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    if (!P[i].vt->matmul_id_combine) {
      ck_record("matmul_id_combine", what, INFINITY, 0, 0, "slot missing");
      ok = 0;
      break;
    }
    memra_tensor tw = ck_view(&dw, i, type, K, n_expert * N, 0, 0),
                 tx = ck_view(&dx, i, MEMRA_TYPE_F32, K, rows, 0, 0),
                 ti = ck_view(&di, i, MEMRA_TYPE_I32, ke, n, 0, 0),
                 tt = ck_view(&dt, i, MEMRA_TYPE_F32, k, n, 0, 0),
                 tg = ck_view(&dg, i, MEMRA_TYPE_F32, 1, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, N, n, 0, 0);
    ok &= must_ok(i,
                  P[i].vt->matmul_id_combine(P[i].be, &ty, &tx, &tw, &ti, (int32_t)n_expert, &tt,
                                             sh ? &tg : NULL),
                  "matmul_id_combine");
  }
  if (ok) {
    cmp_f32("matmul_id_combine", what, &dy, 0, n * N, 1e-5, NULL);
    memra_tensor tw = ck_view(&dw, 1, type, K, n_expert * N, 0, 0),
                 tx = ck_view(&dx, 1, MEMRA_TYPE_F32, K, rows, 0, 0),
                 ti = ck_view(&di, 1, MEMRA_TYPE_I32, ke, n, 0, 0),
                 tt = ck_view(&dt, 1, MEMRA_TYPE_F32, k, n, 0, 0),
                 tg = ck_view(&dg, 1, MEMRA_TYPE_F32, 1, n, 0, 0),
                 td = ck_view(&dd, 1, MEMRA_TYPE_F32, N, rows, 0, 0),
                 ty = ck_view(&dy2, 1, MEMRA_TYPE_F32, N, n, 0, 0);
    if (must_ok(1, P[1].vt->matmul_id(P[1].be, &td, &tx, &tw, &ti, (int32_t)n_expert),
                "matmul_id") &&
        must_ok(1,
                sh ? P[1].vt->moe_combine_shexp(P[1].be, &ty, &td, &tt, &tg)
                   : P[1].vt->moe_combine(P[1].be, &ty, &td, &tt),
                "combine"))
      record_same_bits("matmul_id_combine == matmul_id + combine", what, &dy, 0, &dy2, 1,
                       (uint64_t)(n * N) * 4);
  }
  ck_free(&dw);
  ck_free(&dx);
  ck_free(&di);
  ck_free(&dt);
  ck_free(&dg);
  ck_free(&dy);
  ck_free(&dd);
  ck_free(&dy2);
  free(w);
  free(x);
  free(wt);
  free(g);
  free(ids);
}

/* ABI 1.21 moe_route_glu (opt-in on the GPU plugins: MEMRA_ROUTE_GLU=1), then the down
 * projection's matmul_id over the same ids (on the GPU plugins the route inside the gate / up
 * launch, and the down launch right after it routing from the same logits before its wait): ids,
 * weights, the glu rows and the down rows against the CPU, and on plugin 1 bitwise against its own
 * moe_route, matmul_id_glu and matmul_id. ne routed experts (the warp forms' NPL 4 to 32), k
 * chosen; sh: the stacked shared expert, expert ne of the stacks, as every token's preset (k+1)-th
 * id. */
static void check_route_glu(int32_t type, int64_t ne, int64_t k, int sh, int64_t F, int64_t K,
                            int64_t n) {
  if (!P[1].vt->moe_route_glu) {
    printf("skip moe_route_glu: not in %s's vtable (MEMRA_ROUTE_GLU=1 opts in)\n", P[1].vt->name);
    return;
  }
  const int64_t n_exp = ne + sh, k1 = k + sh, rows = n * k1;
  uint64_t gbytes, dbytes;
  void *wg = ck_rand_rows(type, K, n_exp * 2 * F, &gbytes),
       *wd = ck_rand_rows(type, F, n_exp * K, &dbytes);
  float *x = ck_frand_vec(n * K, -1, 1), *l = ck_frand_vec(n * ne, -4, 4);
  int32_t *ids = ck_xmalloc((size_t)rows * 4 + 4);
  for (int64_t i = 0; i < rows; ++i) /* the routed columns overwritten; the shared one kept */
    ids[i] = sh && i % k1 == k ? (int32_t)ne : -5;
  ck_buf dgw = ck_new(gbytes, wg), ddw = ck_new(dbytes, wd), dx = ck_new((uint64_t)(n * K) * 4, x),
         dl = ck_new((uint64_t)(n * ne) * 4, l), di = ck_new((uint64_t)rows * 4, ids),
         di2 = ck_new((uint64_t)rows * 4, ids), dt = ck_new((uint64_t)(n * k) * 4, NULL),
         dt2 = ck_new((uint64_t)(n * k) * 4, NULL), dy = ck_new((uint64_t)(rows * F) * 4, NULL),
         dy2 = ck_new((uint64_t)(rows * F) * 4, NULL), dd = ck_new((uint64_t)(rows * K) * 4, NULL),
         dd2 = ck_new((uint64_t)(rows * K) * 4, NULL);
  char what[96];
  snprintf(what, sizeof what,
           "%s experts %" PRId64 " k %" PRId64 "%s F %" PRId64 " K %" PRId64 " n %" PRId64,
           tname(type), ne, k, sh ? " + shared" : "", F, K, n);
  int ok = 1;
  for (int i = 0; i < 2 && ok; ++i) {
    if (!P[i].vt->moe_route_glu) {
      ck_record("moe_route_glu", what, INFINITY, 0, 0, "slot missing");
      ok = 0;
      break;
    }
    memra_tensor tg = ck_view(&dgw, i, type, K, n_exp * 2 * F, 0, 0),
                 td = ck_view(&ddw, i, type, F, n_exp * K, 0, 0),
                 tx = ck_view(&dx, i, MEMRA_TYPE_F32, K, n, 0, 0),
                 tl = ck_view(&dl, i, MEMRA_TYPE_F32, ne, n, 0, 0),
                 ti = ck_view(&di, i, MEMRA_TYPE_I32, k1, n, 0, 0),
                 tt = ck_view(&dt, i, MEMRA_TYPE_F32, k, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, F, rows, 0, 0),
                 tdo = ck_view(&dd, i, MEMRA_TYPE_F32, K, rows, 0, 0);
    ok &= must_ok(i,
                  P[i].vt->moe_route_glu(P[i].be, &ty, &tx, &tg, &ti, (int32_t)n_exp,
                                         MEMRA_ACT_SILU, &tt, &tl, 1),
                  "moe_route_glu");
    ok &= must_ok(i, P[i].vt->matmul_id(P[i].be, &tdo, &ty, &td, &ti, (int32_t)n_exp), "matmul_id");
  }
  if (ok) {
    ck_cmp_i32("moe_route_glu ids", what, &di, rows);
    cmp_f32("moe_route_glu w", what, &dt, 0, n * k, 1e-6, NULL);
    cmp_f32("moe_route_glu y", what, &dy, 0, rows * F, 1e-5, NULL);
    cmp_f32("moe_route_glu down", what, &dd, 0, rows * K, 1e-5, NULL);
    memra_tensor tg = ck_view(&dgw, 1, type, K, n_exp * 2 * F, 0, 0),
                 td = ck_view(&ddw, 1, type, F, n_exp * K, 0, 0),
                 tx = ck_view(&dx, 1, MEMRA_TYPE_F32, K, n, 0, 0),
                 tl = ck_view(&dl, 1, MEMRA_TYPE_F32, ne, n, 0, 0),
                 ti = ck_view(&di2, 1, MEMRA_TYPE_I32, k1, n, 0, 0),
                 tr = ck_view(&di2, 1, MEMRA_TYPE_I32, k, n, (uint64_t)k1 * 4, 0),
                 tt = ck_view(&dt2, 1, MEMRA_TYPE_F32, k, n, 0, 0),
                 ty = ck_view(&dy2, 1, MEMRA_TYPE_F32, F, rows, 0, 0),
                 tdo = ck_view(&dd2, 1, MEMRA_TYPE_F32, K, rows, 0, 0);
    if (must_ok(1, P[1].vt->moe_route(P[1].be, &tr, &tt, &tl, 1), "moe_route") &&
        must_ok(1,
                P[1].vt->matmul_id_glu(P[1].be, &ty, &tx, &tg, &ti, (int32_t)n_exp, MEMRA_ACT_SILU),
                "matmul_id_glu") &&
        must_ok(1, P[1].vt->matmul_id(P[1].be, &tdo, &ty, &td, &ti, (int32_t)n_exp), "matmul_id")) {
      record_same_bits("moe_route_glu ids == moe_route's", what, &di, 0, &di2, 1,
                       (uint64_t)rows * 4);
      record_same_bits("moe_route_glu w == moe_route's", what, &dt, 0, &dt2, 1,
                       (uint64_t)(n * k) * 4);
      record_same_bits("moe_route_glu y == matmul_id_glu's", what, &dy, 0, &dy2, 1,
                       (uint64_t)(rows * F) * 4);
      record_same_bits("moe_route_glu down == matmul_id's", what, &dd, 0, &dd2, 1,
                       (uint64_t)(rows * K) * 4);
    }
  }
  ck_buf *bufs[] = {&dgw, &ddw, &dx, &dl, &di, &di2, &dt, &dt2, &dy, &dy2, &dd, &dd2};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i)
    ck_free(bufs[i]);
  free(wg);
  free(wd);
  free(x);
  free(l);
  free(ids);
}

/* ABI 1.22 matmul_n_route: a router's logits (outs 2: a shared gate logit beside them) against
 * the CPU, and on plugin 1 the logits, ids and weights bitwise against its own matmul_n, then
 * moe_route (the GPU plugins route a decode row in the router GEMV's last block). Two rounds of
 * fresh x into ids preset to -5: a launch that left its ticket counter set would leave the second
 * round's ids unwritten. ne experts (the warp forms' NPL 4 to 32; past 1024 the route's own
 * launch), k chosen, K columns (K % 8: not v6, the composition), n rows (n > 1: the composition).
 */
static void check_matmul_n_route(int64_t ne, int64_t k, int64_t K, int64_t n, int outs) {
  if (P[0].vt->matmul_n_route && !P[1].vt->matmul_n_route) {
    printf("skip matmul_n_route: not in %s's vtable (MEMRA_ROUTER_ROUTE=1 opts in)\n",
           P[1].vt->name);
    return;
  }
  char what[96];
  snprintf(what, sizeof what, "experts %" PRId64 " k %" PRId64 " K %" PRId64 " n %" PRId64 "%s", ne,
           k, K, n, outs == 2 ? " + logit" : "");
  float *w = ck_frand_vec(ne * K, -0.5f, 0.5f), *wl = ck_frand_vec(K, -0.5f, 0.5f);
  int32_t *preset = ck_xmalloc((size_t)(n * k) * 4 + 4);
  for (int64_t i = 0; i < n * k; ++i)
    preset[i] = -5;
  ck_buf dw = ck_new((uint64_t)(ne * K) * 4, w), dwl = ck_new((uint64_t)K * 4, wl);
  for (int round = 0; round < 2; ++round) {
    char wr[112];
    snprintf(wr, sizeof wr, "%s round %d", what, round);
    float *x = ck_frand_vec(n * K, -1, 1);
    const uint64_t lb = (uint64_t)(n * ne) * 4, ib = (uint64_t)(n * k) * 4;
    ck_buf dx = ck_new((uint64_t)(n * K) * 4, x), dl = ck_new(lb, NULL), dl2 = ck_new(lb, NULL),
           dg = ck_new((uint64_t)n * 4, NULL), dg2 = ck_new((uint64_t)n * 4, NULL),
           di = ck_new(ib, preset), di2 = ck_new(ib, preset), dt = ck_new(ib, NULL),
           dt2 = ck_new(ib, NULL);
    int ok = 1;
    for (int i = 0; i < 2 && ok; ++i) {
      if (!P[i].vt->matmul_n_route) {
        ck_record("matmul_n_route", wr, INFINITY, 0, 0, "slot missing");
        ok = 0;
        break;
      }
      const memra_tensor y[2] = {ck_t(&dl, i, MEMRA_TYPE_F32, ne, n),
                                 ck_t(&dg, i, MEMRA_TYPE_F32, 1, n)},
                         ws[2] = {ck_t(&dw, i, MEMRA_TYPE_F32, K, ne),
                                  ck_t(&dwl, i, MEMRA_TYPE_F32, K, 1)},
                         tx = ck_t(&dx, i, MEMRA_TYPE_F32, K, n),
                         ti = ck_t(&di, i, MEMRA_TYPE_I32, k, n),
                         tt = ck_t(&dt, i, MEMRA_TYPE_F32, k, n);
      ok &= must_ok(i, P[i].vt->matmul_n_route(P[i].be, outs, y, &tx, ws, NULL, &ti, &tt, 1),
                    "matmul_n_route");
    }
    if (ok) {
      cmp_f32("matmul_n_route logits", wr, &dl, 0, n * ne, 1e-5, NULL);
      if (outs == 2) cmp_f32("matmul_n_route shared logit", wr, &dg, 0, n, 1e-5, NULL);
      const memra_tensor y[2] = {ck_t(&dl2, 1, MEMRA_TYPE_F32, ne, n),
                                 ck_t(&dg2, 1, MEMRA_TYPE_F32, 1, n)},
                         ws[2] = {ck_t(&dw, 1, MEMRA_TYPE_F32, K, ne),
                                  ck_t(&dwl, 1, MEMRA_TYPE_F32, K, 1)},
                         tx = ck_t(&dx, 1, MEMRA_TYPE_F32, K, n),
                         ti = ck_t(&di2, 1, MEMRA_TYPE_I32, k, n),
                         tt = ck_t(&dt2, 1, MEMRA_TYPE_F32, k, n);
      if (must_ok(1, P[1].vt->matmul_n(P[1].be, outs, y, &tx, ws, NULL), "matmul_n") &&
          must_ok(1, P[1].vt->moe_route(P[1].be, &ti, &tt, &y[0], 1), "moe_route")) {
        record_same_bits("matmul_n_route logits == matmul_n's", wr, &dl, 0, &dl2, 1, lb);
        if (outs == 2)
          record_same_bits("matmul_n_route shared logit == matmul_n's", wr, &dg, 0, &dg2, 1,
                           (uint64_t)n * 4);
        record_same_bits("matmul_n_route ids == moe_route's", wr, &di, 0, &di2, 1, ib);
        record_same_bits("matmul_n_route w == moe_route's", wr, &dt, 0, &dt2, 1, ib);
      }
    }
    ck_buf *bufs[] = {&dx, &dl, &dl2, &dg, &dg2, &di, &di2, &dt, &dt2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i)
      ck_free(bufs[i]);
    free(x);
  }
  ck_free(&dw);
  ck_free(&dwl);
  free(w);
  free(wl);
  free(preset);
}

/* --- moe_combine, sigmoid_gate -------------------------------------------------------- */

static void check_combine(int64_t n, int64_t k, int64_t E) {
  float *x = ck_frand_vec(n * k * E, -2, 2), *w = ck_frand_vec(n * k, 0, 1);
  ck_buf dx = ck_new((uint64_t)(n * k * E) * 4, x), dw = ck_new((uint64_t)(n * k) * 4, w),
         dy = ck_new((uint64_t)(n * E) * 4 + 4, NULL);
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, E, n * k, 0, 0),
                 tw = ck_view(&dw, i, MEMRA_TYPE_F32, k, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, E, n, 0, 0);
    ok &= must_ok(i, P[i].vt->moe_combine(P[i].be, &ty, &tx, &tw), "moe_combine");
  }
  char what[80];
  snprintf(what, sizeof what, "n %" PRId64 " k %" PRId64 " E %" PRId64, n, k, E);
  if (ok) cmp_f32("moe_combine", what, &dy, 0, n * E, 1e-6, NULL);
  ck_free(&dx);
  ck_free(&dw);
  ck_free(&dy);
  free(x);
  free(w);
}

/* ABI 1.9 moe_combine_shexp (the shared expert as every token's (k+1)-th row of x): against
 * the CPU, and on plugin 1 bitwise against its own moe_combine_gated over the same rows
 * viewed apart (for one token the routed rows are the first k, the shared row the last). */
static void check_combine_shexp(int64_t n, int64_t k, int64_t E) {
  const int64_t k1 = k + 1;
  float *x = ck_frand_vec(n * k1 * E, -2, 2), *w = ck_frand_vec(n * k, 0, 1),
        *g = ck_frand_vec(n, -6, 6);
  ck_buf dx = ck_new((uint64_t)(n * k1 * E) * 4, x), dw = ck_new((uint64_t)(n * k) * 4, w),
         dg = ck_new((uint64_t)n * 4, g), dy = ck_new((uint64_t)(n * E) * 4 + 4, NULL),
         d2 = ck_new((uint64_t)(n * E) * 4, NULL);
  char what[80];
  snprintf(what, sizeof what, "n %" PRId64 " k %" PRId64 " E %" PRId64, n, k, E);
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    if (!P[i].vt->moe_combine_shexp) {
      ck_record("moe_combine_shexp", what, INFINITY, 0, 0, "slot missing");
      ok = 0;
      break;
    }
    memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, E, n * k1, 0, 0),
                 tw = ck_view(&dw, i, MEMRA_TYPE_F32, k, n, 0, 0),
                 tg = ck_view(&dg, i, MEMRA_TYPE_F32, 1, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, E, n, 0, 0);
    ok &= must_ok(i, P[i].vt->moe_combine_shexp(P[i].be, &ty, &tx, &tw, &tg), "moe_combine_shexp");
  }
  if (ok) {
    cmp_f32("moe_combine_shexp", what, &dy, 0, n * E, 1e-6, NULL);
    if (n == 1) {
      memra_tensor tx = ck_view(&dx, 1, MEMRA_TYPE_F32, E, k, 0, 0),
                   ts = ck_view(&dx, 1, MEMRA_TYPE_F32, E, 1, 0, (uint64_t)(k * E) * 4),
                   tw = ck_view(&dw, 1, MEMRA_TYPE_F32, k, n, 0, 0),
                   tg = ck_view(&dg, 1, MEMRA_TYPE_F32, 1, n, 0, 0),
                   t2 = ck_view(&d2, 1, MEMRA_TYPE_F32, E, n, 0, 0);
      if (must_ok(1, P[1].vt->moe_combine_gated(P[1].be, &t2, &tx, &tw, &ts, &tg),
                  "moe_combine_gated"))
        record_same_bits("moe_combine_shexp == moe_combine_gated on the rows apart", what, &dy, 0,
                         &d2, 1, (uint64_t)E * 4);
    }
  }
  ck_free(&dx);
  ck_free(&dw);
  ck_free(&dg);
  ck_free(&dy);
  ck_free(&d2);
  free(x);
  free(w);
  free(g);
}

/* ABI 1.20 moe_combine_rmsnorm (opt-in on the GPU plugins: MEMRA_COMBINE_NORM=1): the combine
 * (gated: with the stacked shared expert) and the norm that adds it, against the CPU (y, x, xn),
 * and on plugin 1 bitwise against its own moe_combine / moe_combine_shexp, then rmsnorm. */
static void check_combine_norm(int64_t n, int64_t k, int64_t E, int gated) {
  if (!P[1].vt->moe_combine_rmsnorm) {
    printf("skip moe_combine_rmsnorm: not in %s's vtable (MEMRA_COMBINE_NORM=1 opts in)\n",
           P[1].vt->name);
    return;
  }
  const int64_t xk = gated ? k + 1 : k;
  float *d = ck_frand_vec(n * xk * E, -2, 2), *w = ck_frand_vec(n * k, 0, 1),
        *g = ck_frand_vec(n, -6, 6), *x = ck_frand_vec(n * E, -2, 2),
        *wn = ck_frand_vec(E, 0.5f, 1.5f);
  const uint64_t row = (uint64_t)(n * E) * 4;
  ck_buf dd = ck_new((uint64_t)(n * xk * E) * 4, d), dw = ck_new((uint64_t)(n * k) * 4, w),
         dg = ck_new((uint64_t)n * 4, g), dwn = ck_new((uint64_t)E * 4, wn), dx = ck_new(row, x),
         dx2 = ck_new(row, x), dy = ck_new(row, NULL), dy2 = ck_new(row, NULL),
         dn = ck_new(row, NULL), dn2 = ck_new(row, NULL);
  char what[80];
  snprintf(what, sizeof what, "n %" PRId64 " k %" PRId64 " E %" PRId64 "%s", n, k, E,
           gated ? " shared" : "");
  int ok = 1;
  for (int i = 0; i < 2 && ok; ++i) {
    memra_tensor td = ck_view(&dd, i, MEMRA_TYPE_F32, E, n * xk, 0, 0),
                 tw = ck_view(&dw, i, MEMRA_TYPE_F32, k, n, 0, 0),
                 tg = ck_view(&dg, i, MEMRA_TYPE_F32, 1, n, 0, 0),
                 twn = ck_view(&dwn, i, MEMRA_TYPE_F32, E, 1, 0, 0),
                 tx = ck_view(&dx, i, MEMRA_TYPE_F32, E, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, E, n, 0, 0),
                 tn = ck_view(&dn, i, MEMRA_TYPE_F32, E, n, 0, 0);
    ok &= must_ok(i,
                  P[i].vt->moe_combine_rmsnorm(P[i].be, &tn, &tx, &twn, 1e-6f, &ty, &td, &tw,
                                               gated ? &tg : NULL),
                  "moe_combine_rmsnorm");
  }
  if (ok) {
    cmp_f32("moe_combine_rmsnorm y", what, &dy, 0, n * E, 1e-6, NULL);
    cmp_f32("moe_combine_rmsnorm x", what, &dx, 0, n * E, 1e-6, NULL);
    cmp_f32("moe_combine_rmsnorm xn", what, &dn, 0, n * E, 1e-5, NULL);
    memra_tensor td = ck_view(&dd, 1, MEMRA_TYPE_F32, E, n * xk, 0, 0),
                 tw = ck_view(&dw, 1, MEMRA_TYPE_F32, k, n, 0, 0),
                 tg = ck_view(&dg, 1, MEMRA_TYPE_F32, 1, n, 0, 0),
                 twn = ck_view(&dwn, 1, MEMRA_TYPE_F32, E, 1, 0, 0),
                 tx = ck_view(&dx2, 1, MEMRA_TYPE_F32, E, n, 0, 0),
                 ty = ck_view(&dy2, 1, MEMRA_TYPE_F32, E, n, 0, 0),
                 tn = ck_view(&dn2, 1, MEMRA_TYPE_F32, E, n, 0, 0);
    if (must_ok(1,
                gated ? P[1].vt->moe_combine_shexp(P[1].be, &ty, &td, &tw, &tg)
                      : P[1].vt->moe_combine(P[1].be, &ty, &td, &tw),
                "moe_combine") &&
        must_ok(1, P[1].vt->rmsnorm(P[1].be, &tn, &tx, &ty, &twn, 1e-6f), "rmsnorm")) {
      record_same_bits("moe_combine_rmsnorm y == the combine's", what, &dy, 0, &dy2, 1, row);
      record_same_bits("moe_combine_rmsnorm x == rmsnorm's", what, &dx, 0, &dx2, 1, row);
      record_same_bits("moe_combine_rmsnorm xn == rmsnorm's", what, &dn, 0, &dn2, 1, row);
    }
  }
  ck_buf *bufs[] = {&dd, &dw, &dg, &dwn, &dx, &dx2, &dy, &dy2, &dn, &dn2};
  for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; ++j)
    ck_free(bufs[j]);
  free(d);
  free(w);
  free(g);
  free(x);
  free(wn);
}

/* ABI 1.7 moe_combine_gated: against the CPU, and on plugin 1 bitwise against its own
 * moe_combine, sigmoid_gate and add (the composition it replaces). */
static void check_combine_gated(int64_t n, int64_t k, int64_t E) {
  float *x = ck_frand_vec(n * k * E, -2, 2), *w = ck_frand_vec(n * k, 0, 1),
        *sh = ck_frand_vec(n * E, -2, 2), *g = ck_frand_vec(n, -6, 6);
  ck_buf dx = ck_new((uint64_t)(n * k * E) * 4, x), dw = ck_new((uint64_t)(n * k) * 4, w),
         ds = ck_new((uint64_t)(n * E) * 4, sh), dg = ck_new((uint64_t)n * 4, g),
         dy = ck_new((uint64_t)(n * E) * 4 + 4, NULL), d2 = ck_new((uint64_t)(n * E) * 4, NULL);
  char what[80];
  snprintf(what, sizeof what, "n %" PRId64 " k %" PRId64 " E %" PRId64, n, k, E);
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    if (!P[i].vt->moe_combine_gated) {
      ck_record("moe_combine_gated", what, INFINITY, 0, 0, "slot missing");
      ok = 0;
      break;
    }
    memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, E, n * k, 0, 0),
                 tw = ck_view(&dw, i, MEMRA_TYPE_F32, k, n, 0, 0),
                 ts = ck_view(&ds, i, MEMRA_TYPE_F32, E, n, 0, 0),
                 tg = ck_view(&dg, i, MEMRA_TYPE_F32, 1, n, 0, 0),
                 ty = ck_view(&dy, i, MEMRA_TYPE_F32, E, n, 0, 0);
    ok &= must_ok(i, P[i].vt->moe_combine_gated(P[i].be, &ty, &tx, &tw, &ts, &tg),
                  "moe_combine_gated");
  }
  if (ok) {
    cmp_f32("moe_combine_gated", what, &dy, 0, n * E, 1e-6, NULL);
    /* plugin 1's composition: combine into d2, gate sh in place, add */
    memra_tensor tx = ck_view(&dx, 1, MEMRA_TYPE_F32, E, n * k, 0, 0),
                 tw = ck_view(&dw, 1, MEMRA_TYPE_F32, k, n, 0, 0),
                 ts = ck_view(&ds, 1, MEMRA_TYPE_F32, E, n, 0, 0),
                 tg = ck_view(&dg, 1, MEMRA_TYPE_F32, 1, n, 0, 0),
                 t2 = ck_view(&d2, 1, MEMRA_TYPE_F32, E, n, 0, 0);
    if (must_ok(1, P[1].vt->moe_combine(P[1].be, &t2, &tx, &tw), "moe_combine") &&
        must_ok(1, P[1].vt->sigmoid_gate(P[1].be, &ts, &ts, &tg), "sigmoid_gate") &&
        must_ok(1, P[1].vt->add(P[1].be, &t2, &t2, &ts), "add")) {
      record_same_bits("moe_combine_gated == combine + sigmoid_gate + add", what, &dy, 0, &d2, 1,
                       (uint64_t)(n * E) * 4);
    }
  }
  ck_free(&dx);
  ck_free(&dw);
  ck_free(&ds);
  ck_free(&dg);
  ck_free(&dy);
  ck_free(&d2);
  free(x);
  free(w);
  free(sh);
  free(g);
}

/* bcast: g [n, 1]. strided: x and g are per-head views of wider rows, y aliases x (the
 * attention output gate of qwen3next). */
static void check_sigmoid_gate(int64_t n, int64_t ne0, int bcast, int strided) {
  const int64_t xw = strided ? ne0 + 3 : ne0, gw = strided ? 2 * ne0 + 1 : (bcast ? 1 : ne0);
  float *x = ck_frand_vec(n * xw, -3, 3), *g = ck_frand_vec(n * gw, -6, 6);
  ck_buf dx = ck_new((uint64_t)(n * xw) * 4, x), dg = ck_new((uint64_t)(n * gw) * 4, g),
         dy = ck_new((uint64_t)(n * ne0) * 4, NULL);
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, ne0, n, 4 * (uint64_t)xw, 0),
                 tg = ck_view(&dg, i, MEMRA_TYPE_F32, bcast ? 1 : ne0, n, 4 * (uint64_t)gw,
                              strided ? 4 * (uint64_t)(ne0 + 1) : 0),
                 ty = strided ? tx : ck_view(&dy, i, MEMRA_TYPE_F32, ne0, n, 0, 0);
    ok &= must_ok(i, P[i].vt->sigmoid_gate(P[i].be, &ty, &tx, &tg), "sigmoid_gate");
  }
  char what[80];
  snprintf(what, sizeof what, "n %" PRId64 " ne0 %" PRId64 "%s%s", n, ne0, bcast ? " g [n,1]" : "",
           strided ? " strided, in place" : "");
  if (ok) {
    if (strided)
      cmp_f32("sigmoid_gate", what, &dx, 0, n * xw, 1e-6, NULL);
    else
      cmp_f32("sigmoid_gate", what, &dy, 0, n * ne0, 1e-6, NULL);
  }
  ck_free(&dx);
  ck_free(&dg);
  ck_free(&dy);
  free(x);
  free(g);
}

/* ABI 1.7 rmsnorm_gate on per-head rows (n heads of d), in place as the core runs it: against
 * the CPU, and on plugin 1 bitwise against its own rmsnorm then glu. */
static void check_rmsnorm_gate(int64_t rows, int64_t d) {
  float *x = ck_frand_vec(rows * d, -3, 3), *z = ck_frand_vec(rows * d, -5, 5),
        *w = ck_frand_vec(d, 0.5f, 1.5f);
  const uint64_t b = (uint64_t)(rows * d) * 4;
  ck_buf dx = ck_new(b, x), dx2 = ck_new(b, x), dz = ck_new(b, z), dw = ck_new((uint64_t)d * 4, w);
  char what[80];
  snprintf(what, sizeof what, "rows %" PRId64 " d %" PRId64, rows, d);
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    if (!P[i].vt->rmsnorm_gate) {
      ck_record("rmsnorm_gate", what, INFINITY, 0, 0, "slot missing");
      ok = 0;
      break;
    }
    memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, d, rows, 0, 0),
                 tz = ck_view(&dz, i, MEMRA_TYPE_F32, d, rows, 0, 0),
                 tw = ck_view(&dw, i, MEMRA_TYPE_F32, d, 1, 0, 0);
    ok &= must_ok(i, P[i].vt->rmsnorm_gate(P[i].be, &tx, &tx, &tw, &tz, 1e-6f, MEMRA_ACT_SILU),
                  "rmsnorm_gate");
  }
  if (ok) {
    cmp_f32("rmsnorm_gate", what, &dx, 0, rows * d, 1e-5, NULL);
    const memra_tensor none = {0};
    memra_tensor tx = ck_view(&dx2, 1, MEMRA_TYPE_F32, d, rows, 0, 0),
                 tz = ck_view(&dz, 1, MEMRA_TYPE_F32, d, rows, 0, 0),
                 tw = ck_view(&dw, 1, MEMRA_TYPE_F32, d, 1, 0, 0);
    if (must_ok(1, P[1].vt->rmsnorm(P[1].be, &tx, &tx, &none, &tw, 1e-6f), "rmsnorm") &&
        must_ok(1, P[1].vt->glu(P[1].be, &tx, &tz, &tx, MEMRA_ACT_SILU), "glu")) {
      record_same_bits("rmsnorm_gate == rmsnorm + glu", what, &dx, 0, &dx2, 1, b);
    }
  }
  ck_free(&dx);
  ck_free(&dx2);
  ck_free(&dz);
  ck_free(&dw);
  free(x);
  free(z);
  free(w);
}

/* ABI 1.8: q [rq, d] and k [rk, dk] (per-head rows) normed in place in one call, against the
 * CPU and, on plugin 1, bitwise against its own two rmsnorm calls. A plugin that does not offer
 * the slot (the CUDA plugins with MEMRA_RMS_QK=0) is noted, not failed. */
static void check_rmsnorm_qk(int64_t rq, int64_t rk, int64_t d, int64_t dk) {
  char what[80];
  snprintf(what, sizeof what, "q %" PRId64 "x%" PRId64 " k %" PRId64 "x%" PRId64, rq, d, rk, dk);
  if (!P[0].vt->rmsnorm_qk || !P[1].vt->rmsnorm_qk) {
    printf("note: rmsnorm_qk %s not checked: a plugin lacks the slot\n", what);
    return;
  }
  float *q = ck_frand_vec(rq * d, -2, 2), *k = ck_frand_vec(rk * dk, -3, 3),
        *wq = ck_frand_vec(d, 0.5f, 1.5f), *wk = ck_frand_vec(dk, 0.5f, 1.5f);
  const uint64_t bq = (uint64_t)(rq * d) * 4, bk = (uint64_t)(rk * dk) * 4;
  ck_buf dq = ck_new(bq, q), dk_ = ck_new(bk, k), dq2 = ck_new(bq, q), dk2 = ck_new(bk, k),
         dwq = ck_new((uint64_t)d * 4, wq), dwk = ck_new((uint64_t)dk * 4, wk);
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    memra_tensor tq = ck_view(&dq, i, MEMRA_TYPE_F32, d, rq, 0, 0),
                 tk = ck_view(&dk_, i, MEMRA_TYPE_F32, dk, rk, 0, 0),
                 twq = ck_view(&dwq, i, MEMRA_TYPE_F32, d, 1, 0, 0),
                 twk = ck_view(&dwk, i, MEMRA_TYPE_F32, dk, 1, 0, 0);
    ok &= must_ok(i, P[i].vt->rmsnorm_qk(P[i].be, &tq, &twq, &tk, &twk, 1e-6f), "rmsnorm_qk");
  }
  if (ok) {
    cmp_f32("rmsnorm_qk q", what, &dq, 0, rq * d, 1e-5, NULL);
    cmp_f32("rmsnorm_qk k", what, &dk_, 0, rk * dk, 1e-5, NULL);
    const memra_tensor none = {0};
    memra_tensor tq = ck_view(&dq2, 1, MEMRA_TYPE_F32, d, rq, 0, 0),
                 tk = ck_view(&dk2, 1, MEMRA_TYPE_F32, dk, rk, 0, 0),
                 twq = ck_view(&dwq, 1, MEMRA_TYPE_F32, d, 1, 0, 0),
                 twk = ck_view(&dwk, 1, MEMRA_TYPE_F32, dk, 1, 0, 0);
    if (must_ok(1, P[1].vt->rmsnorm(P[1].be, &tq, &tq, &none, &twq, 1e-6f), "rmsnorm") &&
        must_ok(1, P[1].vt->rmsnorm(P[1].be, &tk, &tk, &none, &twk, 1e-6f), "rmsnorm")) {
      record_same_bits("rmsnorm_qk == two rmsnorm (q)", what, &dq, 0, &dq2, 1, bq);
      record_same_bits("rmsnorm_qk == two rmsnorm (k)", what, &dk_, 0, &dk2, 1, bk);
    }
  }
  ck_free(&dq);
  ck_free(&dk_);
  ck_free(&dq2);
  ck_free(&dk2);
  ck_free(&dwq);
  ck_free(&dwk);
  free(q);
  free(k);
  free(wq);
  free(wk);
}

/* --- batches of the recurrent ops -------------------------------------------------------- */

enum { NSEQ = 3, MAX_ROWS = 16 };
typedef struct step {
  int n;
  int32_t seq[MAX_ROWS], pos[MAX_ROWS];
} step;

/* Interleaved prefill of sequences 0 (7 rows) and 2 (4); a decode step where sequence 1
 * resumes at position 5 from a state it never wrote; sequence 0 restarting at 0 beside
 * the others; an empty step. */
static const step STEPS[] = {
    {11, {0, 2, 0, 2, 0, 2, 0, 2, 0, 0, 0}, {0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6}},
    {3, {1, 0, 2}, {5, 7, 4}},
    {4, {0, 0, 2, 1}, {0, 1, 5, 6}},
    {0, {0}, {0}},
};
enum { NSTEPS = sizeof STEPS / sizeof STEPS[0] };

typedef struct dbatch {
  ck_buf pos, seq, bt;
} dbatch;

static dbatch batch_new(const step *s) {
  int32_t bt[NSEQ * 4];
  for (int i = 0; i < NSEQ * 4; ++i)
    bt[i] = i;
  dbatch b = {ck_new(4 * MAX_ROWS, s->pos), ck_new(4 * MAX_ROWS, s->seq), ck_new(sizeof bt, bt)};
  return b;
}
static memra_batch batch_view(const dbatch *b, int i, const step *s) {
  memra_batch m;
  memset(&m, 0, sizeof m);
  m.n_rows = s->n;
  m.n_seqs = NSEQ;
  m.block_size = 64;
  m.max_blocks = 4;
  m.kv_bucket = 256;
  m.pos = ck_view(&b->pos, i, MEMRA_TYPE_I32, s->n > 0 ? s->n : 1, 1, 0, 0);
  m.seq = ck_view(&b->seq, i, MEMRA_TYPE_I32, s->n > 0 ? s->n : 1, 1, 0, 0);
  m.block_table = ck_view(&b->bt, i, MEMRA_TYPE_I32, 4, NSEQ, 0, 0);
  return m;
}
static void batch_free(dbatch *b) {
  ck_free(&b->pos);
  ck_free(&b->seq);
  ck_free(&b->bt);
}

/* --- ssm_conv ------------------------------------------------------------------------ */

static void check_ssm_conv(int64_t C, int64_t K) {
  const int64_t xw = C + 5; /* x is a view of wider rows */
  float *w = ck_frand_vec(C * K, -1, 1), *st = ck_frand_vec(NSEQ * (K - 1) * C, -1, 1);
  ck_buf dw = ck_new((uint64_t)(C * K) * 4, w), ds = ck_new((uint64_t)(NSEQ * (K - 1) * C) * 4, st);
  double worst = 0;
  int ok = 1;
  for (int t = 0; t < NSTEPS && ok; ++t) {
    const step *s = &STEPS[t];
    float *x = ck_frand_vec(MAX_ROWS * xw, -2, 2);
    ck_buf dx = ck_new((uint64_t)(MAX_ROWS * xw) * 4, x),
           dy = ck_new((uint64_t)(MAX_ROWS * C) * 4, NULL);
    dbatch b = batch_new(s);
    for (int i = 0; i < 2; ++i) {
      memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, C, s->n, 4 * (uint64_t)xw, 8),
                   ty = ck_view(&dy, i, MEMRA_TYPE_F32, C, s->n, 0, 0),
                   tw = ck_view(&dw, i, MEMRA_TYPE_F32, K, C, 0, 0),
                   ts = ck_view(&ds, i, MEMRA_TYPE_F32, (K - 1) * C, NSEQ, 0, 0);
      memra_batch mb = batch_view(&b, i, s);
      ok &= must_ok(i, P[i].vt->ssm_conv(P[i].be, &ty, &tx, &tw, &ts, &mb), "ssm_conv");
    }
    if (ok && s->n > 0) cmp_f32("ssm_conv", NULL, &dy, 0, s->n * C, 0, &worst);
    if (ok && !ck_guard_ok(&dy)) worst = INFINITY;
    batch_free(&b);
    ck_free(&dx);
    ck_free(&dy);
    free(x);
  }
  char what[80];
  snprintf(what, sizeof what, "C %" PRId64 " K %" PRId64 ": y of %d steps", C, K, NSTEPS);
  if (ok) {
    ck_record("ssm_conv", what, worst, 1e-5, worst <= 1e-5, "");
    snprintf(what, sizeof what, "C %" PRId64 " K %" PRId64 ": final states", C, K);
    cmp_f32("ssm_conv state", what, &ds, 0, NSEQ * (K - 1) * C, 1e-6, NULL);
  }
  ck_free(&dw);
  ck_free(&ds);
  free(w);
  free(st);
}

/* ssm_conv v2 (the default; MEMRA_GDN_PIPE=0 takes v1: eight rows' inputs loaded at once) on the
 * test plugin, bitwise against v1 over the recurrent schedule (y of every step, the final states; a
 * state copy each). */
static void check_ssm_conv_pipe(int64_t C, int64_t K) {
  const int64_t xw = C + 5;
  float *w = ck_frand_vec(C * K, -1, 1), *st = ck_frand_vec(NSEQ * (K - 1) * C, -1, 1);
  const uint64_t sbytes = (uint64_t)(NSEQ * (K - 1) * C) * 4;
  ck_buf dw = ck_new((uint64_t)(C * K) * 4, w), ds[2] = {ck_new(sbytes, st), ck_new(sbytes, st)};
  const int i = 1;
  int ok = 1, same = 1;
  for (int t = 0; t < NSTEPS && ok; ++t) {
    const step *s = &STEPS[t];
    float *x = ck_frand_vec(MAX_ROWS * xw, -2, 2);
    ck_buf dx = ck_new((uint64_t)(MAX_ROWS * xw) * 4, x),
           dy[2] = {ck_new((uint64_t)(MAX_ROWS * C) * 4, NULL),
                    ck_new((uint64_t)(MAX_ROWS * C) * 4, NULL)};
    dbatch b = batch_new(s);
    memra_batch mb = batch_view(&b, i, s);
    memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, C, s->n, 4 * (uint64_t)xw, 8),
                 tw = ck_view(&dw, i, MEMRA_TYPE_F32, K, C, 0, 0);
    for (int v = 0; v < 2 && ok; ++v) { /* v 0: v1, v 1: v2 */
      memra_tensor ty = ck_view(&dy[v], i, MEMRA_TYPE_F32, C, s->n, 0, 0),
                   ts = ck_view(&ds[v], i, MEMRA_TYPE_F32, (K - 1) * C, NSEQ, 0, 0);
      setenv("MEMRA_GDN_PIPE", v ? "1" : "0", 1);
      ok &= must_ok(i, P[i].vt->ssm_conv(P[i].be, &ty, &tx, &tw, &ts, &mb), "ssm_conv");
    }
    unsetenv("MEMRA_GDN_PIPE");
    if (ok && s->n > 0) {
      uint8_t *y1 = ck_get(&dy[0], i), *y2 = ck_get(&dy[1], i);
      same &= !memcmp(y1, y2, (size_t)(s->n * C) * 4);
      free(y1);
      free(y2);
    }
    batch_free(&b);
    ck_free(&dx);
    ck_free(&dy[0]);
    ck_free(&dy[1]);
    free(x);
  }
  char what[80];
  snprintf(what, sizeof what, "C %" PRId64 " K %" PRId64 ": %d steps", C, K, NSTEPS);
  if (ok) {
    ck_record("ssm_conv v2 == v1", what, same ? 0 : 1, 0, same, "bitwise, every step");
    record_same_bits("ssm_conv v2 state == v1's", what, &ds[1], 0, &ds[0], i, sbytes);
  }
  ck_free(&dw);
  ck_free(&ds[0]);
  ck_free(&ds[1]);
  free(w);
  free(st);
}

/* --- matmul_n_conv (ABI 1.11) ------------------------------------------------------------ */

/* Decode rows of one sequence each (sequence 1 resuming from a state it never wrote, sequence 0
 * starting at 0 over a used state, then continuing), a step of three such rows (the plugin's
 * composition) and one more single row. */
static const step CSTEPS[] = {
    {1, {1}, {5}}, {1, {0}, {0}}, {1, {0}, {1}}, {3, {1, 0, 2}, {6, 2, 0}}, {1, {2}, {1}},
};
enum { NCSTEPS = sizeof CSTEPS / sizeof CSTEPS[0] };

/* A GDN layer's projections (qkv of C rows, then z of N1 rows, type `type`, K wide) with the conv
 * (width 4) on qkv: against the CPU (both outputs every step, the final states), and on plugin 1
 * bitwise against its own matmul_n, then ssm_conv, over a second copy of the state. */
static void check_matmul_n_conv(int32_t type, int64_t C, int64_t N1, int64_t K) {
  const int64_t CK = 4;
  uint64_t b0, b1;
  void *w0 = ck_rand_rows(type, K, C, &b0), *w1 = ck_rand_rows(type, K, N1, &b1);
  float *cw = ck_frand_vec(C * CK, -1, 1), *st = ck_frand_vec(NSEQ * (CK - 1) * C, -1, 1);
  const uint64_t sbytes = (uint64_t)(NSEQ * (CK - 1) * C) * 4;
  ck_buf dw0 = ck_new(b0, w0), dw1 = ck_new(b1, w1), dcw = ck_new((uint64_t)(C * CK) * 4, cw),
         ds = ck_new(sbytes, st), ds2 = ck_new(sbytes, st);
  char what[96];
  snprintf(what, sizeof what, "%s C %" PRId64 " z %" PRId64 " K %" PRId64, tname(type), C, N1, K);
  double worst = 0;
  int ok = 1, same = 1;
  for (int t = 0; t < NCSTEPS && ok; ++t) {
    const step *s = &CSTEPS[t];
    float *x = ck_frand_vec(s->n * K, -1, 1);
    ck_buf dx = ck_new((uint64_t)(s->n * K) * 4, x), du = ck_new((uint64_t)(s->n * C) * 4, NULL),
           dz = ck_new((uint64_t)(s->n * N1) * 4, NULL),
           dt = ck_new((uint64_t)(s->n * C) * 4, NULL),
           du2 = ck_new((uint64_t)(s->n * C) * 4, NULL),
           dz2 = ck_new((uint64_t)(s->n * N1) * 4, NULL);
    dbatch b = batch_new(s);
    for (int i = 0; i < 2 && ok; ++i) {
      const memra_tensor tx = ck_view(&dx, i, MEMRA_TYPE_F32, K, s->n, 0, 0),
                         tw[2] = {ck_view(&dw0, i, type, K, C, 0, 0),
                                  ck_view(&dw1, i, type, K, N1, 0, 0)},
                         ty[2] = {ck_view(&du, i, MEMRA_TYPE_F32, C, s->n, 0, 0),
                                  ck_view(&dz, i, MEMRA_TYPE_F32, N1, s->n, 0, 0)},
                         tcw = ck_view(&dcw, i, MEMRA_TYPE_F32, CK, C, 0, 0),
                         ts = ck_view(&ds, i, MEMRA_TYPE_F32, (CK - 1) * C, NSEQ, 0, 0);
      memra_batch mb = batch_view(&b, i, s);
      ok &= must_ok(i, P[i].vt->matmul_n_conv(P[i].be, 2, ty, &tx, tw, &tcw, &ts, &mb),
                    "matmul_n_conv");
      if (i == 1 && ok) { /* the composition on the test plugin */
        const memra_tensor ty2[2] = {ck_view(&dt, i, MEMRA_TYPE_F32, C, s->n, 0, 0),
                                     ck_view(&dz2, i, MEMRA_TYPE_F32, N1, s->n, 0, 0)},
                           tu2 = ck_view(&du2, i, MEMRA_TYPE_F32, C, s->n, 0, 0),
                           ts2 = ck_view(&ds2, i, MEMRA_TYPE_F32, (CK - 1) * C, NSEQ, 0, 0);
        ok &= must_ok(i, P[i].vt->matmul_n(P[i].be, 2, ty2, &tx, tw, NULL), "matmul_n") &&
              must_ok(i, P[i].vt->ssm_conv(P[i].be, &tu2, &ty2[0], &tcw, &ts2, &mb), "ssm_conv");
      }
    }
    if (ok) {
      cmp_f32("matmul_n_conv", NULL, &du, 0, s->n * C, 0, &worst);
      cmp_f32("matmul_n_conv", NULL, &dz, 0, s->n * N1, 0, &worst);
      if (!ck_guard_ok(&du) || !ck_guard_ok(&dz)) worst = INFINITY;
      uint8_t *a = ck_get(&du, 1), *c = ck_get(&du2, 1), *za = ck_get(&dz, 1),
              *zc = ck_get(&dz2, 1);
      same &= !memcmp(a, c, (size_t)(s->n * C) * 4) && !memcmp(za, zc, (size_t)(s->n * N1) * 4);
      free(a);
      free(c);
      free(za);
      free(zc);
    }
    batch_free(&b);
    ck_free(&dx);
    ck_free(&du);
    ck_free(&dz);
    ck_free(&dt);
    ck_free(&du2);
    ck_free(&dz2);
    free(x);
  }
  if (ok) {
    ck_record("matmul_n_conv", what, worst, 1e-4, worst <= 1e-4, "u and z, 5 steps");
    cmp_f32("matmul_n_conv state", what, &ds, 0, NSEQ * (CK - 1) * C, 1e-4, NULL);
    ck_record("matmul_n_conv == matmul_n, ssm_conv", what, same ? 0 : 1, 0, same,
              "bitwise, every step");
    record_same_bits("matmul_n_conv state == ssm_conv's", what, &ds, 0, &ds2, 1, sbytes);
  }
  ck_free(&dw0);
  ck_free(&dw1);
  ck_free(&dcw);
  ck_free(&ds);
  ck_free(&ds2);
  free(w0);
  free(w1);
  free(cw);
  free(st);
}

/* --- gated_delta_rule ------------------------------------------------------------------ */

static void check_gdn(int hk, int hv, int d, int heads) {
  const int64_t KD = (int64_t)hk * d, VD = (int64_t)hv * d, uw = 2 * KD + VD + 3, abw = 2 * hv + 1;
  const int64_t sn = (int64_t)hv * d * d;
  float *alog = ck_frand_vec(hv, -1.5f, 0.5f), *dt = ck_frand_vec(hv, -1, 1),
        *st = ck_frand_vec(NSEQ * sn, -0.5f, 0.5f);
  for (int h = 0; h < hv; ++h)
    alog[h] = -expf(alog[h]); /* GGUF ssm_a = -exp(A_log) */
  ck_buf dal = ck_new(4 * (uint64_t)hv, alog), ddt = ck_new(4 * (uint64_t)hv, dt),
         ds = ck_new(4 * (uint64_t)(NSEQ * sn), st);
  memra_gdn_params p = {hk, hv, d, heads, 1e-6f, 0};
  double worst = 0;
  int ok = 1;
  for (int t = 0; t < NSTEPS && ok; ++t) {
    const step *s = &STEPS[t];
    float *u = ck_frand_vec(MAX_ROWS * uw, -1, 1), *ab = ck_frand_vec(MAX_ROWS * abw, -3, 3);
    ck_buf du = ck_new(4 * (uint64_t)(MAX_ROWS * uw), u),
           dab = ck_new(4 * (uint64_t)(MAX_ROWS * abw), ab),
           dout = ck_new(4 * (uint64_t)(MAX_ROWS * VD), NULL);
    dbatch b = batch_new(s);
    for (int i = 0; i < 2; ++i) {
      const uint64_t ul = 4 * (uint64_t)uw, al = 4 * (uint64_t)abw;
      memra_tensor tq = ck_view(&du, i, MEMRA_TYPE_F32, KD, s->n, ul, 0),
                   tk = ck_view(&du, i, MEMRA_TYPE_F32, KD, s->n, ul, 4 * (uint64_t)KD),
                   tv = ck_view(&du, i, MEMRA_TYPE_F32, VD, s->n, ul, 8 * (uint64_t)KD),
                   ta = ck_view(&dab, i, MEMRA_TYPE_F32, hv, s->n, al, 0),
                   tb = ck_view(&dab, i, MEMRA_TYPE_F32, hv, s->n, al, 4 * (uint64_t)hv),
                   to = ck_view(&dout, i, MEMRA_TYPE_F32, VD, s->n, 0, 0),
                   tal = ck_view(&dal, i, MEMRA_TYPE_F32, hv, 1, 0, 0),
                   tdt = ck_view(&ddt, i, MEMRA_TYPE_F32, hv, 1, 0, 0),
                   ts = ck_view(&ds, i, MEMRA_TYPE_F32, sn, NSEQ, 0, 0);
      memra_batch mb = batch_view(&b, i, s);
      ok &= must_ok(i,
                    P[i].vt->gated_delta_rule(P[i].be, &to, &tq, &tk, &tv, &ta, &tb, &tal, &tdt,
                                              &ts, &mb, &p),
                    "gated_delta_rule");
    }
    if (ok && s->n > 0) cmp_f32("gdn", NULL, &dout, 0, s->n * VD, 0, &worst);
    if (ok && !ck_guard_ok(&dout)) worst = INFINITY;
    batch_free(&b);
    ck_free(&du);
    ck_free(&dab);
    ck_free(&dout);
    free(u);
    free(ab);
  }
  char what[80];
  snprintf(what, sizeof what, "H_k %d H_v %d d %d %s: out of %d steps", hk, hv, d,
           heads == MEMRA_GDN_TILED ? "tiled" : "grouped", NSTEPS);
  if (ok) {
    ck_record("gated_delta_rule", what, worst, 1e-4, worst <= 1e-4, "");
    snprintf(what, sizeof what, "H_k %d H_v %d d %d %s: final states", hk, hv, d,
             heads == MEMRA_GDN_TILED ? "tiled" : "grouped");
    cmp_f32("gdn state", what, &ds, 0, NSEQ * sn, 1e-4, NULL);
  }
  ck_free(&dal);
  ck_free(&ddt);
  ck_free(&ds);
  free(alog);
  free(dt);
  free(st);
}

/* ABI 1.11 gated_delta_rule_norm over the recurrent schedule: against the CPU (out of every
 * step, final states), and on plugin 1 bitwise against its own gated_delta_rule, then
 * rmsnorm_gate over the per-head views, from a second copy of the state. */
static void check_gdn_norm(int hk, int hv, int d, int heads) {
  const int64_t KD = (int64_t)hk * d, VD = (int64_t)hv * d, uw = 2 * KD + VD + 3, abw = 2 * hv + 1;
  const int64_t sn = (int64_t)hv * d * d;
  float *alog = ck_frand_vec(hv, -1.5f, 0.5f), *dt = ck_frand_vec(hv, -1, 1),
        *st = ck_frand_vec(NSEQ * sn, -0.5f, 0.5f), *nw = ck_frand_vec(d, 0.5f, 1.5f);
  for (int h = 0; h < hv; ++h)
    alog[h] = -expf(alog[h]);
  ck_buf dal = ck_new(4 * (uint64_t)hv, alog), ddt = ck_new(4 * (uint64_t)hv, dt),
         ds = ck_new(4 * (uint64_t)(NSEQ * sn), st), ds2 = ck_new(4 * (uint64_t)(NSEQ * sn), st),
         dnw = ck_new(4 * (uint64_t)d, nw);
  memra_gdn_params p = {hk, hv, d, heads, 1e-6f, 0};
  double worst = 0;
  int ok = 1, same = 1;
  for (int t = 0; t < NSTEPS && ok; ++t) {
    const step *s = &STEPS[t];
    float *u = ck_frand_vec(MAX_ROWS * uw, -1, 1), *ab = ck_frand_vec(MAX_ROWS * abw, -3, 3),
          *z = ck_frand_vec(MAX_ROWS * VD, -3, 3);
    ck_buf du = ck_new(4 * (uint64_t)(MAX_ROWS * uw), u),
           dab = ck_new(4 * (uint64_t)(MAX_ROWS * abw), ab),
           dz = ck_new(4 * (uint64_t)(MAX_ROWS * VD), z),
           dout = ck_new(4 * (uint64_t)(MAX_ROWS * VD), NULL),
           dout2 = ck_new(4 * (uint64_t)(MAX_ROWS * VD), NULL);
    dbatch b = batch_new(s);
    for (int i = 0; i < 2 && ok; ++i) {
      const uint64_t ul = 4 * (uint64_t)uw, al = 4 * (uint64_t)abw;
      memra_tensor tq = ck_view(&du, i, MEMRA_TYPE_F32, KD, s->n, ul, 0),
                   tk = ck_view(&du, i, MEMRA_TYPE_F32, KD, s->n, ul, 4 * (uint64_t)KD),
                   tv = ck_view(&du, i, MEMRA_TYPE_F32, VD, s->n, ul, 8 * (uint64_t)KD),
                   ta = ck_view(&dab, i, MEMRA_TYPE_F32, hv, s->n, al, 0),
                   tb = ck_view(&dab, i, MEMRA_TYPE_F32, hv, s->n, al, 4 * (uint64_t)hv),
                   tz = ck_view(&dz, i, MEMRA_TYPE_F32, VD, s->n, 0, 0),
                   to = ck_view(&dout, i, MEMRA_TYPE_F32, VD, s->n, 0, 0),
                   tal = ck_view(&dal, i, MEMRA_TYPE_F32, hv, 1, 0, 0),
                   tdt = ck_view(&ddt, i, MEMRA_TYPE_F32, hv, 1, 0, 0),
                   tnw = ck_view(&dnw, i, MEMRA_TYPE_F32, d, 1, 0, 0),
                   ts = ck_view(&ds, i, MEMRA_TYPE_F32, sn, NSEQ, 0, 0);
      memra_batch mb = batch_view(&b, i, s);
      ok &=
          must_ok(i,
                  P[i].vt->gated_delta_rule_norm(P[i].be, &to, &tq, &tk, &tv, &ta, &tb, &tal, &tdt,
                                                 &ts, &mb, &p, &tnw, &tz, 1e-6f, MEMRA_ACT_SILU),
                  "gated_delta_rule_norm");
      if (i == 1 && ok && s->n > 0) { /* the composition on the test plugin */
        memra_tensor to2 = ck_view(&dout2, i, MEMRA_TYPE_F32, VD, s->n, 0, 0),
                     ts2 = ck_view(&ds2, i, MEMRA_TYPE_F32, sn, NSEQ, 0, 0),
                     oh = ck_view(&dout2, i, MEMRA_TYPE_F32, d, s->n * hv, 0, 0),
                     zh = ck_view(&dz, i, MEMRA_TYPE_F32, d, s->n * hv, 0, 0);
        ok &= must_ok(i,
                      P[i].vt->gated_delta_rule(P[i].be, &to2, &tq, &tk, &tv, &ta, &tb, &tal, &tdt,
                                                &ts2, &mb, &p),
                      "gated_delta_rule") &&
              must_ok(i, P[i].vt->rmsnorm_gate(P[i].be, &oh, &oh, &tnw, &zh, 1e-6f, MEMRA_ACT_SILU),
                      "rmsnorm_gate");
        if (ok) {
          uint8_t *x1 = ck_get(&dout, 1), *x2 = ck_get(&dout2, 1);
          same &= !memcmp(x1, x2, (size_t)(s->n * VD) * 4);
          free(x1);
          free(x2);
        }
      }
    }
    if (ok && s->n > 0) cmp_f32("gdn norm", NULL, &dout, 0, s->n * VD, 0, &worst);
    if (ok && !ck_guard_ok(&dout)) worst = INFINITY;
    batch_free(&b);
    ck_free(&du);
    ck_free(&dab);
    ck_free(&dz);
    ck_free(&dout);
    ck_free(&dout2);
    free(u);
    free(ab);
    free(z);
  }
  char what[80];
  snprintf(what, sizeof what, "H_k %d H_v %d d %d %s: %d steps", hk, hv, d,
           heads == MEMRA_GDN_TILED ? "tiled" : "grouped", NSTEPS);
  if (ok) {
    ck_record("gated_delta_rule_norm", what, worst, 1e-4, worst <= 1e-4, "out");
    cmp_f32("gated_delta_rule_norm state", what, &ds, 0, NSEQ * sn, 1e-4, NULL);
    ck_record("gated_delta_rule_norm == gdr, rmsnorm_gate", what, same ? 0 : 1, 0, same,
              "bitwise, every step");
    record_same_bits("gated_delta_rule_norm state == gdr's", what, &ds, 0, &ds2, 1,
                     4 * (uint64_t)(NSEQ * sn));
  }
  ck_free(&dal);
  ck_free(&ddt);
  ck_free(&ds);
  ck_free(&ds2);
  ck_free(&dnw);
  free(alog);
  free(dt);
  free(st);
  free(nw);
}

/* gated_delta_rule v2 (the default; MEMRA_GDN_PIPE=0 takes v1: the next row's loads under this
 * row's arithmetic) on the test plugin, bitwise against v1 over the recurrent schedule: out of
 * every step and the final states, each kernel from its own copy of the state (norm:
 * gated_delta_rule_norm's launch). */
static void check_gdn_pipe(int hk, int hv, int d, int heads, int norm) {
  const int64_t KD = (int64_t)hk * d, VD = (int64_t)hv * d, uw = 2 * KD + VD + 3, abw = 2 * hv + 1;
  const int64_t sn = (int64_t)hv * d * d;
  float *alog = ck_frand_vec(hv, -1.5f, 0.5f), *dt = ck_frand_vec(hv, -1, 1),
        *st = ck_frand_vec(NSEQ * sn, -0.5f, 0.5f), *nw = ck_frand_vec(d, 0.5f, 1.5f);
  for (int h = 0; h < hv; ++h)
    alog[h] = -expf(alog[h]);
  ck_buf dal = ck_new(4 * (uint64_t)hv, alog), ddt = ck_new(4 * (uint64_t)hv, dt),
         ds[2] = {ck_new(4 * (uint64_t)(NSEQ * sn), st), ck_new(4 * (uint64_t)(NSEQ * sn), st)},
         dnw = ck_new(4 * (uint64_t)d, nw);
  memra_gdn_params p = {hk, hv, d, heads, 1e-6f, 0};
  const int i = 1;
  int ok = 1, same = 1;
  for (int t = 0; t < NSTEPS && ok; ++t) {
    const step *s = &STEPS[t];
    float *u = ck_frand_vec(MAX_ROWS * uw, -1, 1), *ab = ck_frand_vec(MAX_ROWS * abw, -3, 3),
          *z = ck_frand_vec(MAX_ROWS * VD, -3, 3);
    ck_buf du = ck_new(4 * (uint64_t)(MAX_ROWS * uw), u),
           dab = ck_new(4 * (uint64_t)(MAX_ROWS * abw), ab),
           dz = ck_new(4 * (uint64_t)(MAX_ROWS * VD), z),
           dout[2] = {ck_new(4 * (uint64_t)(MAX_ROWS * VD), NULL),
                      ck_new(4 * (uint64_t)(MAX_ROWS * VD), NULL)};
    dbatch b = batch_new(s);
    const uint64_t ul = 4 * (uint64_t)uw, al = 4 * (uint64_t)abw;
    memra_tensor tq = ck_view(&du, i, MEMRA_TYPE_F32, KD, s->n, ul, 0),
                 tk = ck_view(&du, i, MEMRA_TYPE_F32, KD, s->n, ul, 4 * (uint64_t)KD),
                 tv = ck_view(&du, i, MEMRA_TYPE_F32, VD, s->n, ul, 8 * (uint64_t)KD),
                 ta = ck_view(&dab, i, MEMRA_TYPE_F32, hv, s->n, al, 0),
                 tb = ck_view(&dab, i, MEMRA_TYPE_F32, hv, s->n, al, 4 * (uint64_t)hv),
                 tz = ck_view(&dz, i, MEMRA_TYPE_F32, VD, s->n, 0, 0),
                 tal = ck_view(&dal, i, MEMRA_TYPE_F32, hv, 1, 0, 0),
                 tdt = ck_view(&ddt, i, MEMRA_TYPE_F32, hv, 1, 0, 0),
                 tnw = ck_view(&dnw, i, MEMRA_TYPE_F32, d, 1, 0, 0);
    memra_batch mb = batch_view(&b, i, s);
    for (int v = 0; v < 2 && ok; ++v) { /* v 0: v1, v 1: v2 */
      memra_tensor to = ck_view(&dout[v], i, MEMRA_TYPE_F32, VD, s->n, 0, 0),
                   ts = ck_view(&ds[v], i, MEMRA_TYPE_F32, sn, NSEQ, 0, 0);
      setenv("MEMRA_GDN_PIPE", v ? "1" : "0", 1);
      const memra_status r =
          norm ? P[i].vt->gated_delta_rule_norm(P[i].be, &to, &tq, &tk, &tv, &ta, &tb, &tal, &tdt,
                                                &ts, &mb, &p, &tnw, &tz, 1e-6f, MEMRA_ACT_SILU)
               : P[i].vt->gated_delta_rule(P[i].be, &to, &tq, &tk, &tv, &ta, &tb, &tal, &tdt, &ts,
                                           &mb, &p);
      ok &= must_ok(i, r, norm ? "gated_delta_rule_norm" : "gated_delta_rule");
    }
    unsetenv("MEMRA_GDN_PIPE");
    if (ok && s->n > 0) {
      uint8_t *x1 = ck_get(&dout[0], i), *x2 = ck_get(&dout[1], i);
      same &= !memcmp(x1, x2, (size_t)(s->n * VD) * 4);
      free(x1);
      free(x2);
    }
    batch_free(&b);
    ck_free(&du);
    ck_free(&dab);
    ck_free(&dz);
    ck_free(&dout[0]);
    ck_free(&dout[1]);
    free(u);
    free(ab);
    free(z);
  }
  char what[80];
  snprintf(what, sizeof what, "H_k %d H_v %d d %d %s%s: %d steps", hk, hv, d,
           heads == MEMRA_GDN_TILED ? "tiled" : "grouped", norm ? " norm" : "", NSTEPS);
  if (ok) {
    ck_record("gated_delta_rule v2 == v1", what, same ? 0 : 1, 0, same, "bitwise, every step");
    record_same_bits("gated_delta_rule v2 state == v1's", what, &ds[1], 0, &ds[0], i,
                     4 * (uint64_t)(NSEQ * sn));
  }
  ck_free(&dal);
  ck_free(&ddt);
  ck_free(&ds[0]);
  ck_free(&ds[1]);
  ck_free(&dnw);
  free(alog);
  free(dt);
  free(st);
  free(nw);
}

/* --- hostile arguments: both plugins refuse with the same status ------------------------ */

static void check_errors(void) {
  float x[64];
  for (int i = 0; i < 64; ++i)
    x[i] = ck_frand(-1, 1);
  ck_buf d = ck_new(sizeof x, x);
  memra_status s[2];
  for (int i = 0; i < 2; ++i) { /* 33 weight rows do not split into 2 experts */
    memra_tensor w = ck_view(&d, i, MEMRA_TYPE_F32, 1, 33, 0, 0),
                 y = ck_view(&d, i, MEMRA_TYPE_F32, 1, 2, 0, 0),
                 ids = ck_view(&d, i, MEMRA_TYPE_I32, 1, 1, 0, 0);
    s[i] = P[i].vt->matmul_id(P[i].be, &y, &y, &w, &ids, 2);
  }
  expect_refusal("matmul_id", "weight rows not split into experts", s[0], s[1], 1);
  for (int i = 0; i < 2; ++i) { /* k > n_expert */
    memra_tensor l = ck_view(&d, i, MEMRA_TYPE_F32, 3, 2, 0, 0),
                 ids = ck_view(&d, i, MEMRA_TYPE_I32, 4, 2, 0, 24),
                 w = ck_view(&d, i, MEMRA_TYPE_F32, 4, 2, 0, 64);
    s[i] = P[i].vt->moe_route(P[i].be, &ids, &w, &l, 1);
  }
  expect_refusal("moe_route", "k larger than n_expert", s[0], s[1], 1);
  for (int i = 0; i < 2; ++i) { /* the ids inside the logits they route */
    memra_tensor xx = ck_view(&d, i, MEMRA_TYPE_F32, 8, 1, 0, 0),
                 w = ck_view(&d, i, MEMRA_TYPE_F32, 8, 3, 0, 0),
                 l = ck_view(&d, i, MEMRA_TYPE_F32, 3, 1, 0, 128),
                 ids = ck_view(&d, i, MEMRA_TYPE_I32, 2, 1, 0, 128),
                 wt = ck_view(&d, i, MEMRA_TYPE_F32, 2, 1, 0, 160);
    s[i] = P[i].vt->matmul_n_route
               ? P[i].vt->matmul_n_route(P[i].be, 1, &l, &xx, &w, NULL, &ids, &wt, 1)
               : MEMRA_OK;
  }
  if (P[1].vt->matmul_n_route || !P[0].vt->matmul_n_route) /* opt-in on the GPU plugins */
    expect_refusal("matmul_n_route", "ids overlap the logits", s[0], s[1], 1);
  for (int i = 0; i < 2; ++i) { /* g of another row count */
    memra_tensor xx = ck_view(&d, i, MEMRA_TYPE_F32, 4, 3, 0, 0),
                 g = ck_view(&d, i, MEMRA_TYPE_F32, 4, 2, 0, 64);
    s[i] = P[i].vt->sigmoid_gate(P[i].be, &xx, &xx, &g);
  }
  expect_refusal("sigmoid_gate", "g rows differ from x", s[0], s[1], 1);
  for (int i = 0; i < 2; ++i) { /* y rows overrun the buffer */
    memra_tensor xx = ck_view(&d, i, MEMRA_TYPE_F32, 8, 2, 0, 0),
                 y = ck_view(&d, i, MEMRA_TYPE_F32, 8, 1, 0, 32),
                 w = ck_view(&d, i, MEMRA_TYPE_F32, 2, 2, 0, 0);
    s[i] = P[i].vt->moe_combine(P[i].be, &y, &xx, &w);
  }
  expect_refusal("moe_combine", "x rows not n * k", s[0], s[1], 1);
  step st1 = {1, {0}, {0}};
  dbatch b = batch_new(&st1);
  for (int i = 0; i < 2; ++i) { /* H_v not a multiple of H_k */
    memra_gdn_params p = {2, 3, 4, MEMRA_GDN_GROUPED, 1e-6f, 0};
    memra_tensor t = ck_view(&d, i, MEMRA_TYPE_F32, 8, 1, 0, 0);
    memra_batch mb = batch_view(&b, i, &st1);
    s[i] = P[i].vt->gated_delta_rule(P[i].be, &t, &t, &t, &t, &t, &t, &t, &t, &t, &mb, &p);
  }
  expect_refusal("gated_delta_rule", "H_v not a multiple of H_k", s[0], s[1], 1);
  for (int i = 0; i < 2; ++i) { /* state of the wrong width for K */
    memra_tensor xx = ck_view(&d, i, MEMRA_TYPE_F32, 4, 1, 0, 0),
                 y = ck_view(&d, i, MEMRA_TYPE_F32, 4, 1, 0, 64),
                 w = ck_view(&d, i, MEMRA_TYPE_F32, 4, 4, 0, 96),
                 st = ck_view(&d, i, MEMRA_TYPE_F32, 11, 3, 0, 0);
    memra_batch mb = batch_view(&b, i, &st1);
    s[i] = P[i].vt->ssm_conv(P[i].be, &y, &xx, &w, &st, &mb);
  }
  expect_refusal("ssm_conv", "state width not (K-1) C", s[0], s[1], 1);
  batch_free(&b);
  ck_free(&d);
}

static int run_ops(void) {
  for (int i = 0; i < 2; ++i)
    if (!P[i].vt->moe_route || !P[i].vt->matmul_id || !P[i].vt->moe_combine ||
        !P[i].vt->sigmoid_gate || !P[i].vt->ssm_conv || !P[i].vt->gated_delta_rule) {
      fprintf(stderr, "%s: lacks an op of ABI minor 1 (MoE / Gated DeltaNet)\n", P[i].vt->name);
      return 1;
    }
  check_route(37, 7, 2, 1, 0);
  check_route(5, 64, 8, 1, 0);
  check_route(19, 64, 8, 1, 1);
  check_route(3, 512, 10, 0, 0);
  check_route(9, 128, 8, 1, 1);
  check_route(6, 1000, 32, 1, 0);
  check_route(2, 1500, 8, 1, 0);
  check_route(0, 64, 8, 1, 0);
  check_route_glu(MEMRA_TYPE_Q4_K, 100, 8, 0, 256, 512, 1);  /* Qwen3-30B-A3B's decode form */
  check_route_glu(MEMRA_TYPE_Q4_K, 509, 10, 1, 256, 256, 1); /* Qwen3-Next's, shared stacked */
  check_route_glu(MEMRA_TYPE_Q6_K, 200, 4, 0, 256, 256, 2);
  check_matmul_n_route(128, 8, 2048, 1, 1);  /* Qwen3-30B-A3B's router */
  check_matmul_n_route(512, 10, 2048, 1, 2); /* Qwen3-Next's, with the shared gate logit */
  check_matmul_n_route(61, 5, 200, 1, 2);
  check_matmul_n_route(1000, 32, 96, 1, 1);
  if (!g_quick) {
    check_matmul_n_route(300, 6, 203, 1, 1); /* K % 8: v3, the route's own launch */
    check_matmul_n_route(1500, 8, 64, 1, 1); /* past the warp form */
    check_matmul_n_route(128, 8, 256, 3, 2); /* three rows: the composition */
  }
  if (!g_quick) {
    check_route_glu(MEMRA_TYPE_Q4_K, 100, 8, 0, 256, 512, 19); /* prompt rows: route, then v4 */
    check_route_glu(MEMRA_TYPE_Q4_K, 700, 6, 1, 256, 256, 3);
    check_route_glu(MEMRA_TYPE_Q8_0, 61, 4, 0, 96, 160, 1); /* not v3: route, then matmul_id_glu */
  }
  static const int32_t types[] = {MEMRA_TYPE_F16,  MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K,
                                  MEMRA_TYPE_Q6_K, MEMRA_TYPE_Q5_K, MEMRA_TYPE_Q4_0};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    const int32_t ty = types[t];
    const int kq = ty == MEMRA_TYPE_Q4_K || ty == MEMRA_TYPE_Q5_K || ty == MEMRA_TYPE_Q6_K;
    const int64_t K = kq ? 768 : ty == MEMRA_TYPE_F16 ? 97 : 544;
    check_matmul_id(ty, 7, 33, K, 1, 2, 1, 0);
    check_matmul_id(ty, 7, 33, K, 13, 2, 0, 0);
    if (!g_quick) {
      check_matmul_id(ty, 64, 48, kq ? 512 : 224, 5, 8, 1, 0);
      check_matmul_id(ty, 64, 17, kq ? 1280 : 160, 3, 8, 0, 0);
      check_matmul_id(ty, 9, 37, kq ? 2048 : 320, 3, 4, 1, 0);
      check_matmul_id(ty, 5, 21, kq ? 4352 : 96, 2, 3, 0, 0);
    }
  }
  /* matmul_id v3 (moe_tc.cuh: Q4_K / Q6_K stacks whose experts' rows cut into 16-row tiles):
   * decode-shaped, odd K (3 super-blocks), an out-of-range id, and prompts long enough that a
   * block streams many units through its ring and splits a new x row as it goes */
  check_matmul_id(MEMRA_TYPE_Q4_K, 12, 64, 2048, 1, 10, 1, 0);
  check_matmul_id(MEMRA_TYPE_Q6_K, 12, 48, 512, 1, 10, 0, 0);
  check_matmul_id(MEMRA_TYPE_Q6_K, 9, 32, 768, 5, 3, 0, 0);
  check_matmul_id(MEMRA_TYPE_Q4_K, 9, 48, 768, 7, 4, 1, 0);
  check_matmul_id(MEMRA_TYPE_Q4_K, 7, 32, 256, 4, 2, 1, 1);
  check_matmul_id(MEMRA_TYPE_Q6_K, 7, 16, 512, 3, 2, 0, 1);
  check_matmul_id(MEMRA_TYPE_Q4_K, 32, 256, 2048, 37, 10, 1, 0);
  check_matmul_id(MEMRA_TYPE_Q6_K, 16, 1024, 512, 23, 10, 0, 0);
  /* matmul_id v4 (moe_group.cuh: two rows an expert or more, the rows sorted by expert and a
   * tile applied to up to 8 of them): groups of every size (1, 2, 4 and 8 wide), x shared and
   * per row, the out-of-range bucket, and a token alone (v3) bitwise its batch (v4) */
  check_matmul_id(MEMRA_TYPE_Q4_K, 16, 48, 2048, 40, 8, 1, 0);
  check_matmul_id(MEMRA_TYPE_Q6_K, 12, 32, 768, 29, 6, 0, 0);
  check_matmul_id(MEMRA_TYPE_Q4_K, 64, 32, 512, 26, 5, 0, 0);
  check_matmul_id(MEMRA_TYPE_Q4_K, 8, 32, 512, 40, 4, 1, 1);
  check_matmul_id(MEMRA_TYPE_Q6_K, 8, 16, 256, 37, 3, 0, 1);
  check_matmul_id_alone(MEMRA_TYPE_Q4_K, 16, 48, 2048, 41, 4, 17);
  check_matmul_id_alone(MEMRA_TYPE_Q6_K, 16, 32, 768, 37, 3, 20);
  check_matmul_id_alone(MEMRA_TYPE_Q4_K, 12, 64, 768, 33, 8, 0);
  check_matmul_id_glu(MEMRA_TYPE_Q4_K, 24, 64, 2048, 53, 8, 1);
  check_matmul_id_glu(MEMRA_TYPE_Q6_K, 16, 40, 768, 41, 4, 0);
  check_matmul_id_alone(MEMRA_TYPE_Q4_K, 16, 48, 2048, 7, 4, 5);
  check_matmul_id_alone(MEMRA_TYPE_Q6_K, 16, 32, 768, 6, 3, 2);
  check_matmul_id_alone(MEMRA_TYPE_Q4_K, 16, 45, 2048, 7, 4, 5);
  check_matmul_id_alone(MEMRA_TYPE_Q6_K, 16, 29, 768, 6, 3, 2);
  check_matmul_id_alone(MEMRA_TYPE_Q5_K, 16, 19, 512, 5, 2, 4);
  check_matmul_id_alone(MEMRA_TYPE_F16, 16, 23, 2048, 5, 4, 3);
  check_matmul_id(MEMRA_TYPE_BF16, 9, 37, 2048, 3, 4, 1, 0);
  check_matmul_id(MEMRA_TYPE_BF16, 5, 13, 520, 2, 3, 0, 0);
  check_matmul_id(MEMRA_TYPE_F16, 12, 37, 2048, 3, 10, 1, 0);
  check_matmul_id(MEMRA_TYPE_F16, 7, 33, 256, 4, 2, 1, 1);
  check_matmul_id(MEMRA_TYPE_Q4_K, 7, 33, 256, 4, 2, 1, 1);
  check_matmul_id(MEMRA_TYPE_Q8_0, 7, 33, 64, 4, 2, 1, 1);
  check_matmul_id(MEMRA_TYPE_F16, 7, 9, 64, 0, 2, 1, 0);
  /* the hybrid's (F 512, K 2048) and Qwen3-30B-A3B's (768, 2048) gate/up shapes, odd F and K,
   * each kernel family (K-quant v2 at S 1, 2, 4; 16-bit v2; v1 for Q8_0) */
  check_matmul_id_glu(MEMRA_TYPE_Q4_K, 16, 45, 2048, 1, 10, 1);
  /* v3's GLU tiles (8 gate rows, their 8 up rows): F % 8 == 0 */
  check_matmul_id_glu(MEMRA_TYPE_Q4_K, 16, 64, 2048, 1, 10, 1);
  check_matmul_id_glu(MEMRA_TYPE_Q4_K, 9, 40, 768, 3, 8, 1);
  check_matmul_id_glu(MEMRA_TYPE_Q6_K, 9, 24, 512, 2, 4, 0);
  check_matmul_id_glu(MEMRA_TYPE_Q4_K, 24, 96, 2048, 19, 8, 1);
  check_matmul_id_glu(MEMRA_TYPE_Q6_K, 16, 37, 768, 3, 8, 1);
  check_matmul_id_glu(MEMRA_TYPE_Q5_K, 9, 29, 512, 2, 4, 0);
  check_matmul_id_glu(MEMRA_TYPE_Q4_K, 9, 19, 256, 5, 3, 1);
  check_matmul_id_glu(MEMRA_TYPE_F16, 12, 33, 520, 2, 10, 1);
  check_matmul_id_glu(MEMRA_TYPE_BF16, 7, 21, 264, 3, 2, 0);
  check_matmul_id_glu(MEMRA_TYPE_Q8_0, 7, 33, 544, 4, 2, 1);
  check_matmul_id_glu(MEMRA_TYPE_F16, 7, 9, 97, 3, 2, 1);
  check_combine(13, 8, 101);
  check_combine(1, 2, 2048);
  check_combine(0, 8, 64);
  check_combine_gated(13, 10, 101);
  check_combine_gated(1, 10, 2048);
  check_combine_shexp(13, 10, 101);
  check_combine_norm(1, 8, 2048, 0);  /* Qwen3-30B-A3B decode */
  check_combine_norm(1, 10, 2048, 1); /* Qwen3-Next's, its shared expert stacked */
  check_combine_norm(3, 4, 1030, 0);  /* not a multiple of 4: the scalar path */
  check_combine_norm(2, 5, 4100, 1);  /* 1,025 float4s: two for some threads */
  check_combine_shexp(1, 10, 2048);   /* Qwen3-Next's decode row */
  /* Qwen3-Next's down shape (N 2048, K 512, 10 routed + the shared expert), odd shapes, a
   * prompt's rows, the two-launch form (Q4_K, Q8_0) and no shared expert */
  check_mmid_combine(MEMRA_TYPE_F16, 17, 2048, 512, 1, 10, 1);
  check_mmid_combine(MEMRA_TYPE_BF16, 9, 37, 264, 5, 3, 1);
  check_mmid_combine(MEMRA_TYPE_F16, 12, 101, 520, 7, 4, 0);
  check_mmid_combine(MEMRA_TYPE_F16, 13, 2048, 512, 19, 10, 1);
  check_mmid_combine(MEMRA_TYPE_Q4_K, 9, 96, 512, 3, 4, 1);
  check_mmid_combine(MEMRA_TYPE_Q8_0, 7, 33, 544, 2, 2, 0);
  /* prompt rows enough for matmul_id v4: the two-launch form's rows and v4's sort table share
   * the workspace. They overlapped until the twenty-sixth session (rows written over the table
   * v4's blocks still read: an illegal address in a Qwen3-30B-A3B prompt under
   * MEMRA_MMID_COMBINE=1); the last case, that model's down projection (128 experts, 512
   * rows), faulted on the plugin before the fix, the two before it did not */
  check_mmid_combine(MEMRA_TYPE_Q4_K, 9, 96, 512, 40, 4, 0);
  check_mmid_combine(MEMRA_TYPE_Q6_K, 9, 128, 768, 40, 4, 1);
  check_mmid_combine(MEMRA_TYPE_Q6_K, 128, 2048, 768, 64, 8, 0); /* Qwen3-30B-A3B's down, 64 rows */
  check_rmsnorm_gate(32, 128); /* Qwen3-Next: 32 value heads of 128 */
  check_rmsnorm_gate(3 * 16, 128);
  check_rmsnorm_gate(7, 67);
  /* Qwen3-30B-A3B's decode row (32 q heads, 4 kv heads of 128), a prompt's, odd widths (the
   * scalar path), and q and k of different widths (two launches) */
  check_rmsnorm_qk(32, 4, 128, 128);
  check_rmsnorm_qk(37 * 16, 37 * 2, 256, 256);
  check_rmsnorm_qk(9, 3, 67, 67);
  check_rmsnorm_qk(8, 2, 128, 64);
  check_sigmoid_gate(19, 133, 0, 0);
  check_sigmoid_gate(7, 257, 1, 0);
  check_sigmoid_gate(23, 64, 0, 1);
  check_sigmoid_gate(0, 64, 0, 0);
  check_ssm_conv(161, 4);
  check_ssm_conv(67, 11);
  if (!g_quick) {
    check_ssm_conv(1031, 8);
    check_ssm_conv(33, 2);
  }
  check_ssm_conv_pipe(161, 4);
  check_ssm_conv_pipe(1031, 8);
  check_ssm_conv_pipe(33, 2);
  /* ABI 1.11 matmul_n_conv on each ring kernel of one row (v12 F16 / BF16, v13 Q8_0 at K 4096,
   * v11 Q4_K / Q6_K), and types whose kernel leaves the conv to a second launch (F32, Q5_K) */
  if (P[0].vt->matmul_n_conv && P[1].vt->matmul_n_conv) {
    check_matmul_n_conv(MEMRA_TYPE_F16, 1000, 37, 2048);
    check_matmul_n_conv(MEMRA_TYPE_BF16, 203, 64, 1024);
    check_matmul_n_conv(MEMRA_TYPE_Q8_0, 515, 37, 4096);
    check_matmul_n_conv(MEMRA_TYPE_Q4_K, 1000, 37, 2048);
    check_matmul_n_conv(MEMRA_TYPE_Q6_K, 333, 19, 2048);
    check_matmul_n_conv(MEMRA_TYPE_F32, 130, 9, 520);
    check_matmul_n_conv(MEMRA_TYPE_Q5_K, 77, 13, 768);
  }
  check_gdn(2, 6, 64, MEMRA_GDN_GROUPED);
  check_gdn(3, 6, 128, MEMRA_GDN_TILED);
  if (!g_quick) {
    check_gdn(1, 2, 40, MEMRA_GDN_GROUPED);
    check_gdn(1, 1, 200, MEMRA_GDN_TILED);
    check_gdn(2, 4, 16, MEMRA_GDN_TILED);
  }
  /* ABI 1.11 gated_delta_rule_norm: d 128 fuses (Qwen3-Next: 16 q/k heads, 32 value heads; a
   * tiled order), d 64 takes the two launches */
  if (P[0].vt->gated_delta_rule_norm && P[1].vt->gated_delta_rule_norm) {
    check_gdn_norm(2, 4, 128, MEMRA_GDN_GROUPED);
    check_gdn_norm(3, 6, 128, MEMRA_GDN_TILED);
    check_gdn_norm(2, 6, 64, MEMRA_GDN_GROUPED);
    check_gdn_pipe(3, 6, 128, MEMRA_GDN_TILED, 1);
  }
  check_gdn_pipe(2, 6, 64, MEMRA_GDN_GROUPED, 0);
  check_gdn_pipe(3, 6, 128, MEMRA_GDN_TILED, 0);
  check_gdn_pipe(1, 2, 40, MEMRA_GDN_GROUPED, 0);
  check_gdn_pipe(2, 4, 16, MEMRA_GDN_TILED, 0);
  check_errors();
  return 0;
}

/* --- end to end: the tiny family fixtures ------------------------------------------------ */

static float *read_file_f32(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *v = sz > 0 ? ck_xmalloc((size_t)sz) : NULL;
  *n = v && fread(v, 1, (size_t)sz, f) == (size_t)sz ? (size_t)sz / 4 : 0;
  fclose(f);
  return v;
}

/* The "ids" line of a fixture's .txt (tests/e2e/engine_fixture.h read_ids). */
static int read_ids(const char *path, int32_t *ids, int cap) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "ids ", 4)) {
      char *p = line + 4, *end;
      for (long v; n < cap && (v = strtol(p, &end, 10), end != p); p = end)
        ids[n++] = (int32_t)v;
      break;
    }
  fclose(f);
  return n;
}

static double rel_l2(const float *a, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = (double)a[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

typedef struct engine {
  memra_backend_handle bh;
  memra_gguf *g;
  memra_model *m;
  memra_ctx *c;
  memra_err err;
} engine;

/* As engine_fixture.h's Engine::open: F32 cache, odd ubatch (7) and page size (5) unless
 * the command line names others. */
static int g_ubatch = 7, g_block = 5;

static int engine_open(engine *e, const char *plugin, const char *gguf) {
  memset(e, 0, sizeof *e);
  memra_open_params op = {sizeof op, 0, 0};
  memra_ctx_params p = memra_ctx_defaults();
  p.n_ctx = 64;
  p.n_ubatch = g_ubatch;
  p.block_size = g_block;
  p.kv_type = MEMRA_TYPE_F32;
  return memra_backend_open(plugin, NULL, &op, &e->bh, &e->err) == MEMRA_OK &&
         memra_gguf_open(gguf, &e->g, &e->err) == MEMRA_OK &&
         memra_model_load(e->g, e->bh.vt, e->bh.be, NULL, NULL, &e->m, &e->err) == MEMRA_OK &&
         memra_ctx_new(e->m, &p, &e->c, &e->err) == MEMRA_OK;
}
static void engine_close(engine *e) {
  memra_ctx_free(e->c);
  memra_model_free(e->m);
  if (e->bh.vt) memra_backend_close(&e->bh);
  memra_gguf_close(e->g);
}

static void e2e_one(const char *plugin, const char *dir, const char *name) {
  char path[1024], what[80];
  int32_t ids[256];
  snprintf(path, sizeof path, "%s/%s.txt", dir, name);
  const int n = read_ids(path, ids, 256);
  size_t npre = 0, ndec = 0;
  snprintf(path, sizeof path, "%s/%s.prefill.f32", dir, name);
  float *pre = read_file_f32(path, &npre);
  snprintf(path, sizeof path, "%s/%s.decode.f32", dir, name);
  float *dec = read_file_f32(path, &ndec);
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  const double tol = 1e-3;
  for (int mode = 0; mode < 2; ++mode) {
    snprintf(what, sizeof what, "%s %s vs HF (%d positions)", name, mode ? "decode" : "prefill", n);
    engine e;
    if (n < 1 || !pre || !dec || !engine_open(&e, plugin, path)) {
      ck_record("e2e", what, INFINITY, tol, 0,
                n < 1 || !pre || !dec ? "fixture unreadable" : e.err.msg);
      if (n >= 1 && pre && dec) engine_close(&e);
      continue;
    }
    const size_t nv = (size_t)e.m->hp.n_vocab;
    if (npre != (size_t)n * nv || ndec != (size_t)n * nv) {
      ck_record("e2e", what, INFINITY, tol, 0, "logit file size disagrees with n_vocab");
      engine_close(&e);
      continue;
    }
    float *lg = ck_xmalloc((size_t)n * nv * 4);
    memra_status st = MEMRA_OK;
    if (mode == 0)
      st = memra_ctx_eval(e.c, 0, ids, n, 0, true, lg, &e.err);
    else
      for (int p = 0; p < n && st == MEMRA_OK; ++p)
        st = memra_ctx_eval(e.c, 0, &ids[p], 1, p, true, lg + (size_t)p * nv, &e.err);
    double worst = st == MEMRA_OK ? 0 : INFINITY;
    for (int p = 0; p < n && st == MEMRA_OK; ++p) {
      const double r = rel_l2(lg + (size_t)p * nv, (mode ? dec : pre) + (size_t)p * nv, nv);
      worst = r > worst || isnan(r) ? r : worst;
    }
    ck_record("e2e", what, worst, tol, st == MEMRA_OK && worst <= tol,
              st == MEMRA_OK ? "worst position rel L2" : e.err.msg);
    free(lg);
    engine_close(&e);
  }
  free(pre);
  free(dec);
}

int main(int argc, char **argv) {
  ck_table_style_set(&(ck_table_style){19, 79, 79, 16, 60, 18, 60, "max err"});
  ck_rng = 0x2545F4914F6CDD1Dull; /* the default seed */
  /* the GPU plugins' opt-in slots are checked too (read when a plugin opens) */
  setenv("MEMRA_MMID_COMBINE", "1", 0);
  if ((argc == 4 || argc == 6) && !strcmp(argv[1], "--e2e")) {
    if (argc == 6) {
      g_ubatch = atoi(argv[4]);
      g_block = atoi(argv[5]);
    }
    static const char *names[] = {"qwen3moe", "qwen3next", "qwen35", "qwen35moe"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
      e2e_one(argv[2], argv[3], names[i]);
    char title[256];
    snprintf(title, sizeof title, "opcheck_families e2e on %s (ubatch %d, page %d)", argv[2],
             g_ubatch, g_block);
    ck_table_print(title);
    return ck_table_failed() ? 1 : 0;
  }
  const char *paths[2] = {NULL, NULL};
  if (ck_args(argc, argv, &g_quick, paths, 2) != 2) {
    fprintf(stderr, "usage: opcheck_families [--quick] [--seed N] REF.so TEST.so\n"
                    "       opcheck_families --e2e PLUGIN.so FIXTURE_DIR [UBATCH PAGE]\n");
    return 2;
  }
  for (int i = 0; i < 2; ++i)
    if (memra_plug_open(&P[i], paths[i])) return 2;
  ck_use_plugs(P, 2);
  int rc = run_ops();
  char title[256];
  snprintf(title, sizeof title, "opcheck_families %s vs %s", P[1].vt->name, P[0].vt->name);
  ck_table_print(title);
  for (int i = 0; i < 2; ++i)
    memra_plug_close(&P[i]);
  return rc || ck_table_failed() ? 1 : 0;
}
