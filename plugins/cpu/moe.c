/* moe.c — mixture-of-experts ops: router (softmax, top-k, renormalized weights), the
 * expert matmul over ids (weights in their GGUF layout, one stacked matrix per tensor)
 * and the weighted combine of the k expert outputs of each token. Each output row is
 * computed whole by one thread, in an order fixed by the row alone. */
#include <inttypes.h>
#include <math.h>

#include "plugins/cpu/cpu_backend.h"
#include "plugins/quant/quant.h"

/* --- moe_route --------------------------------------------------------------------- */

typedef struct route_ctx {
  const memra_tensor *ids, *w, *logits;
  int32_t normalize;
} route_ctx;

static void route_rows(void *p, int64_t begin, int64_t end, int tid) {
  const route_ctx *c = p;
  (void)tid;
  const int64_t ne = c->logits->ne0, k = c->ids->ne0;
  for (int64_t r = begin; r < end; ++r) {
    const float *l = cpu_row_f32(c->logits, r);
    int32_t *ids = (int32_t *)(void *)cpu_row(c->ids, r);
    float *w = cpu_row_f32(c->w, r);
    float mx = l[0];
    for (int64_t e = 1; e < ne; ++e)
      mx = l[e] > mx ? l[e] : mx;
    float sum = 0;
    for (int64_t e = 0; e < ne; ++e)
      sum += expf(l[e] - mx);
    /* top-k by repeated selection: k is small; ties go to the lower index */
    float ksum = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < ne; ++e) {
        bool taken = false;
        for (int64_t i = 0; i < j; ++i)
          taken |= ids[i] == e;
        if (!taken && (best < 0 || l[e] > l[best])) best = e;
      }
      ids[j] = (int32_t)best;
      w[j] = expf(l[best] - mx) / sum;
      ksum += w[j];
    }
    if (c->normalize) {
      float d = ksum > 6.1e-5f ? ksum : 6.1e-5f;
      for (int64_t j = 0; j < k; ++j)
        w[j] /= d;
    }
  }
}

memra_status cpu_moe_route(memra_backend *be, const memra_tensor *ids, const memra_tensor *weights,
                           const memra_tensor *logits, int32_t normalize) {
  memra_status st;
  if ((st = cpu_check(be, "moe_route", "logits", logits, CPU_F32)) ||
      (st = cpu_check(be, "moe_route", "ids", ids, CPU_I32)))
    return st;
  if (ids->ne1 != logits->ne1 || ids->ne0 > logits->ne0)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "moe_route: ids [%" PRId64 ", %" PRId64 "] for logits [%" PRId64 ", %" PRId64
                    "] (need one row per token and k <= n_expert)",
                    ids->ne1, ids->ne0, logits->ne1, logits->ne0);
  if ((st = cpu_check_shape(be, "moe_route", "weights", weights, CPU_F32, ids->ne0, ids->ne1)))
    return st;
  route_ctx c = {ids, weights, logits, normalize};
  cpu_run(be, logits->ne1, cpu_mul_sat(logits->ne0, 4 + ids->ne0), route_rows, &c);
  return MEMRA_OK;
}

/* --- matmul_id ----------------------------------------------------------------------- */

typedef struct mmid_ctx {
  const memra_tensor *y, *x, *w, *ids;
  int64_t n_per; /* rows per expert */
  bool shared_x; /* x has one row per token */
} mmid_ctx;

static void mmid_rows(void *p, int64_t begin, int64_t end, int tid) {
  const mmid_ctx *c = p;
  (void)tid;
  const int64_t k = c->ids->ne0, K = c->w->ne0;
  for (int64_t rj = begin; rj < end; ++rj) {
    int64_t r = rj / k, j = rj % k;
    int32_t e = ((const int32_t *)(const void *)cpu_row(c->ids, r))[j];
    const float *x = cpu_row_f32(c->x, c->shared_x ? r : rj);
    float *y = cpu_row_f32(c->y, rj);
    for (int64_t n = 0; n < c->n_per; ++n)
      y[n] = memra_vec_dot(c->w->type, cpu_row(c->w, e * c->n_per + n), x, K);
  }
}

