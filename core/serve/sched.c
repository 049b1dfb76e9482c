#define _GNU_SOURCE
#include "core/serve/sched.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "core/base/alloc.h"
#include "core/serve/logprob.h"
#include "core/serve/stop.h"

typedef struct slot {
  memra_req *r;      /* NULL: free */
  uint64_t admitted; /* admission order: older prompts prefill first */
  memra_sampler *smp;
  memra_detok dt;
  int32_t n_fed;  /* prompt tokens in the KV */
  int32_t n_past; /* positions in the KV */
  int32_t last;   /* the token the next decode row feeds */
  int32_t n_gen;
  double t_last;
  char *raw; /* all generated text; raw[0..released) went to the request */
  size_t n_raw, cap_raw, released;
} slot;

struct memra_sched {
  memra_ctx *c;
  const memra_tokenizer *tok;
  memra_metrics *met;
  memra_sched_cfg cfg;
  int32_t n_vocab;
  pthread_t th;
  pthread_mutex_t mu;     /* guards the queue and the flags below */
  pthread_cond_t cv;      /* work arrived / quit */
  pthread_cond_t idle_cv; /* nothing queued or running */
  memra_req **q;          /* ring of waiting requests */
  int32_t q_head, q_n;
  int32_t n_active;
  bool stopping, cancel_all, quit;
  uint64_t n_admitted;
  slot *slots;
  /* step buffers (scheduler thread only) */
  int32_t *tokens, *pos, *seq, *out_rows, *out_slot;
  float *logits, *scratch;
};

static void set_gauges(memra_sched *s) {
  pthread_mutex_lock(&s->mu);
  int64_t queued = s->q_n, active = s->n_active;
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&s->met->mu);
  s->met->queue_depth = queued;
  s->met->active_seqs = active;
  s->met->kv_blocks_in_use = memra_kv_pages_in_use(&s->c->pages);
  pthread_mutex_unlock(&s->met->mu);
}

/* Returns the slot's pages and its reference; called by the scheduler thread. The pages
 * and gauges are settled before the waiter wakes, so a client that reads /metrics right
 * after its answer sees them. */
static void slot_close(memra_sched *s, int32_t i, memra_finish f, const char *err) {
  slot *sl = &s->slots[i];
  memra_req *r = sl->r;
  memra_kv_pages_release(&s->c->pages, i);
  memra_sampler_free(sl->smp);
  memra_free(sl->raw);
  int32_t n_fed = sl->n_fed;
  memset(sl, 0, sizeof *sl);
  pthread_mutex_lock(&s->mu);
  s->n_active--;
  int64_t active = s->n_active, queued = s->q_n;
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&s->met->mu);
  s->met->prompt_tokens += (uint64_t)n_fed;
  if (f == MEMRA_FINISH_CANCELLED) s->met->cancelled++;
  if (f == MEMRA_FINISH_DEADLINE) s->met->deadline_hits++;
  s->met->active_seqs = active;
  s->met->queue_depth = queued;
  s->met->kv_blocks_in_use = memra_kv_pages_in_use(&s->c->pages);
  pthread_mutex_unlock(&s->met->mu);
  memra_req_finish(r, f, err);
  memra_req_unref(r);
  pthread_mutex_lock(&s->mu);
  if (!s->n_active && !s->q_n) pthread_cond_broadcast(&s->idle_cv);
  pthread_mutex_unlock(&s->mu);
}

static bool raw_append(slot *sl, const char *t, size_t n) {
  if (sl->n_raw + n + 1 > sl->cap_raw) {
    size_t cap = sl->cap_raw ? sl->cap_raw * 2 : 256;
    while (cap < sl->n_raw + n + 1)
      cap *= 2;
    char *p = memra_realloc(sl->raw, cap);
    if (!p) return false;
    sl->raw = p;
    sl->cap_raw = cap;
  }
  memcpy(sl->raw + sl->n_raw, t, n);
  sl->n_raw += n;
  sl->raw[sl->n_raw] = 0;
  return true;
}

/* Releases the text that can no longer be part of a stop string (all of it when final);
 * true when a stop string was found. */
static bool release_text(slot *sl, const memra_tok_rec *rec, bool final) {
  const memra_gen_params *gp = &sl->r->gp;
  bool hit = false;
  size_t upto = memra_serve_stop_scan(sl->raw, sl->n_raw, sl->released, gp->stop, gp->n_stop, &hit);
  if (final && !hit) upto = sl->n_raw;
  if (upto < sl->released) upto = sl->released;
  memra_req_push(sl->r, rec, sl->raw + sl->released, upto - sl->released);
  sl->released = upto;
  return hit;
}

