/* memra gate batch — batch invariance: B sequences with prompts of different lengths are
 * each decoded alone (one row per step), then all together (B rows per step, one graph
 * per KV bucket where the backend captures); every sequence's N greedy tokens must be
 * identical both ways. Also prints the aggregate decode rate of the batched run.
 *   memra gate batch -m MODEL --gate-b 8 --gate-p 200 -n 128 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/decode/decoder.h"
#include "tools/memra/commands.h"
#include "tools/memra/session.h"
#include "tools/memra/generate.h"

/* Prompt lengths differ (odd steps), so the rows sit at different positions and pages. */
static int32_t prompt_len(int32_t p, int32_t j) { return p + 37 * j; }

/* Primes prompts[j] (length lens[j]) into sequence seqs[j] for j < n, then decodes N steps
 * of n rows; out[j * N + i]. */
static memra_status run(memra_ctx *c, int32_t n, int32_t *const *prompts, const int32_t *lens,
                        int32_t N, int32_t *out, double *secs, memra_err *err) {
  int32_t next[64], pos[64];
  memra_status st = MEMRA_OK;
  for (int32_t j = 0; j < n && !st; ++j) {
    memra_kv_pages_release(&c->pages, j);
    st = memra_ctx_eval(c, j, prompts[j], lens[j] - 1, 0, false, NULL, err);
    next[j] = prompts[j][lens[j] - 1];
    pos[j] = lens[j] - 1;
  }
  if (st) return st;
  memra_decoder d;
  if ((st = memra_decoder_init(&d, c, n, next, pos, true, err))) return st;
  int32_t step[64];
  double t0 = memra_now_s();
  for (int32_t i = 0; i < N && !st; ++i) {
    st = memra_decoder_step(&d, step, err);
    for (int32_t j = 0; j < n; ++j)
      out[j * N + i] = step[j];
  }
  *secs = memra_now_s() - t0;
  memra_decoder_free(&d);
  return st;
}

int memra_gate_batch(memra_opts *o) {
  memra_err err = {{0}};
  const int32_t B = o->gate_b, P = o->gate_p, N = o->n_predict;
  if (o->n_ctx < prompt_len(P, B - 1) + N + 1) o->n_ctx = prompt_len(P, B - 1) + N + 1;
  if (o->n_ubatch < B) o->n_ubatch = B;
  memra_session s;
  if (memra_session_open(&s, o, B, &err)) {
    fprintf(stderr, "memra: %s\n", err.msg);
    return 1;
  }
  int32_t *prompts[64], lens[64];
  int32_t *alone = memra_malloc(sizeof(int32_t) * 2 * (size_t)B * N);
  int32_t *batched = alone ? alone + (size_t)B * N : NULL;
  memra_status st = alone ? MEMRA_OK : memra_errf(&err, MEMRA_E_OOM, "out of memory");
  srand((unsigned)o->seed);
  for (int32_t j = 0; j < B; ++j) {
    lens[j] = prompt_len(P, j);
    prompts[j] = memra_malloc(sizeof(int32_t) * (size_t)lens[j]);
    if (!prompts[j] && !st) st = memra_errf(&err, MEMRA_E_OOM, "out of memory");
    for (int32_t i = 0; prompts[j] && i < lens[j]; ++i)
      prompts[j][i] = rand() % s.m->hp.n_vocab;
  }
  double t_alone = 0, t_batch = 0, t;
  for (int32_t j = 0; j < B && !st; ++j) {
    st = run(s.ctx, 1, &prompts[j], &lens[j], N, alone + (size_t)j * N, &t, &err);
    t_alone += t;
  }
  if (!st) st = run(s.ctx, B, prompts, lens, N, batched, &t_batch, &err);
  int rc = 1;
  if (st)
    fprintf(stderr, "memra gate: %s\n", err.msg);
  else {
    printf("batch gate on %s: %d sequences, prompts %d..%d, %d greedy tokens each\n", s.bh.name, B,
           lens[0], lens[B - 1], N);
    printf("alone %.1f tok/s (one sequence per step), batched %.1f tok/s aggregate\n",
           B * N / t_alone, B * N / t_batch);
    int bad = 0;
    for (int32_t j = 0; j < B; ++j)
      for (int32_t i = 0; i < N; ++i)
        if (alone[(size_t)j * N + i] != batched[(size_t)j * N + i]) {
          if (!bad++)
            printf("MISMATCH: sequence %d token %d: alone %d, batched %d\n", j, i,
                   alone[(size_t)j * N + i], batched[(size_t)j * N + i]);
          break;
        }
    if (bad)
      printf("FAIL: %d of %d sequences differ\n", bad, B);
    else
      printf("PASS: all %d x %d tokens identical\n", B, N);
    rc = bad ? 1 : 0;
  }
  for (int32_t j = 0; j < B; ++j)
    memra_free(prompts[j]);
  memra_free(alone);
  memra_session_close(&s);
  return rc;
}
