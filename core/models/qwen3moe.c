/* qwen3moe.c — the forward pass of Qwen3-MoE (llama.cpp src/models/qwen3moe.cpp; HF
 * Qwen3MoeDecoderLayer): qwen3 attention (per-head q/k RMSNorm, NEOX RoPE over the whole
 * head) and, in every layer, the routed-expert FFN of moe_ffn.c:
 *   per layer: h = rmsnorm(x) ; q,k,v = h W ; q,k = rmsnorm per head ; rope ; cache
 *              x += attention(q, cache) Wo ; h = rmsnorm(x) ; x += moe(h)
 *   logits = rmsnorm(x) Wout. Each residual add is fused into the next rmsnorm; in decode steps
 * o adds itself into x (ABI 1.17 matmul_acc), the attention norm goes with q, k, v and the ffn
 * norm with the router's call (ABI 1.14 rmsnorm_matmul_n), as the llama family's norms go with
 * their projections. */
#include "core/models/blocks.h"

memra_status memra_qwen3moe_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const int64_t n = c->n_rows;
  const memra_tensor x = memra_rows(c->x, n), xn = memra_rows(c->xn, n),
                     proj = memra_rows(c->proj, n);
  const memra_attn_cfg attn = memra_attn_cfg_default(&m->hp);

  MEMRA_TRY(memra_blk_embed(c, &x, err));
  c->proj_defer.ok = true;            /* o goes to the norm that adds it: nothing else reads it */
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < m->hp.n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
    const memra_tensor w_qkv[3] = {l->wq, l->wk, l->wv};
    memra_tensor h; /* the projections' input: xn, or its 16-bit gemm operand */
    MEMRA_TRY(memra_blk_add_norm_proj(c, "attn rmsnorm", &xn, &x, pending, &l->attn_norm, 3, w_qkv,
                                      &h, err));
    MEMRA_TRY(memra_blk_attention(c, il, &h, &proj, &attn, err));
    /* xn: the router and the experts read it in F32 */
    MEMRA_TRY(
        memra_blk_add_norm_proj(c, "ffn rmsnorm", &xn, &x, &proj, &l->ffn_norm, 0, NULL, &h, err));
    MEMRA_TRY(memra_moe_ffn(c, l, &h, &proj, err));
    pending = &proj;
  }
  return memra_blk_logits(c, &x, &xn, pending, err);
}