/* matmul_id's checks (glu: matmul_id_glu, y of half the expert rows), its messages. */
static memra_status mmid_check(memra_backend *be, const char *op, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *ids, int32_t n_expert, bool glu) {
  memra_status st;
  if ((st = cpu_check(be, op, "w", w, 0)) || (st = cpu_check(be, op, "ids", ids, CPU_I32)))
    return st;
  if (!memra_quant_supported(w->type))
    return cpu_fail(be, MEMRA_E_UNSUPPORTED, "%s: weight type %s has no CPU dot product", op,
                    memra_type_info(w->type).name);
  if (n_expert < 1 || w->ne1 % n_expert != 0)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: %" PRId64 " weight rows do not split into %d experts",
                    op, w->ne1, n_expert);
  const int64_t n = ids->ne1, k = ids->ne0, n_per = w->ne1 / n_expert;
  if (glu && n_per % 2)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %" PRId64 " rows an expert do not split into gate and up", op, n_per);
  if ((st = cpu_check(be, op, "x", x, CPU_F32))) return st;
  if (x->ne0 != w->ne0 || (x->ne1 != n && x->ne1 != n * k))
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: x [%" PRId64 ", %" PRId64 "], expected [%" PRId64 " or %" PRId64
                    ", %" PRId64 "]",
                    op, x->ne1, x->ne0, n, n * k, w->ne0);
  if ((st = cpu_check_shape(be, op, "y", y, CPU_F32, glu ? n_per / 2 : n_per, n * k))) return st;
  if (cpu_overlap(y, x) || cpu_overlap(y, w) || cpu_overlap(y, ids))
    return cpu_fail(be, MEMRA_E_INVALID, "%s: y overlaps an input", op);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      int32_t e = ((const int32_t *)(const void *)cpu_row(ids, r))[j];
      if (e < 0 || e >= n_expert)
        return cpu_fail(be, MEMRA_E_INVALID,
                        "%s: ids[%" PRId64 ", %" PRId64 "] = %d, expected 0..%d", op, r, j, e,
                        n_expert - 1);
    }
  return MEMRA_OK;
}

memra_status cpu_matmul_id(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *ids, int32_t n_expert) {
  memra_status st;
  if ((st = mmid_check(be, "matmul_id", y, x, w, ids, n_expert, false))) return st;
  const int64_t n = ids->ne1, k = ids->ne0, n_per = w->ne1 / n_expert;
  mmid_ctx c = {y, x, w, ids, n_per, x->ne1 == n && k > 1};
  if (k == 1) c.shared_x = true; /* n == n * k: either reading is the same row */
  cpu_run(be, n * k, cpu_mul_sat(2 * n_per, w->ne0), mmid_rows, &c);
  return MEMRA_OK;
}

/* matmul_id_glu: per output j of row rj, gate row j and up row N + j of the expert's fused
 * stack, each the dot matmul_id computes, then glu's expression: its bits, no scratch. */
typedef struct mmid_glu_ctx {
  mmid_ctx m;
  int32_t act;
} mmid_glu_ctx;

static void mmid_glu_rows(void *p, int64_t begin, int64_t end, int tid) {
  const mmid_glu_ctx *c = p;
  (void)tid;
  const int64_t k = c->m.ids->ne0, K = c->m.w->ne0, F = c->m.n_per / 2;
  for (int64_t rj = begin; rj < end; ++rj) {
    int64_t r = rj / k, j = rj % k;
    int32_t e = ((const int32_t *)(const void *)cpu_row(c->m.ids, r))[j];
    const float *x = cpu_row_f32(c->m.x, c->m.shared_x ? r : rj);
    float *y = cpu_row_f32(c->m.y, rj);
    for (int64_t n = 0; n < F; ++n) {
      const float g = memra_vec_dot(c->m.w->type, cpu_row(c->m.w, e * c->m.n_per + n), x, K),
                  u = memra_vec_dot(c->m.w->type, cpu_row(c->m.w, e * c->m.n_per + F + n), x, K);
      y[n] = (c->act == MEMRA_ACT_SILU ? cpu_silu(g) : cpu_gelu_tanh(g)) * u;
    }
  }
}

memra_status cpu_matmul_id_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                               int32_t act) {
  memra_status st;
  if ((st = cpu_check_act(be, "matmul_id_glu", act))) return st;
  if ((st = mmid_check(be, "matmul_id_glu", y, x, w, ids, n_expert, true))) return st;
  const int64_t n = ids->ne1, k = ids->ne0;
  mmid_glu_ctx c = {{y, x, w, ids, w->ne1 / n_expert, x->ne1 == n && k > 1}, act};
  if (k == 1) c.m.shared_x = true;
  cpu_run(be, n * k, cpu_mul_sat(2 * c.m.n_per, w->ne0), mmid_glu_rows, &c);
  return MEMRA_OK;
}

/* --- moe_combine ----------------------------------------------------------------------- */

typedef struct comb_ctx {
  const memra_tensor *y, *x, *w;
  const memra_tensor *sh, *g; /* moe_combine_gated: + sh sigmoid(g), else NULL */
  bool shx;                   /* moe_combine_shexp: sh is x's (k+1)-th row of each token */
} comb_ctx;

