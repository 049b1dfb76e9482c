/* memra gate chunk — chunked prefill equals one-shot prefill: the logits of every
 * position of a P-token prompt, computed in one step and in steps of --ubatch rows
 * (the KV cache written chunk by chunk), must be bit-identical.
 *   memra gate chunk -m MODEL --gate-p 1000 --ubatch 67 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "tools/memra/commands.h"
#include "tools/memra/session.h"

int memra_gate_chunk(memra_opts *o) {
  memra_err err = {{0}};
  const int32_t P = o->gate_p, U = o->n_ubatch;
  if (U >= P) {
    fprintf(stderr, "memra gate chunk: --ubatch %d must be below --gate-p %d\n", U, P);
    return 2;
  }
  if (o->n_ctx < P + 1) o->n_ctx = P + 1;
  o->n_ubatch = P; /* the context holds the one-shot step; chunks are fed below */
  memra_session s;
  if (memra_session_open(&s, o, 1, &err)) {
    fprintf(stderr, "memra: %s\n", err.msg);
    return 1;
  }
  const size_t nv = (size_t)s.m->hp.n_vocab;
  int32_t *prompt = memra_malloc(sizeof(int32_t) * (size_t)P);
  float *one = memra_malloc(sizeof(float) * 2 * nv * (size_t)P);
  float *chunked = one ? one + nv * (size_t)P : NULL;
  memra_status st = prompt && one
                        ? MEMRA_OK
                        : memra_errf(&err, MEMRA_E_OOM, "out of memory (%d x %zu logits)", P, nv);
  srand((unsigned)o->seed);
  for (int32_t i = 0; prompt && i < P; ++i)
    prompt[i] = rand() % (int)nv;
  if (!st) {
    memra_kv_pages_release(&s.ctx->pages, 0);
    st = memra_ctx_eval(s.ctx, 0, prompt, P, 0, true, one, &err);
  }
  for (int32_t done = 0; done < P && !st; done += U) {
    if (!done) memra_kv_pages_release(&s.ctx->pages, 0);
    const int32_t m = P - done < U ? P - done : U;
    st = memra_ctx_eval(s.ctx, 0, prompt + done, m, done, true, chunked + nv * (size_t)done, &err);
  }
  int rc = 1;
  if (st)
    fprintf(stderr, "memra gate: %s\n", err.msg);
  else {
    int32_t first = -1;
    double max_rel = 0;
    for (int32_t p = 0; p < P; ++p) {
      const float *a = one + nv * (size_t)p, *b = chunked + nv * (size_t)p;
      if (first < 0 && memcmp(a, b, nv * sizeof(float))) first = p;
      double num = 0, den = 0;
      for (size_t i = 0; i < nv; ++i) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)a[i] * a[i];
      }
      if (den > 0 && num / den > max_rel) max_rel = num / den;
    }
    printf("chunk gate on %s: prompt %d tokens, one step vs chunks of %d\n", s.bh.name, P, U);
    if (first >= 0)
      printf("MISMATCH from position %d (max rel L2 %.3g)\nFAIL\n", first,
             max_rel > 0 ? sqrt(max_rel) : 0.0);
    else
      printf("PASS: logits of all %d positions bit-identical\n", P);
    rc = first >= 0;
  }
  memra_free(prompt);
  memra_free(one);
  memra_session_close(&s);
  return rc;
}
