#define _POSIX_C_SOURCE 200809L
#include "tools/memra/session.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void memra_progress_bar(void *label, uint64_t done, uint64_t total) {
  static int last = -1;
  if (!isatty(STDERR_FILENO) || total == 0) return;
  int pct = (int)(100.0 * (double)done / (double)total);
  if (pct == last && done != total) return;
  last = pct;
  int filled = pct / 4;
  fprintf(stderr, "\r%s [", (const char *)label);
  for (int i = 0; i < 25; ++i)
    fputc(i < filled ? '=' : (i == filled ? '>' : ' '), stderr);
  fprintf(stderr, "] %3d%%", pct);
  if (done >= total) {
    fputs("\r\033[K", stderr); /* clear the bar once done */
    last = -1;
  }
  fflush(stderr);
}

/* For auto: say which plugin was chosen and why the others were not. */
static void report_backend(const memra_opts *o, const memra_backend_handle *h) {
  if (strcmp(o->backend, "auto") != 0) return;
  memra_plugin_list list;
  memra_plugin_scan(o->plugin_dir[0] ? o->plugin_dir : NULL, &list);
  for (size_t i = 0; i < list.n; ++i) {
    const memra_plugin_entry *e = &list.items[i];
    if (strcmp(e->name, h->name) == 0) continue;
    if (e->score <= 0)
      fprintf(stderr, "memra: backend %s declined: %s\n", e->name[0] ? e->name : e->path, e->why);
  }
  fprintf(stderr, "memra: using backend %s (%s)\n", h->name, h->path);
}

memra_status memra_session_open(memra_session *s, const memra_opts *o, int32_t n_seq_max,
                                memra_err *err) {
  memset(s, 0, sizeof *s);
  if (o->model[0])
    snprintf(s->model_path, sizeof s->model_path, "%s", o->model);
  else {
    memra_default_model_path(s->model_path, sizeof s->model_path);
    if (access(s->model_path, R_OK) != 0)
      return memra_errf(err, MEMRA_E_IO,
                        "no -m given and the default model %s is missing (fetch it with "
                        "tools/fetch_default_model.sh)",
                        s->model_path);
  }
  int32_t kv_type = -1; /* auto: decided once the backend is known */
  if (!strcmp(o->kv_type, "f16"))
    kv_type = MEMRA_TYPE_F16;
  else if (!strcmp(o->kv_type, "f32"))
    kv_type = MEMRA_TYPE_F32;
  else if (!strcmp(o->kv_type, "f8"))
    kv_type = MEMRA_TYPE_F8_E4M3;
  else if (strcmp(o->kv_type, "auto") != 0)
    return memra_errf(err, MEMRA_E_INVALID, "--kv-type '%s': expected auto, f16, f32 or f8",
                      o->kv_type);
  s->device_sampling = o->device_sampling;
  s->dev_sample = (memra_sample_params){o->temperature, o->top_k, o->top_p, o->min_p};
  s->dev_seed = o->seed;
  if (o->device_sampling && o->repeat_penalty != 1.0f)
    return memra_errf(err, MEMRA_E_INVALID,
                      "--device-sampling: penalties are applied on the host only; drop "
                      "--repeat-penalty %g",
                      o->repeat_penalty);

  memra_status st = memra_gguf_open(s->model_path, &s->g, err);
  if (st) return st;
  memra_open_params params = {.struct_size = sizeof params, .n_threads = o->threads, .device = 0};
  st =
      memra_backend_open(o->backend, o->plugin_dir[0] ? o->plugin_dir : NULL, &params, &s->bh, err);
  if (st) goto fail;
  report_backend(o, &s->bh);
  if ((st = memra_tokenizer_from_gguf(s->g, &s->tok, err))) goto fail;
  if ((st = memra_model_load(s->g, s->bh.vt, s->bh.be, memra_progress_bar, "loading model", &s->m,
                             err)))
    goto fail;
  memra_ctx_params cp = memra_ctx_defaults();
  cp.n_ctx = o->n_ctx;
  cp.n_ubatch = o->n_ubatch;
  cp.n_seq_max = n_seq_max;
  /* The CPU plugin is the float32 oracle, so its cache is too; GPUs halve the KV bytes. */
  cp.kv_type = kv_type >= 0                 ? kv_type
               : !strcmp(s->bh.name, "cpu") ? MEMRA_TYPE_F32
                                            : MEMRA_TYPE_F16;
  if ((st = memra_ctx_new(s->m, &cp, &s->ctx, err))) goto fail;
  return MEMRA_OK;
fail:
  memra_session_close(s);
  return st;
}

void memra_session_close(memra_session *s) {
  memra_ctx_free(s->ctx);
  memra_model_free(s->m);
  memra_tokenizer_free(s->tok);
  memra_backend_close(&s->bh);
  memra_gguf_close(s->g);
  memset(s, 0, sizeof *s);
}
