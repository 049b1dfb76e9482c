#define _GNU_SOURCE
#include "core/serve/req.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/alloc.h"

double memra_serve_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *memra_finish_str(memra_finish f) {
  switch (f) {
  case MEMRA_FINISH_STOP: return "stop";
  case MEMRA_FINISH_LENGTH: return "length";
  case MEMRA_FINISH_CANCELLED: return "cancelled";
  case MEMRA_FINISH_DEADLINE: return "deadline";
  case MEMRA_FINISH_ERROR: return "error";
  default: return "none";
  }
}

memra_status memra_req_new(int32_t *prompt, int32_t n_prompt, const memra_gen_params *gp,
                           memra_req **out, memra_err *err) {
  *out = NULL;
  memra_req *r = memra_calloc(1, sizeof *r);
  if (!r) {
    memra_free(prompt);
    return memra_errf(err, MEMRA_E_OOM, "out of memory");
  }
  r->prompt = prompt;
  r->n_prompt = n_prompt;
  r->gp = *gp;
  pthread_mutex_init(&r->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waiters time out on the same clock */
  pthread_cond_init(&r->cv, &ca);
  pthread_condattr_destroy(&ca);
  atomic_init(&r->cancel, false);
  atomic_init(&r->refs, 1);
  r->t_submit = memra_serve_now();
  *out = r;
  return MEMRA_OK;
}

void memra_req_ref(memra_req *r) { atomic_fetch_add(&r->refs, 1); }

void memra_req_unref(memra_req *r) {
  if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  memra_free(r->prompt);
  memra_free(r->text);
  memra_free(r->toks);
  memra_free(r);
}

void memra_req_cancel(memra_req *r) { atomic_store(&r->cancel, true); }

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 64;
  while (c < need)
    c *= 2;
  void *q = memra_realloc(*p, c * elem);
  if (!q) return false;
  *p = q;
  *cap = c;
  return true;
}

memra_status memra_req_push(memra_req *r, const memra_tok_rec *tok, const char *text, size_t n) {
  memra_status st = MEMRA_OK;
  pthread_mutex_lock(&r->mu);
  size_t cap_toks = (size_t)r->cap_toks;
  if (tok) {
    if (!grow((void **)&r->toks, &cap_toks, (size_t)r->n_toks + 1, sizeof *r->toks))
      st = MEMRA_E_OOM;
    else
      r->toks[r->n_toks++] = *tok;
    r->cap_toks = (int32_t)cap_toks;
    if (!r->t_first) r->t_first = memra_serve_now();
  }
  if (!st && n) {
    if (!grow((void **)&r->text, &r->cap_text, r->n_text + n + 1, 1))
      st = MEMRA_E_OOM;
    else {
      memcpy(r->text + r->n_text, text, n);
      r->n_text += n;
      r->text[r->n_text] = 0;
    }
  }
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return st;
}

void memra_req_finish(memra_req *r, memra_finish f, const char *err) {
  pthread_mutex_lock(&r->mu);
  if (!r->done) {
    r->done = true;
    r->finish = f;
    if (err) snprintf(r->err, sizeof r->err, "%s", err);
  }
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}