static void comb_rows(void *p, int64_t begin, int64_t end, int tid) {
  const comb_ctx *c = p;
  (void)tid;
  const int64_t k = c->w->ne0, E = c->y->ne0, xk = c->shx ? k + 1 : k; /* x rows a token */
  for (int64_t r = begin; r < end; ++r) {
    const float *w = cpu_row_f32(c->w, r);
    float *y = cpu_row_f32(c->y, r);
    for (int64_t i = 0; i < E; ++i)
      y[i] = 0;
    for (int64_t j = 0; j < k; ++j) {
      const float *x = cpu_row_f32(c->x, r * xk + j);
      for (int64_t i = 0; i < E; ++i)
        y[i] += w[j] * x[i];
    }
    if (c->g) { /* sigmoid_gate's then add's arithmetic (ssm_conv.c, elementwise.c) */
      const float *sh = c->shx ? cpu_row_f32(c->x, r * xk + k) : cpu_row_f32(c->sh, r),
                  gv = cpu_row_f32(c->g, r)[0];
      for (int64_t i = 0; i < E; ++i) {
        const float v = sh[i] / (1.0f + expf(-gv));
        y[i] = y[i] + v;
      }
    }
  }
}

memra_status cpu_moe_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                             const memra_tensor *weights) {
  memra_status st;
  if ((st = cpu_check(be, "moe_combine", "weights", weights, CPU_F32))) return st;
  const int64_t n = weights->ne1, k = weights->ne0;
  if ((st = cpu_check_shape(be, "moe_combine", "x", x, CPU_F32, -1, n * k)) ||
      (st = cpu_check_shape(be, "moe_combine", "y", y, CPU_F32, x->ne0, n)))
    return st;
  if (cpu_overlap(y, x) || cpu_overlap(y, weights))
    return cpu_fail(be, MEMRA_E_INVALID, "moe_combine: y overlaps an input");
  comb_ctx c = {y, x, weights, NULL, NULL, false};
  cpu_run(be, n, cpu_mul_sat(2 * k, x->ne0), comb_rows, &c);
  return MEMRA_OK;
}

memra_status cpu_moe_combine_gated(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *weights, const memra_tensor *sh,
                                   const memra_tensor *g) {
  memra_status st;
  if ((st = cpu_check(be, "moe_combine_gated", "weights", weights, CPU_F32))) return st;
  const int64_t n = weights->ne1, k = weights->ne0;
  if ((st = cpu_check_shape(be, "moe_combine_gated", "x", x, CPU_F32, -1, n * k)) ||
      (st = cpu_check_shape(be, "moe_combine_gated", "y", y, CPU_F32, x->ne0, n)) ||
      (st = cpu_check_shape(be, "moe_combine_gated", "sh", sh, CPU_F32, x->ne0, n)) ||
      (st = cpu_check_shape(be, "moe_combine_gated", "g", g, CPU_F32, 1, n)))
    return st;
  if (cpu_overlap(y, x) || cpu_overlap(y, weights) || cpu_overlap(y, sh) || cpu_overlap(y, g))
    return cpu_fail(be, MEMRA_E_INVALID, "moe_combine_gated: y overlaps an input");
  comb_ctx c = {y, x, weights, sh, g, false};
  cpu_run(be, n, cpu_mul_sat(2 * k + 8, x->ne0), comb_rows, &c);
  return MEMRA_OK;
}

memra_status cpu_moe_combine_shexp(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *weights, const memra_tensor *g) {
  memra_status st;
  if ((st = cpu_check(be, "moe_combine_shexp", "weights", weights, CPU_F32))) return st;
  const int64_t n = weights->ne1, k = weights->ne0;
  if ((st = cpu_check_shape(be, "moe_combine_shexp", "x", x, CPU_F32, -1, n * (k + 1))) ||
      (st = cpu_check_shape(be, "moe_combine_shexp", "y", y, CPU_F32, x->ne0, n)) ||
      (st = cpu_check_shape(be, "moe_combine_shexp", "g", g, CPU_F32, 1, n)))
    return st;
  if (cpu_overlap(y, x) || cpu_overlap(y, weights) || cpu_overlap(y, g))
    return cpu_fail(be, MEMRA_E_INVALID, "moe_combine_shexp: y overlaps an input");
  comb_ctx c = {y, x, weights, NULL, g, true};
  cpu_run(be, n, cpu_mul_sat(2 * k + 10, x->ne0), comb_rows, &c);
  return MEMRA_OK;
}

