/* types.h — what a generation request asks for and what it produces per token; plain
 * data shared by the scheduler, the HTTP layer and tests (C++ included). */
#ifndef MEMRA_SERVE_TYPES_H
#define MEMRA_SERVE_TYPES_H

#include <stdint.h>

#include "core/text/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MEMRA_SERVE_MAX_STOP = 4, MEMRA_SERVE_MAX_STOP_LEN = 256, MEMRA_SERVE_MAX_TOP = 20 };

typedef enum memra_finish {
  MEMRA_FINISH_NONE = 0,
  MEMRA_FINISH_STOP,      /* end-of-generation token or a stop string */
  MEMRA_FINISH_LENGTH,    /* max_tokens or the context */
  MEMRA_FINISH_CANCELLED, /* the client went away or the server shut down */
  MEMRA_FINISH_DEADLINE,  /* the per-request deadline passed */
  MEMRA_FINISH_ERROR,     /* the backend failed: err holds the line */
} memra_finish;

const char *memra_finish_str(memra_finish f); /* "stop", "length", ... */

typedef struct memra_gen_params {
  int32_t max_tokens;
  memra_sampler_params sp;
  char stop[MEMRA_SERVE_MAX_STOP][MEMRA_SERVE_MAX_STOP_LEN];
  int32_t n_stop;
  int32_t n_logprobs; /* -1: no logprobs; else the chosen token's and N alternatives */
  double deadline;    /* monotonic seconds (memra_serve_now); 0: none */
} memra_gen_params;

/* One generated token: its log-probability under the model (before sampling filters)
 * and the top alternatives, when logprobs were asked for. */
typedef struct memra_tok_rec {
  int32_t id;
  float logprob;
  int32_t n_top;
  int32_t top_id[MEMRA_SERVE_MAX_TOP];
  float top_lp[MEMRA_SERVE_MAX_TOP];
  uint32_t text_off; /* where the token's text starts in the generated text */
} memra_tok_rec;

#ifdef __cplusplus
}
#endif
#endif