/* One sampled token of slot i: record it, release text, decide whether to stop. */
static void on_token(memra_sched *s, int32_t i, float *logits) {
  slot *sl = &s->slots[i];
  const memra_gen_params *gp = &sl->r->gp;
  memra_tok_rec rec = {0};
  /* Logprobs come from the model's distribution: the sampler filters logits in place. */
  if (gp->n_logprobs >= 0) memcpy(s->scratch, logits, sizeof(float) * (size_t)s->n_vocab);
  int32_t id = memra_sampler_sample(sl->smp, logits);
  rec.id = id;
  if (gp->n_logprobs >= 0) memra_logprobs_fill(s->scratch, s->n_vocab, gp->n_logprobs, &rec);
  double now = memra_serve_now();
  pthread_mutex_lock(&s->met->mu);
  if (sl->n_gen == 0)
    memra_hist_add(&s->met->ttft, now - sl->r->t_submit);
  else
    memra_hist_add(&s->met->itl, now - sl->t_last);
  pthread_mutex_unlock(&s->met->mu);
  sl->t_last = now;
  if (memra_tokenizer_is_eog(s->tok, id)) {
    char tail[32];
    size_t n = memra_detok_flush(&sl->dt, tail, sizeof tail);
    bool ok = raw_append(sl, tail, n);
    bool hit = release_text(sl, NULL, true);
    (void)hit;
    slot_close(s, i, ok ? MEMRA_FINISH_STOP : MEMRA_FINISH_ERROR, ok ? NULL : "out of memory");
    return;
  }
  memra_sampler_accept(sl->smp, id);
  sl->n_gen++;
  pthread_mutex_lock(&s->met->mu);
  s->met->completion_tokens++;
  pthread_mutex_unlock(&s->met->mu);
  rec.text_off = (uint32_t)sl->n_raw;
  char piece[256];
  size_t n = memra_detok_push(&sl->dt, s->tok, id, piece, sizeof piece);
  bool length = sl->n_gen >= gp->max_tokens || sl->n_past >= s->c->p.n_ctx;
  if (length) n += memra_detok_flush(&sl->dt, piece + n, sizeof piece - n);
  if (!raw_append(sl, piece, n)) {
    slot_close(s, i, MEMRA_FINISH_ERROR, "out of memory");
    return;
  }
  if (release_text(sl, &rec, length))
    slot_close(s, i, MEMRA_FINISH_STOP, NULL);
  else if (length)
    slot_close(s, i, MEMRA_FINISH_LENGTH, NULL);
  else
    sl->last = id;
}

