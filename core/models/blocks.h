/* blocks.h — the steps the family forward passes share (blocks.c): the embedding lookup,
 * the fused residual-add + RMSNorm, the attention block, the gated FFN and the logits
 * tail. Each family file composes them and keeps only what is its own. Every step issues
 * the same vtable calls, with the same error prefixes, that the families issued inline.
 * Internal to core/models. */
#ifndef MEMRA_BLOCKS_H
#define MEMRA_BLOCKS_H

#include "core/models/forward.h"

/* What differs between the families' attention blocks. */
typedef struct memra_attn_cfg {
  memra_rope_params rope; /* for q; k is roped with the same, over n_head_kv heads */
  memra_attn_params attn;
  bool qkv_bias; /* add bq, bk, bv (the llama family; absent ones are zero views) */
} memra_attn_cfg;

/* The hparams' defaults: rope_base/rope_scale without frequency factors, full causal
 * attention (no window, no softcap) scaled by attn_scale, no q/k/v biases. */
memra_attn_cfg memra_attn_cfg_default(const memra_hparams *hp);

/* Returns from the calling function when expr fails (its message is already set). */
#define MEMRA_TRY(expr)                                                                            \
  do {                                                                                             \
    memra_status st_ = (expr);                                                                     \
    if (st_ != MEMRA_OK) return st_;                                                               \
  } while (0)

/* y = x w^T (+ bias; NULL = none) over the step's rows: the leading c->n_decode rows
 * through matmul, the prompt rows through gemm when the plugin has it; what names it in
 * errors. */
memra_status memra_blk_matmul(memra_ctx *c, const char *what, const memra_tensor *y,
                              const memra_tensor *x, const memra_tensor *w,
                              const memra_tensor *bias, memra_err *err);

/* y[i] = x w[i]^T (+ bias[i]; bias NULL = none) for i < n <= MEMRA_BLK_MATMULS_MAX projections
 * of one x: in decode-only steps one matmul_n per group of same-type weights (at most 4 a
 * call), with prompt rows one gemm_n when all share a type (n <= 4), else memra_blk_matmul
 * each. The same bits as memra_blk_matmul per output (matmul_n's and gemm_n's contracts). No
 * y[i] may overlap x or another y. */
enum { MEMRA_BLK_MATMULS_MAX = 8 };
memra_status memra_blk_matmuls(memra_ctx *c, const char *what, int n, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *bias, memra_err *err);

/* The route of a MoE layer's router logits (moe_route's ids, weights and normalize) and whether
 * the call that made the logits took it. */
typedef struct memra_blk_route {
  memra_tensor ids, weights;
  int32_t normalize;
  bool done;
} memra_blk_route;
/* memra_blk_matmuls without biases, y[0] a router's logits: in decode-only steps of a plugin with
 * matmul_n_route (ABI 1.22) the call that makes y[0] routes it too (rt->done); otherwise rt->done
 * is false and the caller routes. rt NULL: memra_blk_matmuls. */
memra_status memra_blk_matmuls_route(memra_ctx *c, const char *what, int n, const memra_tensor *y,
                                     const memra_tensor *x, const memra_tensor *w,
                                     memra_blk_route *rt, memra_err *err);

/* Groups of the n weights that share type and row width (one fused matmul_n each), numbered
 * in order of their first member: group[i] is weight i's group. Returns the groups' count. */
int memra_blk_same_type_groups(const memra_tensor *w, int n, int *group);

/* x [n, n_embd] = the embedding rows of the batch's tokens. */
memra_status memra_blk_embed(memra_ctx *c, const memra_tensor *x, memra_err *err);

/* x += *add (when add is not NULL), then xn = rmsnorm(x) * w; what names it in errors. */
memra_status memra_blk_add_norm(memra_ctx *c, const char *what, const memra_tensor *xn,
                                const memra_tensor *x, const memra_tensor *add,
                                const memra_tensor *w, memra_err *err);

/* ABI 1.6: the 16-bit type the plugin's gemm rounds x to for every one of w[0..n), when
 * this step may hand it x in that type: no decode rows, the plugin has gemm and
 * gemm_x_type, all n answers agree and each K is a multiple of 8 (16-byte rows).
 * MEMRA_TYPE_F32 otherwise. */
int32_t memra_blk_op16_type(const memra_ctx *c, int32_t n, const memra_tensor *w);

/* x += *add, then the rmsnorm of x that feeds the projections w[0..n) (n 0: xn, F32): into the
 * context's 16-bit operand buffer when memra_blk_op16_type allows (gemm then skips its conversion
 * and gives the same bits), into xn otherwise. *h is set to the tensor written. In decode-only
 * steps of a plugin with rmsnorm_matmul_n and rmsnorm_ffn_glu (ABI 1.14) the norm is deferred
 * (c->norm_defer) into the next memra_blk_matmuls or memra_blk_glu_ffn on *h. */
memra_status memra_blk_add_norm_proj(memra_ctx *c, const char *what, const memra_tensor *xn,
                                     const memra_tensor *x, const memra_tensor *add,
                                     const memra_tensor *w_norm, int32_t n, const memra_tensor *w,
                                     memra_tensor *h, memra_err *err);

