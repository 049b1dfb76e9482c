/* gemma3.c — the forward pass of Gemma 3, written only against the backend vtable
 * (llama.cpp src/models/gemma3.cpp; HF Gemma3DecoderLayer):
 *   x = embed(tokens) * sqrt(n_embd)
 *   per layer: h = rmsnorm(x) ; q,k,v = h W ; q,k = rmsnorm per head ; q,k = rope(theta_l)
 *              cache k,v ; a = attention(q, cache, window_l, scale) ; x += rmsnorm(a Wo)
 *              h = rmsnorm(x) ; x += rmsnorm((gelu_tanh(h Wg) * (h Wu)) Wd)
 *   logits = rmsnorm(x) Wout.
 * Local layers use the sliding window and theta_swa without position scaling; every
 * swa_pattern-th layer is global. Norm weights are plain multipliers: the converter already
 * added Gemma's +1. Each residual add is fused into the next rmsnorm. */
#include "core/models/forward.h"

#define CALL MEMRA_FWD_CALL

memra_status memra_gemma3_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const int64_t n = c->n_rows;
  const memra_batch *b = &c->batch;

  memra_tensor x = memra_rows(c->x, n), xn = memra_rows(c->xn, n), q = memra_rows(c->q, n),
               k = memra_rows(c->k, n), v = memra_rows(c->v, n), attn = memra_rows(c->attn, n),
               proj = memra_rows(c->proj, n), gate = memra_rows(c->gate, n),
               up = memra_rows(c->up, n), ids = c->ids;
  ids.ne0 = n;
  const memra_tensor none = {0};

  CALL("get_rows", vt->get_rows(be, &x, &m->tok_embd, &ids));
  CALL("embedding scale", vt->scale(be, &x, &x, hp->embd_scale));
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < hp->n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
    const bool swa = memra_hparams_layer_swa(hp, il);
    const memra_rope_params rope = {.n_head = hp->n_head,
                                    .head_dim = hp->head_dim,
                                    .n_rot = hp->n_rot,
                                    .mode = hp->rope_mode,
                                    .freq_base = swa ? hp->rope_base_swa : hp->rope_base,
                                    .freq_scale = swa ? 1.0f : hp->rope_scale,
                                    .freq_factors = none};
    memra_rope_params rope_k = rope;
    rope_k.n_head = hp->n_head_kv;
    const memra_attn_params ap = {.n_head = hp->n_head,
                                  .n_kv_head = hp->n_head_kv,
                                  .head_dim = hp->head_dim,
                                  .window = swa ? hp->n_swa : 0,
                                  .scale = hp->attn_scale,
                                  .softcap = 0};

    CALL("attn rmsnorm", vt->rmsnorm(be, &xn, &x, pending ? pending : &none, &l->attn_norm,
                                     hp->eps));
    CALL("matmul q", vt->matmul(be, &q, &xn, &l->wq, &none));
    CALL("matmul k", vt->matmul(be, &k, &xn, &l->wk, &none));
    CALL("matmul v", vt->matmul(be, &v, &xn, &l->wv, &none));
    memra_tensor qh = memra_per_head(q, n, hp->head_dim), kh = memra_per_head(k, n, hp->head_dim);
    CALL("q norm", vt->rmsnorm(be, &qh, &qh, &none, &l->q_norm, hp->eps));
    CALL("k norm", vt->rmsnorm(be, &kh, &kh, &none, &l->k_norm, hp->eps));
    CALL("rope q", vt->rope(be, &q, &b->pos, &rope));
    CALL("rope k", vt->rope(be, &k, &b->pos, &rope_k));
    CALL("kv_store", vt->kv_store(be, &c->k_cache[il], &c->v_cache[il], &k, &v, b));
    CALL("attention",
         vt->attention(be, &attn, &q, &c->k_cache[il], &c->v_cache[il], b, &ap));
    CALL("matmul o", vt->matmul(be, &proj, &attn, &l->wo, &none));
    CALL("post-attention rmsnorm",
         vt->rmsnorm(be, &proj, &proj, &none, &l->post_attn_norm, hp->eps));
    CALL("ffn rmsnorm", vt->rmsnorm(be, &xn, &x, &proj, &l->ffn_norm, hp->eps));
    CALL("matmul gate", vt->matmul(be, &gate, &xn, &l->w_gate, &none));
    CALL("matmul up", vt->matmul(be, &up, &xn, &l->w_up, &none));
    CALL("glu", vt->glu(be, &gate, &gate, &up, MEMRA_ACT_GELU_TANH));
    CALL("matmul down", vt->matmul(be, &proj, &gate, &l->w_down, &none));
    CALL("post-ffn rmsnorm", vt->rmsnorm(be, &proj, &proj, &none, &l->post_ffn_norm, hp->eps));
    pending = &proj;
  }
  CALL("output rmsnorm", vt->rmsnorm(be, &xn, &x, pending, &m->output_norm, hp->eps));
  if (c->n_out > 0) {
    memra_tensor sel = memra_rows(c->sel, c->n_out), logits = memra_rows(c->logits, c->n_out),
                 out_rows = c->out_rows;
    out_rows.ne0 = c->n_out;
    CALL("select rows", vt->get_rows(be, &sel, &xn, &out_rows));
    CALL("matmul output", vt->matmul(be, &logits, &sel, &m->output, &none));
  }
  return MEMRA_OK;
}
