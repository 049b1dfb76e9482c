/* chat.c — chat templates by family. The template text is recognized (by the markers each
 * family's Jinja uses), never interpreted; each family's rendering below reproduces the
 * reference templates byte for byte (tests/text/chat_test.cc against jinja2):
 *   ChatML    <|im_start|>: plain; SmolLM/Qwen2.5 default system prompt (the literal in the
 *             template); Qwen3 (<think> handling of assistant turns after the last query)
 *   Llama 3   <|start_header_id|>: 3.0; 3.1 (always a system header with the knowledge and
 *             today dates)
 *   Llama 2   [INST] + <<SYS>>;  Mistral  [INST]: v0.1/v0.2 (no system role); v0.3 (the
 *             system text opens the last user turn; tool calls not supported)
 *   Gemma     <start_of_turn>: 1/2 (no system role); 3 (system text before the first turn) */
#include "core/text/chat.h"

#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/text/utf8.h"

typedef struct sb {
  char *p;
  size_t n, cap;
  bool oom;
} sb;

static void put(sb *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *p = memra_realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}
static void puts_(sb *b, const char *s) { put(b, s, s ? strlen(s) : 0); }

/* Python's str.isspace() for one code point (what Jinja's trim and str.strip() remove). */
static bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

/* s[*a..*e) with Python whitespace removed at the chosen ends. */
static void trim(const char *s, size_t *a, size_t *e, bool left, bool right) {
  const uint8_t *u = (const uint8_t *)s;
  while (left && *a < *e) {
    uint32_t c;
    size_t l = memra_utf8_valid_len(u + *a, *e - *a, &c);
    if (!l || !py_space(c)) break;
    *a += l;
  }
  while (right && *a < *e) {
    size_t k = *e - 1;
    while (k > *a && (u[k] & 0xC0) == 0x80)
      k--;
    uint32_t c;
    size_t l = memra_utf8_valid_len(u + k, *e - k, &c);
    if (l != *e - k || !py_space(c)) break;
    *e = k;
  }
}

static void put_trim(sb *b, const char *s) {
  size_t a = 0, e = s ? strlen(s) : 0;
  trim(s, &a, &e, true, true);
  put(b, s + a, e - a);
}

static bool is(const char *role, const char *r) { return role && strcmp(role, r) == 0; }

/* Jinja's raise_exception in the alternation check of Llama 2, Mistral and Gemma. */
static memra_status alternate(const memra_chat_msg *m, size_t n, memra_err *err) {
  for (size_t i = 0; i < n; i++)
    if (is(m[i].role, "user") != (i % 2 == 0))
      return memra_errf(err, MEMRA_E_INVALID,
                        "chat: message %zu is '%s': this template needs "
                        "user/assistant/user/assistant/... after the system message",
                        i, m[i].role ? m[i].role : "(null)");
  return MEMRA_OK;
}

/* The Jinja string literal starting at q (after its opening quote), unescaped into b; or
 * just its end if b is NULL. Returns the pointer past the closing quote, NULL if none. */
static const char *literal(const char *q, char quote, sb *b) {
  for (; *q && *q != quote; q++) {
    char c = *q;
    if (c == '\\' && q[1]) {
      q++;
      c = *q == 'n' ? '\n' : *q == 't' ? '\t' : *q == 'r' ? '\r' : *q;
    }
    if (b) put(b, &c, 1);
  }
  return *q ? q + 1 : NULL;
}

/* SmolLM / Qwen2.5: a literal '<|im_start|>system\n...<|im_end|>\n' in the template is the
 * system turn used when the conversation has none. Writes its text to b; false if none. */
static bool default_system(const char *tmpl, sb *b) {
  for (const char *p = tmpl; (p = strstr(p, "<|im_start|>system")) != NULL; p++) {
    if (p == tmpl) continue;
    char quote = p[-1];
    if (quote != '\'' && quote != '"') continue;
    sb lit = {0};
    if (!literal(p, quote, &lit) || lit.oom) {
      memra_free(lit.p);
      continue;
    }
    const char *head = "<|im_start|>system\n";
    size_t hl = strlen(head);
    const char *end = lit.p ? strstr(lit.p, "<|im_end|>") : NULL;
    bool ok = lit.n > hl && strncmp(lit.p, head, hl) == 0 && end && end > lit.p + hl;
    if (ok) put(b, lit.p + hl, (size_t)(end - lit.p) - hl);
    memra_free(lit.p);
    if (ok) return true;
  }
  return false;
}

