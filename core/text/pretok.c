/* pretok.c — pre-tokenizers chosen by tokenizer.ggml.pre: the Unicode-class regexes of
 * each vocabulary (as in its tokenizer.json / llama.cpp), run through PCRE2 with UTF and
 * UCP. Each stage splits every fragment of the previous stage; both the matches and the
 * text between them become fragments (HF's Split with behavior "Isolated"). */
#include <stdio.h>
#include <string.h>

#include <pcre2.h>

#include "core/base/alloc.h"
#include "core/text/tok_internal.h"

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_RE                                                                                  \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                       \
  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE                                                                                   \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                            \
  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct pre_def {
  const char *names[4]; /* tokenizer.ggml.pre values */
  const char *stages[MEMRA_PRE_MAX_STAGES];
  bool ignore_merges; /* tokenizer.json "ignore_merges": a whole word in the vocab wins */
  bool nfc;           /* the vocabulary's normalizer is NFC */
} pre_def;

static const pre_def PRE_DEFS[] = {
    {{"default", "gpt2", "gpt-2"}, {GPT2_RE}, false, false},
    {{"smollm", "starcoder", "refact"}, {"\\p{N}", GPT2_RE}, false, false},
    {{"llama-bpe", "llama3", "llama-v3", "dbrx"}, {LLAMA3_RE}, true, false},
    {{"qwen2", "qwen3"}, {QWEN2_RE}, false, true},
    {{"deepseek-v3"},
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
      "\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     true,
     false},
};

static const pre_def *find_pre(const char *name) {
  for (size_t i = 0; i < sizeof PRE_DEFS / sizeof PRE_DEFS[0]; i++)
    for (int k = 0; k < 4 && PRE_DEFS[i].names[k]; k++)
      if (strcmp(PRE_DEFS[i].names[k], name) == 0) return &PRE_DEFS[i];
  return NULL;
}

memra_status memra_pretok_init(memra_tokenizer *t, memra_err *err) {
  t->n_re = 0;
  if (t->kind != MEMRA_TOK_BPE) return MEMRA_OK; /* SPM splits nothing before merging */
  const pre_def *d = find_pre(t->pre_name[0] ? t->pre_name : "default");
  if (!d) {
    /* Documented fallback: the GPT-2 split, which every byte-level vocabulary can encode
     * (ids may differ from the model's own pre-tokenizer on digits and whitespace). */
    fprintf(stderr, "memra: warning: unknown tokenizer.ggml.pre '%s', using the gpt2 split\n",
            t->pre_name);
    d = &PRE_DEFS[0];
  }
  t->ignore_merges = d->ignore_merges;
  t->nfc = d->nfc;
  for (int i = 0; i < MEMRA_PRE_MAX_STAGES && d->stages[i]; i++) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)d->stages[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!re) {
      memra_pretok_free(t);
      return memra_errf(err, MEMRA_E_INVALID,
                        "pre-tokenizer '%s': regex %d does not compile (%d at %zu)", t->pre_name, i,
                        ec, (size_t)eo);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    t->re[t->n_re++] = re;
  }
  return MEMRA_OK;
}

void memra_pretok_free(memra_tokenizer *t) {
  for (int i = 0; i < t->n_re; i++)
    pcre2_code_free((pcre2_code *)t->re[i]);
  t->n_re = 0;
}

typedef struct spans {
  size_t *v; /* (off, len) pairs */
  size_t n, cap;
} spans;

static int spans_push(spans *s, size_t off, size_t len) {
  if (len == 0) return 0;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    size_t *p = memra_realloc(s->v, 2 * cap * sizeof *p);
    if (!p) return -1;
    s->v = p, s->cap = cap;
  }
  s->v[2 * s->n] = off, s->v[2 * s->n + 1] = len;
  s->n++;
  return 0;
}

memra_status memra_pretok_split(const memra_tokenizer *t, const char *text, size_t len,
                                size_t **offs, size_t *n, memra_err *err) {
  spans cur = {0}, next = {0};
  pcre2_match_data *md = NULL;
  memra_status st = MEMRA_OK;
  if (spans_push(&cur, 0, len)) goto oom;
  if (t->n_re) {
    md = pcre2_match_data_create(1, NULL);
    if (!md) goto oom;
  }
  for (int r = 0; r < t->n_re; r++) {
    const pcre2_code *re = t->re[r];
    next.n = 0;
    for (size_t f = 0; f < cur.n; f++) {
      size_t base = cur.v[2 * f], flen = cur.v[2 * f + 1], pos = 0, gap = 0;
      /* The fragment alone is the subject: lookaheads do not see past it, as in HF. */
      PCRE2_SPTR subj = (PCRE2_SPTR)text + base;
      while (pos < flen) {
        int rc = pcre2_match(re, subj, flen, pos, pos ? PCRE2_NO_UTF_CHECK : 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) {
            st = memra_errf(err, MEMRA_E_INVALID, "tokenizer: text is not valid UTF-8 at byte %zu",
                            base + pcre2_get_startchar(md));
          } else {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = memra_errf(err, MEMRA_E_INVALID, "tokenizer: pre-tokenizer failed at byte %zu: %s",
                            base + pos, (const char *)msg);
          }
          goto done;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* an empty match: step over one character */
          pos = ms + 1;
          while (pos < flen && (subj[pos] & 0xC0) == 0x80)
            pos++;
          continue;
        }
        if (spans_push(&next, base + gap, ms - gap) || spans_push(&next, base + ms, me - ms))
          goto oom;
        pos = gap = me;
      }
      if (spans_push(&next, base + gap, flen - gap)) goto oom;
    }
    spans tmp = cur;
    cur = next, next = tmp;
  }
done:
  if (md) pcre2_match_data_free(md);
  memra_free(next.v);
  if (st) {
    memra_free(cur.v);
    return st;
  }
  *offs = cur.v, *n = cur.n;
  return MEMRA_OK;
oom:
  if (md) pcre2_match_data_free(md);
  memra_free(next.v);
  memra_free(cur.v);
  return memra_errf(err, MEMRA_E_OOM, "tokenizer: out of memory splitting %zu bytes", len);
}
