/* chat.h — conversations rendered with the model's chat template (tokenizer.chat_template),
 * recognized by family: ChatML, Llama 3/3.1, Llama 2, Mistral, Gemma. */
#ifndef MEMRA_CHAT_H
#define MEMRA_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_chat_msg {
  const char *role; /* "system", "user", "assistant" */
  const char *content;
} memra_chat_msg;

/* Renders msgs with template tmpl (the Jinja text from the GGUF; its family is
 * recognized, not interpreted). bos/eos are the vocabulary's texts for those tokens.
 * add_generation_prompt opens the assistant turn. *out from memra_malloc. An unknown
 * template is MEMRA_E_UNSUPPORTED with a message naming the families known. */
memra_status memra_chat_render(const char *tmpl, const memra_chat_msg *msgs, size_t n_msgs,
                               bool add_generation_prompt, const char *bos, const char *eos,
                               char **out, memra_err *err);

/* A family's reference template text (Jinja, as shipped by its models) for a model whose
 * own template is missing or unrecognized: "chatml", "llama3" or "gemma"; NULL otherwise.
 * The CLI's documented fallback flag passes it to memra_chat_render. */
const char *memra_chat_builtin(const char *family);

/* How many tokens of the cached history (what the context holds for the conversation) the next
 * turn's ids may keep: their common prefix, less one so the turn evaluates at least one token.
 * A recurrent state (hybrid models) holds exactly the n_cached tokens and cannot be cut back to
 * a shorter prefix, so there anything short of all of them is 0: the turn starts over. */
int32_t memra_chat_reuse(const int32_t *cached, int32_t n_cached, const int32_t *ids, int32_t n_ids,
                         bool recurrent);

#ifdef __cplusplus
}
#endif
#endif
