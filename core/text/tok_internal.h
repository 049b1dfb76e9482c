/* tok_internal.h — the tokenizer's state, shared by the files of core/text. */
#ifndef MEMRA_TEXT_TOK_INTERNAL_H
#define MEMRA_TEXT_TOK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/text/strmap.h"
#include "core/text/tokenizer.h"

enum { MEMRA_TOK_SPM = 1, MEMRA_TOK_BPE = 2 };

/* GGUF token types (tokenizer.ggml.token_type). */
enum {
  MEMRA_TT_UNDEFINED = 0,
  MEMRA_TT_NORMAL = 1,
  MEMRA_TT_UNKNOWN = 2,
  MEMRA_TT_CONTROL = 3,
  MEMRA_TT_USER_DEFINED = 4,
  MEMRA_TT_UNUSED = 5,
  MEMRA_TT_BYTE = 6,
};

#define MEMRA_PRE_MAX_STAGES 3

struct memra_tokenizer {
  int kind; /* MEMRA_TOK_SPM or MEMRA_TOK_BPE */
  char pre_name[64];
  int32_t n_vocab;
  char *arena;                 /* every token text and piece, back to back */
  uint32_t *tok_off, *tok_len; /* the vocabulary's text of each token */
  uint32_t *pc_off, *pc_len;   /* the bytes each token decodes to */
  float *scores;               /* SPM merge priority (NULL: none) */
  int32_t *types;
  memra_strmap tok_map;  /* token text -> id */
  memra_pairmap merges;  /* (left id, right id) -> rank */
  int32_t *merge_result; /* rank -> merged token id */
  int32_t n_merges;
  int32_t bos, eos, eot, eom, unk, pad;
  bool add_bos, add_eos, add_space_prefix, ignore_merges, nfc;
  int32_t byte_tok[256]; /* SPM byte fallback <0xNN>; -1 where absent */
  int32_t *special;      /* CONTROL, USER_DEFINED and UNKNOWN ids, longest text first */
  int32_t n_special;
  memra_strmap sp_map;            /* special text -> id (lowest id for a repeated text) */
  uint32_t sp_len_off[257];       /* per first byte: its range in sp_len */
  uint32_t *sp_len;               /* the distinct lengths of the specials, longest first */
  uint8_t *eog;                   /* per id: ends generation */
  void *re[MEMRA_PRE_MAX_STAGES]; /* pcre2_code*: the pre-tokenizer's stages, in order */
  int n_re;
};

static inline const char *memra_tok_text(const memra_tokenizer *t, int32_t id, uint32_t *len) {
  *len = t->tok_len[id];
  return t->arena + t->tok_off[id];
}

/* Compiles the pre-tokenizer named t->pre_name (unknown names warn once on stderr and use
 * the gpt2 split). */
memra_status memra_pretok_init(memra_tokenizer *t, memra_err *err);
void memra_pretok_free(memra_tokenizer *t);
/* Splits text[0..len) into pieces: *offs holds 2*n (offset, length) pairs. */
memra_status memra_pretok_split(const memra_tokenizer *t, const char *text, size_t len,
                                size_t **offs, size_t *n, memra_err *err);

/* A growable id list. */
typedef struct memra_idvec {
  int32_t *v;
  size_t n, cap;
} memra_idvec;
int memra_idvec_push(memra_idvec *v, int32_t id); /* 0 or -1 on OOM */

/* Encodes one piece of raw text (no special tokens in it) with the model's algorithm. */
memra_status memra_bpe_encode(const memra_tokenizer *t, const char *text, size_t len,
                              memra_idvec *out, memra_err *err);
memra_status memra_spm_encode(const memra_tokenizer *t, const char *text, size_t len,
                              memra_idvec *out, memra_err *err);

/* NFC normalization; *out from memra_malloc. */
memra_status memra_nfc(const char *s, size_t len, char **out, size_t *out_len, memra_err *err);

#endif
