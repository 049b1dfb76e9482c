/* memra gate graph — CUDA graph replay must give BIT-IDENTICAL greedy tokens to eager
 * execution: prime a prompt of P tokens, then decode N greedy tokens both ways (crossing
 * KV buckets, so several graphs are captured) and compare every token.
 *   memra gate graph -m MODEL --gate-p 200 -n 300 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/decode/decoder.h"
#include "tools/memra/commands.h"
#include "tools/memra/generate.h"

static int popcount(uint32_t v) {
  int n = 0;
  for (; v; v &= v - 1)
    ++n;
  return n;
}

/* Primes the prompt, then decodes n tokens; out[n]. */
static memra_status decode_run(memra_session *s, const int32_t *prompt, int32_t p, int32_t n,
                               bool graph, int32_t *out, memra_decoder *d, double *secs,
                               memra_err *err) {
  memra_ctx *c = s->ctx;
  memra_kv_pages_release(&c->pages, 0);
  memra_status st = memra_ctx_eval(c, 0, prompt, p - 1, 0, false, NULL, err);
  if (st) return st;
  int32_t pos = p - 1;
  if ((st = memra_decoder_init(d, c, 1, &prompt[p - 1], &pos, graph, err))) return st;
  double t0 = memra_now_s();
  for (int32_t i = 0; i < n && !st; ++i) {
    d->lookahead = graph && i + 1 < n; /* replay queues each step before the last one's token */
    st = memra_decoder_step(d, &out[i], err);
  }
  *secs = memra_now_s() - t0;
  return st;
}

int memra_cmd_gate(int argc, char **argv, int first) {
  const char *which = first < argc ? argv[first] : "";
  if (strcmp(which, "graph") && strcmp(which, "batch") && strcmp(which, "chunk")) {
    fprintf(stderr, "memra gate: expected graph, batch or chunk (usage: memra gate graph|batch|"
                    "chunk [options])\n");
    return 2;
  }
  memra_opts o;
  if (!memra_opts_from_args(&o, argc, argv, first + 1, "gate")) return 2;
  if (!strcmp(which, "batch")) return memra_gate_batch(&o);
  if (!strcmp(which, "chunk")) return memra_gate_chunk(&o);
  memra_err err = {{0}};
  const int32_t P = o.gate_p, N = o.n_predict;
  if (o.n_ctx < P + N + 1) o.n_ctx = P + N + 1;
  memra_session s;
  if (memra_session_open(&s, &o, 1, &err)) {
    fprintf(stderr, "memra: %s\n", err.msg);
    return 1;
  }
  int32_t *prompt = memra_malloc(sizeof(int32_t) * (size_t)(P + 2 * N));
  int32_t *eager = prompt + P, *replay = eager + N;
  srand((unsigned)o.seed);
  for (int32_t i = 0; prompt && i < P; ++i)
    prompt[i] = rand() % s.m->hp.n_vocab;
  memra_decoder de, dg;
  double te = 0, tg = 0;
  memra_status st = prompt ? MEMRA_OK : memra_errf(&err, MEMRA_E_OOM, "out of memory");
  if (!st) st = decode_run(&s, prompt, P, N, false, eager, &de, &te, &err);
  if (!st) st = decode_run(&s, prompt, P, N, true, replay, &dg, &tg, &err);
  int rc = 1;
  if (st)
    fprintf(stderr, "memra gate: %s\n", err.msg);
  else {
    int32_t first_diff = -1;
    for (int32_t i = 0; i < N && first_diff < 0; ++i)
      if (eager[i] != replay[i]) first_diff = i;
    printf("graph gate on %s: prompt %d, %d greedy tokens, %d KV buckets crossed, %d graph "
           "captures%s\n",
           s.bh.name, P, N, popcount(dg.buckets_seen), dg.n_captures,
           dg.use_graph ? "" : " (backend has no graph capture: both runs eager)");
    printf("eager %.1f tok/s, replay %.1f tok/s (%d steps queued ahead of the last token)\n",
           N / te, N / tg, dg.n_ahead);
    if (first_diff >= 0)
      printf("MISMATCH at token %d: eager %d, replay %d\n", first_diff, eager[first_diff],
             replay[first_diff]);
    else
      printf("PASS: all %d tokens identical\n", N);
    rc = first_diff >= 0 || (dg.use_graph && popcount(dg.buckets_seen) < 2) ? 1 : 0;
    if (dg.use_graph && popcount(dg.buckets_seen) < 2)
      printf("FAIL: fewer than 2 buckets crossed (raise -n or --gate-p)\n");
  }
  memra_decoder_free(&de);
  memra_decoder_free(&dg);
  memra_free(prompt);
  memra_session_close(&s);
  return rc;
}
