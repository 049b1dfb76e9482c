/* memra bench — prompt processing (pp) and generation (tg) speed, llama-bench style:
 * each test repeated, the median reported beside min and max, as markdown or JSON. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/decode/decoder.h"
#include "tools/memra/bench_floor.h"
#include "tools/memra/commands.h"
#include "tools/memra/generate.h"

enum { MAX_LIST = 16 };

static memra_status parse_list(const char *flag, const char *s, int32_t *out, int *n, int32_t lo,
                               memra_err *err) {
  *n = 0;
  const char *p = s;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < lo || v > (1 << 24) || *n == MAX_LIST)
      return memra_errf(err, MEMRA_E_INVALID,
                        "--%s '%s': expected up to %d numbers >= %d, "
                        "comma-separated",
                        flag, s, MAX_LIST, lo);
    out[(*n)++] = (int32_t)v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',')
      return memra_errf(err, MEMRA_E_INVALID, "--%s '%s': unexpected '%c'", flag, s, *end);
  }
  return MEMRA_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One timed run: pp (n_prompt tokens in one eval) or tg (n_gen single-token steps after
 * depth tokens of context). Returns tokens per second. */
static memra_status run_once(memra_session *s, int32_t depth, int32_t n_prompt, int32_t n_gen,
                             int32_t *ids, double *tps, memra_err *err) {
  memra_ctx *c = s->ctx;
  memra_kv_pages_release(&c->pages, 0);
  memra_status st = MEMRA_OK;
  if (depth > 0 && (st = memra_ctx_eval(c, 0, ids, depth, 0, false, NULL, err))) return st;
  const memra_backend_vt *vt = s->m->vt;
  if ((st = vt->synchronize(s->m->be))) return memra_ctx_fail(c, st, "synchronize", err);
  double t0 = memra_now_s();
  if (n_prompt > 0) st = memra_ctx_eval(c, 0, ids + depth, n_prompt, depth, false, NULL, err);
  if (n_gen > 0 && !st) { /* greedy decode as `run` does it: graph replay where possible */
    memra_decoder d;
    int32_t tok = ids[depth];
    st = memra_decoder_init(&d, c, 1, &tok, &depth, true, err);
    for (int32_t i = 0; i < n_gen && !st; ++i) {
      d.lookahead = i + 1 < n_gen; /* the sequence ends here: no step past the last */
      st = memra_decoder_step(&d, &tok, err);
    }
    memra_decoder_free(&d);
  }
  if (!st && (st = vt->synchronize(s->m->be))) return memra_ctx_fail(c, st, "synchronize", err);
  *tps = (n_prompt + n_gen) / (memra_now_s() - t0);
  return st;
}

