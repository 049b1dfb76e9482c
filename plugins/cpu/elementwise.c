/* elementwise.c — glu, add, scale and add_i32: one output element from the same-index
 * inputs, row by row. Outputs may alias inputs (same view), since element i is read
 * before it is written. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

typedef struct ew_ctx {
  const memra_tensor *y, *a, *b;
  float s;
  int32_t act;
} ew_ctx;

/* act(g) * u (cpu_silu, cpu_gelu_tanh: cpu_backend.h). */

static void glu_rows(void *p, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const ew_ctx *c = p;
  int64_t n = c->y->ne0;
  const bool op16 = c->y->type != MEMRA_TYPE_F32, bf16 = c->y->type == MEMRA_TYPE_BF16;
  for (int64_t r = begin; r < end; ++r) {
    const float *g = cpu_row_f32(c->a, r), *u = cpu_row_f32(c->b, r);
    if (op16) { /* ABI 1.6: the f32 product rounded as a gemm operand */
      uint16_t *y = (uint16_t *)(void *)cpu_row(c->y, r);
      for (int64_t i = 0; i < n; ++i)
        y[i] = cpu_op16((c->act == MEMRA_ACT_SILU ? cpu_silu(g[i]) : cpu_gelu_tanh(g[i])) * u[i],
                        bf16);
      continue;
    }
    float *y = cpu_row_f32(c->y, r);
    if (c->act == MEMRA_ACT_SILU)
      for (int64_t i = 0; i < n; ++i)
        y[i] = cpu_silu(g[i]) * u[i];
    else
      for (int64_t i = 0; i < n; ++i)
        y[i] = cpu_gelu_tanh(g[i]) * u[i];
  }
}

static void add_rows(void *p, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const ew_ctx *c = p;
  int64_t n = c->y->ne0;
  for (int64_t r = begin; r < end; ++r) {
    const float *a = cpu_row_f32(c->a, r), *b = cpu_row_f32(c->b, r);
    float *y = cpu_row_f32(c->y, r);
    for (int64_t i = 0; i < n; ++i)
      y[i] = a[i] + b[i];
  }
}

static void scale_rows(void *p, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const ew_ctx *c = p;
  int64_t n = c->y->ne0;
  for (int64_t r = begin; r < end; ++r) {
    const float *x = cpu_row_f32(c->a, r);
    float *y = cpu_row_f32(c->y, r);
    for (int64_t i = 0; i < n; ++i)
      y[i] = c->s * x[i];
  }
}

memra_status cpu_check_act(memra_backend *be, const char *op, int32_t act) {
  if (act == MEMRA_ACT_SILU || act == MEMRA_ACT_GELU_TANH) return MEMRA_OK;
  return cpu_fail(be, MEMRA_E_UNSUPPORTED, "%s: unknown activation %d", op, (int)act);
}

memra_status cpu_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *gate,
                     const memra_tensor *up, int32_t act) {
  memra_status st;
  if ((st = cpu_check_act(be, "glu", act))) return st;
  if ((st = cpu_check(be, "glu", "gate", gate, CPU_F32)) ||
      (st = cpu_check_shape(be, "glu", "up", up, CPU_F32, gate->ne0, gate->ne1)) ||
      (st = cpu_check_shape(be, "glu", "y", y, CPU_F32 | CPU_OP16, gate->ne0, gate->ne1)))
    return st;
  if (y->type != MEMRA_TYPE_F32 && (cpu_overlap(y, gate) || cpu_overlap(y, up)))
    return cpu_fail(be, MEMRA_E_INVALID, "glu: a %s y must not overlap gate or up",
                    memra_type_info(y->type).name);
  ew_ctx c = {y, gate, up, 0.0f, act};
  cpu_run(be, y->ne1, 16 * y->ne0, glu_rows, &c);
  return MEMRA_OK;
}

memra_status cpu_add(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                     const memra_tensor *b) {
  memra_status st;
  if ((st = cpu_check(be, "add", "a", a, CPU_F32)) ||
      (st = cpu_check_shape(be, "add", "b", b, CPU_F32, a->ne0, a->ne1)) ||
      (st = cpu_check_shape(be, "add", "y", y, CPU_F32, a->ne0, a->ne1)))
    return st;
  ew_ctx c = {y, a, b, 0.0f, 0};
  cpu_run(be, y->ne1, y->ne0, add_rows, &c);
  return MEMRA_OK;
}

memra_status cpu_scale(memra_backend *be, const memra_tensor *y, const memra_tensor *x, float s) {
  memra_status st;
  if ((st = cpu_check(be, "scale", "x", x, CPU_F32)) ||
      (st = cpu_check_shape(be, "scale", "y", y, CPU_F32, x->ne0, x->ne1)))
    return st;
  ew_ctx c = {y, x, NULL, s, 0};
  cpu_run(be, y->ne1, y->ne0, scale_rows, &c);
  return MEMRA_OK;
}

memra_status cpu_add_i32(memra_backend *be, const memra_tensor *v, int32_t delta) {
  memra_status st = cpu_check(be, "add_i32", "v", v, CPU_I32);
  if (st != MEMRA_OK) return st;
  for (int64_t r = 0; r < v->ne1; ++r) {
    uint8_t *row = cpu_row(v, r);
    for (int64_t i = 0; i < v->ne0; ++i) {
      uint32_t x;
      memcpy(&x, row + 4 * i, 4);
      x += (uint32_t)delta; /* two's-complement wrap, no signed-overflow UB */
      memcpy(row + 4 * i, &x, 4);
    }
  }
  return MEMRA_OK;
}
