#define _GNU_SOURCE
#include "tools/serve/cmd_serve.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/alloc.h"
#include "tools/memra/session.h"
#include "tools/serve/server.h"

typedef struct serve_flag {
  const char *name;
  const char *help;
} serve_flag;

static const serve_flag FLAGS[] = {
    {"host", "address to bind (default 127.0.0.1)"},
    {"port", "TCP port (default 8080; 0 picks a free one, printed on stderr)"},
    {"api-key", "require Authorization: Bearer KEY (also MEMRA_API_KEY)"},
    {"parallel", "sequences running at once (default 4)"},
    {"max-queue", "requests waiting beyond the running ones before 429 (default 64)"},
    {"max-body", "request body limit in bytes (default 1048576)"},
    {"max-prompt-tokens", "prompt limit in tokens (default: the context)"},
    {"max-total-tokens", "prompt + max_tokens limit (default: the context)"},
    {"prefill-chunk", "prompt rows one request adds to a step (default 64; 0 = ubatch)"},
    {"conn-limit", "open connections (default 256)"},
    {"conn-timeout", "seconds before an idle or slow connection is closed (default 30)"},
    {"request-timeout", "per-request deadline in seconds (default 600)"},
    {"shutdown-timeout", "seconds to finish in-flight requests on SIGINT/SIGTERM (default 10)"},
    {"alias", "model id reported by the API (default: the file name)"},
};
enum { N_FLAGS = sizeof FLAGS / sizeof FLAGS[0] };

static void usage(void) {
  fprintf(stderr, "usage: memra serve [flags]\n\nserver flags:\n");
  for (int i = 0; i < N_FLAGS; ++i)
    fprintf(stderr, "      --%-20s %s\n", FLAGS[i].name, FLAGS[i].help);
  fprintf(stderr, "\nmodel flags:\n");
  memra_opts_usage(stderr);
}

static int find_flag(const char *a, size_t len) {
  for (int i = 0; i < N_FLAGS; ++i)
    if (strlen(FLAGS[i].name) == len && !strncmp(FLAGS[i].name, a, len)) return i;
  return -1;
}

static memra_status num(const char *flag, const char *v, double lo, double hi, double *out,
                        memra_err *err) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || *end || !(d >= lo && d <= hi))
    return memra_errf(err, MEMRA_E_INVALID, "--%s '%s': expected a number in %g..%g", flag, v, lo,
                      hi);
  *out = d;
  return MEMRA_OK;
}

static memra_status set_flag(memra_serve_cfg *c, int i, const char *v, memra_err *err) {
  const char *f = FLAGS[i].name;
  double d = 0;
  memra_status st = MEMRA_OK;
  if (!strcmp(f, "host"))
    snprintf(c->host, sizeof c->host, "%s", v);
  else if (!strcmp(f, "api-key"))
    snprintf(c->api_key, sizeof c->api_key, "%s", v);
  else if (!strcmp(f, "alias"))
    snprintf(c->alias, sizeof c->alias, "%s", v);
  else if (!strcmp(f, "port")) {
    if (!(st = num(f, v, 0, 65535, &d, err))) c->port = (int)d;
  } else if (!strcmp(f, "parallel")) {
    if (!(st = num(f, v, 1, 4096, &d, err))) c->max_seqs = (int32_t)d;
  } else if (!strcmp(f, "max-queue")) {
    if (!(st = num(f, v, 1, 1 << 20, &d, err))) c->max_queue = (int32_t)d;
  } else if (!strcmp(f, "max-body")) {
    if (!(st = num(f, v, 64, 1 << 30, &d, err))) c->max_body = (size_t)d;
  } else if (!strcmp(f, "max-prompt-tokens")) {
    if (!(st = num(f, v, 1, 1 << 24, &d, err))) c->max_prompt = (int32_t)d;
  } else if (!strcmp(f, "max-total-tokens")) {
    if (!(st = num(f, v, 2, 1 << 24, &d, err))) c->max_total = (int32_t)d;
  } else if (!strcmp(f, "prefill-chunk")) {
    if (!(st = num(f, v, 0, 65536, &d, err))) c->prefill_chunk = (int32_t)d;
  } else if (!strcmp(f, "conn-limit")) {
    if (!(st = num(f, v, 1, 65536, &d, err))) c->conn_limit = (int)d;
  } else if (!strcmp(f, "conn-timeout")) {
    if (!(st = num(f, v, 1, 86400, &d, err))) c->conn_timeout_s = (int)d;
  } else if (!strcmp(f, "request-timeout"))
    st = num(f, v, 0.001, 1e6, &c->request_timeout_s, err);
  else if (!strcmp(f, "shutdown-timeout"))
    st = num(f, v, 0, 1e6, &c->shutdown_timeout_s, err);
  return st;
}

/* Takes the server's flags out of argv; the rest go to the shared option parser. */
static memra_status split_args(memra_serve_cfg *c, int argc, char **argv, int first, char **rest,
                               int *n_rest, memra_err *err) {
  *n_rest = 0;
  for (int i = first; i < argc; ++i) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) != 0 || !a[2]) {
      rest[(*n_rest)++] = argv[i];
      continue;
    }
    const char *eq = strchr(a + 2, '=');
    int f = find_flag(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
    if (f < 0) {
      rest[(*n_rest)++] = argv[i];
      continue;
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v) {
      if (i + 1 >= argc)
        return memra_errf(err, MEMRA_E_INVALID, "option --%s needs a value", FLAGS[f].name);
      v = argv[++i];
    }
    memra_status st = set_flag(c, f, v, err);
    if (st) return st;
  }
  return MEMRA_OK;
}

