#define _GNU_SOURCE
#include "tools/serve/parse.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/alloc.h"

/* Fields accepted by each endpoint; anything else is an error, so a typo never passes
 * silently. Fields here that memra does not implement are refused by value below. */
static const char *const COMMON[] = {"model",
                                     "stream",
                                     "stream_options",
                                     "max_tokens",
                                     "temperature",
                                     "top_p",
                                     "top_k",
                                     "min_p",
                                     "seed",
                                     "stop",
                                     "n",
                                     "presence_penalty",
                                     "frequency_penalty",
                                     "user",
                                     "logit_bias",
                                     "timeout",
                                     NULL};
static const char *const COMPLETION_ONLY[] = {"prompt",  "logprobs", "echo",
                                              "best_of", "suffix",   NULL};
static const char *const CHAT_ONLY[] = {"messages", "logprobs", "top_logprobs",
                                        "max_completion_tokens", NULL};

static bool in_list(const char *const *l, const char *k) {
  for (; *l; ++l)
    if (!strcmp(*l, k)) return true;
  return false;
}

/* A name from the body as the error message shows it: printable ASCII as is, any other byte as
 * \xNN, at most 48 bytes of it, so the message stays one line of valid text. */
typedef struct shown_name {
  char s[48 * 4 + 4];
} shown_name;

static shown_name show_name(const char *name) {
  shown_name o;
  size_t w = 0;
  for (size_t i = 0; name[i] && i < 48; ++i) {
    const unsigned char c = (unsigned char)name[i];
    if (c >= 0x20 && c < 0x7f)
      o.s[w++] = (char)c;
    else
      w += (size_t)snprintf(o.s + w, sizeof o.s - w, "\\x%02x", c);
  }
  if (name[0] && strlen(name) > 48) o.s[w++] = '.', o.s[w++] = '.', o.s[w++] = '.';
  o.s[w] = 0;
  return o;
}

static memra_status bad(memra_err *err, const char *fmt, const char *field) {
  return memra_errf(err, MEMRA_E_INVALID, fmt, field);
}

/* A JSON number that is an integer in [lo, hi]. */
static memra_status get_int(const cJSON *root, const char *k, double lo, double hi, bool *set,
                            double *v, memra_err *err) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, k);
  *set = false;
  if (!j || cJSON_IsNull(j)) return MEMRA_OK;
  if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || j->valuedouble != floor(j->valuedouble))
    return bad(err, "'%s' must be an integer", k);
  if (j->valuedouble < lo || j->valuedouble > hi)
    return memra_errf(err, MEMRA_E_INVALID, "'%s' must be between %.0f and %.0f, got %.0f", k, lo,
                      hi, j->valuedouble);
  *set = true;
  *v = j->valuedouble;
  return MEMRA_OK;
}

static memra_status get_num(const cJSON *root, const char *k, double lo, double hi, bool lo_open,
                            float *dst, memra_err *err) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, k);
  if (!j || cJSON_IsNull(j)) return MEMRA_OK;
  if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble)) return bad(err, "'%s' must be a number", k);
  double v = j->valuedouble;
  if (v > hi || (lo_open ? v <= lo : v < lo))
    return memra_errf(err, MEMRA_E_INVALID, "'%s' must be in %s%g, %g], got %g", k,
                      lo_open ? "(" : "[", lo, hi, v);
  *dst = (float)v;
  return MEMRA_OK;
}

static memra_status get_bool(const cJSON *root, const char *k, bool *dst, memra_err *err) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, k);
  if (!j || cJSON_IsNull(j)) return MEMRA_OK;
  if (!cJSON_IsBool(j)) return bad(err, "'%s' must be a boolean", k);
  *dst = cJSON_IsTrue(j);
  return MEMRA_OK;
}

