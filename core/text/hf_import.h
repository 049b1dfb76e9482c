/* hf_import.h — a Hugging Face tokenizer.json (+ tokenizer_config.json) converted to the
 * GGUF tokenizer metadata (tokenizer.ggml.*, tokenizer.chat_template), so vocabularies
 * shipped as tokenizer.json can be tested and converted.
 *
 * Supported: model "BPE", either byte-level (ByteLevel pre-tokenizer/decoder -> "gpt2")
 * or SentencePiece style with byte fallback and U+2581 spaces (-> "llama"; the merges are
 * kept too, and the SPM encoder merges by their rank, which is what HF does). The
 * pre-tokenizer is recognized from its regex (llama-bpe, qwen2, smollm, gpt2). Added tokens
 * become CONTROL (special) or USER_DEFINED; BOS/EOS insertion follows the post-processor. */
#ifndef MEMRA_HF_IMPORT_H
#define MEMRA_HF_IMPORT_H

#include <stddef.h>

#include "core/base/err.h"
#include "core/gguf/gguf.h"
#include "core/text/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the tokenizer keys on w. config may be NULL (no chat template, ids from the
 * post-processor only). */
memra_status memra_hf_tokenizer_to_gguf(const char *tokenizer_json, size_t len,
                                        const char *config_json, size_t config_len,
                                        memra_gguf_writer *w, memra_err *err);

/* Reads both files (config_path NULL: tokenizer_config.json beside the first, if present)
 * and builds a tokenizer through an in-memory GGUF. *chat_template (may be NULL) receives
 * the template from memra_malloc, or NULL if there is none. */
memra_status memra_tokenizer_from_hf_files(const char *tokenizer_json_path, const char *config_path,
                                           memra_tokenizer **out, char **chat_template,
                                           memra_err *err);

#ifdef __cplusplus
}
#endif
#endif
