/* llama.c — the forward pass of the llama family (llama, qwen2, qwen3), written only
 * against the backend vtable. Reads like the paper:
 *   x = embed(tokens)
 *   per layer: h = rmsnorm(x) ; q,k,v = h W (+b) ; [qwen3: q,k = rmsnorm per head]
 *              q,k = rope(q,k) ; cache k,v ; a = attention(q, cache) ; x += a Wo
 *              h = rmsnorm(x) ; x += (silu(h Wg) * (h Wu)) Wd
 *   logits = rmsnorm(x) Wout, for the rows asked for.
 * Every residual add is fused into the next rmsnorm. */
#include <math.h>

#include "core/models/forward.h"

static memra_tensor rows(memra_tensor t, int64_t n) {
  t.ne1 = n;
  return t;
}

/* A [n, n_head * d] tensor viewed as [n * n_head, d] for per-head norms. */
static memra_tensor per_head(memra_tensor t, int64_t n, int64_t d) {
  t.ne1 = n * (t.ne0 / d);
  t.ne0 = d;
  t.nb1 = (uint64_t)d * 4;
  return t;
}

#define CALL(what, expr)                                                                       \
  do {                                                                                         \
    memra_status st_ = (expr);                                                                 \
    if (st_ != MEMRA_OK) return memra_ctx_fail(c, st_, what, err);                             \
  } while (0)

memra_status memra_llama_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const int64_t n = c->n_rows;
  const memra_batch *b = &c->batch;

  memra_tensor x = rows(c->x, n), xn = rows(c->xn, n), q = rows(c->q, n), k = rows(c->k, n),
               v = rows(c->v, n), attn = rows(c->attn, n), proj = rows(c->proj, n),
               gate = rows(c->gate, n), up = rows(c->up, n), ids = c->ids;
  ids.ne0 = n;
  const memra_tensor none = {0};

  const memra_rope_params rope = {.n_head = hp->n_head,
                                  .head_dim = hp->head_dim,
                                  .n_rot = hp->n_rot,
                                  .mode = hp->rope_mode,
                                  .freq_base = hp->rope_base,
                                  .freq_scale = hp->rope_scale,
                                  .freq_factors = m->rope_freqs};
  memra_rope_params rope_k = rope;
  rope_k.n_head = hp->n_head_kv;
  const memra_attn_params ap = {.n_head = hp->n_head,
                                .n_kv_head = hp->n_head_kv,
                                .head_dim = hp->head_dim,
                                .window = 0,
                                .scale = 1.0f / sqrtf((float)hp->head_dim),
                                .softcap = 0};

  CALL("get_rows", vt->get_rows(be, &x, &m->tok_embd, &ids));
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < hp->n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
    CALL("attn rmsnorm", vt->rmsnorm(be, &xn, &x, pending ? pending : &none, &l->attn_norm,
                                     hp->eps));
    CALL("matmul q", vt->matmul(be, &q, &xn, &l->wq, &l->bq));
    CALL("matmul k", vt->matmul(be, &k, &xn, &l->wk, &l->bk));
    CALL("matmul v", vt->matmul(be, &v, &xn, &l->wv, &l->bv));
    if (l->q_norm.buf) {
      memra_tensor qh = per_head(q, n, hp->head_dim), kh = per_head(k, n, hp->head_dim);
      CALL("q norm", vt->rmsnorm(be, &qh, &qh, &none, &l->q_norm, hp->eps));
      CALL("k norm", vt->rmsnorm(be, &kh, &kh, &none, &l->k_norm, hp->eps));
    }
    CALL("rope q", vt->rope(be, &q, &b->pos, &rope));
    CALL("rope k", vt->rope(be, &k, &b->pos, &rope_k));
    CALL("kv_store", vt->kv_store(be, &c->k_cache[il], &c->v_cache[il], &k, &v, b));
    CALL("attention",
         vt->attention(be, &attn, &q, &c->k_cache[il], &c->v_cache[il], b, &ap));
    CALL("matmul o", vt->matmul(be, &proj, &attn, &l->wo, &none));
    CALL("ffn rmsnorm", vt->rmsnorm(be, &xn, &x, &proj, &l->ffn_norm, hp->eps));
    CALL("matmul gate", vt->matmul(be, &gate, &xn, &l->w_gate, &none));
    CALL("matmul up", vt->matmul(be, &up, &xn, &l->w_up, &none));
    CALL("glu", vt->glu(be, &gate, &gate, &up, MEMRA_ACT_SILU));
    CALL("matmul down", vt->matmul(be, &proj, &gate, &l->w_down, &none));
    pending = &proj;
  }
  CALL("output rmsnorm", vt->rmsnorm(be, &xn, &x, pending, &m->output_norm, hp->eps));
  if (c->n_out > 0) {
    memra_tensor sel = rows(c->sel, c->n_out), logits = rows(c->logits, c->n_out),
                 out_rows = c->out_rows;
    out_rows.ne0 = c->n_out;
    CALL("select rows", vt->get_rows(be, &sel, &xn, &out_rows));
    CALL("matmul output", vt->matmul(be, &logits, &sel, &m->output, &none));
  }
  return MEMRA_OK;
}
