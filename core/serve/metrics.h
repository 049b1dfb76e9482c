/* metrics.h — the server's counters, gauges and latency histograms, rendered as
 * Prometheus text. Every update takes one lock; readers get a consistent snapshot. */
#ifndef MEMRA_SERVE_METRICS_H
#define MEMRA_SERVE_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { MEMRA_HIST_BUCKETS = 14 };

typedef struct memra_hist {
  uint64_t counts[MEMRA_HIST_BUCKETS + 1]; /* the last one is +Inf */
  double sum;
  uint64_t n;
} memra_hist;

typedef struct memra_metrics {
  pthread_mutex_t mu;
  uint64_t requests_ok, requests_client_err, requests_rejected, requests_server_err;
  uint64_t prompt_tokens, completion_tokens;
  uint64_t cancelled, deadline_hits, steps, step_rows;
  int64_t queue_depth, active_seqs, kv_blocks_in_use, kv_blocks_total;
  memra_hist ttft, itl; /* seconds */
} memra_metrics;

void memra_metrics_init(memra_metrics *m);
void memra_metrics_destroy(memra_metrics *m);
void memra_hist_add(memra_hist *h, double seconds); /* caller holds m->mu */
/* HTTP status of a finished request: 2xx ok, 429/503 rejected, 4xx client, 5xx server. */
void memra_metrics_request(memra_metrics *m, int http_status);
/* Renders the Prometheus text exposition into buf (NUL-terminated); returns its length
 * or the size needed when cap is too small. */
size_t memra_metrics_render(memra_metrics *m, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