static memra_status parse_stop(const cJSON *root, memra_gen_params *gp, memra_err *err) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, "stop");
  if (!j || cJSON_IsNull(j)) return MEMRA_OK;
  const cJSON *one = cJSON_IsString(j) ? j : NULL;
  if (!one && !cJSON_IsArray(j))
    return bad(err, "'%s' must be a string or an array of strings", "stop");
  int n = one ? 1 : cJSON_GetArraySize(j);
  if (n > MEMRA_SERVE_MAX_STOP)
    return memra_errf(err, MEMRA_E_INVALID, "'stop' has %d strings, at most %d are allowed", n,
                      MEMRA_SERVE_MAX_STOP);
  for (int i = 0; i < n; ++i) {
    const cJSON *s = one ? one : cJSON_GetArrayItem(j, i);
    if (!cJSON_IsString(s)) return bad(err, "'%s' must be a string or an array of strings", "stop");
    size_t L = strlen(s->valuestring);
    if (L == 0) return bad(err, "'%s' strings must not be empty", "stop");
    if (L >= MEMRA_SERVE_MAX_STOP_LEN)
      return memra_errf(err, MEMRA_E_INVALID, "'stop' strings must be shorter than %d bytes",
                        MEMRA_SERVE_MAX_STOP_LEN);
    memcpy(gp->stop[gp->n_stop++], s->valuestring, L + 1);
  }
  return MEMRA_OK;
}

static memra_status parse_prompt(const cJSON *root, int32_t n_vocab, memra_api_req *r,
                                 memra_err *err) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
  if (!p || cJSON_IsNull(p)) return bad(err, "'%s' is required", "prompt");
  if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
    p = cJSON_GetArrayItem(p, 0); /* ["text"]: one prompt */
  if (cJSON_IsString(p)) {
    r->prompt = p->valuestring;
    r->prompt_len = strlen(p->valuestring);
    return MEMRA_OK;
  }
  if (!cJSON_IsArray(p))
    return bad(err, "'%s' must be a string or an array of token ids", "prompt");
  int n = cJSON_GetArraySize(p);
  if (n == 0) return bad(err, "'%s' must not be empty", "prompt");
  if (cJSON_IsString(cJSON_GetArrayItem(p, 0)) || cJSON_IsArray(cJSON_GetArrayItem(p, 0)))
    return bad(err, "'%s': only one prompt per request is supported", "prompt");
  r->prompt_ids = memra_malloc(sizeof(int32_t) * (size_t)n);
  if (!r->prompt_ids) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  r->n_prompt_ids = n;
  int i = 0;
  for (const cJSON *e = p->child; e; e = e->next, ++i) {
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble))
      return memra_errf(err, MEMRA_E_INVALID, "'prompt'[%d] must be a token id (an integer)", i);
    if (e->valuedouble < 0 || e->valuedouble >= n_vocab)
      return memra_errf(err, MEMRA_E_INVALID, "'prompt'[%d]: token id %.0f out of range 0..%d", i,
                        e->valuedouble, n_vocab - 1);
    r->prompt_ids[i] = (int32_t)e->valuedouble;
  }
  return MEMRA_OK;
}

