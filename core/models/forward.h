/* forward.h — the per-family forward passes memra_ctx_forward dispatches to, and the
 * small view helpers they share. Internal to core/models. */
#ifndef MEMRA_FORWARD_H
#define MEMRA_FORWARD_H

#include "core/models/context.h"

memra_status memra_llama_forward(memra_ctx *c, memra_err *err);    /* llama.c */
memra_status memra_gemma3_forward(memra_ctx *c, memra_err *err);   /* gemma3.c */
memra_status memra_qwen3moe_forward(memra_ctx *c, memra_err *err); /* qwen3moe.c */
/* qwen3next, qwen35, qwen35moe (qwen3next.c) */
memra_status memra_qwen3next_forward(memra_ctx *c, memra_err *err);

/* out [n, n_embd] = the routed-expert FFN of layer l on xn [n, n_embd] (moe_ffn.c). */
memra_status memra_moe_ffn(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                           const memra_tensor *out, memra_err *err);

static inline memra_tensor memra_rows(memra_tensor t, int64_t n) {
  t.ne1 = n;
  return t;
}

/* A [n, n_head * d] F32 tensor viewed as [n * n_head, d] for per-head norms. */
static inline memra_tensor memra_per_head(memra_tensor t, int64_t n, int64_t d) {
  t.ne1 = n * (t.ne0 / d);
  t.ne0 = d;
  t.nb1 = (uint64_t)d * 4;
  return t;
}

/* Runs one vtable call; on failure returns the backend's message prefixed by what. */
#define MEMRA_FWD_CALL(what, expr)                                                                 \
  do {                                                                                             \
    memra_status st_ = (expr);                                                                     \
    if (st_ != MEMRA_OK) return memra_ctx_fail(c, st_, what, err);                                 \
  } while (0)

#endif
