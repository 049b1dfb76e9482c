/* qwen3moe.c — the forward pass of Qwen3-MoE (llama.cpp src/models/qwen3moe.cpp; HF
 * Qwen3MoeDecoderLayer): qwen3 attention (per-head q/k RMSNorm, NEOX RoPE over the whole
 * head) and, in every layer, the routed-expert FFN of moe_ffn.c:
 *   per layer: h = rmsnorm(x) ; q,k,v = h W ; q,k = rmsnorm per head ; rope ; cache
 *              x += attention(q, cache) Wo ; h = rmsnorm(x) ; x += moe(h)
 *   logits = rmsnorm(x) Wout. Each residual add is fused into the next rmsnorm. */
#include "core/models/forward.h"

#define CALL MEMRA_FWD_CALL

memra_status memra_qwen3moe_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const int64_t n = c->n_rows;
  const memra_batch *b = &c->batch;

  memra_tensor x = memra_rows(c->x, n), xn = memra_rows(c->xn, n), q = memra_rows(c->q, n),
               k = memra_rows(c->k, n), v = memra_rows(c->v, n), attn = memra_rows(c->attn, n),
               proj = memra_rows(c->proj, n), ids = c->ids;
  ids.ne0 = n;
  const memra_tensor none = {0};
  const memra_rope_params rope = {.n_head = hp->n_head,
                                  .head_dim = hp->head_dim,
                                  .n_rot = hp->n_rot,
                                  .mode = hp->rope_mode,
                                  .freq_base = hp->rope_base,
                                  .freq_scale = hp->rope_scale,
                                  .freq_factors = none};
  memra_rope_params rope_k = rope;
  rope_k.n_head = hp->n_head_kv;
  const memra_attn_params ap = {.n_head = hp->n_head,
                                .n_kv_head = hp->n_head_kv,
                                .head_dim = hp->head_dim,
                                .window = 0,
                                .scale = hp->attn_scale,
                                .softcap = 0};

  CALL("get_rows", vt->get_rows(be, &x, &m->tok_embd, &ids));
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < hp->n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
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
    CALL("ffn rmsnorm", vt->rmsnorm(be, &xn, &x, &proj, &l->ffn_norm, hp->eps));
    memra_status st = memra_moe_ffn(c, l, &xn, &proj, err);
    if (st) return st;
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
