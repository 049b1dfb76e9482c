/* delta_rule.c — the gated delta rule of Gated DeltaNet layers (Yang, Kautz, Hatamizadeh,
 * arXiv:2412.06464; HF torch_recurrent_gated_delta_rule), token by token: each value
 * head runs on one thread through the rows in order, reading and writing its d x d state
 * once per token. q/k L2 norms and the decay/beta gates are computed here too. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

typedef struct gdn_ctx {
  const memra_tensor *out, *q, *k, *v, *a, *b, *a_log, *dt, *state;
  const memra_batch *bt;
  memra_gdn_params p;
} gdn_ctx;

static void l2norm(float *x, int64_t d, float eps, float scale) {
  float ss = 0;
  for (int64_t i = 0; i < d; ++i)
    ss += x[i] * x[i];
  float f = scale / sqrtf(ss + eps);
  for (int64_t i = 0; i < d; ++i)
    x[i] *= f;
}

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

static void gdn_heads(void *pp, int64_t begin, int64_t end, int tid) {
  const gdn_ctx *c = pp;
  const int64_t d = c->p.head_dim, n = c->q->ne1, hk = c->p.n_k_head;
  const int64_t r_ = c->p.n_v_head / hk;
  float q[512], k[512]; /* normalised q/k head; head_dim <= 512 is checked */
  (void)tid;
  for (int64_t h = begin; h < end; ++h) {
    const int64_t kh = c->p.heads == MEMRA_GDN_TILED ? h % hk : h / r_;
    const float a_log = cpu_row_f32(c->a_log, 0)[h], dt = cpu_row_f32(c->dt, 0)[h];
    for (int64_t r = 0; r < n; ++r) {
      float *S = cpu_row_f32(c->state, cpu_i32_at(&c->bt->seq, r)) + h * d * d;
      if (cpu_i32_at(&c->bt->pos, r) == 0) memset(S, 0, sizeof(float) * (size_t)(d * d));
      memcpy(q, cpu_row_f32(c->q, r) + kh * d, sizeof(float) * (size_t)d);
      memcpy(k, cpu_row_f32(c->k, r) + kh * d, sizeof(float) * (size_t)d);
      l2norm(q, d, c->p.eps, 1.0f / sqrtf((float)d));
      l2norm(k, d, c->p.eps, 1.0f);
      const float *v = cpu_row_f32(c->v, r) + h * d;
      const float beta = 1.0f / (1.0f + expf(-cpu_row_f32(c->b, r)[h]));
      const float decay = expf(a_log * softplus(cpu_row_f32(c->a, r)[h] + dt));
      float *o = cpu_row_f32(c->out, r) + h * d;
      for (int64_t j = 0; j < d; ++j) {
        float *Sj = S + j * d, kv = 0;
        for (int64_t i = 0; i < d; ++i)
          kv += (Sj[i] *= decay) * k[i];
        const float delta = beta * (v[j] - kv);
        float oj = 0;
        for (int64_t i = 0; i < d; ++i)
          oj += (Sj[i] += k[i] * delta) * q[i];
        o[j] = oj;
      }
    }
  }
}