int memra_cmd_bench(int argc, char **argv, int first) {
  memra_opts o;
  memra_opts_defaults(&o);
  memra_err err = {{0}};
  const char *pos[1];
  int n_pos;
  int32_t ps[MAX_LIST], ns[MAX_LIST], ds[MAX_LIST];
  int n_p, n_n, n_d;
  if (memra_opts_parse(&o, argc, argv, first, pos, 0, &n_pos, &err) ||
      parse_list("bench-p", o.bench_p, ps, &n_p, 0, &err) ||
      parse_list("bench-n", o.bench_n, ns, &n_n, 0, &err) ||
      parse_list("bench-d", o.bench_d, ds, &n_d, 0, &err) ||
      (strcmp(o.bench_output, "md") && strcmp(o.bench_output, "json") &&
       memra_errf(&err, MEMRA_E_INVALID, "--output '%s': expected md or json", o.bench_output))) {
    fprintf(stderr, "memra bench: %s\n", err.msg);
    return 2;
  }
  int32_t need = 1;
  for (int i = 0; i < n_p; ++i)
    need = ps[i] + 1 > need ? ps[i] + 1 : need;
  for (int i = 0; i < n_n; ++i)
    for (int j = 0; j < n_d; ++j)
      need = ns[i] + ds[j] + 1 > need ? ns[i] + ds[j] + 1 : need;
  if (o.n_ctx < need) o.n_ctx = need;
  memra_session s;
  if (memra_session_open(&s, &o, 1, &err)) {
    fprintf(stderr, "memra: %s\n", err.msg);
    return 1;
  }
  int32_t *ids = memra_malloc(sizeof(int32_t) * (size_t)need);
  double *t = memra_malloc(sizeof(double) * (size_t)o.bench_reps);
  srand((unsigned)o.seed);
  for (int32_t i = 0; ids && i < need; ++i)
    ids[i] = rand() % s.m->hp.n_vocab;
  const char *base = strrchr(s.model_path, '/');
  base = base ? base + 1 : s.model_path;
  /* the floor's bandwidth: this backend's own copy rate, measured now (decode rows only
   * have a floor: no copy for a prompt-only run) */
  double gbps = 0;
  uint64_t copied = 0, want = s.m->weights_bytes / 2;
  want = want < (64ull << 20) ? (64ull << 20) : want > (2ull << 30) ? (2ull << 30) : want;
  memra_err cerr = {{0}};
  bool want_bw = false;
  for (int i = 0; i < n_n; ++i)
    want_bw = want_bw || ns[i] > 0;
  const bool have_bw =
      want_bw && memra_bench_copy_gbps(s.m->vt, s.m->be, want, &gbps, &copied, &cerr) == MEMRA_OK;
  bool json = !strcmp(o.bench_output, "json");
  if (json)
    printf("[\n");
  else {
    printf("| model | size | backend | test | t/s (median) | min | max | floor t/s | of floor |\n");
    printf("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  }
  memra_status st = ids && t ? MEMRA_OK : memra_errf(&err, MEMRA_E_OOM, "out of memory");
  int n_rows = 0;
  for (int kind = 0; kind < 2 && !st; ++kind) {
    int n_tests = kind == 0 ? n_p : n_n * n_d;
    for (int ti = 0; ti < n_tests && !st; ++ti) {
      int32_t np = kind == 0 ? ps[ti] : 0, ng = kind == 1 ? ns[ti / n_d] : 0,
              d = kind == 1 ? ds[ti % n_d] : 0;
      if (np + ng == 0) continue;
      double warm;
      st = run_once(&s, d, np, ng ? 1 : 0, ids, &warm, &err); /* warm-up */
      for (int r = 0; r < o.bench_reps && !st; ++r)
        st = run_once(&s, d, np, ng, ids, &t[r], &err);
      if (st) break;
      qsort(t, (size_t)o.bench_reps, sizeof *t, cmp_double);
      double med = o.bench_reps % 2 ? t[o.bench_reps / 2]
                                    : 0.5 * (t[o.bench_reps / 2 - 1] + t[o.bench_reps / 2]);
      char test[64];
      if (kind == 0)
        snprintf(test, sizeof test, "pp%d", np);
      else if (d)
        snprintf(test, sizeof test, "tg%d @ d%d", ng, d);
      else
        snprintf(test, sizeof test, "tg%d", ng);
      /* decode rows only: prompt rows are bound by the arithmetic rate, not bytes */
      const double floor = have_bw && kind == 1 ? memra_bench_tg_floor(s.ctx, gbps, d, ng) : 0;
      char fl[32] = "-", sh[32] = "-", jf[32] = "null";
      if (floor > 0) {
        snprintf(fl, sizeof fl, "%.1f", floor);
        snprintf(sh, sizeof sh, "%.1f%%", 100.0 * med / floor);
        snprintf(jf, sizeof jf, "%.3f", floor);
      }
      if (json)
        printf("%s  {\"model\": \"%s\", \"size_bytes\": %llu, \"backend\": \"%s\", \"test\": "
               "\"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"depth\": %d, \"reps\": %d, "
               "\"tps_median\": %.3f, \"tps_min\": %.3f, \"tps_max\": %.3f, \"floor_tps\": %s, "
               "\"copy_gbps\": %.3f, \"step_weight_bytes\": %llu}",
               n_rows ? ",\n" : "", base, (unsigned long long)s.m->weights_bytes, s.bh.name, test,
               np, ng, d, o.bench_reps, med, t[0], t[o.bench_reps - 1], jf, have_bw ? gbps : 0.0,
               (unsigned long long)s.m->step_weight_bytes);
      else
        printf("| %s | %.1f MiB | %s | %s | %.2f | %.2f | %.2f | %s | %s |\n", base,
               s.m->weights_bytes / 1048576.0, s.bh.name, test, med, t[0], t[o.bench_reps - 1], fl,
               sh);
      fflush(stdout);
      n_rows++;
    }
  }
  if (json)
    printf("\n]\n");
  else if (have_bw)
    printf("\nfloor = copy bandwidth %.1f GB/s (%s buf_copy of 2 x %llu MiB, read + written, "
           "median of 5) / bytes a decode step moves: weights %.1f MiB (token embedding one row, "
           "routed experts their share) + each attention layer's K and V rows attended + "
           "recurrent state in and out\n",
           gbps, s.bh.name, (unsigned long long)(copied >> 20), s.m->step_weight_bytes / 1048576.0);
  else if (want_bw)
    printf("\nno floor: %s\n", cerr.msg);
  if (st) fprintf(stderr, "memra bench: %s\n", err.msg);
  memra_free(ids);
  memra_free(t);
  memra_session_close(&s);
  return st ? 1 : 0;
}
