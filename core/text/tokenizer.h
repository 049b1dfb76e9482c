/* tokenizer.h — the vocabulary of a GGUF file: SPM (`llama`) and byte-level BPE (`gpt2`)
 * encoders, special tokens, and a stream-safe detokenizer. Exact against HF tokenizers. */
#ifndef MEMRA_TOKENIZER_H
#define MEMRA_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/err.h"
#include "core/gguf/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_tokenizer memra_tokenizer;

/* Reads tokenizer.ggml.* from g; the tokenizer copies what it keeps (g may close after). */
memra_status memra_tokenizer_from_gguf(const memra_gguf *g, memra_tokenizer **out, memra_err *err);
void memra_tokenizer_free(memra_tokenizer *t);

int32_t memra_tokenizer_n_vocab(const memra_tokenizer *t);
int32_t memra_tokenizer_bos(const memra_tokenizer *t);  /* -1 if none */
int32_t memra_tokenizer_eos(const memra_tokenizer *t);  /* -1 if none */
bool memra_tokenizer_add_bos(const memra_tokenizer *t); /* tokenizer.ggml.add_bos_token */
/* End of generation: EOS, EOT, <|im_end|>, <|eot_id|>, <end_of_turn>, ... */
bool memra_tokenizer_is_eog(const memra_tokenizer *t, int32_t id);

/* Encodes text. add_bos: prepend BOS when the vocabulary asks for it (add_bos_token), and
 * append EOS when it asks for that (add_eos_token). parse_special: text spelling a
 * control (or unknown) token becomes that token; user-defined added tokens are always
 * matched, as in llama.cpp and HF. Byte-level (gpt2) vocabularies need valid UTF-8
 * (MEMRA_E_INVALID names the byte); SPM carries any bytes through byte tokens.
 * *ids from memra_malloc (caller memra_free), *n_ids its length. */
memra_status memra_tokenize(const memra_tokenizer *t, const char *text, size_t len, bool add_bos,
                            bool parse_special, int32_t **ids, size_t *n_ids, memra_err *err);

/* The id of the token whose vocabulary text is text[0..len) exactly, -1 if none. */
int32_t memra_tokenizer_find(const memra_tokenizer *t, const char *text, size_t len);
/* True for control and unknown tokens (<s>, <|im_end|>, ...): what HF's
 * skip_special_tokens leaves out of decoded text. */
bool memra_token_is_special(const memra_tokenizer *t, int32_t id);

/* The bytes a token stands for (byte tokens and the BPE byte map decoded); special
 * tokens render as their text. *len its length. NULL for an id out of range. */
const char *memra_token_piece(const memra_tokenizer *t, int32_t id, size_t *len);

/* Stream-safe detokenizer: never emits part of a UTF-8 sequence. */
typedef struct memra_detok {
  char pending[16];
  size_t n_pending;
  bool first;    /* SPM: the leading space of the first piece is dropped */
  bool per_byte; /* SPM (set by push): one U+FFFD per invalid byte, as sentencepiece */
} memra_detok;

void memra_detok_init(memra_detok *d);
/* Appends the text that became complete with token id to out (NUL-terminated, at most
 * cap-1 bytes; pieces are short) and returns the byte count written. */
size_t memra_detok_push(memra_detok *d, const memra_tokenizer *t, int32_t id, char *out,
                        size_t cap);
/* Whatever is still pending (an incomplete sequence at the end), as U+FFFD per the
 * reference's rules. Invalid bytes: byte-level (gpt2) vocabularies give one U+FFFD per
 * maximal invalid subpart (from_utf8_lossy, HF's ByteLevel decoder); SPM vocabularies one
 * per invalid byte (sentencepiece; HF's ByteFallback instead replaces a whole run of byte
 * tokens that holds any invalid byte, which a streaming decoder cannot know early). */
size_t memra_detok_flush(memra_detok *d, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
