/* logprob.h — log-probabilities of a logit row: the chosen token's and the N most likely
 * alternatives (ties: lower id first), in double precision before sampling filters. */
#ifndef MEMRA_SERVE_LOGPROB_H
#define MEMRA_SERVE_LOGPROB_H

#include "core/serve/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills rec->logprob for rec->id and rec->top_* (n_top of them, at most
 * MEMRA_SERVE_MAX_TOP). logits is not modified. */
void memra_logprobs_fill(const float *logits, int32_t n_vocab, int32_t n_top, memra_tok_rec *rec);

#ifdef __cplusplus
}
#endif
#endif