/* The norm memra_blk_add_norm_proj deferred (ABI 1.14), run now as rmsnorm; nothing when none
 * waits. Every reader of xn other than the projections that take the norm with them calls it
 * first. */
memra_status memra_blk_norm_flush(memra_ctx *c, memra_err *err);
/* The projection memra_blk_proj_matmul left waiting (c->proj_defer), as a plain matmul. */
memra_status memra_blk_proj_flush(memra_ctx *c, memra_err *err);
/* A MoE layer's combine into y of its expert rows down with the token weights w (logit present:
 * the stacked shared expert too, moe_combine_shexp): in a decode-only step whose plugin has
 * moe_combine_rmsnorm (ABI 1.20) left for the norm that adds y (memra_blk_add_norm,
 * memra_blk_logits), else run now. */
memra_status memra_blk_moe_combine(memra_ctx *c, const memra_tensor *y, const memra_tensor *down,
                                   const memra_tensor *w, const memra_tensor *logit,
                                   memra_err *err);
/* The combine memra_blk_moe_combine left waiting (c->combine_defer), run now. */
memra_status memra_blk_combine_flush(memra_ctx *c, memra_err *err);
/* y = a w^T into the residual branch; in a decode-only step whose family allows it
 * (c->proj_defer.ok) and whose plugin has matmul_acc (ABI 1.17, with the 1.14 slots) or
 * matmul_rmsnorm (ABI 1.15), left for the norm that adds y (memra_blk_add_norm_proj,
 * memra_blk_add_norm, memra_blk_logits): matmul_acc adds it into x there (y its scratch) and
 * the norm goes without a residual, or matmul_rmsnorm does both. */
memra_status memra_blk_proj_matmul(memra_ctx *c, const char *what, const memra_tensor *y,
                                   const memra_tensor *a, const memra_tensor *w, memra_err *err);

/* q, k = rope(q, k) ; cache k, v in layer il ; attn = attention(q, cache). */
memra_status memra_blk_rope_attend(memra_ctx *c, int il, const memra_tensor *q,
                                   const memra_tensor *k, const memra_tensor *v,
                                   const memra_tensor *attn, const memra_attn_cfg *cfg,
                                   memra_err *err);
/* The same, then attn = attn * sigmoid(gate) over attn's per-head view (gate: a per-head view
 * [n_rows * n_head, head_dim], Qwen3-Next's output gate): one ABI 1.11 attention_gate call when
 * the step's rows attend in one call and the plugin has it, else sigmoid_gate after. */
memra_status memra_blk_rope_attend_gated(memra_ctx *c, int il, const memra_tensor *q,
                                         const memra_tensor *k, const memra_tensor *v,
                                         const memra_tensor *attn, const memra_attn_cfg *cfg,
                                         const memra_tensor *gate, memra_err *err);

/* q = rmsnorm per head of q_in (NULL: of q, in place) with layer il's q_norm, k = rmsnorm per
 * head with its k_norm, then memra_blk_rope_attend_gated (gate NULL: memra_blk_rope_attend):
 * in the decode-only steps that take rope_kv_store, the norms, rope and kv_store in one ABI 1.19
 * rmsnorm_qk_rope_kv call when the plugin has it (their bits). q_in: a per-head view
 * [n_rows * n_head, head_dim]. */
memra_status memra_blk_qk_norm_rope_attend(memra_ctx *c, int il, const memra_tensor *q,
                                           const memra_tensor *q_in, const memra_tensor *k,
                                           const memra_tensor *v, const memra_tensor *attn,
                                           const memra_attn_cfg *cfg, const memra_tensor *gate,
                                           memra_err *err);

/* out = attention of layer il on xn (F32, or the operand memra_blk_add_norm_proj made
 * for wq, wk, wv): q,k,v = xn W (+b) ; q,k = rmsnorm per head (when the
 * layer has q_norm) ; rope ; cache ; attention ; out = a Wo. Decode-only steps of layers
 * without q_norm give the projections (q, k and v, or q and k after a v of another type), rope
 * and cache to one ABI 1.16 matmul_n_rope_kv call when the plugin has it, unless rope_kv_attend
 * takes the step or a norm waits to go with the projections (ABI 1.14). */
memra_status memra_blk_attention(memra_ctx *c, int il, const memra_tensor *xn,
                                 const memra_tensor *out, const memra_attn_cfg *cfg,
                                 memra_err *err);

/* out = (act(xn Wgate) * (xn Wup)) Wdown with the layer's dense FFN (width n_ff); xn as
 * for memra_blk_attention (made for w_gate, w_up). glu writes Wdown's 16-bit operand
 * when memra_blk_op16_type allows. */
memra_status memra_blk_glu_ffn(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                               const memra_tensor *out, memra_act act, memra_err *err);

/* x += *pending ; logits = rmsnorm(x) Wout for the rows asked for (xn is scratch). */
memra_status memra_blk_logits(memra_ctx *c, const memra_tensor *x, const memra_tensor *xn,
                              const memra_tensor *pending, memra_err *err);

#endif
