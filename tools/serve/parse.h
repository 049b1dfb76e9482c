/* parse.h — the JSON body of POST /v1/completions and /v1/chat/completions, validated
 * into generation parameters. Every rejection is one line naming the field, for a 400. */
#ifndef MEMRA_SERVE_PARSE_H
#define MEMRA_SERVE_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/serve/types.h"
#include "core/text/chat.h"

typedef enum memra_api_kind { MEMRA_API_COMPLETION = 0, MEMRA_API_CHAT = 1 } memra_api_kind;

typedef struct memra_api_req {
  memra_api_kind kind;
  bool stream;
  bool max_tokens_set; /* else the server picks: 16 (completions) or the context left */
  bool logprobs;       /* chat: logprobs true; completions: logprobs given */
  memra_gen_params gp; /* n_logprobs -1 when logprobs are off */
  double timeout_s;    /* memra extension "timeout": 0 when absent */
  /* completions: a text prompt or token ids */
  const char *prompt; /* points into root */
  size_t prompt_len;
  int32_t *prompt_ids; /* memra_malloc'd; NULL for a text prompt */
  int32_t n_prompt_ids;
  /* chat */
  memra_chat_msg *msgs; /* memra_malloc'd; strings point into root */
  size_t n_msgs;
  void *root; /* the cJSON tree the strings live in */
} memra_api_req;

/* Parses and validates body. n_vocab bounds token ids. MEMRA_E_INVALID with a message
 * on any problem (nothing left allocated, *out zeroed); on success free with
 * memra_api_req_free (which a zeroed *out also takes). */
memra_status memra_api_parse(memra_api_kind kind, const char *body, size_t n, int32_t n_vocab,
                             memra_api_req *out, memra_err *err);
void memra_api_req_free(memra_api_req *r);

#endif
