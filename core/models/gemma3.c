/* gemma3.c — the forward pass of Gemma 3, written only against the backend vtable through
 * the shared blocks (llama.cpp src/models/gemma3.cpp; HF Gemma3DecoderLayer):
 *   x = embed(tokens) * sqrt(n_embd)
 *   per layer: h = rmsnorm(x) ; q,k,v = h W ; q,k = rmsnorm per head ; q,k = rope(theta_l)
 *              cache k,v ; a = attention(q, cache, window_l, scale) ; x += rmsnorm(a Wo)
 *              h = rmsnorm(x) ; x += rmsnorm((gelu_tanh(h Wg) * (h Wu)) Wd)
 *   logits = rmsnorm(x) Wout.
 * Local layers use the sliding window and theta_swa without position scaling; every
 * swa_pattern-th layer is global. Norm weights are plain multipliers: the converter already
 * added Gemma's +1. Each residual add is fused into the next rmsnorm. */
#include "core/models/blocks.h"

#define CALL MEMRA_FWD_CALL

memra_status memra_gemma3_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const int64_t n = c->n_rows;
  const memra_tensor x = memra_rows(c->x, n), xn = memra_rows(c->xn, n),
                     proj = memra_rows(c->proj, n), none = {0};

  MEMRA_TRY(memra_blk_embed(c, &x, err));
  CALL("embedding scale", vt->scale(be, &x, &x, hp->embd_scale));
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < hp->n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
    const bool swa = memra_hparams_layer_swa(hp, il);
    memra_attn_cfg attn = memra_attn_cfg_default(hp);
    if (swa) {
      attn.rope.freq_base = hp->rope_base_swa;
      attn.rope.freq_scale = 1.0f;
      attn.attn.window = hp->n_swa;
    }
    MEMRA_TRY(memra_blk_add_norm(c, "attn rmsnorm", &xn, &x, pending, &l->attn_norm, err));
    MEMRA_TRY(memra_blk_attention(c, il, &xn, &proj, &attn, err));
    CALL("post-attention rmsnorm",
         vt->rmsnorm(be, &proj, &proj, &none, &l->post_attn_norm, hp->eps));
    MEMRA_TRY(memra_blk_add_norm(c, "ffn rmsnorm", &xn, &x, &proj, &l->ffn_norm, err));
    MEMRA_TRY(memra_blk_glu_ffn(c, l, &xn, &proj, MEMRA_ACT_GELU_TANH, err));
    CALL("post-ffn rmsnorm", vt->rmsnorm(be, &proj, &proj, &none, &l->post_ffn_norm, hp->eps));
    pending = &proj;
  }
  return memra_blk_logits(c, &x, &xn, pending, err);
}
