/* session.h — what every model-running subcommand opens: a backend, the GGUF, the model
 * on the backend, its tokenizer and a context. */
#ifndef MEMRA_CLI_SESSION_H
#define MEMRA_CLI_SESSION_H

#include "core/gguf/gguf.h"
#include "core/models/context.h"
#include "core/plugin/loader.h"
#include "core/text/tokenizer.h"
#include "tools/memra/options.h"

typedef struct memra_session {
  memra_backend_handle bh;
  memra_gguf *g;
  memra_model *m;
  memra_tokenizer *tok;
  memra_ctx *ctx;
  char model_path[1024];
  /* --device-sampling: the plugin's sample op draws each token (generate.c). */
  bool device_sampling;
  memra_sample_params dev_sample;
  uint64_t dev_seed;
  /* `run`: the sequence ends with its one generation, so its decoder may queue a step past the
   * last token whatever the model keeps (generate.c; chat goes on from the cache). */
  bool one_shot;
} memra_session;

/* Opens everything in o (the default model when o->model is empty); n_seq_max sequences.
 * Prints the backend chosen (and why others declined, for auto) on stderr. */
memra_status memra_session_open(memra_session *s, const memra_opts *o, int32_t n_seq_max,
                                memra_err *err);
void memra_session_close(memra_session *s);

/* Draws a progress bar on stderr when it is a terminal; silent otherwise. */
void memra_progress_bar(void *label, uint64_t done, uint64_t total);

#endif
