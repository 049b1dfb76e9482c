/* sampler.h — the host sampling chain: penalties, top-k, top-p, min-p, temperature. */
#ifndef MEMRA_SAMPLER_H
#define MEMRA_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_sampler_params {
  float temperature;       /* 0: greedy (argmax, lowest id wins ties) */
  int32_t top_k;           /* 0: off */
  float top_p;             /* 1: off */
  float min_p;             /* 0: off */
  float repeat_penalty;    /* 1: off (llama.cpp semantics) */
  float frequency_penalty; /* 0: off (OpenAI semantics) */
  float presence_penalty;  /* 0: off */
  int32_t penalty_last_n;  /* tokens of history the penalties look at; -1 all */
  uint64_t seed;
} memra_sampler_params;

memra_sampler_params memra_sampler_defaults(void);

typedef struct memra_sampler memra_sampler;

memra_status memra_sampler_new(const memra_sampler_params *p, int32_t n_vocab, memra_sampler **out,
                               memra_err *err);
void memra_sampler_free(memra_sampler *s);
/* Records a token as part of the history the penalties see (prompt and generated). */
void memra_sampler_accept(memra_sampler *s, int32_t id);
void memra_sampler_reset(memra_sampler *s);
/* Picks a token from logits [n_vocab] (logits may be modified in place). */
int32_t memra_sampler_sample(memra_sampler *s, float *logits);

/* Stop strings over streamed text: the number of bytes of text[0..len) that are safe to
 * emit now (a tail that may still become a stop string is held back); if a stop string
 * occurs, *stopped is set and the result is the offset where the first one starts. */
size_t memra_stop_scan(const char *text, size_t len, const char *const *stops, size_t n_stops,
                       bool *stopped);

#ifdef __cplusplus
}
#endif
#endif