static void defaults(memra_serve_cfg *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->host, sizeof c->host, "127.0.0.1");
  c->port = 8080;
  c->max_body = 1 << 20;
  c->max_seqs = 4;
  c->max_queue = 64;
  c->prefill_chunk = 64;
  c->conn_limit = 256;
  c->conn_timeout_s = 30;
  c->request_timeout_s = 600;
  c->shutdown_timeout_s = 10;
  const char *key = getenv("MEMRA_API_KEY");
  if (key) snprintf(c->api_key, sizeof c->api_key, "%s", key);
}

static void model_name(memra_server *srv, const char *path) {
  if (srv->cfg.alias[0]) {
    snprintf(srv->model, sizeof srv->model, "%s", srv->cfg.alias);
    return;
  }
  const char *b = strrchr(path, '/');
  snprintf(srv->model, sizeof srv->model, "%.255s", b ? b + 1 : path);
  size_t n = strlen(srv->model);
  if (n > 5 && !strcmp(srv->model + n - 5, ".gguf")) srv->model[n - 5] = 0;
}

static void token_text(const memra_tokenizer *t, int32_t id, char *out, size_t cap) {
  size_t len = 0;
  const char *p = id >= 0 ? memra_token_piece(t, id, &len) : NULL;
  snprintf(out, cap, "%.*s", p ? (int)len : 0, p ? p : "");
}

static int serve(memra_server *srv, memra_session *ses, memra_err *err) {
  srv->tok = ses->tok;
  srv->n_vocab = ses->m->hp.n_vocab;
  srv->n_ctx = ses->ctx->p.n_ctx;
  srv->created = (long long)time(NULL);
  if (!srv->cfg.max_prompt) srv->cfg.max_prompt = srv->n_ctx;
  if (!srv->cfg.max_total) srv->cfg.max_total = srv->n_ctx;
  token_text(ses->tok, memra_tokenizer_bos(ses->tok), srv->bos_text, sizeof srv->bos_text);
  token_text(ses->tok, memra_tokenizer_eos(ses->tok), srv->eos_text, sizeof srv->eos_text);
  model_name(srv, ses->model_path);
  memra_str tmpl;
  memra_err ignore;
  char *chat_tmpl = NULL;
  if (!memra_gguf_get_str(ses->g, "tokenizer.chat_template", &tmpl, &ignore))
    chat_tmpl = memra_strndup(tmpl.ptr, (size_t)tmpl.len);
  srv->chat_tmpl = chat_tmpl;
  memra_metrics_init(&srv->met);
  memra_sched_cfg sc = {.max_queue = srv->cfg.max_queue,
                        .max_seqs = srv->cfg.max_seqs,
                        .prefill_chunk = srv->cfg.prefill_chunk};
  int rc = 1;
  if (memra_sched_new(ses->ctx, ses->tok, &sc, &srv->met, &srv->sched, err)) goto out;
  if (memra_http_start(srv, err)) goto out;
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
  fprintf(stderr, "memra: serving %s on http://%s:%u (%d sequences of %d positions)\n", srv->model,
          srv->cfg.host, di ? di->port : (unsigned)srv->cfg.port, srv->cfg.max_seqs, srv->n_ctx);
  fflush(stderr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  fprintf(stderr, "memra: %s: stopping (finishing in-flight requests for up to %g s)\n",
          sig == SIGINT ? "SIGINT" : "SIGTERM", srv->cfg.shutdown_timeout_s);
  atomic_store(&srv->stopping, true);
  memra_http_quiesce(srv);
  int32_t left = memra_sched_drain(srv->sched, srv->cfg.shutdown_timeout_s);
  if (left) fprintf(stderr, "memra: cancelled %d unfinished requests\n", left);
  /* Finished requests may still be writing their responses: let them (bounded). */
  for (int i = 0; i < 500 && atomic_load(&srv->in_flight) > 0; ++i) {
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  rc = 0;
out:
  memra_http_stop(srv); /* joins the connection threads before the scheduler goes */
  memra_sched_free(srv->sched);
  memra_metrics_destroy(&srv->met);
  memra_free(chat_tmpl);
  return rc;
}

int memra_cmd_serve(int argc, char **argv, int first) {
  /* Before any thread exists: the signals are taken by sigwait in this thread only. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  for (int i = first; i < argc; ++i)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    }
  memra_server *srv = memra_calloc(1, sizeof *srv);
  char **rest = memra_calloc((size_t)argc + 1, sizeof *rest);
  memra_err err = {0};
  memra_opts o;
  memra_opts_defaults(&o);
  int rc = 1, n_rest = 0, n_pos = 0;
  const char *pos[1];
  if (!srv || !rest) {
    fprintf(stderr, "memra serve: out of memory\n");
    goto done;
  }
  defaults(&srv->cfg);
  if (split_args(&srv->cfg, argc, argv, first, rest, &n_rest, &err) ||
      memra_opts_parse(&o, n_rest, rest, 0, pos, 0, &n_pos, &err)) {
    fprintf(stderr, "memra serve: %s\n", err.msg);
    goto done;
  }
  memra_session ses;
  if (memra_session_open(&ses, &o, srv->cfg.max_seqs, &err)) {
    fprintf(stderr, "memra serve: %s\n", err.msg);
    goto done;
  }
  rc = serve(srv, &ses, &err);
  if (rc) fprintf(stderr, "memra serve: %s\n", err.msg);
  memra_session_close(&ses);
done:
  memra_free(rest);
  memra_free(srv);
  return rc;
}
