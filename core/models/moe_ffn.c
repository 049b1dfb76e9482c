/* moe_ffn.c — the routed mixture-of-experts FFN (llama.cpp build_moe_ffn with softmax
 * gating and normalized top-k weights; HF Qwen3MoeSparseMoeBlock, norm_topk_prob):
 *   p = softmax(xn W_router) ; S = top-k(p) ; w_i = p_i / sum_S p
 *   out = sum_{i in S} w_i * W_down_i (silu(W_gate_i xn) * W_up_i xn)
 * Only the chosen experts are computed; expert weights stay in their GGUF layout.
 * With a shared expert (qwen3next, qwen35moe; llama.cpp qwen3next.cpp build_layer_ffn):
 *   out += sigmoid(xn . w_shexp_gate) * W_down_s (silu(W_gate_s xn) * W_up_s xn)
 * Two paths compute that: apart (the shared expert's own matmuls, glu and a gated combine) and,
 * for decode rows of a layer whose stacks hold the shared expert as expert n_expert (ABI 1.9,
 * model.c stack_shexp), stacked (every token's (k+1)-th expert inside the routed launches). */
#include "core/models/blocks.h"

#define CALL MEMRA_FWD_CALL

/* Whether this step's combine goes with the norm after it (ABI 1.20 moe_combine_rmsnorm, a
 * decode-only step): then matmul_id_combine (ABI 1.9) gives way, the down projection runs alone. */
static bool combine_defers(const memra_ctx *c) {
  return c->m->vt->moe_combine_rmsnorm && c->n_decode >= c->n_rows;
}

/* The experts' gate, up and glu into gate [rows, n_ff_exp]: one launch when the plugin has
 * matmul_id_glu and the stacks are fused, else the calls it replaces. */
static memra_status experts_glu(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                                const memra_tensor *gate, const memra_tensor *ids, int32_t n_exp,
                                memra_err *err) {
  const memra_backend_vt *vt = c->m->vt;
  memra_backend *be = c->m->be;
  const int64_t F = c->m->hp.n_ff_exp;
  memra_tensor up = memra_rows(c->moe_up, gate->ne1);
  if (l->ffn_gate_up_exps.buf && vt->matmul_id_glu) { /* ABI 1.7: gate, up and glu at once */
    CALL("matmul_id gate+up+glu",
         vt->matmul_id_glu(be, gate, xn, &l->ffn_gate_up_exps, ids, n_exp, MEMRA_ACT_SILU));
  } else if (l->ffn_gate_up_exps.buf) { /* one launch for gate and up (model.c fuse_gate_up) */
    memra_tensor gu = *gate;
    gu.ne0 = 2 * F;
    CALL("matmul_id gate+up", vt->matmul_id(be, &gu, xn, &l->ffn_gate_up_exps, ids, n_exp));
    up = *gate;
    up.offset += 4u * (uint64_t)F;
    CALL("expert glu", vt->glu(be, gate, gate, &up, MEMRA_ACT_SILU));
  } else {
    CALL("matmul_id gate", vt->matmul_id(be, gate, xn, &l->ffn_gate_exps, ids, n_exp));
    CALL("matmul_id up", vt->matmul_id(be, &up, xn, &l->ffn_up_exps, ids, n_exp));
    CALL("expert glu", vt->glu(be, gate, gate, &up, MEMRA_ACT_SILU));
  }
  return MEMRA_OK;
}

/* Whether route_glu routes inside the experts' call (ABI 1.21 moe_route_glu, fused stacks). */
static bool route_in_experts(const memra_ctx *c, const memra_layer *l) {
  const memra_backend_vt *vt = c->m->vt;
  return vt->moe_route_glu && vt->matmul_id_glu && l->ffn_gate_up_exps.buf;
}

/* The route offered to the router's call (ABI 1.22 matmul_n_route: a decode step's route with
 * the router's GEMV) where route_glu would not take it into the experts' launch (ABI 1.21 keeps
 * its place where the plugin has it); NULL where neither. */
static memra_blk_route *route_offer(const memra_ctx *c, const memra_layer *l,
                                    const memra_tensor *ids, const memra_tensor *w,
                                    memra_blk_route *rt) {
  if (!c->m->vt->matmul_n_route || route_in_experts(c, l)) return NULL;
  rt->ids = *ids;
  rt->ids.ne0 = w->ne0; /* the routed columns only */
  rt->weights = *w;
  rt->normalize = 1;
  return rt;
}

/* The route into ids' first w->ne0 columns, then the experts' gate, up and glu over all of ids'
 * columns: one call where the plugin has moe_route_glu (ABI 1.21) and the stacks are fused (its
 * GPU form routes a decode step inside the experts' launch), else the calls it stands for.
 * routed: the router's call routed already (route_offer), the experts' calls remain. */
