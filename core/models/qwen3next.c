/* qwen3next.c — the forward pass of the hybrid Gated DeltaNet families qwen3next, qwen35
 * and qwen35moe (llama.cpp src/models/qwen3next.cpp, qwen35.cpp; HF Qwen3NextDecoderLayer;
 * facts in shared/research/hybrid-and-moe.md). Per layer: x += mixer(rmsnorm(x)), then
 * x += ffn(rmsnorm(x)), where the mixer is
 *   GDN layer:  qkv = h Wqkv ; z = h Wz ; b = h Wb ; a = h Wa
 *               u = silu(causal_conv(qkv)) (conv state per sequence) ; q,k,v = split(u)
 *               o = gated_delta_rule(q, k, v, a, b) (delta state per sequence)
 *               out = (rmsnorm_per_head(o) * silu(z)) Wout
 *   attention:  [q|gate] per head = h Wq ; q,k = rmsnorm per head ; partial NEOX rope
 *               out = (attention(q, cache) * sigmoid(gate)) Wo
 * and the FFN is routed + shared experts (qwen3next, qwen35moe) or SwiGLU (qwen35).
 * Value heads map to q/k heads grouped (qwen3next) or tiled (qwen35*; the converter
 * reorders their v heads). Each residual add is fused into the next rmsnorm; in decode steps the
 * mixer's out projection adds itself into x (ABI 1.17 matmul_acc) and the ffn norm goes with the
 * FFN's first call (ABI 1.14). */
#include "core/models/blocks.h"

#define CALL MEMRA_FWD_CALL

/* Columns [c0, c0 + w) of a row-major F32 [n, ne0] tensor, as a view. */
static memra_tensor cols(memra_tensor t, int64_t c0, int64_t w) {
  t.offset += 4u * (uint64_t)c0;
  t.ne0 = w;
  return t;
}

static memra_status gdn_mixer(memra_ctx *c, int il, const memra_tensor *xn, const memra_tensor *out,
                              memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const memra_layer *l = &m->layers[il];
  const int64_t n = c->n_rows, d = hp->ssm_head_dim, KD = (int64_t)hp->ssm_k_heads * d,
                VD = (int64_t)hp->ssm_v_heads * d;
  const memra_tensor none = {0};
  memra_tensor qkv = memra_rows(c->qkv, n), u = memra_rows(c->conv_out, n), z = memra_rows(c->z, n),
               o = memra_rows(c->gdn_out, n), b = memra_rows(c->gbeta, n),
               a = memra_rows(c->galpha, n);
  const memra_tensor ys[4] = {qkv, z, b, a},
                     ws[4] = {l->ssm_qkv, l->ssm_z, l->ssm_beta, l->ssm_alpha};
  if (vt->matmul_n_conv && vt->matmul_n && c->n_decode >= c->n_rows) {
    /* ABI 1.11, decode-only steps (as matmul_n): the projections of qkv's type group and the
     * conv in one call, u in qkv's place; the other groups as memra_blk_matmuls makes them */
    int grp[4], gn = 0, rn = 0;
    memra_blk_same_type_groups(ws, 4, grp);
    memra_tensor gy[4], gw[4], ry[4], rw[4];
    for (int i = 0; i < 4; ++i) {
      if (grp[i] == grp[0])
        gy[gn] = i == 0 ? u : ys[i], gw[gn++] = ws[i];
      else
        ry[rn] = ys[i], rw[rn++] = ws[i];
    }
    CALL("matmul qkv (+conv), z, beta, alpha",
         vt->matmul_n_conv(be, gn, gy, xn, gw, &l->ssm_conv1d, &c->conv_state[il], &c->batch));
    if (rn > 0) MEMRA_TRY(memra_blk_matmuls(c, "matmul z, beta, alpha", rn, ry, xn, rw, NULL, err));
  } else {
    MEMRA_TRY(memra_blk_matmuls(c, "matmul qkv, z, beta, alpha", 4, ys, xn, ws, NULL, err));
    CALL("ssm_conv", vt->ssm_conv(be, &u, &qkv, &l->ssm_conv1d, &c->conv_state[il], &c->batch));
  }
  const memra_tensor q = cols(u, 0, KD), k = cols(u, KD, KD), v = cols(u, 2 * KD, VD);
  const memra_gdn_params gp = {.n_k_head = hp->ssm_k_heads,
                               .n_v_head = hp->ssm_v_heads,
                               .head_dim = hp->ssm_head_dim,
                               .heads = hp->arch == MEMRA_ARCH_QWEN3NEXT ? MEMRA_GDN_GROUPED
                                                                         : MEMRA_GDN_TILED,
                               /* HF l2norm's fixed eps; llama.cpp uses rms_norm_eps */
                               .eps = 1e-6f};
  if (vt->gated_delta_rule_norm && c->n_decode >= c->n_rows) {
    /* ABI 1.11, decode-only steps: the recurrence and its gated output norm in one call */
    CALL("gated_delta_rule, gated norm",
         vt->gated_delta_rule_norm(be, &o, &q, &k, &v, &a, &b, &l->ssm_a, &l->ssm_dt,
                                   &c->ssm_state[il], &c->batch, &gp, &l->ssm_norm, &z, hp->eps,
                                   MEMRA_ACT_SILU));
    MEMRA_TRY(memra_blk_proj_matmul(c, "matmul ssm out", out, &o, &l->ssm_out, err));
    return MEMRA_OK;
  }
  CALL("gated_delta_rule", vt->gated_delta_rule(be, &o, &q, &k, &v, &a, &b, &l->ssm_a, &l->ssm_dt,
                                                &c->ssm_state[il], &c->batch, &gp));
  memra_tensor oh = memra_per_head(o, n, d);
  if (vt->rmsnorm_gate) { /* ABI 1.7: the norm and the silu(z) gate in one pass */
    const memra_tensor zh = memra_per_head(z, n, d);
    CALL("ssm gated norm",
         vt->rmsnorm_gate(be, &oh, &oh, &l->ssm_norm, &zh, hp->eps, MEMRA_ACT_SILU));
  } else {
    CALL("ssm norm", vt->rmsnorm(be, &oh, &oh, &none, &l->ssm_norm, hp->eps));
    CALL("ssm gate", vt->glu(be, &o, &z, &o, MEMRA_ACT_SILU));
  }
  MEMRA_TRY(memra_blk_proj_matmul(c, "matmul ssm out", out, &o, &l->ssm_out, err));
  return MEMRA_OK;
}