static void admit(memra_sched *s) {
  pthread_mutex_lock(&s->mu);
  while (s->q_n && s->n_active < s->cfg.max_seqs) {
    memra_req *r = s->q[s->q_head];
    s->q_head = (s->q_head + 1) % s->cfg.max_queue;
    s->q_n--;
    int32_t i = 0;
    while (s->slots[i].r)
      ++i;
    slot *sl = &s->slots[i];
    memset(sl, 0, sizeof *sl);
    sl->r = r;
    sl->admitted = s->n_admitted++;
    s->n_active++;
    pthread_mutex_unlock(&s->mu);
    memra_err err = {0};
    memra_detok_init(&sl->dt);
    if (memra_sampler_new(&r->gp.sp, s->n_vocab, &sl->smp, &err))
      slot_close(s, i, MEMRA_FINISH_ERROR, err.msg);
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
}

/* Drops cancelled and expired requests before the step is built. */
static void reap(memra_sched *s, bool cancel_all) {
  double now = memra_serve_now();
  for (int32_t i = 0; i < s->cfg.max_seqs; ++i) {
    memra_req *r = s->slots[i].r;
    if (!r) continue;
    if (cancel_all || atomic_load(&r->cancel))
      slot_close(s, i, MEMRA_FINISH_CANCELLED, NULL);
    else if (r->gp.deadline > 0 && now > r->gp.deadline)
      slot_close(s, i, MEMRA_FINISH_DEADLINE, NULL);
  }
}

static void fail_all(memra_sched *s, const char *msg) {
  for (int32_t i = 0; i < s->cfg.max_seqs; ++i)
    if (s->slots[i].r) slot_close(s, i, MEMRA_FINISH_ERROR, msg);
}

/* Builds and runs one step. Decode rows come first so running requests never wait on a
 * long prompt; prompts fill the remaining rows oldest first. */
static void step(memra_sched *s) {
  const int32_t U = s->c->p.n_ubatch;
  const int32_t chunk_max = s->cfg.prefill_chunk > 0 ? s->cfg.prefill_chunk : U;
  int32_t n = 0, n_out = 0;
  int32_t rows_of[4096];
  memra_err err = {0};
  for (int32_t i = 0; i < s->cfg.max_seqs; ++i) {
    slot *sl = &s->slots[i];
    rows_of[i] = 0;
    if (!sl->r || sl->n_fed < sl->r->n_prompt) continue;
    s->tokens[n] = sl->last;
    s->pos[n] = sl->n_past;
    s->seq[n] = i;
    s->out_slot[n_out] = i;
    s->out_rows[n_out++] = n++;
    rows_of[i] = 1;
  }
  const int32_t n_decode = n;
  while (n < U) {
    int32_t best = -1;
    for (int32_t i = 0; i < s->cfg.max_seqs; ++i) {
      slot *sl = &s->slots[i];
      if (sl->r && !rows_of[i] && sl->n_fed < sl->r->n_prompt &&
          (best < 0 || sl->admitted < s->slots[best].admitted))
        best = i;
    }
    if (best < 0) break;
    slot *sl = &s->slots[best];
    int32_t m = sl->r->n_prompt - sl->n_fed;
    if (m > U - n) m = U - n;
    if (m > chunk_max) m = chunk_max;
    for (int32_t k = 0; k < m; ++k) {
      s->tokens[n + k] = sl->r->prompt[sl->n_fed + k];
      s->pos[n + k] = sl->n_past + k;
      s->seq[n + k] = best;
    }
    n += m;
    rows_of[best] = m;
    if (sl->n_fed + m == sl->r->n_prompt) {
      s->out_slot[n_out] = best;
      s->out_rows[n_out++] = n - 1;
    }
  }
  if (!n) return;
  for (int32_t i = 0; i < s->cfg.max_seqs; ++i) {
    if (!rows_of[i]) continue;
    if (memra_kv_pages_reserve(&s->c->pages, i, s->slots[i].n_past + rows_of[i], &err)) {
      fail_all(s, err.msg); /* the pool holds every sequence's full context: a bug */
      return;
    }
  }
  bool ok =
      memra_ctx_set_rows(s->c, n, s->tokens, s->pos, s->seq, n_out, s->out_rows, &err) == MEMRA_OK;
  if (ok) s->c->n_decode = n_decode; /* the rest are prompt chunks, even one-row ones */
  if (!ok || memra_ctx_forward(s->c, &err) ||
      (n_out && memra_ctx_get_logits(s->c, s->logits, &err))) {
    fail_all(s, err.msg);
    return;
  }
  pthread_mutex_lock(&s->met->mu);
  s->met->steps++;
  s->met->step_rows += (uint64_t)n;
  pthread_mutex_unlock(&s->met->mu);
  for (int32_t i = 0; i < s->cfg.max_seqs; ++i) {
    slot *sl = &s->slots[i];
    if (!rows_of[i]) continue;
    if (sl->n_fed < sl->r->n_prompt) sl->n_fed += rows_of[i];
    sl->n_past += rows_of[i];
  }
  for (int32_t k = 0; k < n_out; ++k)
    on_token(s, s->out_slot[k], s->logits + (size_t)k * (size_t)s->n_vocab);
}

static void *run(void *arg) {
  memra_sched *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->quit && !s->n_active && !s->q_n)
      pthread_cond_wait(&s->cv, &s->mu);
    bool quit = s->quit, cancel_all = s->cancel_all;
    if (cancel_all) { /* drop the queue too */
      while (s->q_n) {
        memra_req *r = s->q[s->q_head];
        s->q_head = (s->q_head + 1) % s->cfg.max_queue;
        s->q_n--;
        memra_req_finish(r, MEMRA_FINISH_CANCELLED, "server shutting down");
        memra_req_unref(r);
      }
      pthread_cond_broadcast(&s->idle_cv);
    }
    pthread_mutex_unlock(&s->mu);
    reap(s, cancel_all);
    if (quit) break;
    admit(s);
    reap(s, false); /* requests cancelled while they waited */
    step(s);
    set_gauges(s);
  }
  set_gauges(s);
  return NULL;
}

