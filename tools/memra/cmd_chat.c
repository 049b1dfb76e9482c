/* memra chat — a conversation with history, rendered with the model's chat template.
 * Each line of stdin is one user message (a terminal gets a "> " prompt); /reset clears
 * the history, /exit (or end of input) quits. Replies stream as they are generated.
 * The KV cache is reused: only the tokens after the common prefix of the previous turn's
 * tokens and the newly rendered conversation are evaluated. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/base/alloc.h"
#include "core/text/chat.h"
#include "tools/memra/commands.h"
#include "tools/memra/generate.h"

enum { MAX_TURNS = 512 };

typedef struct chat_state {
  memra_chat_msg msgs[MAX_TURNS];
  char *owned[MAX_TURNS]; /* the strings msgs point to */
  size_t n;
  int32_t *cached; /* tokens whose K/V sit in sequence 0 */
  int32_t n_cached;
  char *reply; /* the assistant text being generated */
  size_t reply_len, reply_cap;
} chat_state;

static void on_text(void *user, const char *text, size_t len) {
  chat_state *cs = user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  if (cs->reply_len + len + 1 > cs->reply_cap) {
    size_t cap = (cs->reply_len + len + 1) * 2;
    char *r = memra_realloc(cs->reply, cap);
    if (!r) return;
    cs->reply = r;
    cs->reply_cap = cap;
  }
  memcpy(cs->reply + cs->reply_len, text, len);
  cs->reply_len += len;
  cs->reply[cs->reply_len] = 0;
}

static bool push_msg(chat_state *cs, const char *role, const char *text) {
  if (cs->n == MAX_TURNS) return false;
  char *copy = memra_strndup(text, strlen(text));
  if (!copy) return false;
  cs->owned[cs->n] = copy;
  cs->msgs[cs->n++] = (memra_chat_msg){role, copy};
  return true;
}

static void reset(chat_state *cs, const char *system) {
  for (size_t i = 0; i < cs->n; ++i)
    memra_free(cs->owned[i]);
  cs->n = 0;
  if (system && *system) push_msg(cs, "system", system);
}

/* One turn: render, tokenize, evaluate the new suffix, generate. */
static memra_status turn(memra_session *s, memra_sampler *smp, chat_state *cs, const char *tmpl,
                         int32_t n_predict, bool greedy, memra_err *err) {
  size_t bos_len = 0, eos_len = 0;
  int32_t bos = memra_tokenizer_bos(s->tok), eos = memra_tokenizer_eos(s->tok);
  const char *bos_p = bos >= 0 ? memra_token_piece(s->tok, bos, &bos_len) : NULL;
  const char *eos_p = eos >= 0 ? memra_token_piece(s->tok, eos, &eos_len) : NULL;
  char bos_s[64] = "", eos_s[64] = "";
  if (bos_p && bos_len < sizeof bos_s) memcpy(bos_s, bos_p, bos_len);
  if (eos_p && eos_len < sizeof eos_s) memcpy(eos_s, eos_p, eos_len);
  char *text = NULL;
  memra_status st = memra_chat_render(tmpl, cs->msgs, cs->n, true, bos_s, eos_s, &text, err);
  if (st) return st;
  /* The template writes BOS itself when the family wants it. */
  bool has_bos = bos_s[0] && strncmp(text, bos_s, strlen(bos_s)) == 0;
  int32_t *ids = NULL;
  size_t n_ids = 0;
  st = memra_tokenize(s->tok, text, strlen(text), !has_bos, true, &ids, &n_ids, err);
  memra_free(text);
  if (st) return st;
  /* reuse the cached prefix (all of it or nothing where a recurrent state holds it) */
  const int32_t keep =
      memra_chat_reuse(cs->cached, cs->n_cached, ids, (int32_t)n_ids, s->ctx->conv_state != NULL);
  cs->reply_len = 0;
  if (cs->reply) cs->reply[0] = 0;
  int32_t *gen = memra_malloc(sizeof(int32_t) * (size_t)(n_predict + 1));
  memra_gen_stats gs;
  if (!gen)
    st = memra_errf(err, MEMRA_E_OOM, "out of memory");
  else {
    memra_sampler_reset(smp);
    for (int32_t i = 0; i < keep; ++i)
      memra_sampler_accept(smp, ids[i]);
    st = memra_generate(s, smp, ids + keep, (int32_t)n_ids - keep, keep, n_predict, greedy, on_text,
                        cs, gen, &gs, err);
  }
  fputc('\n', stdout);
  fflush(stdout);
  if (!st) {
    /* What sits in the cache now: the prompt and every generated token but the last. */
    int32_t n_new = (int32_t)n_ids + (gs.n_gen > 0 ? gs.n_gen - 1 : 0);
    int32_t *c = memra_realloc(cs->cached, sizeof(int32_t) * (size_t)(n_new > 0 ? n_new : 1));
    if (!c)
      st = memra_errf(err, MEMRA_E_OOM, "out of memory");
    else {
      memcpy(c, ids, sizeof(int32_t) * n_ids);
      for (int32_t i = 0; i + 1 < gs.n_gen; ++i)
        c[n_ids + i] = gen[i];
      cs->cached = c;
      cs->n_cached = n_new;
      if (!push_msg(cs, "assistant", cs->reply ? cs->reply : ""))
        st = memra_errf(err, MEMRA_E_OOM, "conversation too long (%d turns)", MAX_TURNS);
    }
  }
  memra_free(gen);
  memra_free(ids);
  return st;
}

