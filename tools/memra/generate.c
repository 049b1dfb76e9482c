#define _POSIX_C_SOURCE 200809L
#include "tools/memra/generate.h"

#include <string.h>
#include <time.h>

#include "core/base/alloc.h"
#include "core/decode/decoder.h"

double memra_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

memra_status memra_generate(memra_session *s, memra_sampler *smp, const int32_t *prompt,
                            int32_t n_prompt, int32_t pos0, int32_t n_predict, bool device_greedy,
                            void (*on_text)(void *user, const char *text, size_t len), void *user,
                            int32_t *gen_ids, memra_gen_stats *stats, memra_err *err) {
  memra_ctx *c = s->ctx;
  const int32_t n_vocab = s->m->hp.n_vocab;
  memset(stats, 0, sizeof *stats);
  if (pos0 + n_prompt > c->p.n_ctx)
    return memra_errf(err, MEMRA_E_INVALID, "prompt of %d tokens does not fit the context of %d",
                      pos0 + n_prompt, c->p.n_ctx);
  float *logits = memra_malloc(sizeof(float) * (size_t)n_vocab);
  if (!logits) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  for (int32_t i = 0; i < n_prompt; ++i) memra_sampler_accept(smp, prompt[i]);

  double t0 = memra_now_s();
  memra_status st = memra_ctx_eval(c, 0, prompt, n_prompt, pos0, false, logits, err);
  stats->n_prompt = n_prompt;
  stats->prompt_s = memra_now_s() - t0;
  memra_detok dt;
  memra_detok_init(&dt);
  char text[256];
  int32_t pos = pos0 + n_prompt;
  memra_decoder dec = {0};
  t0 = memra_now_s();
  int32_t id = st ? 0 : memra_sampler_sample(smp, logits);
  /* Greedy runs on the device: the graph (or eager steps) feed argmax back as the next
   * input and only the token comes back; sampling downloads the logits each step. */
  if (!st && device_greedy && n_predict > 1 && pos < c->p.n_ctx)
    st = memra_decoder_init(&dec, c, 1, &id, &pos, true, err);
  while (!st) {
    if (gen_ids) gen_ids[stats->n_gen] = id;
    stats->n_gen++;
    memra_sampler_accept(smp, id);
    if (memra_tokenizer_is_eog(s->tok, id)) {
      stats->hit_eog = true;
      break;
    }
    size_t n = memra_detok_push(&dt, s->tok, id, text, sizeof text);
    if (n && on_text) on_text(user, text, n);
    if (stats->n_gen == n_predict) break;
    if (pos + 1 > c->p.n_ctx) {
      stats->hit_ctx = true;
      break;
    }
    if (dec.c) st = memra_decoder_step(&dec, &id, err);
    else {
      st = memra_ctx_eval(c, 0, &id, 1, pos, false, logits, err);
      if (!st) id = memra_sampler_sample(smp, logits);
    }
    pos++;
  }
  memra_decoder_free(&dec);
  size_t n = memra_detok_flush(&dt, text, sizeof text);
  if (n && on_text) on_text(user, text, n);
  stats->gen_s = memra_now_s() - t0;
  memra_free(logits);
  return st;
}
