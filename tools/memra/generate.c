#define _POSIX_C_SOURCE 200809L
#include "tools/memra/generate.h"

#include <string.h>
#include <time.h>

#include "core/base/alloc.h"
#include "core/decode/decoder.h"

/* --device-sampling: ids I32 [1] at byte 0 and the generator state I64 [1] at byte 8 of one
 * small device buffer; the plugin's sample op draws from the logits still on the device,
 * so only 4 bytes come back per token. The host sampler still sees every token (accept). */
typedef struct dev_sampler {
  const memra_backend_vt *vt;
  memra_backend *be;
  memra_buf *buf;
  memra_tensor ids, rng;
  memra_sample_params p;
} dev_sampler;

static memra_status dev_sampler_init(dev_sampler *d, memra_session *s, memra_err *err) {
  memset(d, 0, sizeof *d);
  d->vt = s->bh.vt;
  d->be = s->bh.be;
  d->p = s->dev_sample;
  if (!d->vt->sample)
    return memra_errf(err, MEMRA_E_UNSUPPORTED,
                      "--device-sampling: backend %s has no sample op (ABI minor 2)", s->bh.name);
  memra_status st = d->vt->buf_alloc(d->be, 16, &d->buf);
  if (st) return memra_errf(err, st, "--device-sampling: %s", d->vt->last_error(d->be));
  d->ids = (memra_tensor){.buf = d->buf, .type = MEMRA_TYPE_I32, .ne0 = 1, .ne1 = 1, .nb1 = 4};
  d->rng = (memra_tensor){
      .buf = d->buf, .offset = 8, .type = MEMRA_TYPE_I64, .ne0 = 1, .ne1 = 1, .nb1 = 8};
  if ((st = d->vt->buf_upload(d->be, d->buf, 8, &s->dev_seed, 8)))
    return memra_errf(err, st, "--device-sampling: %s", d->vt->last_error(d->be));
  return MEMRA_OK;
}

/* Draws from the context's last logits row (left on the device by memra_ctx_eval). */
static memra_status dev_sampler_draw(dev_sampler *d, memra_ctx *c, int32_t *id, memra_err *err) {
  memra_tensor lg = c->logits;
  lg.ne1 = 1;
  memra_status st = d->vt->sample(d->be, &d->ids, &lg, &d->rng, &d->p);
  if (!st) st = d->vt->buf_download(d->be, d->buf, 0, id, 4);
  if (st) return memra_errf(err, st, "sample: %s", d->vt->last_error(d->be));
  return MEMRA_OK;
}

static void dev_sampler_free(dev_sampler *d) {
  if (d->buf) d->vt->buf_free(d->be, d->buf);
  d->buf = NULL;
}

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
  for (int32_t i = 0; i < n_prompt; ++i)
    memra_sampler_accept(smp, prompt[i]);

  double t0 = memra_now_s();
  memra_status st = memra_ctx_eval(c, 0, prompt, n_prompt, pos0, false, logits, err);
  stats->n_prompt = n_prompt;
  stats->prompt_s = memra_now_s() - t0;
  memra_detok dt;
  memra_detok_init(&dt);
  char text[256];
  int32_t pos = pos0 + n_prompt;
  memra_decoder dec = {0};
  dev_sampler ds = {0};
  const bool on_device = !device_greedy && s->device_sampling;
  if (!st && on_device) st = dev_sampler_init(&ds, s, err);
  t0 = memra_now_s();
  int32_t id = 0;
  if (!st && on_device)
    st = dev_sampler_draw(&ds, c, &id, err);
  else if (!st)
    id = memra_sampler_sample(smp, logits);
  /* Greedy and --device-sampling run on the device: the graph (or eager steps) feed the
   * argmax or the sample op's draw back as the next input and only the token comes back;
   * host sampling downloads the logits each step. */
  if (!st && (device_greedy || on_device) && n_predict > 1 && pos < c->p.n_ctx) {
    st = memra_decoder_init(&dec, c, 1, &id, &pos, true, err);
    if (!st && on_device) st = memra_decoder_set_sampling(&dec, &ds.p, s->dev_seed + 1, err);
  }
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
    if (dec.c) {
      /* the step after this one queued ahead when it will be asked for and the sequence ends
       * here or can go on after it (no recurrent state took in a token nobody fed) */
      dec.lookahead =
          stats->n_gen + 1 < n_predict && (s->one_shot || memra_decoder_can_look_ahead(&dec));
      st = memra_decoder_step(&dec, &id, err);
    } else {
      if (on_device) {
        st = memra_ctx_eval(c, 0, &id, 1, pos, false, NULL, err);
        if (!st) st = dev_sampler_draw(&ds, c, &id, err);
      } else {
        st = memra_ctx_eval(c, 0, &id, 1, pos, false, logits, err);
        if (!st) id = memra_sampler_sample(smp, logits);
      }
    }
    pos++;
  }
  memra_decoder_free(&dec);
  dev_sampler_free(&ds);
  size_t n = memra_detok_flush(&dt, text, sizeof text);
  if (n && on_text) on_text(user, text, n);
  stats->gen_s = memra_now_s() - t0;
  memra_free(logits);
  return st;
}