static memra_status parse_messages(const cJSON *root, memra_api_req *r, memra_err *err) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "messages");
  if (!m || cJSON_IsNull(m)) return bad(err, "'%s' is required", "messages");
  if (!cJSON_IsArray(m)) return bad(err, "'%s' must be an array", "messages");
  int n = cJSON_GetArraySize(m);
  if (n == 0) return bad(err, "'%s' must not be empty", "messages");
  r->msgs = memra_calloc((size_t)n, sizeof *r->msgs);
  if (!r->msgs) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  int i = 0;
  for (const cJSON *e = m->child; e; e = e->next, ++i) {
    if (!cJSON_IsObject(e))
      return memra_errf(err, MEMRA_E_INVALID, "'messages'[%d] must be an object", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
    if (!cJSON_IsString(role))
      return memra_errf(err, MEMRA_E_INVALID, "'messages'[%d].role must be a string", i);
    const char *rs = role->valuestring;
    if (!strcmp(rs, "developer")) rs = "system"; /* the newer name of the same role */
    if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant"))
      return memra_errf(err, MEMRA_E_INVALID,
                        "'messages'[%d].role '%s': expected system, developer, user or "
                        "assistant",
                        i, show_name(role->valuestring).s);
    if (!cJSON_IsString(content))
      return memra_errf(err, MEMRA_E_INVALID, "'messages'[%d].content must be a string", i);
    for (const cJSON *f = e->child; f; f = f->next)
      if (strcmp(f->string, "role") && strcmp(f->string, "content") && strcmp(f->string, "name"))
        return memra_errf(err, MEMRA_E_INVALID, "'messages'[%d]: unknown field '%s'", i,
                          show_name(f->string).s);
    r->msgs[i].role = rs;
    r->msgs[i].content = content->valuestring;
  }
  r->n_msgs = (size_t)n;
  return MEMRA_OK;
}

/* Fields memra knows but does not implement, refused unless they carry their default. */
static memra_status refuse_unsupported(const cJSON *root, memra_api_kind kind, memra_err *err) {
  const cJSON *j;
  bool set;
  double v;
  memra_status st = get_int(root, "n", 1, 1, &set, &v, err);
  if (st) return memra_errf(err, MEMRA_E_INVALID, "'n': only n=1 is supported");
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "logit_bias")) && !cJSON_IsNull(j) &&
      !(cJSON_IsObject(j) && !j->child))
    return bad(err, "'%s' is not supported", "logit_bias");
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "user")) && !cJSON_IsNull(j) &&
      !cJSON_IsString(j))
    return bad(err, "'%s' must be a string", "user");
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "stream_options")) && !cJSON_IsNull(j) &&
      !cJSON_IsObject(j))
    return bad(err, "'%s' must be an object", "stream_options");
  if (kind != MEMRA_API_COMPLETION) return MEMRA_OK;
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "echo")) && !cJSON_IsNull(j) && !cJSON_IsFalse(j))
    return bad(err, "'%s' is not supported", "echo");
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "suffix")) && !cJSON_IsNull(j))
    return bad(err, "'%s' is not supported", "suffix");
  if (get_int(root, "best_of", 1, 1, &set, &v, err))
    return memra_errf(err, MEMRA_E_INVALID, "'best_of': only best_of=1 is supported");
  return MEMRA_OK;
}

