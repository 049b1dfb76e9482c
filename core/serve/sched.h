/* sched.h — continuous batching over one model context. A single scheduler thread owns
 * the context: at every step boundary it admits queued requests into free sequences,
 * drops cancelled or expired ones (returning their KV pages at once), and runs one
 * forward step holding a decode row for every running request plus prompt chunks of
 * the requests still prefilling. Each request samples with its own sampler, and a row's
 * result does not depend on the other rows, so a request's tokens do not depend on what
 * else is running. */
#ifndef MEMRA_SERVE_SCHED_H
#define MEMRA_SERVE_SCHED_H

#include "core/models/context.h"
#include "core/serve/metrics.h"
#include "core/serve/req.h"
#include "core/text/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_sched_cfg {
  int32_t max_queue;     /* requests waiting for a sequence before submit refuses */
  int32_t max_seqs;      /* running at once: at most the context's n_seq_max and n_ubatch */
  int32_t prefill_chunk; /* prompt rows one request may add to a step; 0: up to n_ubatch */
} memra_sched_cfg;

typedef struct memra_sched memra_sched;

typedef enum memra_submit {
  MEMRA_SUBMIT_OK = 0,
  MEMRA_SUBMIT_QUEUE_FULL, /* -> 429 */
  MEMRA_SUBMIT_STOPPING,   /* -> 503 */
} memra_submit;

/* Starts the scheduler thread. c, tok and metrics must outlive the scheduler. */
memra_status memra_sched_new(memra_ctx *c, const memra_tokenizer *tok, const memra_sched_cfg *cfg,
                             memra_metrics *metrics, memra_sched **out, memra_err *err);
/* Queues r; the scheduler takes its own reference on success. */
memra_submit memra_sched_submit(memra_sched *s, memra_req *r);
/* Stops accepting, waits up to timeout_s for queued and running requests to finish,
 * then cancels what is left. Returns the number of requests cancelled. */
int32_t memra_sched_drain(memra_sched *s, double timeout_s);
/* Cancels everything, joins the thread and frees. */
void memra_sched_free(memra_sched *s);

#ifdef __cplusplus
}
#endif
#endif