/* matmul_id_combine: the oracle is the composition itself, through a scratch [n ke, N]. */
memra_status cpu_matmul_id_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                                   const memra_tensor *weights, const memra_tensor *g) {
  memra_status st;
  if ((st = cpu_check(be, "matmul_id_combine", "ids", ids, CPU_I32))) return st;
  if (n_expert < 1 || w->ne1 % n_expert)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "matmul_id_combine: %" PRId64 " weight rows do not split into %d experts",
                    w->ne1, n_expert);
  const int64_t N = w->ne1 / n_expert, rows = ids->ne0 * ids->ne1;
  if (cpu_overlap(y, x) || cpu_overlap(y, w) || cpu_overlap(y, ids) || cpu_overlap(y, weights) ||
      (g && cpu_overlap(y, g)))
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_id_combine: y overlaps an input");
  memra_buf *buf;
  if ((st = cpu_buf_alloc(be, (uint64_t)(rows > 0 ? rows : 1) * (uint64_t)N * 4, &buf))) return st;
  const memra_tensor d = {buf, 0, MEMRA_TYPE_F32, 0, N, rows, (uint64_t)N * 4};
  st = cpu_matmul_id(be, &d, x, w, ids, n_expert);
  if (!st)
    st = g ? cpu_moe_combine_shexp(be, y, &d, weights, g) : cpu_moe_combine(be, y, &d, weights);
  cpu_buf_free(be, buf);
  return st;
}

/* ABI 1.20 moe_combine_rmsnorm: the combine (routed, or with the stacked shared expert when logit
 * is given), then the norm that adds it; the composition it stands for. */
memra_status cpu_moe_combine_rmsnorm(memra_backend *be, const memra_tensor *xn,
                                     const memra_tensor *x, const memra_tensor *w_norm, float eps,
                                     const memra_tensor *y, const memra_tensor *down,
                                     const memra_tensor *weights, const memra_tensor *logit) {
  if (!xn || !x || !w_norm || !y || !down || !weights)
    return cpu_fail(be, MEMRA_E_INVALID, "moe_combine_rmsnorm: a tensor argument is NULL");
  if (cpu_overlap(y, x) || cpu_overlap(y, xn))
    return cpu_fail(be, MEMRA_E_INVALID, "moe_combine_rmsnorm: y overlaps x or xn");
  const bool sh = logit && logit->buf;
  memra_status st = sh ? cpu_moe_combine_shexp(be, y, down, weights, logit)
                       : cpu_moe_combine(be, y, down, weights);
  return st ? st : cpu_rmsnorm(be, xn, x, y, w_norm, eps);
}

/* ABI 1.21 moe_route_glu: the route into ids' first weights->ne0 columns, then the experts' gate,
 * up and glu over all of ids' columns; the composition it stands for. */
memra_status cpu_moe_route_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                               int32_t act, const memra_tensor *weights, const memra_tensor *logits,
                               int32_t normalize) {
  if (!y || !x || !w || !ids || !weights || !logits)
    return cpu_fail(be, MEMRA_E_INVALID, "moe_route_glu: a tensor argument is NULL");
  if (weights->ne0 > ids->ne0)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "moe_route_glu: %" PRId64 " routed columns, ids has %" PRId64, weights->ne0,
                    ids->ne0);
  if (cpu_overlap(y, weights) || cpu_overlap(y, logits))
    return cpu_fail(be, MEMRA_E_INVALID, "moe_route_glu: y overlaps weights or logits");
  memra_tensor routed = *ids;
  routed.ne0 = weights->ne0;
  const memra_status st = cpu_moe_route(be, &routed, weights, logits, normalize);
  return st ? st : cpu_matmul_id_glu(be, y, x, w, ids, n_expert, act);
}

/* ABI 1.22 matmul_n_route: matmul_n, then moe_route of y[0]; the composition it stands for.
 * Refused before anything is written: ids or weights overlapping what the projections read or
 * write. */
memra_status cpu_matmul_n_route(memra_backend *be, int32_t n, const memra_tensor *y,
                                const memra_tensor *x, const memra_tensor *w,
                                const memra_tensor *bias, const memra_tensor *ids,
                                const memra_tensor *weights, int32_t normalize) {
  if (!y || !x || !w || !ids || !weights)
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_n_route: a tensor argument is NULL");
  if (n < 1 || n > 4) return cpu_fail(be, MEMRA_E_INVALID, "matmul_n_route: %d outputs (1..4)", n);
  const memra_tensor *out[2] = {ids, weights};
  for (int o = 0; o < 2; ++o) {
    if (cpu_overlap(out[o], x))
      return cpu_fail(be, MEMRA_E_INVALID, "matmul_n_route: %s overlaps x", o ? "weights" : "ids");
    for (int32_t i = 0; i < n; ++i)
      if (cpu_overlap(out[o], &y[i]) || cpu_overlap(out[o], &w[i]))
        return cpu_fail(be, MEMRA_E_INVALID, "matmul_n_route: %s overlaps y[%d] or w[%d]",
                        o ? "weights" : "ids", i, i);
  }
  const memra_status st = cpu_matmul_n(be, n, y, x, w, bias);
  return st ? st : cpu_moe_route(be, ids, weights, &y[0], normalize);
}
