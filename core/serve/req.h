/* req.h — one generation request, shared by the HTTP thread that waits on it and the
 * scheduler thread that fills it: its parameters, the text and tokens produced so far,
 * and the lock and condition variable that hand them over. Reference counted: the
 * submitter holds one reference and the scheduler one while the request is queued or
 * running. */
#ifndef MEMRA_SERVE_REQ_H
#define MEMRA_SERVE_REQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/err.h"
#include "core/serve/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_req {
  /* set before submit, read-only after */
  int32_t *prompt; /* memra_malloc'd, owned */
  int32_t n_prompt;
  memra_gen_params gp;
  /* everything below is guarded by mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char *text; /* visible text: stop strings and what follows them are cut */
  size_t n_text, cap_text;
  memra_tok_rec *toks; /* generated tokens (the end-of-generation token excluded) */
  int32_t n_toks, cap_toks;
  bool done;
  memra_finish finish;
  char err[256];
  double t_submit, t_first; /* monotonic seconds; t_first 0 until the first token */
  atomic_bool cancel;       /* set by the waiter: the scheduler drops the request */
  atomic_int refs;
} memra_req;

/* A request with one reference; takes ownership of prompt (memra_malloc'd). */
memra_status memra_req_new(int32_t *prompt, int32_t n_prompt, const memra_gen_params *gp,
                           memra_req **out, memra_err *err);
void memra_req_ref(memra_req *r);
void memra_req_unref(memra_req *r);
/* Asks the scheduler to drop r at its next step (the client disconnected). */
void memra_req_cancel(memra_req *r);

/* Producer side (the scheduler), each takes the lock and wakes the waiter. */
memra_status memra_req_push(memra_req *r, const memra_tok_rec *tok, const char *text, size_t n);
void memra_req_finish(memra_req *r, memra_finish f, const char *err);

double memra_serve_now(void); /* CLOCK_MONOTONIC seconds */

#ifdef __cplusplus
}
#endif
#endif
