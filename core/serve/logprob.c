#include "core/serve/logprob.h"

#include <math.h>

void memra_logprobs_fill(const float *logits, int32_t n_vocab, int32_t n_top, memra_tok_rec *rec) {
  double mx = -INFINITY;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (logits[i] > mx) mx = logits[i];
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i)
    sum += exp((double)logits[i] - mx);
  const double lse = mx + log(sum);
  rec->logprob = (float)((double)logits[rec->id] - lse);
  if (n_top > MEMRA_SERVE_MAX_TOP) n_top = MEMRA_SERVE_MAX_TOP;
  if (n_top > n_vocab) n_top = n_vocab;
  if (n_top < 0) n_top = 0;
  /* Insertion into a short sorted list: N <= 20, one pass over the vocabulary. */
  int32_t k = 0;
  for (int32_t i = 0; i < n_vocab && n_top; ++i) {
    float v = logits[i];
    if (k == n_top && v <= logits[rec->top_id[k - 1]]) continue;
    int32_t j = k < n_top ? k++ : k - 1;
    while (j > 0 && logits[rec->top_id[j - 1]] < v) {
      rec->top_id[j] = rec->top_id[j - 1];
      --j;
    }
    rec->top_id[j] = i;
  }
  rec->n_top = k;
  for (int32_t j = 0; j < k; ++j)
    rec->top_lp[j] = (float)((double)logits[rec->top_id[j]] - lse);
}
