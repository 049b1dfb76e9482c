/* rope.c — rotary position embedding, in place on x [n_rows, n_head * head_dim].
 *
 * Pair i (0 <= i < n_rot/2) of a head at position p turns by
 *     theta_i = p * freq_scale * freq_base^(-2i / n_rot) / freq_factors[i]
 * NORM rotates (x[2i], x[2i+1]) (llama); NEOX rotates (x[i], x[i + n_rot/2]) (qwen).
 * Angles and their cos/sin are computed in double and rounded once: the oracle carries
 * no error of its own from the angle, which grows with the position. */
#include <inttypes.h>
#include <math.h>

#include "plugins/cpu/cpu_backend.h"

typedef struct rope_ctx {
  memra_backend *be;
  const memra_tensor *x, *pos;
  const memra_rope_params *p;
  const float *ff; /* NULL: all ones */
} rope_ctx;

static void rope_rows(void *arg, int64_t begin, int64_t end, int tid) {
  const rope_ctx *c = arg;
  const memra_rope_params *p = c->p;
  int half = p->n_rot / 2;
  float *cs = c->be->scratch[tid], *sn = cs + half;
  for (int64_t r = begin; r < end; ++r) {
    double pos = (double)cpu_i32_at(c->pos, r);
    for (int i = 0; i < half; ++i) {
      double inv = pow((double)p->freq_base, -2.0 * i / p->n_rot) / (c->ff ? c->ff[i] : 1.0);
      double theta = pos * (double)p->freq_scale * inv;
      cs[i] = (float)cos(theta);
      sn[i] = (float)sin(theta);
    }
    float *row = cpu_row_f32(c->x, r);
    for (int h = 0; h < p->n_head; ++h) {
      float *x = row + (int64_t)h * p->head_dim;
      for (int i = 0; i < half; ++i) {
        int a = p->mode == MEMRA_ROPE_NEOX ? i : 2 * i;
        int b = p->mode == MEMRA_ROPE_NEOX ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * cs[i] - x1 * sn[i];
        x[b] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

memra_status cpu_rope(memra_backend *be, const memra_tensor *x, const memra_tensor *pos,
                      const memra_rope_params *p) {
  if (!p) return cpu_fail(be, MEMRA_E_INVALID, "rope: params are absent");
  if (p->n_head < 1 || p->head_dim < 1 || p->n_rot < 0 || p->n_rot % 2 != 0 ||
      p->n_rot > p->head_dim)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "rope: n_head %d, head_dim %d, n_rot %d (need n_head, head_dim >= 1 and an "
                    "even n_rot <= head_dim)",
                    p->n_head, p->head_dim, p->n_rot);
  if (p->mode != MEMRA_ROPE_NORM && p->mode != MEMRA_ROPE_NEOX)
    return cpu_fail(be, MEMRA_E_UNSUPPORTED, "rope: mode %d is neither NORM (0) nor NEOX (2)",
                    p->mode);
  if (!(p->freq_base > 0.0f) || isinf(p->freq_base) || !(p->freq_scale > 0.0f) ||
      isinf(p->freq_scale))
    return cpu_fail(be, MEMRA_E_INVALID, "rope: freq_base %g and freq_scale %g must be finite > 0",
                    p->freq_base, p->freq_scale);
  memra_status st;
  if ((st = cpu_check_shape(be, "rope", "x", x, CPU_F32, (int64_t)p->n_head * p->head_dim, -1)) ||
      (st = cpu_check_shape(be, "rope", "pos", pos, CPU_I32, -1, 1)))
    return st;
  if (pos->ne0 < x->ne1)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "rope: pos has %" PRId64 " entries, x has %" PRId64 " rows", pos->ne0, x->ne1);
  const float *ff = NULL;
  if (cpu_present(&p->freq_factors)) {
    if (p->n_rot == 0 || (st = cpu_check_shape(be, "rope", "freq_factors", &p->freq_factors,
                                               CPU_F32, p->n_rot / 2, 1)))
      return p->n_rot == 0 ? cpu_fail(be, MEMRA_E_INVALID, "rope: freq_factors with n_rot 0") : st;
    ff = cpu_row_f32(&p->freq_factors, 0);
    for (int i = 0; i < p->n_rot / 2; ++i)
      if (!(ff[i] > 0.0f) || isinf(ff[i]))
        return cpu_fail(be, MEMRA_E_INVALID, "rope: freq_factors[%d] = %g is not finite > 0", i,
                        ff[i]);
  }
  if (p->n_rot == 0) return MEMRA_OK;
  if ((st = cpu_scratch_reserve(be, "rope", (size_t)p->n_rot))) return st;
  rope_ctx c = {be, x, pos, p, ff};
  cpu_run(be, x->ne1, 8 * x->ne0, rope_rows, &c);
  return MEMRA_OK;
}
