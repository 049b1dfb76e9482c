#define _GNU_SOURCE
#include "tools/serve/server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/base/alloc.h"
#include "tools/serve/respond.h"

/* Per-connection request state: the body collected so far. */
typedef struct conn_req {
  char *body;
  size_t n, cap;
  bool too_large;
  bool replied; /* a response was queued before the body was read */
} conn_req;

enum MHD_Result memra_http_reply(memra_server *s, struct MHD_Connection *c, int status,
                                 const char *ctype, char *body) {
  if (!body) {
    status = 500;
    body = memra_strndup("{\"error\":{\"message\":\"out of memory\"}}", 38);
    if (!body) return MHD_NO;
  }
  struct MHD_Response *r =
      MHD_create_response_from_buffer_with_free_callback(strlen(body), body, memra_free);
  if (!r) {
    memra_free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", ctype);
  if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
  enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  memra_metrics_request(&s->met, status);
  return ok;
}

enum MHD_Result memra_http_error(memra_server *s, struct MHD_Connection *c, int status,
                                 const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return memra_http_reply(s, c, status, "application/json", memra_resp_error(status, msg));
}

bool memra_http_peer_gone(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci) return false;
  struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
  char b;
  return recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Constant-time comparison: the key must not leak through timing. */
static bool key_ok(const memra_server *s, struct MHD_Connection *c) {
  if (!s->cfg.api_key[0]) return true;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
  if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
  const char *k = h + 7, *want = s->cfg.api_key;
  size_t n = strlen(k), m = strlen(want);
  unsigned char d = n != m;
  for (size_t i = 0; i < m; ++i)
    d |= (unsigned char)(want[i] ^ (i < n ? k[i] : 0));
  return d == 0;
}

static enum MHD_Result route(memra_server *s, struct MHD_Connection *c, const char *url,
                             const char *method, conn_req *cr) {
  const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (!strcmp(url, "/health")) {
    if (!get) return memra_http_error(s, c, 405, "%s %s: method not allowed", method, url);
    if (atomic_load(&s->stopping)) return memra_http_error(s, c, 503, "server is shutting down");
    return memra_http_reply(s, c, 200, "application/json",
                            memra_strndup("{\"status\":\"ok\"}", 15));
  }
  const bool is_metrics = !strcmp(url, "/metrics"), is_models = !strcmp(url, "/v1/models");
  const bool is_cmpl = !strcmp(url, "/v1/completions"),
             is_chat = !strcmp(url, "/v1/chat/completions");
  if (!is_metrics && !is_models && !is_cmpl && !is_chat)
    return memra_http_error(s, c, 404, "no such endpoint: %s %.200s", method, url);
  if (!key_ok(s, c))
    return memra_http_error(s, c, 401, "missing or wrong API key (Authorization: Bearer ...)");
  if ((is_metrics || is_models) && !get)
    return memra_http_error(s, c, 405, "%s %s: method not allowed", method, url);
  if (is_metrics) {
    size_t need = memra_metrics_render(&s->met, NULL, 0) + 1024; /* gauges may move meanwhile */
    char *buf = memra_malloc(need);
    if (buf) memra_metrics_render(&s->met, buf, need);
    return memra_http_reply(s, c, 200, "text/plain; version=0.0.4", buf);
  }
  if (is_models)
    return memra_http_reply(s, c, 200, "application/json", memra_resp_models(s->model, s->created));
  if (!post) return memra_http_error(s, c, 405, "%s %s: method not allowed", method, url);
  if (cr->too_large)
    return memra_http_error(s, c, 413, "request body over the limit of %zu bytes", s->cfg.max_body);
  const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
  /* curl -d sends form-urlencoded by default: the body is still read as JSON */
  if (ct && strncasecmp(ct, "application/json", 16) != 0 &&
      strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0)
    return memra_http_error(s, c, 415, "Content-Type must be application/json, got '%.100s'", ct);
  return memra_handle_gen(s, c, is_chat ? MEMRA_API_CHAT : MEMRA_API_COMPLETION, cr->body, cr->n);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
  (void)version;
  memra_server *s = cls;
  conn_req *cr = *con_cls;
  if (!cr) {
    cr = memra_calloc(1, sizeof *cr);
    if (!cr) return MHD_NO;
    *con_cls = cr;
    atomic_fetch_add(&s->in_flight, 1);
    /* Refuse an announced oversize body before reading any of it. */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)s->cfg.max_body) {
      cr->too_large = cr->replied = true;
      return memra_http_error(s, c, 413, "request body over the limit of %zu bytes",
                              s->cfg.max_body);
    }
    return MHD_YES;
  }
  if (cr->replied) {
    *data_size = 0;
    return MHD_YES;
  }
  if (*data_size) {
    if (!cr->too_large && cr->n + *data_size > s->cfg.max_body) {
      cr->too_large = true;
      memra_free(cr->body);
      cr->body = NULL;
      cr->n = cr->cap = 0;
    }
    if (!cr->too_large) {
      if (cr->n + *data_size + 1 > cr->cap) {
        size_t cap = cr->cap ? cr->cap : 4096;
        while (cap < cr->n + *data_size + 1)
          cap *= 2;
        char *b = memra_realloc(cr->body, cap);
        if (!b) return MHD_NO;
        cr->body = b;
        cr->cap = cap;
      }
      memcpy(cr->body + cr->n, data, *data_size);
      cr->n += *data_size;
      cr->body[cr->n] = 0;
    }
    *data_size = 0;
    return MHD_YES;
  }
  return route(s, c, url, method, cr);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)c, (void)toe;
  memra_server *s = cls;
  conn_req *cr = *con_cls;
  if (!cr) return;
  atomic_fetch_sub(&s->in_flight, 1);
  memra_free(cr->body);
  memra_free(cr);
  *con_cls = NULL;
}

memra_status memra_http_start(memra_server *s, memra_err *err) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->cfg.port)};
  if (inet_pton(AF_INET, s->cfg.host, &addr.sin_addr) != 1)
    return memra_errf(err, MEMRA_E_INVALID,
                      "--host '%s': expected an IPv4 address such as 127.0.0.1", s->cfg.host);
  s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                              MHD_USE_ITC | MHD_USE_ERROR_LOG,
                          (uint16_t)s->cfg.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                          (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
                          (unsigned)s->cfg.conn_limit, MHD_OPTION_CONNECTION_TIMEOUT,
                          (unsigned)s->cfg.conn_timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
                          on_completed, s, MHD_OPTION_END);
  if (!s->d)
    return memra_errf(err, MEMRA_E_IO, "cannot listen on %s:%d (in use, or no permission)",
                      s->cfg.host, s->cfg.port);
  return MEMRA_OK;
}

void memra_http_quiesce(memra_server *s) {
  if (s->d) {
    MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
  }
}

void memra_http_stop(memra_server *s) {
  if (s->d) MHD_stop_daemon(s->d);
  s->d = NULL;
}