static memra_status route_glu(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                              const memra_tensor *gate, const memra_tensor *ids,
                              const memra_tensor *w, const memra_tensor *router, int32_t n_exp,
                              bool routed, memra_err *err) {
  const memra_backend_vt *vt = c->m->vt;
  memra_backend *be = c->m->be;
  if (routed) return experts_glu(c, l, xn, gate, ids, n_exp, err);
  if (route_in_experts(c, l)) {
    CALL("moe_route + matmul_id gate+up+glu",
         vt->moe_route_glu(be, gate, xn, &l->ffn_gate_up_exps, ids, n_exp, MEMRA_ACT_SILU, w,
                           router, 1));
    return MEMRA_OK;
  }
  memra_tensor route = *ids;
  route.ne0 = w->ne0; /* moe_route fills the routed columns only */
  CALL("moe_route", vt->moe_route(be, &route, w, router, 1));
  return experts_glu(c, l, xn, gate, ids, n_exp, err);
}

/* A layer whose shared expert is expert n_expert of its stacks (model.c stack_shexp): the ids
 * buffer's column k holds n_expert for every token (context.c), so the routed launches
 * compute the shared expert as every token's (k+1)-th expert; the router and the shared gate
 * logit still read xn in one call. */
static memra_status moe_ffn_stacked(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                                    const memra_tensor *out, memra_err *err) {
  const memra_hparams *hp = &c->m->hp;
  const memra_backend_vt *vt = c->m->vt;
  memra_backend *be = c->m->be;
  const int64_t n = xn->ne1, k1 = hp->n_expert_used + 1;
  memra_tensor router = memra_rows(c->router, n), logit = memra_rows(c->sh_logit, n),
               ids = memra_rows(c->moe_ids, n), w = memra_rows(c->moe_w, n),
               gate = memra_rows(c->moe_gate, n * k1), down = memra_rows(c->moe_out, n * k1);
  gate.ne0 = hp->n_ff_exp;
  memra_blk_route rt;
  memra_blk_route *offer = route_offer(c, l, &ids, &w, &rt);
  {
    const memra_tensor ys[2] = {router, logit}, ws[2] = {l->ffn_gate_inp, l->ffn_gate_inp_shexp};
    MEMRA_TRY(memra_blk_matmuls_route(c, "matmul router, shared logit", 2, ys, xn, ws, offer, err));
  }
  MEMRA_TRY(route_glu(c, l, xn, &gate, &ids, &w, &router, hp->n_expert + 1, offer && rt.done, err));
  if (vt->matmul_id_combine && !combine_defers(c)) { /* ABI 1.9: down and the combine at once */
    CALL("matmul_id_combine", vt->matmul_id_combine(be, out, &gate, &l->ffn_down_exps, &ids,
                                                    hp->n_expert + 1, &w, &logit));
    return MEMRA_OK;
  }
  CALL("matmul_id down",
       vt->matmul_id(be, &down, &gate, &l->ffn_down_exps, &ids, hp->n_expert + 1));
  return memra_blk_moe_combine(c, out, &down, &w, &logit, err); /* ABI 1.20: with the next norm */
}

static memra_status moe_ffn_apart(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                                  const memra_tensor *out, memra_err *err);

/* Rows [r0, r0 + nr) of xn and out as a step of their own: nr rows, nd of them decode rows
 * (the grouped projections inside read the split from the context). */
static memra_status moe_rows(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                             const memra_tensor *out, int64_t r0, int32_t nr, int32_t nd,
                             bool stacked, memra_err *err) {
  memra_tensor xs = *xn, os = *out;
  xs.offset += (uint64_t)r0 * xs.nb1;
  os.offset += (uint64_t)r0 * os.nb1;
  xs.ne1 = os.ne1 = nr;
  const int32_t n_rows = c->n_rows, n_decode = c->n_decode;
  c->n_rows = nr;
  c->n_decode = nd;
  const memra_status st =
      stacked ? moe_ffn_stacked(c, l, &xs, &os, err) : moe_ffn_apart(c, l, &xs, &os, err);
  c->n_rows = n_rows;
  c->n_decode = n_decode;
  return st;
}

/* A stacked layer's decode rows take the stacked path; its prompt rows keep the shared expert
 * apart, where its gate, up and down run as prompt-row GEMMs (the stacked path would run them
 * through matmul_id: pp512 -3 to -5%, docs/PERF.md). Each kind of row takes one path in every
 * step, so a decode row's bits never depend on the batch, nor a prompt row's on its chunk. */