memra_status memra_sched_new(memra_ctx *c, const memra_tokenizer *tok, const memra_sched_cfg *cfg,
                             memra_metrics *met, memra_sched **out, memra_err *err) {
  *out = NULL;
  if (cfg->max_queue < 1 || cfg->max_seqs < 1 || cfg->max_seqs > c->p.n_seq_max ||
      cfg->max_seqs > c->p.n_ubatch || cfg->max_seqs > 4096 || cfg->prefill_chunk < 0)
    return memra_errf(err, MEMRA_E_INVALID,
                      "scheduler: queue %d (>= 1), sequences %d (1..min(%d sequences, %d "
                      "ubatch rows)), prefill chunk %d (>= 0)",
                      cfg->max_queue, cfg->max_seqs, c->p.n_seq_max, c->p.n_ubatch,
                      cfg->prefill_chunk);
  memra_sched *s = memra_calloc(1, sizeof *s);
  if (!s) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  s->c = c;
  s->tok = tok;
  s->met = met;
  s->cfg = *cfg;
  s->n_vocab = c->m->hp.n_vocab;
  const size_t U = (size_t)c->p.n_ubatch;
  s->q = memra_calloc((size_t)cfg->max_queue, sizeof *s->q);
  s->slots = memra_calloc((size_t)cfg->max_seqs, sizeof *s->slots);
  s->tokens = memra_calloc(5 * U, sizeof(int32_t));
  s->logits = memra_calloc((size_t)(cfg->max_seqs + 1) * (size_t)s->n_vocab, sizeof(float));
  if (!s->q || !s->slots || !s->tokens || !s->logits) {
    memra_free(s->q);
    memra_free(s->slots);
    memra_free(s->tokens);
    memra_free(s->logits);
    memra_free(s);
    return memra_errf(err, MEMRA_E_OOM, "out of memory");
  }
  s->scratch = s->logits + (size_t)cfg->max_seqs * (size_t)s->n_vocab;
  s->pos = s->tokens + U;
  s->seq = s->tokens + 2 * U;
  s->out_rows = s->tokens + 3 * U;
  s->out_slot = s->tokens + 4 * U;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->idle_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_lock(&met->mu);
  met->kv_blocks_total = c->pages.n_pages;
  pthread_mutex_unlock(&met->mu);
  if (pthread_create(&s->th, NULL, run, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle_cv);
    memra_free(s->q);
    memra_free(s->slots);
    memra_free(s->tokens);
    memra_free(s->logits);
    memra_free(s);
    return memra_errf(err, MEMRA_E_DEVICE, "scheduler: cannot start its thread");
  }
  *out = s;
  return MEMRA_OK;
}

memra_submit memra_sched_submit(memra_sched *s, memra_req *r) {
  memra_submit res = MEMRA_SUBMIT_OK;
  pthread_mutex_lock(&s->mu);
  if (s->stopping)
    res = MEMRA_SUBMIT_STOPPING;
  else if (s->q_n >= s->cfg.max_queue)
    res = MEMRA_SUBMIT_QUEUE_FULL;
  else {
    memra_req_ref(r);
    s->q[(s->q_head + s->q_n) % s->cfg.max_queue] = r;
    s->q_n++;
    pthread_cond_signal(&s->cv);
  }
  int64_t depth = s->q_n;
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&s->met->mu);
  s->met->queue_depth = depth;
  pthread_mutex_unlock(&s->met->mu);
  return res;
}

int32_t memra_sched_drain(memra_sched *s, double timeout_s) {
  double end = memra_serve_now() + timeout_s;
  struct timespec ts = {.tv_sec = (time_t)end,
                        .tv_nsec = (long)((end - (double)(time_t)end) * 1e9)};
  pthread_mutex_lock(&s->mu);
  s->stopping = true;
  while ((s->n_active || s->q_n) && pthread_cond_timedwait(&s->idle_cv, &s->mu, &ts) != ETIMEDOUT) {
  }
  int32_t left = s->n_active + s->q_n;
  s->cancel_all = true;
  pthread_cond_signal(&s->cv);
  while (s->n_active || s->q_n)
    pthread_cond_wait(&s->idle_cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return left;
}

void memra_sched_free(memra_sched *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stopping = s->cancel_all = s->quit = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->th, NULL);
  /* the thread reaped the running requests; drop any still queued */
  while (s->q_n) {
    memra_req *r = s->q[s->q_head];
    s->q_head = (s->q_head + 1) % s->cfg.max_queue;
    s->q_n--;
    memra_req_finish(r, MEMRA_FINISH_CANCELLED, "server shutting down");
    memra_req_unref(r);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  pthread_cond_destroy(&s->idle_cv);
  memra_free(s->q);
  memra_free(s->slots);
  memra_free(s->tokens);
  memra_free(s->logits);
  memra_free(s);
}
