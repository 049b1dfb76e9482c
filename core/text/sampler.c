/* sampler.c — the host sampling chain, in llama.cpp's order: penalties over the recent
 * history, then top-k, top-p and min-p on the untempered distribution, then temperature
 * and a draw from a seeded xoshiro256** stream. Temperature 0 is greedy (argmax, lowest id
 * on ties) after the penalties. Same seed, same inputs: same tokens, on every machine. */
#include "core/text/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"

typedef struct cand {
  int32_t id;
  float logit;
} cand;

struct memra_sampler {
  memra_sampler_params p;
  int32_t n_vocab;
  cand *c;       /* candidates, n_vocab */
  int32_t *hist; /* ring of the last penalty_last_n accepted tokens (all if -1: grows) */
  size_t n_hist, cap_hist, head;
  int32_t *count; /* per id: occurrences in the window */
  uint64_t s[4];  /* xoshiro256** state */
};

memra_sampler_params memra_sampler_defaults(void) {
  memra_sampler_params p = {0};
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.0f;
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.0f;
  p.penalty_last_n = 64;
  p.seed = 0x5EED;
  return p;
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(memra_sampler *s) {
  uint64_t *q = s->s, r = rotl(q[1] * 5, 7) * 9, t = q[1] << 17;
  q[2] ^= q[0], q[3] ^= q[1], q[1] ^= q[2], q[0] ^= q[3], q[2] ^= t, q[3] = rotl(q[3], 45);
  return r;
}

static double next_unit(memra_sampler *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

static void seed_rng(memra_sampler *s) {
  uint64_t x = s->p.seed;
  for (int i = 0; i < 4; i++)
    s->s[i] = splitmix64(&x);
}

memra_status memra_sampler_new(const memra_sampler_params *p, int32_t n_vocab, memra_sampler **out,
                               memra_err *err) {
  *out = NULL;
  if (n_vocab <= 0) return memra_errf(err, MEMRA_E_INVALID, "sampler: n_vocab %d", n_vocab);
  if (!(p->temperature >= 0) || p->top_k < 0 || !(p->top_p > 0 && p->top_p <= 1) ||
      !(p->min_p >= 0 && p->min_p <= 1) || !(p->repeat_penalty > 0) ||
      !isfinite(p->frequency_penalty) || !isfinite(p->presence_penalty) || p->penalty_last_n < -1)
    return memra_errf(err, MEMRA_E_INVALID,
                      "sampler: parameters out of range (temperature >= 0, top_k >= 0, "
                      "0 < top_p <= 1, 0 <= min_p <= 1, repeat_penalty > 0, last_n >= -1)");
  memra_sampler *s = memra_calloc(1, sizeof *s);
  if (!s) return memra_errf(err, MEMRA_E_OOM, "sampler: out of memory");
  s->p = *p;
  s->n_vocab = n_vocab;
  s->c = memra_malloc((size_t)n_vocab * sizeof *s->c);
  s->count = memra_calloc((size_t)n_vocab, sizeof *s->count);
  s->cap_hist = p->penalty_last_n > 0 ? (size_t)p->penalty_last_n : 64;
  s->hist = memra_malloc(s->cap_hist * sizeof *s->hist);
  if (!s->c || !s->count || !s->hist) {
    memra_sampler_free(s);
    return memra_errf(err, MEMRA_E_OOM, "sampler: out of memory for %d tokens", n_vocab);
  }
  seed_rng(s);
  *out = s;
  return MEMRA_OK;
}

void memra_sampler_free(memra_sampler *s) {
  if (!s) return;
  memra_free(s->c);
  memra_free(s->count);
  memra_free(s->hist);
  memra_free(s);
}

void memra_sampler_accept(memra_sampler *s, int32_t id) {
  if (id < 0 || id >= s->n_vocab || s->p.penalty_last_n == 0) return;
  if (s->p.penalty_last_n > 0) {
    if (s->n_hist == s->cap_hist) { /* the window is full: the oldest token leaves */
      s->count[s->hist[s->head]]--;
      s->hist[s->head] = id;
      s->head = (s->head + 1) % s->cap_hist;
    } else {
      s->hist[s->n_hist++] = id;
    }
  } else {
    if (s->n_hist == s->cap_hist) {
      int32_t *h = memra_realloc(s->hist, 2 * s->cap_hist * sizeof *h);
      if (!h) return; /* history stops growing; sampling still works */
      s->hist = h, s->cap_hist *= 2;
    }
    s->hist[s->n_hist++] = id;
  }
  s->count[id]++;
}

void memra_sampler_reset(memra_sampler *s) {
  memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
  s->n_hist = s->head = 0;
  seed_rng(s);
}

static int cand_desc(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Moves the k best candidates (by logit, then lower id: a total order) to the front:
 * quickselect for position k-1, O(n) on average instead of sorting the vocabulary. */
static void select_top(cand *c, size_t n, size_t k) {
  size_t lo = 0, hi = n - 1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    cand piv = c[mid], t;
    c[mid] = c[hi], c[hi] = piv;
    size_t store = lo;
    for (size_t i = lo; i < hi; i++)
      if (cand_desc(&c[i], &piv) < 0) t = c[i], c[i] = c[store], c[store++] = t;
    t = c[store], c[store] = c[hi], c[hi] = t;
    if (store == k - 1) return;
    if (store < k - 1)
      lo = store + 1;
    else
      hi = store - 1;
  }
}

int32_t memra_sampler_sample(memra_sampler *s, float *logits) {
  const memra_sampler_params *p = &s->p;
  int32_t V = s->n_vocab;
  /* Penalties: only tokens in the window change. */
  if (s->n_hist &&
      (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f)) {
    size_t n = s->n_hist;
    for (size_t i = 0; i < n; i++) {
      int32_t id = s->hist[i];
      int32_t c = s->count[id];
      if (c <= 0) continue;
      float *l = &logits[id];
      if (p->repeat_penalty != 1.0f) *l = *l > 0 ? *l / p->repeat_penalty : *l * p->repeat_penalty;
      *l -= (float)c * p->frequency_penalty + p->presence_penalty;
      s->count[id] = -c; /* mark done: a token repeated in the window is penalized once */
    }
    for (size_t i = 0; i < n; i++)
      if (s->count[s->hist[i]] < 0) s->count[s->hist[i]] = -s->count[s->hist[i]];
  }
  if (p->temperature <= 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; i++)
      if (logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
    return best;
  }
  cand *c = s->c;
  size_t n = 0;
  for (int32_t i = 0; i < V; i++)
    if (!isnan(logits[i]) && logits[i] != -INFINITY) c[n].id = i, c[n].logit = logits[i], n++;
  if (n == 0) return 0;
  bool sorted = false;
  if (p->top_k > 0 && (size_t)p->top_k < n) {
    select_top(c, n, (size_t)p->top_k);
    n = (size_t)p->top_k;
  }
  if (p->top_p < 1.0f || p->min_p > 0.0f) {
    qsort(c, n, sizeof *c, cand_desc);
    sorted = true;
  }
  double mx = c[0].logit;
  if (!sorted)
    for (size_t i = 1; i < n; i++)
      mx = c[i].logit > mx ? c[i].logit : mx;
  if (isinf(mx)) { /* +inf dominates every other logit: greedy among the +inf ones */
    int32_t best = -1;
    for (size_t i = 0; i < n; i++)
      if (c[i].logit == (float)mx && (best < 0 || c[i].id < best)) best = c[i].id;
    return best;
  }
  if (p->top_p < 1.0f) {
    /* The smallest prefix (best first) whose probability reaches top_p. */
    double z = 0, cum = 0;
    for (size_t i = 0; i < n; i++)
      z += exp(c[i].logit - mx);
    for (size_t i = 0; i < n; i++) {
      cum += exp(c[i].logit - mx) / z;
      if (cum >= p->top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (p->min_p > 0.0f) {
    /* Keep tokens with p >= min_p * p_max, i.e. logit >= max + log(min_p). */
    double cut = mx + log((double)p->min_p);
    size_t k = 1;
    while (k < n && c[k].logit >= cut)
      k++;
    n = k;
  }
  /* Temperature, then one draw. */
  double inv_t = 1.0 / p->temperature, z = 0;
  for (size_t i = 0; i < n; i++)
    z += exp((c[i].logit - mx) * inv_t);
  double u = next_unit(s) * z, cum = 0;
  for (size_t i = 0; i < n; i++) {
    cum += exp((c[i].logit - mx) * inv_t);
    if (u < cum) return c[i].id;
  }
  return c[n - 1].id;
}

size_t memra_stop_scan(const char *text, size_t len, const char *const *stops, size_t n_stops,
                       bool *stopped) {
  size_t safe = len, first = len;
  *stopped = false;
  for (size_t k = 0; k < n_stops; k++) {
    size_t sl = strlen(stops[k]);
    if (sl == 0) continue;
    for (size_t i = 0; i + sl <= len; i++)
      if (memcmp(text + i, stops[k], sl) == 0) {
        if (i < first) first = i;
        *stopped = true;
        break;
      }
    /* A tail that could still grow into this stop string is held back. */
    for (size_t l = sl - 1 < len ? sl - 1 : len; l > 0; l--)
      if (memcmp(text + len - l, stops[k], l) == 0) {
        if (len - l < safe) safe = len - l;
        break;
      }
  }
  return *stopped ? first : safe;
}