static char *chomp(char *line) {
  size_t n = strlen(line);
  while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
    line[--n] = 0;
  return line;
}

int memra_cmd_chat(int argc, char **argv, int first) {
  memra_opts o;
  if (!memra_opts_from_args(&o, argc, argv, first, "chat")) return 2;
  memra_err err = {{0}};
  memra_session s;
  if (memra_session_open(&s, &o, 1, &err)) {
    fprintf(stderr, "memra: %s\n", err.msg);
    return 1;
  }
  /* The model's template, unless --chat-template names a built-in one; a model without a
   * template (base models) gets its family's built-in one, and says so. */
  memra_str tmpl_str;
  char *tmpl = NULL;
  const char *family = o.chat_template[0] ? o.chat_template : NULL;
  if (!family && memra_gguf_get_str(s.g, "tokenizer.chat_template", &tmpl_str, &err) == MEMRA_OK)
    tmpl = memra_strndup(tmpl_str.ptr, (size_t)tmpl_str.len);
  else if (!family) {
    const char *arch = s.m->hp.arch_name;
    family = !strncmp(arch, "gemma", 5)   ? "gemma"
             : !strncmp(arch, "llama", 5) ? "llama3"
                                          : "chatml";
    fprintf(stderr,
            "memra chat: the model has no chat template; using the built-in %s one "
            "(--chat-template chooses)\n",
            family);
  }
  if (family) {
    const char *b = memra_chat_builtin(family);
    if (!b) {
      fprintf(stderr, "memra chat: --chat-template '%s': expected chatml, llama3 or gemma\n",
              family);
      memra_session_close(&s);
      return 2;
    }
    tmpl = memra_strndup(b, strlen(b));
  }
  bool greedy;
  memra_sampler_params sp = memra_opts_sampling(&o, &greedy);
  memra_sampler *smp = NULL;
  chat_state cs = {0};
  memra_status st = memra_sampler_new(&sp, s.m->hp.n_vocab, &smp, &err);
  reset(&cs, o.system);
  bool tty = isatty(STDIN_FILENO);
  static char line[65536];
  while (!st) {
    if (tty) {
      fputs("> ", stdout);
      fflush(stdout);
    }
    if (!fgets(line, sizeof line, stdin)) break;
    chomp(line);
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
    if (!strcmp(line, "/reset")) {
      reset(&cs, o.system);
      cs.n_cached = 0;
      memra_kv_pages_release(&s.ctx->pages, 0);
      if (tty) puts("(history cleared)");
      continue;
    }
    if (!line[0]) continue;
    if (!push_msg(&cs, "user", line)) {
      st = memra_errf(&err, MEMRA_E_OOM, "conversation too long (%d turns)", MAX_TURNS);
      break;
    }
    st = turn(&s, smp, &cs, tmpl, o.n_predict, greedy, &err);
  }
  if (st) fprintf(stderr, "memra chat: %s\n", err.msg);
  reset(&cs, NULL);
  memra_free(cs.cached);
  memra_free(cs.reply);
  memra_free(tmpl);
  memra_sampler_free(smp);
  memra_session_close(&s);
  return st ? 1 : 0;
}