static memra_status parse_fields(const cJSON *root, memra_api_kind kind, int32_t n_vocab,
                                 memra_api_req *r, memra_err *err) {
  for (const cJSON *f = root->child; f; f = f->next)
    if (!in_list(COMMON, f->string) &&
        !in_list(kind == MEMRA_API_CHAT ? CHAT_ONLY : COMPLETION_ONLY, f->string))
      return memra_errf(err, MEMRA_E_INVALID, "unknown field '%s'", show_name(f->string).s);
  memra_status st;
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (model && !cJSON_IsNull(model) && !cJSON_IsString(model))
    return bad(err, "'%s' must be a string", "model");
  if ((st = refuse_unsupported(root, kind, err))) return st;
  if ((st = get_bool(root, "stream", &r->stream, err))) return st;
  memra_gen_params *gp = &r->gp;
  bool set;
  double v;
  const char *mt = "max_tokens";
  if (kind == MEMRA_API_CHAT && cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens"))
    mt = "max_completion_tokens";
  if ((st = get_int(root, mt, 1, 1 << 24, &set, &v, err))) return st;
  if (set) {
    r->max_tokens_set = true;
    gp->max_tokens = (int32_t)v;
  }
  if ((st = get_num(root, "temperature", 0, 2, false, &gp->sp.temperature, err)) ||
      (st = get_num(root, "top_p", 0, 1, true, &gp->sp.top_p, err)) ||
      (st = get_num(root, "min_p", 0, 1, false, &gp->sp.min_p, err)) ||
      (st = get_num(root, "presence_penalty", -2, 2, false, &gp->sp.presence_penalty, err)) ||
      (st = get_num(root, "frequency_penalty", -2, 2, false, &gp->sp.frequency_penalty, err)))
    return st;
  if ((st = get_int(root, "top_k", 0, 1 << 24, &set, &v, err))) return st;
  if (set) gp->sp.top_k = (int32_t)v;
  if ((st = get_int(root, "seed", -9007199254740991.0, 9007199254740991.0, &set, &v, err)))
    return st;
  if (set) gp->sp.seed = (uint64_t)(int64_t)v;
  float timeout = 0;
  if ((st = get_num(root, "timeout", 0, 86400, true, &timeout, err))) return st;
  r->timeout_s = timeout;
  if ((st = parse_stop(root, gp, err))) return st;
  if (kind == MEMRA_API_COMPLETION) {
    if ((st = get_int(root, "logprobs", 0, MEMRA_SERVE_MAX_TOP, &set, &v, err))) return st;
    if (set) {
      r->logprobs = true;
      gp->n_logprobs = (int32_t)v;
    }
    return parse_prompt(root, n_vocab, r, err);
  }
  if ((st = get_bool(root, "logprobs", &r->logprobs, err))) return st;
  if ((st = get_int(root, "top_logprobs", 0, MEMRA_SERVE_MAX_TOP, &set, &v, err))) return st;
  if (set && !r->logprobs) return bad(err, "'%s' needs 'logprobs': true", "top_logprobs");
  if (r->logprobs) gp->n_logprobs = set ? (int32_t)v : 0;
  return parse_messages(root, r, err);
}

static memra_status api_parse(memra_api_kind kind, const char *body, size_t n, int32_t n_vocab,
                              memra_api_req *r, memra_err *err) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->gp.n_logprobs = -1;
  r->gp.sp = memra_sampler_defaults();
  r->gp.sp.temperature = 1.0f; /* OpenAI's default */
  r->gp.sp.top_k = 0;
  r->gp.sp.top_p = 1.0f;
  r->gp.sp.min_p = 0.0f;
  r->gp.sp.repeat_penalty = 1.0f;
  r->gp.sp.penalty_last_n = -1;
  /* no seed: a fresh one per request */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  r->gp.sp.seed = (uint64_t)ts.tv_nsec * 6364136223846793005ull ^ (uint64_t)ts.tv_sec;
  if (n == 0) return memra_errf(err, MEMRA_E_INVALID, "the request body is empty");
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(body, n, &end, false);
  if (!root) {
    size_t at = end && end >= body && end <= body + n ? (size_t)(end - body) : 0;
    return memra_errf(err, MEMRA_E_INVALID, "invalid JSON at byte %zu", at);
  }
  r->root = root;
  size_t used = (size_t)(end - body);
  while (used < n && strchr(" \t\r\n", body[used]))
    ++used;
  if (used < n)
    return memra_errf(err, MEMRA_E_INVALID, "invalid JSON: trailing bytes at %zu", used);
  if (!cJSON_IsObject(root))
    return memra_errf(err, MEMRA_E_INVALID, "the request body must be a JSON object");
  return parse_fields(root, kind, n_vocab, r, err);
}

/* A rejected body leaves nothing allocated (r zeroed), as parse.h promises. */
memra_status memra_api_parse(memra_api_kind kind, const char *body, size_t n, int32_t n_vocab,
                             memra_api_req *r, memra_err *err) {
  const memra_status st = api_parse(kind, body, n, n_vocab, r, err);
  if (st != MEMRA_OK) memra_api_req_free(r);
  return st;
}

void memra_api_req_free(memra_api_req *r) {
  memra_free(r->prompt_ids);
  memra_free(r->msgs);
  cJSON_Delete(r->root);
  memset(r, 0, sizeof *r);
}