memra_status memra_moe_ffn(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                           const memra_tensor *out, memra_err *err) {
  const memra_backend_vt *vt = c->m->vt;
  if (!vt->moe_route || !vt->matmul_id || !vt->moe_combine)
    return memra_errf(err, MEMRA_E_UNSUPPORTED, "backend %s has no mixture-of-experts ops",
                      vt->name);
  if (!l->shexp_stacked || !vt->moe_combine_shexp) return moe_ffn_apart(c, l, xn, out, err);
  const int32_t n = (int32_t)xn->ne1, d = c->n_decode < n ? c->n_decode : n;
  if (d == n) return moe_ffn_stacked(c, l, xn, out, err);
  if (d > 0) MEMRA_TRY(moe_rows(c, l, xn, out, 0, d, d, true, err));
  return moe_rows(c, l, xn, out, d, n - d, 0, false, err);
}

/* The shared expert apart from the routed ones (or none): its gate and up with the router,
 * its glu and down, then the combine with its sigmoid gate. */
static memra_status moe_ffn_apart(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                                  const memra_tensor *out, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const int64_t n = xn->ne1, k = hp->n_expert_used;
  memra_layer routed;
  if (l->shexp_stacked) { /* the routed experts only: the stacks' first n_expert */
    routed = *l;
    memra_tensor *st[4] = {&routed.ffn_gate_up_exps, &routed.ffn_gate_exps, &routed.ffn_up_exps,
                           &routed.ffn_down_exps};
    for (int i = 0; i < 4; ++i)
      st[i]->ne1 = st[i]->ne1 / (hp->n_expert + 1) * hp->n_expert;
    l = &routed;
  }
  const memra_tensor none = {0};
  memra_tensor router = memra_rows(c->router, n), ids = memra_rows(c->moe_ids, n),
               w = memra_rows(c->moe_w, n), gate = memra_rows(c->moe_gate, n * k),
               down = memra_rows(c->moe_out, n * k);
  ids.ne0 = k;             /* the buffer's rows hold k + 1 ids with a shared expert (context.c) */
  gate.ne0 = hp->n_ff_exp; /* the buffer's rows hold 2 n_ff_exp: gate, then (fused) up */
  const bool shexp = l->ffn_gate_shexp.buf != NULL;
  if (shexp && !vt->sigmoid_gate)
    return memra_errf(err, MEMRA_E_UNSUPPORTED, "backend %s has no sigmoid_gate op", vt->name);
  /* the shared expert's gate and up and its gate logit read xn like the router: one fused
   * call per same-type group (the router and the logit are F32 in quantized files) */
  memra_tensor sg = memra_rows(c->gate, n), su = memra_rows(c->up, n),
               logit = memra_rows(c->sh_logit, n), sh = memra_rows(c->sh_out, n);
  sg.ne0 = su.ne0 = hp->n_ff_shexp;
  sg.nb1 = su.nb1 = 4u * (uint64_t)hp->n_ff_shexp;
  memra_blk_route rt;
  memra_blk_route *offer = route_offer(c, l, &ids, &w, &rt);
  {
    const memra_tensor ys[4] = {router, sg, su, logit},
                       ws[4] = {l->ffn_gate_inp, l->ffn_gate_shexp, l->ffn_up_shexp,
                                l->ffn_gate_inp_shexp};
    MEMRA_TRY(memra_blk_matmuls_route(
        c, shexp ? "matmul router, shared gate, up, logit" : "matmul router", shexp ? 4 : 1, ys, xn,
        ws, offer, err));
  }
  MEMRA_TRY(route_glu(c, l, xn, &gate, &ids, &w, &router, hp->n_expert, offer && rt.done, err));
  if (!shexp && vt->matmul_id_combine && !combine_defers(c)) { /* ABI 1.9 */
    CALL("matmul_id_combine",
         vt->matmul_id_combine(be, out, &gate, &l->ffn_down_exps, &ids, hp->n_expert, &w, NULL));
    return MEMRA_OK;
  }
  CALL("matmul_id down", vt->matmul_id(be, &down, &gate, &l->ffn_down_exps, &ids, hp->n_expert));
  if (!shexp) return memra_blk_moe_combine(c, out, &down, &w, NULL, err); /* ABI 1.20 */
  CALL("shared glu", vt->glu(be, &sg, &sg, &su, MEMRA_ACT_SILU));
  MEMRA_TRY(memra_blk_matmul(c, "matmul shared down", &sh, &sg, &l->ffn_down_shexp, &none, err));
  if (vt->moe_combine_gated) { /* ABI 1.7: the three calls below in one, the same bits */
    CALL("moe_combine_gated", vt->moe_combine_gated(be, out, &down, &w, &sh, &logit));
    return MEMRA_OK;
  }
  CALL("moe_combine", vt->moe_combine(be, out, &down, &w));
  CALL("sigmoid_gate shared", vt->sigmoid_gate(be, &sh, &sh, &logit));
  CALL("add shared expert", vt->add(be, out, out, &sh));
  return MEMRA_OK;
}
