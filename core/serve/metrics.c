#include "core/serve/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Upper bounds in seconds: 1 ms to 30 s, covering CPU decode and long GPU prefills. */
static const double BOUNDS[MEMRA_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25,  0.5,    1,     2.5,  5,     10,   30};

void memra_metrics_init(memra_metrics *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->mu, NULL);
}

void memra_metrics_destroy(memra_metrics *m) { pthread_mutex_destroy(&m->mu); }

void memra_hist_add(memra_hist *h, double s) {
  int b = 0;
  while (b < MEMRA_HIST_BUCKETS && s > BOUNDS[b])
    ++b;
  h->counts[b]++;
  h->sum += s;
  h->n++;
}

void memra_metrics_request(memra_metrics *m, int st) {
  pthread_mutex_lock(&m->mu);
  if (st < 300)
    m->requests_ok++;
  else if (st == 429 || st == 503)
    m->requests_rejected++;
  else if (st < 500)
    m->requests_client_err++;
  else
    m->requests_server_err++;
  pthread_mutex_unlock(&m->mu);
}

typedef struct out {
  char *buf;
  size_t cap, n;
} out;

static void put(out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = o->n < o->cap ? o->cap - o->n : 0;
  int k = vsnprintf(room ? o->buf + o->n : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0) o->n += (size_t)k;
}

static void put_hist(out *o, const char *name, const char *help, const memra_hist *h) {
  put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cum = 0;
  for (int b = 0; b < MEMRA_HIST_BUCKETS; ++b) {
    cum += h->counts[b];
    put(o, "%s_bucket{le=\"%g\"} %llu\n", name, BOUNDS[b], (unsigned long long)cum);
  }
  cum += h->counts[MEMRA_HIST_BUCKETS];
  put(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)cum,
      name, h->sum, name, (unsigned long long)h->n);
}

static void put_one(out *o, const char *name, const char *type, const char *help, double v) {
  put(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

size_t memra_metrics_render(memra_metrics *m, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  pthread_mutex_lock(&m->mu);
  put(&o, "# HELP memra_requests_total HTTP requests finished, by outcome.\n"
          "# TYPE memra_requests_total counter\n");
  put(&o, "memra_requests_total{outcome=\"ok\"} %llu\n", (unsigned long long)m->requests_ok);
  put(&o, "memra_requests_total{outcome=\"client_error\"} %llu\n",
      (unsigned long long)m->requests_client_err);
  put(&o, "memra_requests_total{outcome=\"rejected\"} %llu\n",
      (unsigned long long)m->requests_rejected);
  put(&o, "memra_requests_total{outcome=\"server_error\"} %llu\n",
      (unsigned long long)m->requests_server_err);
  put_one(&o, "memra_prompt_tokens_total", "counter", "Prompt tokens prefilled.",
          (double)m->prompt_tokens);
  put_one(&o, "memra_completion_tokens_total", "counter", "Tokens generated.",
          (double)m->completion_tokens);
  put_one(&o, "memra_requests_cancelled_total", "counter",
          "Requests dropped because the client went away or the server stopped.",
          (double)m->cancelled);
  put_one(&o, "memra_requests_deadline_total", "counter", "Requests stopped by their deadline.",
          (double)m->deadline_hits);
  put_one(&o, "memra_steps_total", "counter", "Forward steps run.", (double)m->steps);
  put_one(&o, "memra_step_rows_total", "counter", "Rows over all forward steps.",
          (double)m->step_rows);
  put_one(&o, "memra_queue_depth", "gauge", "Requests waiting for a sequence.",
          (double)m->queue_depth);
  put_one(&o, "memra_active_sequences", "gauge", "Requests holding a sequence.",
          (double)m->active_seqs);
  put_one(&o, "memra_kv_blocks_in_use", "gauge", "KV cache pages held by sequences.",
          (double)m->kv_blocks_in_use);
  put_one(&o, "memra_kv_blocks_total", "gauge", "KV cache pages in the pool.",
          (double)m->kv_blocks_total);
  put_hist(&o, "memra_time_to_first_token_seconds", "Submit to first generated token.", &m->ttft);
  put_hist(&o, "memra_inter_token_latency_seconds", "Time between consecutive tokens.", &m->itl);
  pthread_mutex_unlock(&m->mu);
  return o.n;
}