memra_status cpu_gated_delta_rule(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                  const memra_tensor *k, const memra_tensor *v,
                                  const memra_tensor *a, const memra_tensor *b,
                                  const memra_tensor *a_log, const memra_tensor *dt_bias,
                                  const memra_tensor *state, const memra_batch *batch,
                                  const memra_gdn_params *p) {
  const char *op = "gated_delta_rule";
  if (p->n_k_head < 1 || p->n_v_head < 1 || p->n_v_head % p->n_k_head || p->head_dim < 1 ||
      p->head_dim > 512 || (p->heads != MEMRA_GDN_GROUPED && p->heads != MEMRA_GDN_TILED) ||
      !(p->eps >= 0))
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: H_k %d, H_v %d, head_dim %d, heads %d (need H_v a multiple of H_k, "
                    "head_dim 1..512, heads grouped or tiled)",
                    op, p->n_k_head, p->n_v_head, p->head_dim, p->heads);
  const int64_t n = q->ne1, d = p->head_dim, hv = p->n_v_head;
  memra_status st;
  if ((st = cpu_check_shape(be, op, "q", q, CPU_F32, p->n_k_head * d, -1)) ||
      (st = cpu_check_shape(be, op, "k", k, CPU_F32, p->n_k_head * d, n)) ||
      (st = cpu_check_shape(be, op, "v", v, CPU_F32, hv * d, n)) ||
      (st = cpu_check_shape(be, op, "out", out, CPU_F32, hv * d, n)) ||
      (st = cpu_check_shape(be, op, "a", a, CPU_F32, hv, n)) ||
      (st = cpu_check_shape(be, op, "b", b, CPU_F32, hv, n)) ||
      (st = cpu_check_shape(be, op, "a_log", a_log, CPU_F32, hv, 1)) ||
      (st = cpu_check_shape(be, op, "dt_bias", dt_bias, CPU_F32, hv, 1)) ||
      (st = cpu_batch_check(be, op, batch)) ||
      (st = cpu_check_shape(be, op, "state", state, CPU_F32, hv * d * d, batch->n_seqs)))
    return st;
  if (batch->n_rows != n)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: batch of %d rows for q of %" PRId64, op,
                    batch->n_rows, n);
  gdn_ctx c = {out, q, k, v, a, b, a_log, dt_bias, state, batch, *p};
  cpu_run(be, hv, cpu_mul_sat(n, 6 * d * d), gdn_heads, &c);
  return MEMRA_OK;
}

/* ABI 1.11 gated_delta_rule_norm: the composition over per-head views. */
memra_status cpu_gated_delta_rule_norm(memra_backend *be, const memra_tensor *out,
                                       const memra_tensor *q, const memra_tensor *k,
                                       const memra_tensor *v, const memra_tensor *a,
                                       const memra_tensor *b, const memra_tensor *a_log,
                                       const memra_tensor *dt_bias, const memra_tensor *state,
                                       const memra_batch *batch, const memra_gdn_params *p,
                                       const memra_tensor *norm_w, const memra_tensor *z, float eps,
                                       int32_t act) {
  if (!p || !out || !z)
    return cpu_fail(be, MEMRA_E_INVALID, "gated_delta_rule_norm: params, out or z are NULL");
  const int64_t d = p->head_dim;
  if (d < 1 || out->ne0 % d || z->ne0 != out->ne0 || z->ne1 != out->ne1 ||
      out->nb1 != 4u * (uint64_t)out->ne0 || z->nb1 % (4u * (uint64_t)d))
    return cpu_fail(be, MEMRA_E_INVALID,
                    "gated_delta_rule_norm: out [%" PRId64 ", %" PRId64 "] and z [%" PRId64
                    ", %" PRId64 "] (need one shape, out's rows packed, whole heads)",
                    out->ne1, out->ne0, z->ne1, z->ne0);
  if (cpu_overlap(out, z))
    return cpu_fail(be, MEMRA_E_INVALID, "gated_delta_rule_norm: out overlaps z");
  memra_status st = cpu_gated_delta_rule(be, out, q, k, v, a, b, a_log, dt_bias, state, batch, p);
  if (st) return st;
  memra_tensor oh = *out, zh = *z;
  oh.ne0 = zh.ne0 = d;
  oh.ne1 = zh.ne1 = out->ne1 * (out->ne0 / d);
  oh.nb1 = zh.nb1 = 4u * (uint64_t)d;
  if (z->ne1 > 1 && z->nb1 != 4u * (uint64_t)z->ne0) {
    for (int64_t r = 0; r < out->ne1; ++r) { /* z rows apart: a call a row */
      memra_tensor o1 = oh, z1 = zh;
      o1.offset += (uint64_t)r * out->nb1;
      z1.offset += (uint64_t)r * z->nb1;
      o1.ne1 = z1.ne1 = out->ne0 / d;
      if ((st = cpu_rmsnorm_gate(be, &o1, &o1, norm_w, &z1, eps, act))) return st;
    }
    return MEMRA_OK;
  }
  return cpu_rmsnorm_gate(be, &oh, &oh, norm_w, &zh, eps, act);
}
