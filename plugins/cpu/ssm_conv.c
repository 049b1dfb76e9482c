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
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + expf(-g[bcast ? 0 : i]));
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
      for (int64_t i = 0; i < K - 1; ++i) acc += w[i] * st[i];
      acc += w[K - 1] * xv;
      cpu_row_f32(c->y, r)[ch] = acc / (1.0f + expf(-acc));
      for (int64_t i = 0; i + 1 < K - 1; ++i) st[i] = st[i + 1];
      if (K > 1) st[K - 2] = xv;
    }
  }
}

memra_status cpu_ssm_conv(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                          const memra_tensor *w, const memra_tensor *state,
                          const memra_batch *batch) {
  memra_status st;
  if ((st = cpu_check(be, "ssm_conv", "x", x, CPU_F32)) ||
      (st = cpu_check_shape(be, "ssm_conv", "y", y, CPU_F32, x->ne0, x->ne1)) ||
      (st = cpu_check_shape(be, "ssm_conv", "w", w, CPU_F32, -1, x->ne0)) ||
      (st = cpu_batch_check(be, "ssm_conv", batch)))
    return st;
  if (batch->n_rows != x->ne1)
    return cpu_fail(be, MEMRA_E_INVALID, "ssm_conv: batch of %d rows for x of %" PRId64,
                    batch->n_rows, x->ne1);
  const int64_t K = w->ne0;
  if ((st = cpu_check_shape(be, "ssm_conv", "state", state, CPU_F32, (K - 1) * x->ne0,
                            batch->n_seqs)))
    return st;
  if (y->buf == x->buf || y->buf == state->buf) {
    /* views of one buffer are fine as long as they do not share bytes */
    uint64_t y0 = y->offset, y1 = y->offset + (uint64_t)(y->ne1 - 1) * y->nb1 + 4 * y->ne0;
    uint64_t x1 = x->offset + (uint64_t)(x->ne1 - 1) * x->nb1 + 4 * x->ne0;
    uint64_t s1 = state->offset + (uint64_t)(state->ne1 - 1) * state->nb1 + 4 * state->ne0;
    if ((y->buf == x->buf && y0 < x1 && x->offset < y1) ||
        (y->buf == state->buf && y0 < s1 && state->offset < y1))
      return cpu_fail(be, MEMRA_E_INVALID, "ssm_conv: y overlaps x or state");
  }
  conv_ctx c = {y, x, w, state, batch};
  cpu_run(be, x->ne0, cpu_mul_sat(x->ne1, 2 * K + 8), conv_channels, &c);
  return MEMRA_OK;
}