static void chatml_turn(sb *b, const char *role, const char *content, size_t len) {
  puts_(b, "<|im_start|>");
  puts_(b, role);
  puts_(b, "\n");
  put(b, content, len);
  puts_(b, "<|im_end|>\n");
}

static bool is_tool_response(const char *s) {
  size_t n = strlen(s), a = strlen("<tool_response>"), z = strlen("</tool_response>");
  return n >= a && n >= z && memcmp(s, "<tool_response>", a) == 0 &&
         memcmp(s + n - z, "</tool_response>", z) == 0;
}

/* The last occurrence of needle in s[0..n). */
static const char *last_of(const char *s, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
    if (memcmp(s + i, needle, k) == 0) return s + i;
  return NULL;
}

static void render_qwen3(sb *b, const memra_chat_msg *m, size_t n, bool gen) {
  if (n && is(m[0].role, "system")) chatml_turn(b, "system", m[0].content, strlen(m[0].content));
  size_t last_query = n ? n - 1 : 0;
  for (size_t k = n; k-- > 0;)
    if (is(m[k].role, "user") && !is_tool_response(m[k].content)) {
      last_query = k;
      break;
    }
  for (size_t i = 0; i < n; i++) {
    const char *c = m[i].content;
    size_t cl = strlen(c);
    if (is(m[i].role, "user") || (is(m[i].role, "system") && i > 0)) {
      chatml_turn(b, m[i].role, c, cl);
    } else if (is(m[i].role, "assistant")) {
      /* Reasoning inside <think>...</think> is split off the content. */
      size_t ca = 0, ce = cl, ra = 0, re = 0;
      const char *close = strstr(c, "</think>");
      if (close) {
        const char *lastc = last_of(c, cl, "</think>");
        ca = (size_t)(lastc - c) + strlen("</think>");
        while (ca < ce && c[ca] == '\n')
          ca++;
        re = (size_t)(close - c);
        while (re > 0 && c[re - 1] == '\n')
          re--;
        const char *open = last_of(c, re, "<think>");
        ra = open ? (size_t)(open - c) + strlen("<think>") : 0;
        while (ra < re && c[ra] == '\n')
          ra++;
      }
      puts_(b, "<|im_start|>assistant\n");
      if (i > last_query && (i + 1 == n || re > ra)) {
        while (ra < re && c[ra] == '\n')
          ra++;
        while (re > ra && c[re - 1] == '\n')
          re--;
        puts_(b, "<think>\n");
        put(b, c + ra, re - ra);
        puts_(b, "\n</think>\n\n");
        while (ca < ce && c[ca] == '\n')
          ca++;
      }
      put(b, c + ca, ce - ca);
      puts_(b, "<|im_end|>\n");
    }
  }
  if (gen) puts_(b, "<|im_start|>assistant\n");
}

static void render_chatml(sb *b, const char *tmpl, const memra_chat_msg *m, size_t n, bool gen) {
  if (n && !is(m[0].role, "system")) {
    sb sys = {0};
    if (default_system(tmpl, &sys) && !sys.oom) chatml_turn(b, "system", sys.p, sys.n);
    b->oom |= sys.oom;
    memra_free(sys.p);
  }
  for (size_t i = 0; i < n; i++)
    chatml_turn(b, m[i].role, m[i].content, strlen(m[i].content));
  if (gen) puts_(b, "<|im_start|>assistant\n");
}

static void llama3_turn(sb *b, const char *role, const char *content) {
  puts_(b, "<|start_header_id|>");
  puts_(b, role);
  puts_(b, "<|end_header_id|>\n\n");
  put_trim(b, content);
  puts_(b, "<|eot_id|>");
}

