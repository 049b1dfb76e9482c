/* ssm_conv.c — sigmoid_gate and the depthwise causal conv (with SiLU) of recurrent
 * layers. The conv runs each channel on one thread through the rows in order, so rows
 * of one sequence see the state their predecessors left. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

/* --- sigmoid_gate -------------------------------------------------------------------- */

typedef struct sg_ctx {
  const memra_tensor *y, *x, *g;
} sg_ctx;

static void sg_rows(void *p, int64_t begin, int64_t end, int tid) {
  const sg_ctx *c = p;
  (void)tid;
  const int64_t n = c->x->ne0;
  const bool bcast = c->g->ne0 == 1 && n != 1;
  for (int64_t r = begin; r < end; ++r) {
    const float *x = cpu_row_f32(c->x, r), *g = cpu_row_f32(c->g, r);
    float *y = cpu_row_f32(c->y, r);
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] / (1.0f + expf(-g[bcast ? 0 : i]));
  }
}

memra_status cpu_sigmoid_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *g) {
  memra_status st;
  if ((st = cpu_check(be, "sigmoid_gate", "x", x, CPU_F32)) ||
      (st = cpu_check_shape(be, "sigmoid_gate", "y", y, CPU_F32, x->ne0, x->ne1)))
    return st;
  if ((st = cpu_check(be, "sigmoid_gate", "g", g, CPU_F32))) return st;
  if (g->ne1 != x->ne1 || (g->ne0 != x->ne0 && g->ne0 != 1))
    return cpu_fail(be, MEMRA_E_INVALID,
                    "sigmoid_gate: g [%" PRId64 ", %" PRId64 "] for x [%" PRId64 ", %" PRId64
                    "] (need the same shape or one column)",
                    g->ne1, g->ne0, x->ne1, x->ne0);
  sg_ctx c = {y, x, g};
  cpu_run(be, x->ne1, cpu_mul_sat(x->ne0, 8), sg_rows, &c);
  return MEMRA_OK;
}

/* --- ssm_conv ------------------------------------------------------------------------ */

typedef struct conv_ctx {
  const memra_tensor *y, *x, *w, *state;
  const memra_batch *b;
} conv_ctx;

static void conv_channels(void *p, int64_t begin, int64_t end, int tid) {
  const conv_ctx *c = p;
  (void)tid;
  const int64_t K = c->w->ne0, n = c->x->ne1;
  for (int64_t ch = begin; ch < end; ++ch) {
    const float *w = cpu_row_f32(c->w, ch);
    for (int64_t r = 0; r < n; ++r) {
      int32_t s = cpu_i32_at(&c->b->seq, r);
      float *st = cpu_row_f32(c->state, s) + ch * (K - 1);
      if (cpu_i32_at(&c->b->pos, r) == 0) memset(st, 0, sizeof(float) * (size_t)(K - 1));
      float xv = cpu_row_f32(c->x, r)[ch], acc = 0;
      for (int64_t i = 0; i < K - 1; ++i)
        acc += w[i] * st[i];
      acc += w[K - 1] * xv;
      cpu_row_f32(c->y, r)[ch] = acc / (1.0f + expf(-acc));
      for (int64_t i = 0; i + 1 < K - 1; ++i)
        st[i] = st[i + 1];
      if (K > 1) st[K - 2] = xv;
    }
  }
}

/* ssm_conv's checks of x, w, state and batch (y checked by the caller). */
static memra_status conv_check(memra_backend *be, const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *state, const memra_batch *batch) {
  memra_status st;
  if ((st = cpu_check(be, "ssm_conv", "x", x, CPU_F32)) ||
      (st = cpu_check_shape(be, "ssm_conv", "w", w, CPU_F32, -1, x->ne0)) ||
      (st = cpu_batch_check(be, "ssm_conv", batch)))
    return st;
  if (batch->n_rows != x->ne1)
    return cpu_fail(be, MEMRA_E_INVALID, "ssm_conv: batch of %d rows for x of %" PRId64,
                    batch->n_rows, x->ne1);
  return cpu_check_shape(be, "ssm_conv", "state", state, CPU_F32, (w->ne0 - 1) * x->ne0,
                         batch->n_seqs);
}

memra_status cpu_ssm_conv(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                          const memra_tensor *w, const memra_tensor *state,
                          const memra_batch *batch) {
  memra_status st;
  if ((st = conv_check(be, x, w, state, batch)) ||
      (st = cpu_check_shape(be, "ssm_conv", "y", y, CPU_F32, x->ne0, x->ne1)))
    return st;
  if (cpu_overlap(y, x) || cpu_overlap(y, state))
    return cpu_fail(be, MEMRA_E_INVALID, "ssm_conv: y overlaps x or state");
  conv_ctx c = {y, x, w, state, batch};
  cpu_run(be, x->ne0, cpu_mul_sat(x->ne1, 2 * w->ne0 + 8), conv_channels, &c);
  return MEMRA_OK;
}

/* ABI 1.11 matmul_n_conv: the composition. The conv runs on y[0] in place: a channel's thread
 * reads each row's value before it writes that row's result. */
memra_status cpu_matmul_n_conv(memra_backend *be, int32_t n, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *conv_w, const memra_tensor *state,
                               const memra_batch *batch) {
  memra_status st;
  if (n < 1 || !y || !w)
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_n_conv: %d outputs (need at least 1)", n);
  if ((st = conv_check(be, &y[0], conv_w, state, batch))) return st;
  if (cpu_overlap(&y[0], state) || cpu_overlap(&y[0], conv_w))
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_n_conv: y[0] overlaps the conv state or weights");
  if ((st = cpu_matmul_n(be, n, y, x, w, NULL))) return st;
  conv_ctx c = {&y[0], &y[0], conv_w, state, batch};
  cpu_run(be, y[0].ne0, cpu_mul_sat(y[0].ne1, 2 * conv_w->ne0 + 8), conv_channels, &c);
  return MEMRA_OK;
}
