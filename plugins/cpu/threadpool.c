/* threadpool.c — a small fork-join pool: n-1 workers plus the calling thread.
 *
 * cpu_pool_run splits [0, n) into contiguous chunks, wakes the workers through one
 * condition variable (a generation counter says "new job") and waits on another until
 * every chunk is done. No spinning: the machines this runs on may be shared. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "plugins/cpu/cpu_backend.h"

struct cpu_pool {
  int n; /* threads including the caller */
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t wake; /* workers wait here for a new generation */
  pthread_cond_t done; /* the caller waits here for pending == 0 */
  uint64_t generation;
  int pending; /* workers that have not finished the current job */
  bool quit;
  /* the current job */
  cpu_task_fn fn;
  void *ctx;
  int64_t items;
  int chunks;
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

static void *worker_main(void *p) {
  worker_arg *a = p;
  cpu_pool *pool = a->pool;
  int tid = a->tid;
  free(a);
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->mu);
  for (;;) {
    while (!pool->quit && pool->generation == seen)
      pthread_cond_wait(&pool->wake, &pool->mu);
    if (pool->quit) break;
    seen = pool->generation;
    cpu_task_fn fn = pool->fn;
    void *ctx = pool->ctx;
    int64_t items = pool->items;
    int chunks = pool->chunks;
    pthread_mutex_unlock(&pool->mu);
    if (tid < chunks) {
      int64_t b, e;
      chunk_range(items, chunks, tid, &b, &e);
      if (b < e) fn(ctx, b, e, tid);
    }
    pthread_mutex_lock(&pool->mu);
    if (--pool->pending == 0) pthread_cond_signal(&pool->done);
  }
  pthread_mutex_unlock(&pool->mu);
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
  int chunks = n < p->n ? (int)n : p->n;
  if (chunks == 1) { /* not worth a wake-up */
    fn(ctx, 0, n, 0);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->items = n;
  p->chunks = chunks;
  p->pending = p->n - 1;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  int64_t b, e;
  chunk_range(n, chunks, 0, &b, &e);
  fn(ctx, b, e, 0);

  pthread_mutex_lock(&p->mu);
  while (p->pending > 0)
    pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}
