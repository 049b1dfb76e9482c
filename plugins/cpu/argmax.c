/* argmax.c — ids[r] = index of the largest logit of row r; the lowest index wins ties
 * (a strict > while scanning upward). NaN never wins; an all-NaN row gives 0. */
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

typedef struct argmax_ctx {
  const memra_tensor *ids, *logits;
} argmax_ctx;

static void argmax_rows(void *p, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const argmax_ctx *c = p;
  int64_t n = c->logits->ne0;
  int32_t *ids = (int32_t *)(void *)cpu_row(c->ids, 0);
  for (int64_t r = begin; r < end; ++r) {
    const float *x = cpu_row_f32(c->logits, r);
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
    ids[r] = (int32_t)best;
  }
}

memra_status cpu_argmax(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits) {
  memra_status st;
  if ((st = cpu_check(be, "argmax", "logits", logits, CPU_F32)) ||
      (st = cpu_check_shape(be, "argmax", "ids", ids, CPU_I32, logits->ne1, 1)))
    return st;
  if (logits->ne0 > INT32_MAX)
    return cpu_fail(be, MEMRA_E_INVALID, "argmax: rows of %lld logits do not fit I32 ids",
                    (long long)logits->ne0);
  argmax_ctx c = {ids, logits};
  cpu_run(be, logits->ne1, logits->ne0, argmax_rows, &c);
  return MEMRA_OK;
}
