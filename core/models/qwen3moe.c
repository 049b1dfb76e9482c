/* qwen3moe.c — the forward pass of Qwen3-MoE (llama.cpp src/models/qwen3moe.cpp; HF
 * Qwen3MoeDecoderLayer): qwen3 attention (per-head q/k RMSNorm, NEOX RoPE over the whole
 * head) and, in every layer, the routed-expert FFN of moe_ffn.c:
 *   per layer: h = rmsnorm(x) ; q,k,v = h W ; q,k = rmsnorm per head ; rope ; cache
 *              x += attention(q, cache) Wo ; h = rmsnorm(x) ; x += moe(h)
 *   logits = rmsnorm(x) Wout. Each residual add is fused into the next rmsnorm. */
#include "core/models/blocks.h"

memra_status memra_qwen3moe_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const int64_t n = c->n_rows;
  const memra_tensor x = memra_rows(c->x, n), xn = memra_rows(c->xn, n),
                     proj = memra_rows(c->proj, n);
  const memra_attn_cfg attn = memra_attn_cfg_default(&m->hp);

  MEMRA_TRY(memra_blk_embed(c, &x, err));
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < m->hp.n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
    MEMRA_TRY(memra_blk_add_norm(c, "attn rmsnorm", &xn, &x, pending, &l->attn_norm, err));
    MEMRA_TRY(memra_blk_attention(c, il, &xn, &proj, &attn, err));
    MEMRA_TRY(memra_blk_add_norm(c, "ffn rmsnorm", &xn, &x, &proj, &l->ffn_norm, err));
    MEMRA_TRY(memra_moe_ffn(c, l, &xn, &proj, err));
    pending = &proj;
  }
  return memra_blk_logits(c, &x, &xn, pending, err);
}
