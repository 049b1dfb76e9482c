/* server.h — the state of `memra serve` shared by the HTTP layer and the handlers: the
 * limits, the scheduler, the metrics and what the handlers need of the model. */
#ifndef MEMRA_SERVE_SERVER_H
#define MEMRA_SERVE_SERVER_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/serve/metrics.h"
#include "core/serve/sched.h"
#include "core/text/tokenizer.h"
#include "tools/serve/parse.h"

typedef struct memra_serve_cfg {
  char host[256];
  int port;
  char api_key[256];  /* empty: no key */
  size_t max_body;    /* bytes */
  int32_t max_prompt; /* prompt tokens */
  int32_t max_total;  /* prompt + max_tokens */
  int32_t max_seqs;
  int32_t max_queue;
  int32_t prefill_chunk;
  int conn_limit;           /* open connections */
  int conn_timeout_s;       /* idle connections (slow clients) are closed after this */
  double request_timeout_s; /* the per-request deadline, and the cap of "timeout" */
  double shutdown_timeout_s;
  char alias[256]; /* the model id; the file name without .gguf when empty */
} memra_serve_cfg;

typedef struct memra_server {
  memra_serve_cfg cfg;
  struct MHD_Daemon *d;
  memra_sched *sched;
  memra_metrics met;
  const memra_tokenizer *tok;
  int32_t n_vocab, n_ctx;
  const char *chat_tmpl; /* NULL when the model has none */
  char bos_text[64], eos_text[64];
  char model[256];
  long long created;
  atomic_ullong next_id;
  atomic_bool stopping;
  atomic_int in_flight; /* HTTP requests whose response is not yet fully sent */
} memra_server;

/* http.c */
memra_status memra_http_start(memra_server *s, memra_err *err);
void memra_http_quiesce(memra_server *s); /* stop accepting connections */
void memra_http_stop(memra_server *s);    /* close all and join their threads */
/* Queues a reply and counts it; body is memra_malloc'd and taken. */
enum MHD_Result memra_http_reply(memra_server *s, struct MHD_Connection *c, int status,
                                 const char *ctype, char *body);
enum MHD_Result memra_http_error(memra_server *s, struct MHD_Connection *c, int status,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* True when the peer of c has closed its end. */
bool memra_http_peer_gone(struct MHD_Connection *c);

/* gen.c: POST /v1/completions and /v1/chat/completions */
enum MHD_Result memra_handle_gen(memra_server *s, struct MHD_Connection *c, memra_api_kind kind,
                                 const char *body, size_t n);

#endif