static memra_status attn_mixer(memra_ctx *c, int il, const memra_tensor *xn,
                               const memra_tensor *out, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_layer *l = &m->layers[il];
  const int64_t n = c->n_rows, D = hp->head_dim;
  memra_tensor qg = memra_rows(c->qg, n), q = memra_rows(c->q, n), k = memra_rows(c->k, n),
               v = memra_rows(c->v, n), attn = memra_rows(c->attn, n);
  {
    const memra_tensor ys[3] = {qg, k, v}, ws[3] = {l->wq, l->wk, l->wv};
    MEMRA_TRY(memra_blk_matmuls(c, "matmul q+gate, k, v", 3, ys, xn, ws, NULL, err));
  }
  /* per head the projection holds [q (D), gate (D)]: strided per-head views */
  memra_tensor qh_in = memra_per_head(qg, n, 2 * D), gate = qh_in;
  qh_in.ne0 = gate.ne0 = D;
  gate.offset += 4u * (uint64_t)D;
  const memra_attn_cfg cfg = memra_attn_cfg_default(hp); /* n_rot < head_dim: partial */
  MEMRA_TRY(memra_blk_qk_norm_rope_attend(c, il, &q, &qh_in, &k, &v, &attn, &cfg, &gate, err));
  MEMRA_TRY(memra_blk_proj_matmul(c, "matmul o", out, &attn, &l->wo, err));
  return MEMRA_OK;
}

memra_status memra_qwen3next_forward(memra_ctx *c, memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  const int64_t n = c->n_rows;
  if (!vt->sigmoid_gate || !vt->ssm_conv || !vt->gated_delta_rule)
    return memra_errf(err, MEMRA_E_UNSUPPORTED, "backend %s has no Gated DeltaNet ops", vt->name);
  const memra_tensor x = memra_rows(c->x, n), xn = memra_rows(c->xn, n),
                     proj = memra_rows(c->proj, n);

  MEMRA_TRY(memra_blk_embed(c, &x, err));
  /* the mixers' out projections go to the ffn norm that adds them: nothing else reads them */
  c->proj_defer.ok = true;
  const memra_tensor *pending = NULL; /* residual not yet added into x */
  for (int il = 0; il < hp->n_layer; ++il) {
    const memra_layer *l = &m->layers[il];
    MEMRA_TRY(memra_blk_add_norm(c, "attn rmsnorm", &xn, &x, pending, &l->attn_norm, err));
    MEMRA_TRY(memra_hparams_layer_recurrent(hp, il) ? gdn_mixer(c, il, &xn, &proj, err)
                                                    : attn_mixer(c, il, &xn, &proj, err));
    /* the ffn norm with the FFN's first call (ABI 1.14, decode steps): the router's, or the dense
     * FFN's; xn stays F32 for the experts, the dense FFN may take its 16-bit operand */
    const memra_tensor w_gu[2] = {l->w_gate, l->w_up};
    const int32_t n_gu = hp->n_expert > 0 ? 0 : 2;
    memra_tensor h;
    MEMRA_TRY(memra_blk_add_norm_proj(c, "ffn rmsnorm", &xn, &x, &proj, &l->ffn_norm, n_gu,
                                      n_gu ? w_gu : NULL, &h, err));
    MEMRA_TRY(hp->n_expert > 0 ? memra_moe_ffn(c, l, &h, &proj, err)
                               : memra_blk_glu_ffn(c, l, &h, &proj, MEMRA_ACT_SILU, err));
    pending = &proj;
  }
  return memra_blk_logits(c, &x, &xn, pending, err);
}
