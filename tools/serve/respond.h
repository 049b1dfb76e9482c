/* respond.h — response bodies in the OpenAI formats: errors, whole completions and the
 * server-sent-event chunks of a stream, each with usage. Strings from memra_malloc. */
#ifndef MEMRA_SERVE_RESPOND_H
#define MEMRA_SERVE_RESPOND_H

#include <stdint.h>

#include "core/serve/req.h"
#include "core/text/tokenizer.h"
#include "tools/serve/parse.h"

typedef struct memra_resp_ctx {
  memra_api_kind kind;
  char id[48];
  long long created;
  const char *model;
  const memra_tokenizer *tok;
  int32_t n_prompt;
  bool logprobs;
} memra_resp_ctx;

/* {"error": {"message", "type", "param", "code"}}; type from the HTTP status. */
char *memra_resp_error(int http_status, const char *msg);
/* The whole response of a finished request (r->mu held or r done). */
char *memra_resp_final(const memra_resp_ctx *rc, const memra_req *r);
/* One "data: {...}\n\n" event carrying text [t0, t1) and tokens [k0, k1); finish NONE for
 * a middle chunk; the final chunk carries finish_reason and usage. first: chat's role. */
char *memra_resp_chunk(const memra_resp_ctx *rc, const memra_req *r, size_t t0, size_t t1,
                       int32_t k0, int32_t k1, memra_finish finish, bool first);
/* GET /v1/models */
char *memra_resp_models(const char *model, long long created);

#endif
