/* bench_floor.c — see bench_floor.h. */
#include "tools/memra/bench_floor.h"

#include <stdlib.h>

#include "core/models/traffic.h"
#include "tools/memra/generate.h"

enum { COPY_REPS = 5 };
static const uint64_t COPY_MIN = 16ull << 20;

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

memra_status memra_bench_copy_gbps(const memra_backend_vt *vt, memra_backend *be,
                                   uint64_t max_bytes, double *gbps, uint64_t *copied,
                                   memra_err *err) {
  memra_buf *a = NULL, *b = NULL;
  uint64_t n = max_bytes < COPY_MIN ? COPY_MIN : max_bytes;
  for (; n >= COPY_MIN; n /= 2) {
    a = b = NULL;
    if (vt->buf_alloc(be, n, &a) == MEMRA_OK && vt->buf_alloc(be, n, &b) == MEMRA_OK) break;
    if (a) vt->buf_free(be, a);
  }
  if (n < COPY_MIN)
    return memra_errf(err, MEMRA_E_OOM, "bench: no room for two %llu MiB copy buffers on %s",
                      (unsigned long long)(COPY_MIN >> 20), vt->name);
  double t[COPY_REPS];
  memra_status st = vt->buf_copy(be, b, 0, a, 0, n); /* warm-up */
  if (!st) st = vt->synchronize(be);
  for (int r = 0; r < COPY_REPS && !st; ++r) {
    const double t0 = memra_now_s();
    st = vt->buf_copy(be, b, 0, a, 0, n);
    if (!st) st = vt->synchronize(be);
    t[r] = memra_now_s() - t0;
  }
  vt->buf_free(be, a);
  vt->buf_free(be, b);
  if (st) return memra_errf(err, st, "bench: copy: %s", vt->last_error(be));
  qsort(t, COPY_REPS, sizeof *t, cmp_d);
  *gbps = 2.0 * (double)n / t[COPY_REPS / 2] / 1e9;
  *copied = n;
  return MEMRA_OK;
}

double memra_bench_tg_floor(const memra_ctx *c, double gbps, int32_t depth, int32_t n_gen) {
  double bytes = 0;
  for (int32_t i = 0; i < n_gen; ++i)
    bytes += (double)memra_ctx_step_bytes(c, depth + i + 1);
  return n_gen > 0 && bytes > 0 ? gbps * 1e9 / (bytes / n_gen) : 0;
}
