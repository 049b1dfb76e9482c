/* gen.c — POST /v1/completions and /v1/chat/completions: validate, tokenize, check the
 * limits, submit to the scheduler, then wait for the whole answer or stream it as
 * server-sent events. A client that goes away cancels its request at once. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/alloc.h"
#include "tools/serve/respond.h"
#include "tools/serve/server.h"

enum { WAIT_MS = 50 }; /* how often a waiter looks for a vanished client */

static void wait_a_bit(memra_req *r) { /* r->mu held */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += WAIT_MS * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

/* The HTTP status and message of a request that did not end normally (0: it did). */
static int failure(const memra_server *s, const memra_req *r, char *msg, size_t cap) {
  switch (r->finish) {
  case MEMRA_FINISH_DEADLINE:
    snprintf(msg, cap, "request deadline passed after %d generated tokens", r->n_toks);
    return 504;
  case MEMRA_FINISH_CANCELLED:
    snprintf(msg, cap, "request cancelled: %s", r->err[0] ? r->err : "server shutting down");
    return 503;
  case MEMRA_FINISH_ERROR: snprintf(msg, cap, "generation failed: %s", r->err); return 500;
  default: (void)s; return 0;
  }
}

/* ---- streaming ---- */

typedef struct stream {
  memra_server *s;
  struct MHD_Connection *c;
  memra_req *r;
  memra_resp_ctx rc;
  char *buf; /* the event being sent */
  size_t n, off;
  size_t t_sent;
  int32_t k_sent;
  double t_out; /* when the last event went out */
  bool started, finished, done_sent;
} stream;

/* Makes the next event(s); false when the client has gone. */
static bool produce(stream *st) {
  memra_req *r = st->r;
  if (st->finished) {
    st->buf = memra_strndup("data: [DONE]\n\n", 14);
    st->done_sent = true;
    return st->buf != NULL;
  }
  if (!st->started && st->rc.kind == MEMRA_API_CHAT) { /* the role comes first */
    pthread_mutex_lock(&r->mu);
    st->buf = memra_resp_chunk(&st->rc, r, 0, 0, 0, 0, MEMRA_FINISH_NONE, true);
    pthread_mutex_unlock(&r->mu);
    st->started = true;
    return st->buf != NULL;
  }
  st->started = true;
  /* The connection timeout counts a quiet stream as idle: a slow prefill or a slow
   * backend must not get the stream closed, so say something well before it. */
  double keepalive = st->s->cfg.conn_timeout_s / 3.0;
  if (keepalive > 10) keepalive = 10;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    bool news = r->n_text > st->t_sent || (st->rc.logprobs && r->n_toks > st->k_sent);
    if (news || r->done) break;
    wait_a_bit(r);
    if (memra_http_peer_gone(st->c)) {
      pthread_mutex_unlock(&r->mu);
      return false;
    }
    if (memra_serve_now() - st->t_out > keepalive) {
      pthread_mutex_unlock(&r->mu);
      st->t_out = memra_serve_now();
      st->buf = memra_strndup(": keep-alive\n\n", 14); /* an SSE comment: clients skip it */
      return st->buf != NULL;
    }
  }
  st->t_out = memra_serve_now();
  char msg[320];
  int fail = r->done ? failure(st->s, r, msg, sizeof msg) : 0;
  if (fail) {
    char *e = memra_resp_error(fail, msg);
    size_t n = e ? strlen(e) : 0;
    st->buf = e ? memra_malloc(n + 9) : NULL;
    if (st->buf) snprintf(st->buf, n + 9, "data: %s\n\n", e);
    memra_free(e);
  } else {
    st->buf = memra_resp_chunk(&st->rc, r, st->t_sent, r->n_text, st->k_sent, r->n_toks,
                               r->done ? r->finish : MEMRA_FINISH_NONE, false);
  }
  st->t_sent = r->n_text;
  st->k_sent = r->n_toks;
  st->finished = r->done;
  pthread_mutex_unlock(&r->mu);
  return st->buf != NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
  (void)pos;
  stream *st = cls;
  while (!st->buf || st->off == st->n) {
    memra_free(st->buf);
    st->buf = NULL;
    st->n = st->off = 0;
    if (st->done_sent) return MHD_CONTENT_READER_END_OF_STREAM;
    if (!produce(st)) {
      memra_req_cancel(st->r);
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    st->n = strlen(st->buf);
  }
  size_t k = st->n - st->off < max ? st->n - st->off : max;
  memcpy(out, st->buf + st->off, k);
  st->off += k;
  return (ssize_t)k;
}

static void stream_free(void *cls) {
  stream *st = cls;
  memra_req_cancel(st->r); /* a no-op when it already finished */
  memra_req_unref(st->r);
  memra_free(st->buf);
  memra_free(st);
}

static enum MHD_Result start_stream(memra_server *s, struct MHD_Connection *c, memra_req *r,
                                    const memra_resp_ctx *rc) {
  stream *st = memra_calloc(1, sizeof *st);
  if (!st) {
    memra_req_cancel(r);
    memra_req_unref(r);
    return memra_http_error(s, c, 500, "out of memory");
  }
  st->s = s;
  st->c = c;
  st->r = r;
  st->rc = *rc;
  st->t_out = memra_serve_now();
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
  if (!resp) {
    stream_free(st);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "text/event-stream");
  MHD_add_response_header(resp, "Cache-Control", "no-cache");
  enum MHD_Result ok = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  memra_metrics_request(&s->met, 200);
  return ok;
}

/* ---- the request ---- */

static memra_status prompt_ids(memra_server *s, memra_api_req *a, int32_t **ids, int32_t *n,
                               memra_err *err) {
  *ids = NULL;
  *n = 0;
  if (a->prompt_ids) {
    *ids = a->prompt_ids;
    *n = a->n_prompt_ids;
    a->prompt_ids = NULL;
    return MEMRA_OK;
  }
  char *text = NULL;
  const char *p = a->prompt;
  size_t len = a->prompt_len;
  bool add_bos = true;
  if (a->kind == MEMRA_API_CHAT) {
    if (!s->chat_tmpl)
      return memra_errf(err, MEMRA_E_UNSUPPORTED,
                        "the model has no chat template: use /v1/completions");
    memra_status st = memra_chat_render(s->chat_tmpl, a->msgs, a->n_msgs, true, s->bos_text,
                                        s->eos_text, &text, err);
    if (st) return st;
    p = text;
    len = strlen(text);
    /* templates that spell BOS themselves must not get a second one */
    add_bos = !(s->bos_text[0] && !strncmp(text, s->bos_text, strlen(s->bos_text)));
  }
  size_t n_ids = 0;
  memra_status st = memra_tokenize(s->tok, p, len, add_bos, true, ids, &n_ids, err);
  memra_free(text);
  if (!st && n_ids > (size_t)INT32_MAX) st = memra_errf(err, MEMRA_E_INVALID, "prompt too long");
  *n = (int32_t)n_ids;
  return st;
}

enum MHD_Result memra_handle_gen(memra_server *s, struct MHD_Connection *c, memra_api_kind kind,
                                 const char *body, size_t n) {
  memra_api_req a;
  memra_err err = {0};
  memra_status st = memra_api_parse(kind, body, n, s->n_vocab, &a, &err);
  int32_t *ids = NULL, n_ids = 0;
  if (!st) st = prompt_ids(s, &a, &ids, &n_ids, &err);
  if (st) {
    memra_api_req_free(&a);
    memra_free(ids);
    return memra_http_error(s, c, st == MEMRA_E_OOM ? 500 : 400, "%s", err.msg);
  }
  const int32_t limit = s->cfg.max_total < s->n_ctx ? s->cfg.max_total : s->n_ctx;
  int http = 0;
  if (n_ids == 0) {
    http = 400;
    snprintf(err.msg, sizeof err.msg, "the prompt is empty");
  } else if (n_ids > s->cfg.max_prompt) {
    http = 400;
    snprintf(err.msg, sizeof err.msg, "the prompt has %d tokens, the limit is %d", n_ids,
             s->cfg.max_prompt);
  } else if (n_ids >= limit) {
    http = 400;
    snprintf(err.msg, sizeof err.msg,
             "the prompt has %d tokens, leaving no room under the limit of %d", n_ids, limit);
  } else {
    if (!a.max_tokens_set) a.gp.max_tokens = kind == MEMRA_API_COMPLETION ? 16 : limit - n_ids;
    if (a.gp.max_tokens > limit - n_ids) {
      http = 400;
      snprintf(err.msg, sizeof err.msg,
               "prompt (%d tokens) + max_tokens (%d) is over the limit of %d tokens", n_ids,
               a.gp.max_tokens, limit);
    }
  }
  if (http) {
    memra_api_req_free(&a);
    memra_free(ids);
    return memra_http_error(s, c, http, "%s", err.msg);
  }
  double timeout = s->cfg.request_timeout_s;
  if (a.timeout_s > 0 && a.timeout_s < timeout) timeout = a.timeout_s;
  a.gp.deadline = timeout > 0 ? memra_serve_now() + timeout : 0;
  memra_resp_ctx rc = {.kind = kind,
                       .created = (long long)time(NULL),
                       .model = s->model,
                       .tok = s->tok,
                       .n_prompt = n_ids,
                       .logprobs = a.logprobs};
  snprintf(rc.id, sizeof rc.id, "%s-%llx", kind == MEMRA_API_CHAT ? "chatcmpl" : "cmpl",
           (unsigned long long)atomic_fetch_add(&s->next_id, 1));
  const bool stream = a.stream;
  memra_req *r;
  st = memra_req_new(ids, n_ids, &a.gp, &r, &err);
  memra_api_req_free(&a);
  if (st) return memra_http_error(s, c, 500, "%s", err.msg);
  memra_submit sub = memra_sched_submit(s->sched, r);
  if (sub != MEMRA_SUBMIT_OK) {
    memra_req_unref(r);
    if (sub == MEMRA_SUBMIT_QUEUE_FULL)
      return memra_http_error(s, c, 429, "server busy: %d requests already waiting, retry later",
                              s->cfg.max_queue);
    return memra_http_error(s, c, 503, "server is shutting down");
  }
  if (stream) return start_stream(s, c, r, &rc);
  pthread_mutex_lock(&r->mu);
  while (!r->done) {
    wait_a_bit(r);
    if (!r->done && memra_http_peer_gone(c)) {
      pthread_mutex_unlock(&r->mu);
      memra_req_cancel(r);
      memra_req_unref(r);
      return MHD_NO; /* nobody to answer: close the connection */
    }
  }
  char msg[320];
  int fail = failure(s, r, msg, sizeof msg);
  char *out = fail ? memra_resp_error(fail, msg) : memra_resp_final(&rc, r);
  pthread_mutex_unlock(&r->mu);
  memra_req_unref(r);
  return memra_http_reply(s, c, fail ? fail : 200, "application/json", out);
}
