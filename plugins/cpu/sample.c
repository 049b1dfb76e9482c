/* sample.c — one token per logits row from temperature, top-k, top-p and min-p, with a
 * per-row counter generator held in (device) memory; the oracle of the GPU kernels.
 * The exact definition is in memra_plugin.h (the `sample` slot); here it is literally:
 * sort (p desc, id asc), three prefix cuts, the shortest wins, inverse CDF of one u.
 *
 * Edge rules: NaN logits count as -inf; p_i = 1 where z_i equals the row maximum (so a
 * +inf logit is a certain token and a row with no finite logit is uniform over its
 * tokens), expf(z_i - max) elsewhere. At least the first token of the order is kept. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

typedef struct tok_p {
  float p;
  int32_t id;
} tok_p;

typedef struct sample_ctx {
  const memra_tensor *ids, *logits, *rng;
  const memra_sample_params *p;
  float *const *scratch; /* the backend's per-thread scratch */
} sample_ctx;

static uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int by_p_desc_id_asc(const void *a, const void *b) {
  const tok_p *x = a, *y = b;
  if (x->p != y->p) return x->p > y->p ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int32_t argmax_row(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
  return (int32_t)best;
}

static int32_t sample_row(const float *x, int64_t n, uint64_t *state, const memra_sample_params *sp,
                          tok_p *t) {
  *state += 0x9E3779B97F4A7C15ull;
  const double u = (double)(splitmix64_mix(*state) >> 11) * 0x1p-53;
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    float z = x[i] / sp->temperature;
    if (z != z) z = -INFINITY;
    t[i].p = z; /* z for now */
    t[i].id = (int32_t)i;
    if (z > m) m = z;
  }
  for (int64_t i = 0; i < n; ++i)
    t[i].p = t[i].p == m ? 1.0f : expf(t[i].p - m);
  qsort(t, (size_t)n, sizeof *t, by_p_desc_id_asc);

  int64_t keep = sp->top_k > 0 && sp->top_k < n ? sp->top_k : n;
  if (sp->top_p < 1.0f) {
    double mass = 0.0, cum = 0.0;
    for (int64_t j = 0; j < keep; ++j)
      mass += t[j].p;
    const double target = (double)sp->top_p * mass;
    int64_t j = 0;
    while (j < keep) {
      cum += t[j++].p;
      if (cum >= target) break;
    }
    keep = j;
  }
  if (sp->min_p > 0.0f) {
    const float floor_p = sp->min_p * t[0].p;
    int64_t j = 1;
    while (j < keep && t[j].p >= floor_p)
      ++j;
    keep = j;
  }
  if (keep < 1) keep = 1;
  double mass = 0.0, cum = 0.0;
  for (int64_t j = 0; j < keep; ++j)
    mass += t[j].p;
  const double target = u * mass;
  for (int64_t j = 0; j < keep; ++j) {
    cum += t[j].p;
    if (cum > target) return t[j].id;
  }
  return t[keep - 1].id;
}

static void sample_rows(void *arg, int64_t begin, int64_t end, int tid) {
  const sample_ctx *c = arg;
  int32_t *ids = (int32_t *)(void *)cpu_row(c->ids, 0);
  uint8_t *rng = cpu_row(c->rng, 0);
  const int64_t n = c->logits->ne0;
  for (int64_t r = begin; r < end; ++r) {
    const float *x = cpu_row_f32(c->logits, r);
    if (!(c->p->temperature > 0.0f)) {
      ids[r] = argmax_row(x, n);
      continue;
    }
    uint64_t s;
    memcpy(&s, rng + 8 * r, 8);
    ids[r] = sample_row(x, n, &s, c->p, (tok_p *)(void *)c->scratch[tid]);
    memcpy(rng + 8 * r, &s, 8);
  }
}

memra_status cpu_sample(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits,
                        const memra_tensor *rng, const memra_sample_params *p) {
  if (!p) return cpu_fail(be, MEMRA_E_INVALID, "sample: params are absent");
  if (!isfinite(p->temperature) || !isfinite(p->top_p) || !isfinite(p->min_p))
    return cpu_fail(be, MEMRA_E_INVALID,
                    "sample: temperature %g, top_p %g and min_p %g must be finite", p->temperature,
                    p->top_p, p->min_p);
  memra_status st;
  if ((st = cpu_check(be, "sample", "logits", logits, CPU_F32)) ||
      (st = cpu_check_shape(be, "sample", "ids", ids, CPU_I32, logits->ne1, 1)) ||
      (st = cpu_check_shape(be, "sample", "rng", rng, CPU_I64, logits->ne1, 1)))
    return st;
  if (logits->ne0 > INT32_MAX)
    return cpu_fail(be, MEMRA_E_INVALID, "sample: rows of %lld logits do not fit I32 ids",
                    (long long)logits->ne0);
  /* One (p, id) pair per token and thread: two floats each. */
  if ((st = cpu_scratch_reserve(be, "sample", 2 * (size_t)logits->ne0))) return st;
  sample_ctx c = {ids, logits, rng, p, be->scratch};
  cpu_run(be, logits->ne1, cpu_mul_sat(logits->ne0, 20), sample_rows, &c);
  return MEMRA_OK;
}
