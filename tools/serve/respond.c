#define _GNU_SOURCE
#include "tools/serve/respond.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"

/* cJSON allocates with malloc; callers free with memra_free, so copy across. */
static char *print(cJSON *j) {
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  if (!s) return NULL;
  char *out = memra_strndup(s, strlen(s));
  cJSON_free(s);
  return out;
}

static const char *error_type(int st) {
  switch (st) {
  case 401: return "authentication_error";
  case 404: return "not_found_error";
  case 429: return "rate_limit_error";
  case 503: return "overloaded_error";
  default: return st >= 500 ? "server_error" : "invalid_request_error";
  }
}

char *memra_resp_error(int st, const char *msg) {
  cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddStringToObject(e, "type", error_type(st));
  cJSON_AddNullToObject(e, "param");
  cJSON_AddNumberToObject(e, "code", st);
  return print(root);
}

/* A token's bytes as valid UTF-8 (a byte-level piece can be part of a character). */
static void token_text(const memra_tokenizer *t, int32_t id, char *out, size_t cap, cJSON **bytes) {
  size_t n = 0, len = 0;
  const unsigned char *p = (const unsigned char *)memra_token_piece(t, id, &len);
  if (!p) len = 0;
  if (bytes) *bytes = cJSON_CreateArray();
  for (size_t i = 0; i < len && n + 4 < cap;) {
    if (bytes) cJSON_AddItemToArray(*bytes, cJSON_CreateNumber(p[i]));
    size_t L = p[i] < 0x80         ? 1
               : (p[i] >> 5) == 6  ? 2
               : (p[i] >> 4) == 14 ? 3
               : (p[i] >> 3) == 30 ? 4
                                   : 0;
    bool ok = L && i + L <= len;
    for (size_t k = 1; ok && k < L; ++k)
      ok = (p[i + k] & 0xC0) == 0x80;
    if (ok) {
      for (size_t k = 1; k < L && bytes; ++k)
        cJSON_AddItemToArray(*bytes, cJSON_CreateNumber(p[i + k]));
      memcpy(out + n, p + i, L);
      n += L;
      i += L;
    } else {
      memcpy(out + n, "\xEF\xBF\xBD", 3); /* U+FFFD */
      n += 3;
      i += 1;
    }
  }
  out[n] = 0;
}

static cJSON *logprobs_json(const memra_resp_ctx *rc, const memra_req *r, int32_t k0, int32_t k1) {
  cJSON *lp = cJSON_CreateObject();
  char txt[256];
  if (rc->kind == MEMRA_API_CHAT) {
    cJSON *content = cJSON_AddArrayToObject(lp, "content");
    for (int32_t k = k0; k < k1; ++k) {
      const memra_tok_rec *t = &r->toks[k];
      cJSON *e = cJSON_CreateObject(), *bytes;
      token_text(rc->tok, t->id, txt, sizeof txt, &bytes);
      cJSON_AddStringToObject(e, "token", txt);
      cJSON_AddNumberToObject(e, "logprob", t->logprob);
      cJSON_AddItemToObject(e, "bytes", bytes);
      cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
      for (int32_t j = 0; j < t->n_top; ++j) {
        cJSON *a = cJSON_CreateObject(), *ab;
        token_text(rc->tok, t->top_id[j], txt, sizeof txt, &ab);
        cJSON_AddStringToObject(a, "token", txt);
        cJSON_AddNumberToObject(a, "logprob", t->top_lp[j]);
        cJSON_AddItemToObject(a, "bytes", ab);
        cJSON_AddItemToArray(top, a);
      }
      cJSON_AddItemToArray(content, e);
    }
    return lp;
  }
  cJSON *tokens = cJSON_AddArrayToObject(lp, "tokens"),
        *tlp = cJSON_AddArrayToObject(lp, "token_logprobs"),
        *top = cJSON_AddArrayToObject(lp, "top_logprobs"),
        *off = cJSON_AddArrayToObject(lp, "text_offset");
  for (int32_t k = k0; k < k1; ++k) {
    const memra_tok_rec *t = &r->toks[k];
    token_text(rc->tok, t->id, txt, sizeof txt, NULL);
    cJSON_AddItemToArray(tokens, cJSON_CreateString(txt));
    cJSON_AddItemToArray(tlp, cJSON_CreateNumber(t->logprob));
    cJSON_AddItemToArray(off, cJSON_CreateNumber(t->text_off));
    cJSON *alt = cJSON_CreateObject();
    for (int32_t j = 0; j < t->n_top; ++j) {
      token_text(rc->tok, t->top_id[j], txt, sizeof txt, NULL);
      if (!cJSON_GetObjectItemCaseSensitive(alt, txt))
        cJSON_AddNumberToObject(alt, txt, t->top_lp[j]);
    }
    cJSON_AddItemToArray(top, alt);
  }
  return lp;
}

