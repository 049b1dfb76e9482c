/* moe_ffn.c — the routed mixture-of-experts FFN (llama.cpp build_moe_ffn with softmax
 * gating and normalized top-k weights; HF Qwen3MoeSparseMoeBlock, norm_topk_prob):
 *   p = softmax(xn W_router) ; S = top-k(p) ; w_i = p_i / sum_S p
 *   out = sum_{i in S} w_i * W_down_i (silu(W_gate_i xn) * W_up_i xn)
 * Only the chosen experts are computed; expert weights stay in their GGUF layout.
 * With a shared expert (qwen3next, qwen35moe; llama.cpp qwen3next.cpp build_layer_ffn):
 *   out += sigmoid(xn . w_shexp_gate) * W_down_s (silu(W_gate_s xn) * W_up_s xn) */
#include "core/models/blocks.h"

#define CALL MEMRA_FWD_CALL

memra_status memra_moe_ffn(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                           const memra_tensor *out, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const int64_t n = xn->ne1, k = hp->n_expert_used;
  if (!vt->moe_route || !vt->matmul_id || !vt->moe_combine)
    return memra_errf(err, MEMRA_E_UNSUPPORTED, "backend %s has no mixture-of-experts ops",
                      vt->name);
  const memra_tensor none = {0};
  memra_tensor router = memra_rows(c->router, n), ids = memra_rows(c->moe_ids, n),
               w = memra_rows(c->moe_w, n), gate = memra_rows(c->moe_gate, n * k),
               up = memra_rows(c->moe_up, n * k), down = memra_rows(c->moe_out, n * k);
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
  {
    const memra_tensor ys[4] = {router, sg, su, logit},
                       ws[4] = {l->ffn_gate_inp, l->ffn_gate_shexp, l->ffn_up_shexp,
                                l->ffn_gate_inp_shexp};
    MEMRA_TRY(memra_blk_matmuls(c,
                                shexp ? "matmul router, shared gate, up, logit" : "matmul router",
                                shexp ? 4 : 1, ys, xn, ws, NULL, err));
  }
  CALL("moe_route", vt->moe_route(be, &ids, &w, &router, 1));
  if (l->ffn_gate_up_exps.buf && vt->matmul_id_glu) { /* ABI 1.7: gate, up and glu at once */
    CALL("matmul_id gate+up+glu", vt->matmul_id_glu(be, &gate, xn, &l->ffn_gate_up_exps, &ids,
                                                    hp->n_expert, MEMRA_ACT_SILU));
  } else if (l->ffn_gate_up_exps.buf) { /* one launch for gate and up (model.c fuse_gate_up) */
    memra_tensor gu = gate;
    gu.ne0 = 2 * hp->n_ff_exp;
    CALL("matmul_id gate+up", vt->matmul_id(be, &gu, xn, &l->ffn_gate_up_exps, &ids, hp->n_expert));
    up = gate;
    up.offset += 4u * (uint64_t)hp->n_ff_exp;
    CALL("expert glu", vt->glu(be, &gate, &gate, &up, MEMRA_ACT_SILU));
  } else {
    CALL("matmul_id gate", vt->matmul_id(be, &gate, xn, &l->ffn_gate_exps, &ids, hp->n_expert));
    CALL("matmul_id up", vt->matmul_id(be, &up, xn, &l->ffn_up_exps, &ids, hp->n_expert));
    CALL("expert glu", vt->glu(be, &gate, &gate, &up, MEMRA_ACT_SILU));
  }
  CALL("matmul_id down", vt->matmul_id(be, &down, &gate, &l->ffn_down_exps, &ids, hp->n_expert));
  if (!shexp) {
    CALL("moe_combine", vt->moe_combine(be, out, &down, &w));
    return MEMRA_OK;
  }
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
