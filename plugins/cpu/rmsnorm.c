/* rmsnorm.c — y = x / sqrt(mean(x^2) + eps) * w per row of width w.ne0, after the
 * optional residual add x += res (written back to x, as the vtable says). */
#include <math.h>

#include "plugins/cpu/cpu_backend.h"

typedef struct rmsnorm_ctx {
  const memra_tensor *y, *x, *res, *w;
  float eps;
} rmsnorm_ctx;

static void rmsnorm_rows(void *p, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const rmsnorm_ctx *c = p;
  int64_t d = c->x->ne0;
  const float *w = cpu_row_f32(c->w, 0);
  for (int64_t r = begin; r < end; ++r) {
    float *x = cpu_row_f32(c->x, r);
    if (c->res) {
      const float *res = cpu_row_f32(c->res, r);
      for (int64_t i = 0; i < d; ++i)
        x[i] += res[i];
    }
    float mean = cpu_dot_f32(x, x, d) / (float)d;
    float s = 1.0f / sqrtf(mean + c->eps);
    if (c->y->type != MEMRA_TYPE_F32) { /* ABI 1.6: rounded as a gemm operand */
      uint16_t *y = (uint16_t *)(void *)cpu_row(c->y, r);
      const bool bf16 = c->y->type == MEMRA_TYPE_BF16;
      for (int64_t i = 0; i < d; ++i)
        y[i] = cpu_op16((x[i] * s) * w[i], bf16);
      continue;
    }
    float *y = cpu_row_f32(c->y, r); /* may alias x: x[i] is read before y[i] is written */
    for (int64_t i = 0; i < d; ++i)
      y[i] = (x[i] * s) * w[i];
  }
}

memra_status cpu_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                         const memra_tensor *res, const memra_tensor *w, float eps) {
  memra_status st;
  if ((st = cpu_check_shape(be, "rmsnorm", "w", w, CPU_F32, -1, 1))) return st;
  if ((st = cpu_check_shape(be, "rmsnorm", "x", x, CPU_F32, w->ne0, -1))) return st;
  if ((st = cpu_check_shape(be, "rmsnorm", "y", y, CPU_F32 | CPU_OP16, w->ne0, x->ne1))) return st;
  if (cpu_present(res) &&
      (st = cpu_check_shape(be, "rmsnorm", "res", res, CPU_F32, w->ne0, x->ne1)))
    return st;
  if (y->type != MEMRA_TYPE_F32 && (cpu_overlap(y, x) || (cpu_present(res) && cpu_overlap(y, res))))
    return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm: a %s y must not overlap x or res",
                    memra_type_info(y->type).name);
  if (!(eps >= 0.0f) || isinf(eps))
    return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm: eps %g is not a finite value >= 0", eps);
  rmsnorm_ctx c = {y, x, cpu_present(res) ? res : NULL, w, eps};
  cpu_run(be, x->ne1, 3 * x->ne0, rmsnorm_rows, &c);
  return MEMRA_OK;
}

/* ABI 1.7: the oracle of the gated norm is its definition, rmsnorm then glu(y, z, y). */
memra_status cpu_rmsnorm_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *w, const memra_tensor *z, float eps,
                              int32_t act) {
  memra_status st;
  if ((st = cpu_check_act(be, "rmsnorm_gate", act))) return st;
  if ((st = cpu_check_shape(be, "rmsnorm_gate", "y", y, CPU_F32, -1, -1)) ||
      (st = cpu_check_shape(be, "rmsnorm_gate", "z", z, CPU_F32, y->ne0, y->ne1)))
    return st;
  if (cpu_overlap(y, z)) return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_gate: y overlaps z");
  if ((st = cpu_rmsnorm(be, y, x, NULL, w, eps))) return st;
  return cpu_glu(be, y, z, y, act);
}

/* ABI 1.8: the oracle of the q / k norm pair is its definition, rmsnorm of q in place, then of
 * k; every argument is checked first, so a refused call leaves q and k as they were. */
memra_status cpu_rmsnorm_qk(memra_backend *be, const memra_tensor *q, const memra_tensor *wq,
                            const memra_tensor *k, const memra_tensor *wk, float eps) {
  memra_status st;
  if ((st = cpu_check_shape(be, "rmsnorm_qk", "wq", wq, CPU_F32, -1, 1)) ||
      (st = cpu_check_shape(be, "rmsnorm_qk", "wk", wk, CPU_F32, -1, 1)) ||
      (st = cpu_check_shape(be, "rmsnorm_qk", "q", q, CPU_F32, wq->ne0, -1)) ||
      (st = cpu_check_shape(be, "rmsnorm_qk", "k", k, CPU_F32, wk->ne0, -1)))
    return st;
  if (cpu_overlap(q, k)) return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_qk: q overlaps k");
  if (!(eps >= 0.0f) || isinf(eps))
    return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_qk: eps %g is not a finite value >= 0", eps);
  if ((st = cpu_rmsnorm(be, q, q, NULL, wq, eps))) return st;
  return cpu_rmsnorm(be, k, k, NULL, wk, eps);
}
