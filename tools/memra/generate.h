/* generate.h — the generation loop shared by `run` and `chat`: evaluate a prompt, then
 * sample, stream and feed back tokens until an end-of-generation token, n_predict tokens
 * or a full context. */
#ifndef MEMRA_CLI_GENERATE_H
#define MEMRA_CLI_GENERATE_H

#include "core/text/sampler.h"
#include "tools/memra/session.h"

typedef struct memra_gen_stats {
  int32_t n_prompt, n_gen;
  double prompt_s, gen_s;
  bool hit_eog, hit_ctx;
} memra_gen_stats;

/* on_text receives each piece of completed UTF-8 as it streams. gen_ids (may be NULL)
 * receives the generated ids (cap at least n_predict). pos0: where the prompt starts in
 * sequence 0 (chat continues its history). device_greedy: the sampler is greedy (no
 * penalties), so decode steps may run on the device (CUDA graphs where available). */
memra_status memra_generate(memra_session *s, memra_sampler *smp, const int32_t *prompt,
                            int32_t n_prompt, int32_t pos0, int32_t n_predict, bool device_greedy,
                            void (*on_text)(void *user, const char *text, size_t len), void *user,
                            int32_t *gen_ids, memra_gen_stats *stats, memra_err *err);

double memra_now_s(void);

#endif
