/* memra run — generate text from a prompt (or token ids) with one model. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "tools/memra/commands.h"
#include "tools/memra/generate.h"

static void print_text(void *user, const char *text, size_t len) {
  FILE *f = user;
  fwrite(text, 1, len, f);
  fflush(f);
}

/* "1, 2,3" -> ids; every id must be in the vocabulary. */
static memra_status parse_ids(const char *s, int32_t n_vocab, int32_t **out, int32_t *n,
                              memra_err *err) {
  size_t cap = strlen(s) / 2 + 1;
  int32_t *ids = memra_malloc(cap * sizeof *ids);
  if (!ids) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  int32_t k = 0;
  const char *p = s;
  while (*p) {
    while (*p == ' ' || *p == ',')
      ++p;
    if (!*p) break;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 0 || v >= n_vocab) {
      memra_free(ids);
      return memra_errf(err, MEMRA_E_INVALID, "--prompt-ids: '%.16s' is not a token id in 0..%d", p,
                        n_vocab - 1);
    }
    ids[k++] = (int32_t)v;
    p = end;
  }
  if (k == 0) {
    memra_free(ids);
    return memra_errf(err, MEMRA_E_INVALID, "--prompt-ids: no ids given");
  }
  *out = ids;
  *n = k;
  return MEMRA_OK;
}

static char *read_stdin(void) {
  size_t cap = 4096, n = 0;
  char *buf = memra_malloc(cap);
  while (buf) {
    if (n + 1 >= cap) {
      char *b = memra_realloc(buf, cap *= 2);
      if (!b) break;
      buf = b;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, stdin);
    if (r == 0) {
      buf[n] = 0;
      return buf;
    }
    n += r;
  }
  memra_free(buf);
  return NULL;
}

/* Raw little-endian float32 [n_prompt, n_vocab], written to a temp file then renamed so a
 * failure leaves no partial file. */
static memra_status dump_logits(memra_session *s, const int32_t *ids, int32_t n, const char *path,
                                memra_err *err) {
  const size_t nv = (size_t)s->m->hp.n_vocab;
  float *lg = memra_malloc(sizeof(float) * nv * (size_t)n);
  if (!lg) return memra_errf(err, MEMRA_E_OOM, "out of memory for %d x %zu logits", n, nv);
  memra_status st = memra_ctx_eval(s->ctx, 0, ids, n, 0, true, lg, err);
  memra_kv_pages_release(&s->ctx->pages, 0);
  if (!st) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
      st = memra_errf(err, MEMRA_E_IO, "--dump-logits %s: %s", path, strerror(errno));
    else {
      size_t w = fwrite(lg, sizeof(float), nv * (size_t)n, f);
      if (fclose(f) != 0 || w != nv * (size_t)n || rename(tmp, path) != 0) {
        st = memra_errf(err, MEMRA_E_IO, "--dump-logits %s: write failed: %s", path,
                        strerror(errno));
        remove(tmp);
      }
    }
  }
  memra_free(lg);
  return st;
}

int memra_cmd_run(int argc, char **argv, int first) {
  memra_opts o;
  if (!memra_opts_from_args(&o, argc, argv, first, "run")) return 2;
  memra_err err = {{0}};
  char *stdin_prompt = NULL;
  if (!o.prompt_set && !o.prompt_ids_set) {
    stdin_prompt = read_stdin();
    if (!stdin_prompt || !*stdin_prompt) {
      fprintf(stderr, "memra run: no prompt (give -p TEXT, --prompt-ids or text on stdin)\n");
      memra_free(stdin_prompt);
      return 2;
    }
  }
  memra_session s;
  memra_status st = memra_session_open(&s, &o, 1, &err);
  if (st) {
    fprintf(stderr, "memra: %s\n", err.msg);
    memra_free(stdin_prompt);
    return 1;
  }
  int32_t *ids = NULL, n_ids = 0;
  if (o.prompt_ids_set)
    st = parse_ids(o.prompt_ids, s.m->hp.n_vocab, &ids, &n_ids, &err);
  else {
    const char *text = o.prompt_set ? o.prompt : stdin_prompt;
    size_t n = 0;
    st = memra_tokenize(s.tok, text, strlen(text), true, false, &ids, &n, &err);
    n_ids = (int32_t)n;
    if (!st && n_ids == 0) st = memra_errf(&err, MEMRA_E_INVALID, "the prompt is empty");
  }
  memra_sampler *smp = NULL;
  int32_t *gen = NULL;
  bool greedy = false;
  if (!st && n_ids > s.ctx->p.n_ctx) /* before anything reaches stdout */
    st = memra_errf(&err, MEMRA_E_INVALID, "prompt of %d tokens does not fit the context of %d",
                    n_ids, s.ctx->p.n_ctx);
  if (!st && o.dump_logits[0]) st = dump_logits(&s, ids, n_ids, o.dump_logits, &err);
  if (!st) {
    memra_sampler_params sp = memra_opts_sampling(&o, &greedy);
    st = memra_sampler_new(&sp, s.m->hp.n_vocab, &smp, &err);
  }
  if (!st && !(gen = memra_malloc(sizeof(int32_t) * (size_t)(o.n_predict + 1))))
    st = memra_errf(&err, MEMRA_E_OOM, "out of memory");
  memra_gen_stats gs = {0};
  if (!st) {
    FILE *out = o.print_ids ? NULL : stdout;
    if (out && o.prompt_set && !o.no_display_prompt) fputs(o.prompt, out);
    s.one_shot = true; /* nothing runs on this sequence after it */
    st = memra_generate(&s, smp, ids, n_ids, 0, o.n_predict, greedy, out ? print_text : NULL, out,
                        gen, &gs, &err);
    if (out) fputc('\n', out);
  }
  if (!st && o.print_ids) {
    putchar('[');
    for (int32_t i = 0; i < gs.n_gen; ++i)
      printf(i ? ",%d" : "%d", gen[i]);
    puts("]");
  }
  if (!st)
    fprintf(stderr,
            "memra: prompt %d tokens in %.3f s (%.1f tok/s), generated %d tokens in %.3f s "
            "(%.1f tok/s) on %s\n",
            gs.n_prompt, gs.prompt_s, gs.n_prompt / (gs.prompt_s > 0 ? gs.prompt_s : 1), gs.n_gen,
            gs.gen_s, gs.n_gen > 1 ? (gs.n_gen - 1) / gs.gen_s : 0.0, s.bh.name);
  else
    fprintf(stderr, "memra: %s\n", err.msg);
  memra_free(gen);
  memra_sampler_free(smp);
  memra_free(ids);
  memra_free(stdin_prompt);
  memra_session_close(&s);
  return st ? 1 : 0;
}