static void render_llama3(sb *b, const char *tmpl, const memra_chat_msg *m, size_t n, bool gen,
                          const char *bos) {
  if (strstr(tmpl, "Cutting Knowledge Date")) {
    /* 3.1: the system header always comes, with the dates; date_string's default is the
     * literal the template sets. */
    puts_(b, bos);
    puts_(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    puts_(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    const char *d = strstr(tmpl, "set date_string = ");
    sb date = {0};
    if (d && (d[18] == '"' || d[18] == '\'')) literal(d + 19, d[18], &date);
    put(b, date.n ? date.p : "26 Jul 2024", date.n ? date.n : 11);
    memra_free(date.p);
    puts_(b, "\n\n");
    size_t first = 0;
    if (n && is(m[0].role, "system")) put_trim(b, m[0].content), first = 1;
    puts_(b, "<|eot_id|>");
    for (size_t i = first; i < n; i++)
      llama3_turn(b, m[i].role, m[i].content);
  } else {
    for (size_t i = 0; i < n; i++) {
      if (i == 0) puts_(b, bos);
      llama3_turn(b, m[i].role, m[i].content);
    }
  }
  if (gen) puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static memra_status render_llama2(sb *b, const memra_chat_msg *m, size_t n, const char *bos,
                                  const char *eos, memra_err *err) {
  const char *sys = NULL;
  if (n && is(m[0].role, "system")) sys = m[0].content, m++, n--;
  memra_status st = alternate(m, n, err);
  if (st) return st;
  for (size_t i = 0; i < n; i++) {
    sb c = {0};
    if (i == 0 && sys) {
      puts_(&c, "<<SYS>>\n");
      puts_(&c, sys);
      puts_(&c, "\n<</SYS>>\n\n");
    }
    puts_(&c, m[i].content);
    if (c.oom) {
      memra_free(c.p);
      b->oom = true;
      return MEMRA_OK;
    }
    if (is(m[i].role, "user")) {
      puts_(b, bos);
      puts_(b, "[INST] ");
      put_trim(b, c.p ? c.p : "");
      puts_(b, " [/INST]");
    } else if (is(m[i].role, "assistant")) {
      puts_(b, " ");
      put_trim(b, c.p ? c.p : "");
      puts_(b, " ");
      puts_(b, eos);
    }
    memra_free(c.p);
  }
  return MEMRA_OK;
}

static memra_status render_mistral(sb *b, const memra_chat_msg *m, size_t n, const char *bos,
                                   const char *eos, memra_err *err) {
  memra_status st = alternate(m, n, err);
  if (st) return st;
  puts_(b, bos);
  for (size_t i = 0; i < n; i++) {
    if (is(m[i].role, "user")) {
      puts_(b, "[INST] ");
      puts_(b, m[i].content);
      puts_(b, " [/INST]");
    } else if (is(m[i].role, "assistant")) {
      puts_(b, m[i].content);
      puts_(b, eos);
    } else {
      return memra_errf(err, MEMRA_E_INVALID,
                        "chat: this Mistral template supports only user and assistant roles");
    }
  }
  return MEMRA_OK;
}

/* Mistral v0.3 style: the system message joins the LAST user turn; "[/INST]" unspaced. */
static memra_status render_mistral_v3(sb *b, const memra_chat_msg *m, size_t n, const char *bos,
                                      const char *eos, memra_err *err) {
  const char *sys = NULL;
  if (n && is(m[0].role, "system")) sys = m[0].content, m++, n--;
  memra_status st = alternate(m, n, err);
  if (st) return st;
  puts_(b, bos);
  for (size_t i = 0; i < n; i++) {
    if (is(m[i].role, "user")) {
      puts_(b, "[INST] ");
      if (sys && i + 1 == n) {
        puts_(b, sys);
        puts_(b, "\n\n");
      }
      puts_(b, m[i].content);
      puts_(b, "[/INST]");
    } else if (is(m[i].role, "assistant")) {
      puts_(b, " ");
      put_trim(b, m[i].content);
      puts_(b, eos);
    } else {
      return memra_errf(err, MEMRA_E_INVALID,
                        "chat: this Mistral template supports only user and assistant roles "
                        "after an optional system message");
    }
  }
  return MEMRA_OK;
}

static memra_status render_gemma(sb *b, const char *tmpl, const memra_chat_msg *m, size_t n,
                                 bool gen, const char *bos, memra_err *err) {
  const char *prefix = NULL;
  if (n && is(m[0].role, "system")) {
    if (!strstr(tmpl, "first_user_prefix"))
      return memra_errf(err, MEMRA_E_INVALID, "chat: this Gemma template has no system role");
    prefix = m[0].content, m++, n--;
  }
  memra_status st = alternate(m, n, err);
  if (st) return st;
  puts_(b, bos);
  for (size_t i = 0; i < n; i++) {
    puts_(b, "<start_of_turn>");
    puts_(b, is(m[i].role, "assistant") ? "model" : m[i].role);
    puts_(b, "\n");
    if (i == 0 && prefix) {
      puts_(b, prefix);
      puts_(b, "\n\n");
    }
    put_trim(b, m[i].content);
    puts_(b, "<end_of_turn>\n");
  }
  if (gen) puts_(b, "<start_of_turn>model\n");
  return MEMRA_OK;
}

memra_status memra_chat_render(const char *tmpl, const memra_chat_msg *msgs, size_t n_msgs,
                               bool add_generation_prompt, const char *bos, const char *eos,
                               char **out, memra_err *err) {
  *out = NULL;
  if (!tmpl) return memra_errf(err, MEMRA_E_INVALID, "chat: the model has no chat template");
  for (size_t i = 0; i < n_msgs; i++)
    if (!msgs[i].role || !msgs[i].content)
      return memra_errf(err, MEMRA_E_INVALID, "chat: message %zu has no role or content", i);
  if (!bos) bos = "";
  if (!eos) eos = "";
  sb b = {0};
  memra_status st = MEMRA_OK;
  bool gen = add_generation_prompt;
  if (strstr(tmpl, "<|im_start|>")) {
    if (strstr(tmpl, "last_query_index"))
      render_qwen3(&b, msgs, n_msgs, gen);
    else
      render_chatml(&b, tmpl, msgs, n_msgs, gen);
  } else if (strstr(tmpl, "<|start_header_id|>")) {
    render_llama3(&b, tmpl, msgs, n_msgs, gen, bos);
  } else if (strstr(tmpl, "<start_of_turn>")) {
    st = render_gemma(&b, tmpl, msgs, n_msgs, gen, bos, err);
  } else if (strstr(tmpl, "[INST]") && strstr(tmpl, "<<SYS>>")) {
    st = render_llama2(&b, msgs, n_msgs, bos, eos, err);
  } else if (strstr(tmpl, "[INST]") && strstr(tmpl, "system_message")) {
    st = render_mistral_v3(&b, msgs, n_msgs, bos, eos, err);
  } else if (strstr(tmpl, "[INST]")) {
    st = render_mistral(&b, msgs, n_msgs, bos, eos, err);
  } else {
    return memra_errf(err, MEMRA_E_UNSUPPORTED,
                      "chat: template not recognized (known families: ChatML, Llama 3/3.1, "
                      "Llama 2, Mistral, Gemma)");
  }
  if (st == MEMRA_OK && b.oom) st = memra_errf(err, MEMRA_E_OOM, "chat: out of memory");
  if (st == MEMRA_OK && !b.p) {
    put(&b, "", 0);
    if (b.oom) st = memra_errf(err, MEMRA_E_OOM, "chat: out of memory");
  }
  if (st) {
    memra_free(b.p);
    return st;
  }
  *out = b.p;
  return MEMRA_OK;
}

const char *memra_chat_builtin(const char *family) {
  if (!family) return NULL;
  if (strcmp(family, "chatml") == 0)
    return "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
           "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
           "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  if (strcmp(family, "llama3") == 0)
    return "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content "
           "= '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
           "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content "
           "= bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if "
           "add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
           "{% endif %}";
  if (strcmp(family, "gemma") == 0)
    return "{{ bos_token }}{% for message in messages %}{% if (message['role'] == "
           "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
           "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
           "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
           "{{'<start_of_turn>model\\n'}}{% endif %}";
  return NULL;
}

int32_t memra_chat_reuse(const int32_t *cached, int32_t n_cached, const int32_t *ids, int32_t n_ids,
                         bool recurrent) {
  int32_t keep = 0;
  while (keep < n_cached && keep < n_ids - 1 && cached[keep] == ids[keep])
    keep++;
  return recurrent && keep != n_cached ? 0 : keep;
}
