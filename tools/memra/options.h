/* options.h — the flags shared by `memra run`, `bench` and `chat`, their defaults, the INI
 * config file (inih) they can come from, and the parser. Flags override the config. */
#ifndef MEMRA_CLI_OPTIONS_H
#define MEMRA_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/base/err.h"
#include "core/text/sampler.h"

typedef struct memra_opts {
  char model[1024];
  char prompt[8192];
  bool prompt_set;
  char prompt_ids[8192]; /* "1,2,3": used exactly, no BOS */
  bool prompt_ids_set;
  int32_t n_predict;
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  float repeat_penalty;
  uint64_t seed;
  int32_t n_ctx;
  int32_t n_ubatch;
  int32_t threads;
  char backend[1024];
  char plugin_dir[1024];
  bool print_ids;
  char dump_logits[1024];
  char kv_type[8];      /* auto | f16 | f32 | f8 */
  bool device_sampling; /* sample on the device (the plugin's sample op), not the host */
  bool no_display_prompt;
  /* bench */
  char bench_p[256]; /* "512" or "512,4096" */
  char bench_n[256];
  char bench_d[256]; /* context depth before tg: "0" or "0,4096" */
  int32_t bench_reps;
  char bench_output[16];  /* md | json */
  int32_t gate_p;         /* gate: prompt tokens before decoding */
  int32_t gate_b;         /* gate batch: sequences decoded together */
  char system[4096];      /* chat: system prompt */
  char chat_template[16]; /* chat: chatml | llama3 | gemma, overrides the model's */
  char config[1024];
} memra_opts;

void memra_opts_defaults(memra_opts *o);

/* Parses argv[first..argc): --config FILE is applied first (then MEMRA_CONFIG if no flag),
 * then every flag. Positional arguments land in positional[] (at most max_pos).
 * Returns MEMRA_E_INVALID with a one-line message naming the flag on any error. */
memra_status memra_opts_parse(memra_opts *o, int argc, char **argv, int first,
                              const char **positional, int max_pos, int *n_pos, memra_err *err);

/* Defaults, then argv[first..) with no positional arguments; on error prints
 * "memra CMD: message" and returns false. */
bool memra_opts_from_args(memra_opts *o, int argc, char **argv, int first, const char *cmd);

/* The sampling flags as sampler parameters; greedy: temperature 0 and no penalty. */
memra_sampler_params memra_opts_sampling(const memra_opts *o, bool *greedy);

/* The path of the default model in the cache (SmolLM2-135M-Instruct Q4_1). */
void memra_default_model_path(char *out, size_t cap);

void memra_opts_usage(FILE *f);

#endif