static void add_usage(cJSON *root, const memra_resp_ctx *rc, const memra_req *r) {
  cJSON *u = cJSON_AddObjectToObject(root, "usage");
  cJSON_AddNumberToObject(u, "prompt_tokens", rc->n_prompt);
  cJSON_AddNumberToObject(u, "completion_tokens", r->n_toks);
  cJSON_AddNumberToObject(u, "total_tokens", rc->n_prompt + r->n_toks);
}

static cJSON *envelope(const memra_resp_ctx *rc, bool chunk, cJSON **choice) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "id", rc->id);
  cJSON_AddStringToObject(root, "object",
                          rc->kind == MEMRA_API_CHAT
                              ? (chunk ? "chat.completion.chunk" : "chat.completion")
                              : "text_completion");
  cJSON_AddNumberToObject(root, "created", (double)rc->created);
  cJSON_AddStringToObject(root, "model", rc->model);
  cJSON_AddNullToObject(root, "system_fingerprint");
  cJSON *choices = cJSON_AddArrayToObject(root, "choices");
  *choice = cJSON_CreateObject();
  cJSON_AddItemToArray(choices, *choice);
  cJSON_AddNumberToObject(*choice, "index", 0);
  return root;
}

static void add_finish(cJSON *choice, memra_finish f) {
  if (f == MEMRA_FINISH_NONE)
    cJSON_AddNullToObject(choice, "finish_reason");
  else
    cJSON_AddStringToObject(choice, "finish_reason", f == MEMRA_FINISH_STOP ? "stop" : "length");
}

static cJSON *string_n(const char *s, size_t n) {
  char *tmp = memra_strndup(s ? s : "", n);
  cJSON *j = cJSON_CreateString(tmp ? tmp : "");
  memra_free(tmp);
  return j;
}

char *memra_resp_final(const memra_resp_ctx *rc, const memra_req *r) {
  cJSON *choice, *root = envelope(rc, false, &choice);
  cJSON *text = string_n(r->text, r->n_text);
  if (rc->kind == MEMRA_API_CHAT) {
    cJSON *msg = cJSON_AddObjectToObject(choice, "message");
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_AddItemToObject(msg, "content", text);
  } else {
    cJSON_AddItemToObject(choice, "text", text);
  }
  if (rc->logprobs)
    cJSON_AddItemToObject(choice, "logprobs", logprobs_json(rc, r, 0, r->n_toks));
  else
    cJSON_AddNullToObject(choice, "logprobs");
  add_finish(choice, r->finish);
  add_usage(root, rc, r);
  return print(root);
}

char *memra_resp_chunk(const memra_resp_ctx *rc, const memra_req *r, size_t t0, size_t t1,
                       int32_t k0, int32_t k1, memra_finish finish, bool first) {
  cJSON *choice, *root = envelope(rc, true, &choice);
  cJSON *text = string_n(r->text + t0, t1 - t0);
  if (rc->kind == MEMRA_API_CHAT) {
    cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
    if (first) cJSON_AddStringToObject(delta, "role", "assistant");
    if (t1 > t0 || first)
      cJSON_AddItemToObject(delta, "content", text);
    else
      cJSON_Delete(text);
  } else {
    cJSON_AddItemToObject(choice, "text", text);
  }
  if (rc->logprobs && k1 > k0)
    cJSON_AddItemToObject(choice, "logprobs", logprobs_json(rc, r, k0, k1));
  else
    cJSON_AddNullToObject(choice, "logprobs");
  add_finish(choice, finish);
  if (finish != MEMRA_FINISH_NONE) add_usage(root, rc, r);
  char *body = print(root);
  if (!body) return NULL;
  size_t n = strlen(body);
  char *ev = memra_malloc(n + 9);
  if (ev) snprintf(ev, n + 9, "data: %s\n\n", body);
  memra_free(body);
  return ev;
}

char *memra_resp_models(const char *model, long long created) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "object", "list");
  cJSON *data = cJSON_AddArrayToObject(root, "data"), *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "id", model);
  cJSON_AddStringToObject(m, "object", "model");
  cJSON_AddNumberToObject(m, "created", (double)created);
  cJSON_AddStringToObject(m, "owned_by", "memra");
  cJSON_AddItemToArray(data, m);
  return print(root);
}
