/* llama.c — the forward pass of the llama family (llama, qwen2, qwen3), written only
 * against the backend vtable through the shared blocks. Reads like the paper:
 *   x = embed(tokens)
 *   per layer: h = rmsnorm(x) ; q,k,v = h W (+b) ; [qwen3: q,k = rmsnorm per head]
 *              q,k = rope(q,k) ; cache k,v ; a = attention(q, cache) ; x += a Wo
 *              h = rmsnorm(x) ; x += (silu(h Wg) * (h Wu)) Wd
 *   logits = rmsnorm(x) Wout, for the rows asked for.
 * Every residual add is fused into the next rmsnorm. */
#include "core/models/blocks.h"

memra_status memra_llama_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const int64_t n = c->n_rows;
  const memra_tensor x = memra_rows(c->x, n), xn = memra_rows(c->xn, n),
                     proj = memra_rows(c->proj, n);
  memra_attn_cfg attn = memra_attn_cfg_default(&m->hp);
  attn.qkv_bias = true;                   /* qwen2; zero views elsewhere */
  attn.rope.freq_factors = m->rope_freqs; /* llama 3.1 long-context factors, if present */

  MEMRA_TRY(memra_blk_embed(c, &x, err));
  /* o and down go to the norms that add them (ABI 1.15 matmul_rmsnorm): nothing else reads them */
  c->proj_defer.ok = true;
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < m->hp.n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
    const memra_tensor w_qkv[3] = {l->wq, l->wk, l->wv}, w_gu[2] = {l->w_gate, l->w_up};
    memra_tensor h; /* the projections' input: xn, or its 16-bit gemm operand */
    MEMRA_TRY(memra_blk_add_norm_proj(c, "attn rmsnorm", &xn, &x, pending, &l->attn_norm, 3, w_qkv,
                                      &h, err));
    MEMRA_TRY(memra_blk_attention(c, il, &h, &proj, &attn, err));
    MEMRA_TRY(
        memra_blk_add_norm_proj(c, "ffn rmsnorm", &xn, &x, &proj, &l->ffn_norm, 2, w_gu, &h, err));
    MEMRA_TRY(memra_blk_glu_ffn(c, l, &h, &proj, MEMRA_ACT_SILU, err));
    pending = &proj;
  }
  return memra_blk_logits(c, &x, &xn, pending, err);
}
