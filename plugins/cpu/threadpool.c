/* threadpool.c — a small fork-join pool: n-1 workers plus the calling thread.
 *
 * cpu_pool_run cuts [0, n) into a few contiguous chunks per thread; every thread,
 * the caller included, claims chunks one at a time until none are left, and the caller
 * returns when all chunks are done. Claiming (instead of a fixed split) matters on a
 * shared machine: a worker that is not scheduled does not hold the step up, the others
 * take its chunks. Which thread runs a chunk never changes a result (see the header).
 * No spinning: waits are on condition variables. A worker that wakes late sees a newer
 * generation or no chunks left; chunks are claimed under the mutex, tagged by
 * generation, so a late worker can never run an old job's function on a new job. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "plugins/cpu/cpu_backend.h"

enum { CHUNKS_PER_THREAD = 4 };

struct cpu_pool {
  int n; /* threads including the caller */
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t wake; /* workers wait here for a new generation */
  pthread_cond_t done; /* the caller waits here for finished == chunks */
  uint64_t generation;
  bool quit;
  /* the current job, guarded by mu */
  cpu_task_fn fn;
  void *ctx;
  int64_t items;
  int chunks, next, finished;
};

typedef struct worker_arg {
  cpu_pool *pool;
  int tid;
} worker_arg;

/* Chunk c of `chunks` over [0, n): balanced, contiguous, in order. */
static void chunk_range(int64_t n, int chunks, int c, int64_t *b, int64_t *e) {
  int64_t base = n / chunks, rem = n % chunks;
  *b = c * base + (c < rem ? c : rem);
  *e = *b + base + (c < rem ? 1 : 0);
}

/* Runs chunks of generation gen until none are left. Called and returns with mu held. */
static void drain(cpu_pool *p, uint64_t gen, int tid) {
  while (p->generation == gen && p->next < p->chunks) {
    int c = p->next++;
    cpu_task_fn fn = p->fn;
    void *ctx = p->ctx;
    int64_t b, e;
    chunk_range(p->items, p->chunks, c, &b, &e);
    pthread_mutex_unlock(&p->mu);
    if (b < e) fn(ctx, b, e, tid);
    pthread_mutex_lock(&p->mu);
    /* gen cannot have moved on: the caller waits for this chunk before the next job. */
    if (++p->finished == p->chunks) pthread_cond_signal(&p->done);
  }
}

static void *worker_main(void *arg) {
  worker_arg *a = arg;
  cpu_pool *p = a->pool;
  int tid = a->tid;
  free(a);
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->quit && p->generation == seen)
      pthread_cond_wait(&p->wake, &p->mu);
    if (p->quit) break;
    seen = p->generation;
    drain(p, seen, tid);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

cpu_pool *cpu_pool_create(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  cpu_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n_threads;
  if (pthread_mutex_init(&p->mu, NULL) != 0) goto fail_mu;
  if (pthread_cond_init(&p->wake, NULL) != 0) goto fail_wake;
  if (pthread_cond_init(&p->done, NULL) != 0) goto fail_done;
  p->threads = calloc((size_t)n_threads, sizeof *p->threads);
  if (!p->threads) goto fail_threads;
  for (int i = 1; i < n_threads; ++i) {
    worker_arg *a = malloc(sizeof *a);
    if (a) *a = (worker_arg){p, i};
    if (!a || pthread_create(&p->threads[i], NULL, worker_main, a) != 0) {
      free(a);
      p->n = i; /* destroy joins the i - 1 workers started so far */
      cpu_pool_destroy(p);
      return NULL;
    }
  }
  return p;
fail_threads:
  pthread_cond_destroy(&p->done);
fail_done:
  pthread_cond_destroy(&p->wake);
fail_wake:
  pthread_mutex_destroy(&p->mu);
fail_mu:
  free(p);
  return NULL;
}

void cpu_pool_destroy(cpu_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->quit = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n; ++i)
    pthread_join(p->threads[i], NULL);
  free(p->threads);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int cpu_pool_size(const cpu_pool *p) { return p->n; }

void cpu_pool_run(cpu_pool *p, int64_t n, cpu_task_fn fn, void *ctx) {
  if (n <= 0) return;
  if (p->n == 1 || n == 1) { /* not worth a wake-up */
    fn(ctx, 0, n, 0);
    return;
  }
  int64_t want = (int64_t)p->n * CHUNKS_PER_THREAD;
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->items = n;
  p->chunks = (int)(n < want ? n : want);
  p->next = 0;
  p->finished = 0;
  uint64_t gen = ++p->generation;
  pthread_cond_broadcast(&p->wake);
  drain(p, gen, 0);
  while (p->finished < p->chunks)
    pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}
