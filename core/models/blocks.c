/* blocks.c — the forward-pass steps the families share (see blocks.h). Each is a fixed
 * sequence of vtable calls on row views of the context's activation buffers. */
#include "core/models/blocks.h"

#define CALL MEMRA_FWD_CALL

memra_attn_cfg memra_attn_cfg_default(const memra_hparams *hp) {
  const memra_attn_cfg cfg = {.rope = {.n_head = hp->n_head,
                                       .head_dim = hp->head_dim,
                                       .n_rot = hp->n_rot,
                                       .mode = hp->rope_mode,
                                       .freq_base = hp->rope_base,
                                       .freq_scale = hp->rope_scale},
                              .attn = {.n_head = hp->n_head,
                                       .n_kv_head = hp->n_head_kv,
                                       .head_dim = hp->head_dim,
                                       .window = 0,
                                       .scale = hp->attn_scale,
                                       .softcap = 0},
                              .qkv_bias = false};
  return cfg;
}

/* Rows [r0, r0 + n) of a row-major tensor. */
static memra_tensor rows_at(memra_tensor t, int64_t r0, int64_t n) {
  t.offset += (uint64_t)r0 * t.nb1;
  t.ne1 = n;
  return t;
}

/* Whether a (may be NULL) is the very view b: the tensor a deferred call writes. */
static bool same_view(const memra_tensor *a, const memra_tensor *b) {
  return a && a->buf == b->buf && a->offset == b->offset && a->ne0 == b->ne0 && a->ne1 == b->ne1 &&
         a->nb1 == b->nb1 && a->type == b->type;
}

/* Whether the norm deferred by memra_blk_add_norm_proj produces x (a decode-only step's xn,
 * the plugin's ABI 1.14 slots present). */
static bool norm_defer_takes(const memra_ctx *c, const memra_tensor *x) {
  return c->norm_defer.on && same_view(x, &c->norm_defer.xn);
}

memra_status memra_blk_norm_flush(memra_ctx *c, memra_err *err) {
  if (!c->norm_defer.on) return MEMRA_OK;
  c->norm_defer.on = false;
  CALL("rmsnorm", c->m->vt->rmsnorm(c->m->be, &c->norm_defer.xn, &c->norm_defer.x,
                                    &c->norm_defer.res, &c->norm_defer.w, c->m->hp.eps));
  return MEMRA_OK;
}

/* y = x w^T with rows [0, d) through matmul (decode rows: batch-invariant kernels) and the
 * rest through gemm (prompt rows: tensor cores) when the plugin has it. */
static memra_status split_matmul(memra_ctx *c, const char *what, const memra_tensor *y,
                                 const memra_tensor *x, const memra_tensor *w,
                                 const memra_tensor *bias, int64_t d, memra_err *err) {
  const memra_model *m = c->m;
  const memra_tensor none = {0};
  const memra_tensor *b = bias ? bias : &none;
  const int64_t rows = x->ne1;
  if (!m->vt->gemm || d >= rows) {
    CALL(what, m->vt->matmul(m->be, y, x, w, b));
    return MEMRA_OK;
  }
  if (d > 0) {
    const memra_tensor yd = rows_at(*y, 0, d), xd = rows_at(*x, 0, d);
    CALL(what, m->vt->matmul(m->be, &yd, &xd, w, b));
  }
  const memra_tensor yp = rows_at(*y, d, rows - d), xp = rows_at(*x, d, rows - d);
  CALL(what, m->vt->gemm(m->be, &yp, &xp, w, b));
  return MEMRA_OK;
}

/* y[i] = x w[i]^T for outputs sharing x in a step with prompt rows: rows [0, d) through
 * matmul (decode rows), the prompt rows through one gemm_n call (ABI 1.5: gemm's bits for
 * each output, one grouped launch). The caller checked gemm and gemm_n are present. */
static memra_status split_gemm_n(memra_ctx *c, const char *what, int32_t n, const memra_tensor *y,
                                 const memra_tensor *x, const memra_tensor *w,
                                 const memra_tensor *bias, memra_err *err) {
  const memra_model *m = c->m;
  const memra_tensor none = {0};
  const int64_t d = c->n_decode, rows = x->ne1;
  memra_tensor yp[4], bp[4];
  for (int32_t i = 0; i < n; ++i) {
    if (d > 0) {
      const memra_tensor yd = rows_at(y[i], 0, d), xd = rows_at(*x, 0, d);
      CALL(what, m->vt->matmul(m->be, &yd, &xd, &w[i], bias ? &bias[i] : &none));
    }
    yp[i] = rows_at(y[i], d, rows - d);
    bp[i] = bias ? bias[i] : none;
  }
  const memra_tensor xp = rows_at(*x, d, rows - d);
  CALL(what, m->vt->gemm_n(m->be, n, yp, &xp, w, bp));
  return MEMRA_OK;
}

/* True when a step with prompt rows may take gemm_n for weights w[0..n): the plugin has
 * gemm and gemm_n, and the weights share type and K (gemm_n's precondition). */
static bool use_gemm_n(const memra_ctx *c, int32_t n, const memra_tensor *w) {
  const memra_backend_vt *vt = c->m->vt;
  if (!vt->gemm || !vt->gemm_n || c->n_decode >= c->n_rows) return false;
  for (int32_t i = 1; i < n; ++i)
    if (w[i].type != w[0].type || w[i].ne0 != w[0].ne0) return false;
  return true;
}

memra_status memra_blk_matmul(memra_ctx *c, const char *what, const memra_tensor *y,
                              const memra_tensor *x, const memra_tensor *w,
                              const memra_tensor *bias, memra_err *err) {
  return split_matmul(c, what, y, x, w, bias, c->n_decode, err);
}

memra_status memra_blk_proj_flush(memra_ctx *c, memra_err *err) {
  if (!c->proj_defer.on) return MEMRA_OK;
  const memra_tensor none = {0};
  c->proj_defer.on = false;
  return memra_blk_matmul(c, "matmul", &c->proj_defer.y, &c->proj_defer.a, &c->proj_defer.w, &none,
                          err);
}

memra_status memra_blk_combine_flush(memra_ctx *c, memra_err *err) {
  if (!c->combine_defer.on) return MEMRA_OK;
  const memra_backend_vt *vt = c->m->vt;
  const memra_tensor *y = &c->combine_defer.y, *d = &c->combine_defer.down,
                     *w = &c->combine_defer.w, *g = &c->combine_defer.logit;
  c->combine_defer.on = false;
  if (g->buf)
    CALL("moe_combine_shexp", vt->moe_combine_shexp(c->m->be, y, d, w, g));
  else
    CALL("moe_combine", vt->moe_combine(c->m->be, y, d, w));
  return MEMRA_OK;
}

memra_status memra_blk_moe_combine(memra_ctx *c, const memra_tensor *y, const memra_tensor *down,
                                   const memra_tensor *w, const memra_tensor *logit,
                                   memra_err *err) {
  const memra_tensor none = {0};
  MEMRA_TRY(memra_blk_combine_flush(c, err));
  c->combine_defer.on = true;
  c->combine_defer.y = *y;
  c->combine_defer.down = *down;
  c->combine_defer.w = *w;
  c->combine_defer.logit = logit ? *logit : none;
  if (c->m->vt->moe_combine_rmsnorm && c->n_decode >= c->n_rows) return MEMRA_OK;
  return memra_blk_combine_flush(c, err);
}

/* Whether the waiting combine (c->combine_defer) writes add: then the norm adding add takes it
 * (moe_combine_rmsnorm, ABI 1.20). */
static bool combine_defer_takes(const memra_ctx *c, const memra_tensor *add) {
  return c->combine_defer.on && same_view(add, &c->combine_defer.y);
}

/* rmsnorm(xn, x, add, w) with the waiting combine that writes add, in one call (ABI 1.20). */
static memra_status combine_norm(memra_ctx *c, const char *what, const memra_tensor *xn,
                                 const memra_tensor *x, const memra_tensor *w, memra_err *err) {
  c->combine_defer.on = false;
  const memra_tensor *g = &c->combine_defer.logit;
  CALL(what, c->m->vt->moe_combine_rmsnorm(c->m->be, xn, x, w, c->m->hp.eps, &c->combine_defer.y,
                                           &c->combine_defer.down, &c->combine_defer.w,
                                           g->buf ? g : NULL));
  return MEMRA_OK;
}

/* Whether a decode step's residual projections go by matmul_acc (ABI 1.17) with their norms
 * deferred into the next projections without a residual (ABI 1.14, res none). */
static bool acc_mode(const memra_ctx *c) {
  const memra_backend_vt *vt = c->m->vt;
  return vt->matmul_acc && vt->rmsnorm_matmul_n && vt->rmsnorm_ffn_glu && c->n_decode >= c->n_rows;
}

memra_status memra_blk_proj_matmul(memra_ctx *c, const char *what, const memra_tensor *y,
                                   const memra_tensor *a, const memra_tensor *w, memra_err *err) {
  const memra_tensor none = {0};
  MEMRA_TRY(memra_blk_proj_flush(c, err));
  const memra_backend_vt *vt = c->m->vt;
  /* matmul_acc (ABI 1.17) adds it into x where the norm would have; else matmul_rmsnorm (1.15),
   * unless the 1.14 slots take the norm with the next projections */
  const bool by_norm = vt->matmul_rmsnorm && !(vt->rmsnorm_matmul_n && vt->rmsnorm_ffn_glu);
  if (c->proj_defer.ok && (acc_mode(c) || by_norm) && c->n_decode >= c->n_rows &&
      y->type == MEMRA_TYPE_F32 && a->type == MEMRA_TYPE_F32) {
    c->proj_defer.on = true;
    c->proj_defer.y = *y;
    c->proj_defer.a = *a;
    c->proj_defer.w = *w;
    return MEMRA_OK;
  }
  return memra_blk_matmul(c, what, y, a, w, &none, err);
}

/* Whether the waiting projection (c->proj_defer) writes add: then the norm adding add takes it
 * (matmul_rmsnorm, ABI 1.15). */
static bool proj_defer_takes(const memra_ctx *c, const memra_tensor *add) {
  return c->proj_defer.on && same_view(add, &c->proj_defer.y);
}

/* The waiting projection added into x by matmul_acc (its y the scratch). */
static memra_status proj_acc(memra_ctx *c, const char *what, const memra_tensor *x,
                             memra_err *err) {
  c->proj_defer.on = false;
  CALL(what,
       c->m->vt->matmul_acc(c->m->be, x, &c->proj_defer.y, &c->proj_defer.a, &c->proj_defer.w));
  return MEMRA_OK;
}

/* rmsnorm(xn, x, add, w) with the waiting projection that writes add: matmul_acc, then the norm
 * without a residual (ABI 1.17); else matmul_rmsnorm, one call (ABI 1.15). */
static memra_status proj_norm(memra_ctx *c, const char *what, const memra_tensor *xn,
                              const memra_tensor *x, const memra_tensor *w, memra_err *err) {
  if (acc_mode(c)) {
    const memra_tensor none = {0};
    MEMRA_TRY(proj_acc(c, what, x, err));
    CALL(what, c->m->vt->rmsnorm(c->m->be, xn, x, &none, w, c->m->hp.eps));
    return MEMRA_OK;
  }
  c->proj_defer.on = false;
  CALL(what, c->m->vt->matmul_rmsnorm(c->m->be, &c->proj_defer.y, &c->proj_defer.a,
                                      &c->proj_defer.w, xn, x, w, c->m->hp.eps));
  return MEMRA_OK;
}

/* memra_blk_matmuls; rt (may be NULL): the route of y[0] offered to the decode call that makes it
 * (ABI 1.22 matmul_n_route; rt->done when taken). */
static memra_status matmuls(memra_ctx *c, const char *what, int n, const memra_tensor *y,
                            const memra_tensor *x, const memra_tensor *w, const memra_tensor *bias,
                            memra_blk_route *rt, memra_err *err) {
  const memra_backend_vt *vt = c->m->vt;
  const memra_tensor none = {0};
  if (n < 1 || n > MEMRA_BLK_MATMULS_MAX)
    return memra_errf(err, MEMRA_E_INVALID, "%s: %d projections (1..%d)", what, n,
                      MEMRA_BLK_MATMULS_MAX);
  const bool decode = vt->matmul_n && c->n_decode >= c->n_rows;
  MEMRA_TRY(memra_blk_combine_flush(c, err));
  MEMRA_TRY(memra_blk_proj_flush(c, err));
  /* a route offered to the router's call (ABI 1.22) keeps that call: the norm goes first */
  if (!decode || !norm_defer_takes(c, x) || (rt && vt->matmul_n_route))
    MEMRA_TRY(memra_blk_norm_flush(c, err));
  if (decode) { /* decode-only: matmul_n per type group */
    int grp[MEMRA_BLK_MATMULS_MAX];
    const int n_grp = memra_blk_same_type_groups(w, n, grp);
    bool one_k = true;
    for (int i = 1; i < n; ++i)
      one_k = one_k && w[i].ne0 == w[0].ne0;
    if (n_grp > 1 && n <= 4 && one_k && c->norm_defer.on && vt->rmsnorm_matmul_mixed) {
      /* the deferred norm with every projection, whatever their types (ABI 1.23) */
      c->norm_defer.on = false;
      CALL(what, vt->rmsnorm_matmul_mixed(c->m->be, &c->norm_defer.xn, &c->norm_defer.x,
                                          &c->norm_defer.res, &c->norm_defer.w, c->m->hp.eps, n, y,
                                          w, bias));
      return MEMRA_OK;
    }
    for (int gi = 0; gi < n_grp; ++gi) {
      memra_tensor gy[4], gw[4], gb[4];
      int32_t gn = 0;
      bool has0 = false; /* this call makes y[0] (its group's first) */
      for (int i = 0; i <= n; ++i) {
        if (gn > 0 && (i == n || gn == 4)) { /* a call per 4 members (matmul_n's n <= 4) */
          if (c->norm_defer.on) {            /* the deferred norm with the first call (ABI 1.14) */
            c->norm_defer.on = false;
            CALL(what, vt->rmsnorm_matmul_n(c->m->be, &c->norm_defer.xn, &c->norm_defer.x,
                                            &c->norm_defer.res, &c->norm_defer.w, c->m->hp.eps, gn,
                                            gy, gw, bias ? gb : NULL));
          } else if (has0 && rt && vt->matmul_n_route) { /* y[0] with its route (ABI 1.22) */
            CALL(what, vt->matmul_n_route(c->m->be, gn, gy, x, gw, bias ? gb : NULL, &rt->ids,
                                          &rt->weights, rt->normalize));
            rt->done = true;
          } else if (gn == 1)
            MEMRA_TRY(memra_blk_matmul(c, what, gy, x, gw, gb, err));
          else
            CALL(what, vt->matmul_n(c->m->be, gn, gy, x, gw, bias ? gb : NULL));
          gn = 0;
          has0 = false;
        }
        if (i < n && grp[i] == gi) {
          has0 = has0 || i == 0;
          gy[gn] = y[i], gw[gn] = w[i], gb[gn++] = bias ? bias[i] : none;
        }
      }
    }
    return MEMRA_OK;
  }
  if (n <= 4 && use_gemm_n(c, n, w)) return split_gemm_n(c, what, n, y, x, w, bias, err);
  for (int i = 0; i < n; ++i)
    MEMRA_TRY(memra_blk_matmul(c, what, &y[i], x, &w[i], bias ? &bias[i] : &none, err));
  return MEMRA_OK;
}

memra_status memra_blk_matmuls(memra_ctx *c, const char *what, int n, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *bias, memra_err *err) {
  return matmuls(c, what, n, y, x, w, bias, NULL, err);
}

memra_status memra_blk_matmuls_route(memra_ctx *c, const char *what, int n, const memra_tensor *y,
                                     const memra_tensor *x, const memra_tensor *w,
                                     memra_blk_route *rt, memra_err *err) {
  if (rt) rt->done = false;
  return matmuls(c, what, n, y, x, w, NULL, rt, err);
}

memra_status memra_blk_embed(memra_ctx *c, const memra_tensor *x, memra_err *err) {
  const memra_model *m = c->m;
  memra_tensor ids = c->ids;
  ids.ne0 = c->n_rows;
  CALL("get_rows", m->vt->get_rows(m->be, x, &m->tok_embd, &ids));
  return MEMRA_OK;
}

memra_status memra_blk_add_norm(memra_ctx *c, const char *what, const memra_tensor *xn,
                                const memra_tensor *x, const memra_tensor *add,
                                const memra_tensor *w, memra_err *err) {
  const memra_model *m = c->m;
  const memra_tensor none = {0};
  MEMRA_TRY(memra_blk_norm_flush(c, err));
  if (combine_defer_takes(c, add) && xn->type == MEMRA_TYPE_F32)
    return combine_norm(c, what, xn, x, w, err);
  MEMRA_TRY(memra_blk_combine_flush(c, err));
  if (proj_defer_takes(c, add) && xn->type == MEMRA_TYPE_F32)
    return proj_norm(c, what, xn, x, w, err);
  MEMRA_TRY(memra_blk_proj_flush(c, err));
  CALL(what, m->vt->rmsnorm(m->be, xn, x, add ? add : &none, w, m->hp.eps));
  return MEMRA_OK;
}

int32_t memra_blk_op16_type(const memra_ctx *c, int32_t n, const memra_tensor *w) {
  const memra_backend_vt *vt = c->m->vt;
  if (!vt->gemm || !vt->gemm_x_type || !c->op16.buf || c->n_decode > 0 || n < 1)
    return MEMRA_TYPE_F32;
  const int32_t t = vt->gemm_x_type(c->m->be, w[0].type);
  if (t != MEMRA_TYPE_F16 && t != MEMRA_TYPE_BF16) return MEMRA_TYPE_F32;
  for (int32_t i = 0; i < n; ++i)
    if (w[i].ne0 % 8 || (w[i].ne0 > c->op16.ne0 && w[i].ne0 > c->op16_ff.ne0) ||
        (i && vt->gemm_x_type(c->m->be, w[i].type) != t))
      return MEMRA_TYPE_F32;
  return t;
}

/* A 16-bit operand buffer of the context (op16 or op16_ff) as [n_rows, k] of type t. */
static memra_tensor op16_view(const memra_ctx *c, const memra_tensor *buf, int32_t t, int64_t k) {
  memra_tensor v = memra_rows(*buf, c->n_rows);
  v.type = t;
  v.ne0 = k;
  v.nb1 = 2u * (uint64_t)k;
  return v;
}

memra_status memra_blk_add_norm_proj(memra_ctx *c, const char *what, const memra_tensor *xn,
                                     const memra_tensor *x, const memra_tensor *add,
                                     const memra_tensor *w_norm, int32_t n, const memra_tensor *w,
                                     memra_tensor *h, memra_err *err) {
  /* a combine waiting for this norm (ABI 1.20) takes it: as many calls as the norm's deferral */
  if (combine_defer_takes(c, add) && xn->type == MEMRA_TYPE_F32) {
    *h = *xn;
    return memra_blk_add_norm(c, what, xn, x, add, w_norm, err);
  }
  MEMRA_TRY(memra_blk_combine_flush(c, err));
  const int32_t t = memra_blk_op16_type(c, n, w);
  *h = t == MEMRA_TYPE_F32 || xn->ne0 > c->op16.ne0 ? *xn : op16_view(c, &c->op16, t, xn->ne0);
  const memra_backend_vt *vt = c->m->vt;
  if (proj_defer_takes(c, add) && h->type == MEMRA_TYPE_F32) {
    MEMRA_TRY(memra_blk_norm_flush(c, err));
    if (!acc_mode(c)) return proj_norm(c, what, h, x, w_norm, err); /* ABI 1.15 */
    MEMRA_TRY(proj_acc(c, what, x, err)); /* ABI 1.17: x += the projection; the norm waits */
    add = NULL;
  }
  MEMRA_TRY(memra_blk_proj_flush(c, err));
  if (vt->rmsnorm_matmul_n && vt->rmsnorm_ffn_glu && c->n_decode >= c->n_rows &&
      h->type == MEMRA_TYPE_F32) { /* ABI 1.14: the norm goes with the projections of *h */
    const memra_tensor none = {0};
    MEMRA_TRY(memra_blk_norm_flush(c, err));
    c->norm_defer.on = true;
    c->norm_defer.xn = *h;
    c->norm_defer.x = *x;
    c->norm_defer.res = add ? *add : none;
    c->norm_defer.w = *w_norm;
    return MEMRA_OK;
  }
  return memra_blk_add_norm(c, what, h, x, add, w_norm, err);
}

/* attn = attn * sigmoid(gate) over attn's per-head view; nothing without a gate. */
static memra_status attn_gate(memra_ctx *c, const memra_tensor *attn, const memra_tensor *gate,
                              memra_err *err) {
  if (!gate) return MEMRA_OK;
  memra_tensor ah = memra_per_head(*attn, c->n_rows, gate->ne0);
  CALL("attention gate", c->m->vt->sigmoid_gate(c->m->be, &ah, &ah, gate));
  return MEMRA_OK;
}

/* Whether k is all n_head_kv heads of the rope (the fused rope slots' shape). */
static bool k_all_heads(const memra_ctx *c, const memra_tensor *k, const memra_attn_cfg *cfg) {
  return k->ne0 == (int64_t)c->m->hp.n_head_kv * cfg->rope.head_dim;
}

/* Whether rope_attend gives this step's rope, kv_store and attention to rope_kv_attend (ABI
 * 1.10): decode rows of distinct sequences. */
static bool rope_kv_attend_takes(const memra_ctx *c, const memra_tensor *k,
                                 const memra_attn_cfg *cfg) {
  return c->m->vt->rope_kv_attend && c->n_decode >= c->n_rows && c->n_rows <= c->n_distinct &&
         k_all_heads(c, k, cfg);
}

/* The attention of q over layer il's cache (rope and kv_store done): decode rows and prompt rows
 * attend in separate calls, the prompt ones flagged so the plugin may take its prefill kernel
 * without touching the decode rows' results; then the output gate, when there is one. */
static memra_status attend(memra_ctx *c, int il, const memra_tensor *q, const memra_tensor *attn,
                           const memra_attn_cfg *cfg, const memra_tensor *gate, memra_err *err) {
  const memra_backend_vt *vt = c->m->vt;
  memra_backend *be = c->m->be;
  const memra_batch *b = &c->batch;
  const int64_t n = c->n_rows, d = c->n_decode;
  if (d >= n || d == 0) {
    memra_batch all = *b;
    all.flags = d == 0 ? MEMRA_BATCH_PROMPT : n <= c->n_distinct ? MEMRA_BATCH_DISTINCT : 0;
    if (gate && vt->attention_gate) { /* ABI 1.11: the gate in the same call */
      CALL("attention, gate", vt->attention_gate(be, attn, q, &c->k_cache[il], &c->v_cache[il],
                                                 &all, &cfg->attn, gate));
      return MEMRA_OK;
    }
    CALL("attention",
         vt->attention(be, attn, q, &c->k_cache[il], &c->v_cache[il], &all, &cfg->attn));
    return attn_gate(c, attn, gate, err);
  }
  for (int part = 0; part < 2; ++part) {
    const int64_t r0 = part ? d : 0, nr = part ? n - d : d;
    memra_batch sub = *b;
    sub.n_rows = (int32_t)nr;
    sub.flags = part ? MEMRA_BATCH_PROMPT : 0;
    sub.pos.offset += 4u * (uint64_t)r0;
    sub.pos.ne0 = nr;
    sub.seq.offset += 4u * (uint64_t)r0;
    sub.seq.ne0 = nr;
    const memra_tensor qs = rows_at(*q, r0, nr), as = rows_at(*attn, r0, nr);
    CALL("attention",
         vt->attention(be, &as, &qs, &c->k_cache[il], &c->v_cache[il], &sub, &cfg->attn));
  }
  return attn_gate(c, attn, gate, err);
}

/* memra_blk_rope_attend, and with gate (may be NULL) memra_blk_rope_attend_gated. */
static memra_status rope_attend(memra_ctx *c, int il, const memra_tensor *q, const memra_tensor *k,
                                const memra_tensor *v, const memra_tensor *attn,
                                const memra_attn_cfg *cfg, const memra_tensor *gate,
                                memra_err *err) {
  const memra_model *m = c->m;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const memra_batch *b = &c->batch;
  memra_rope_params rope_k = cfg->rope;
  rope_k.n_head = m->hp.n_head_kv;
  /* Decode rows of distinct sequences: rope, kv_store and attention in one call (ABI 1.10,
   * the same bits as the calls below) */
  if (rope_kv_attend_takes(c, k, cfg)) {
    memra_batch dec = *b;
    dec.flags = 0;
    CALL("rope, kv_store, attention",
         vt->rope_kv_attend(be, attn, q, k, v, &c->k_cache[il], &c->v_cache[il], &dec, &cfg->rope,
                            &cfg->attn));
    return attn_gate(c, attn, gate, err);
  }
  /* Decode-only batches: rope q, rope k and kv_store in one call (ABI 1.4, the same bits);
   * every family's rope goes through here after its q/k norms, partial (n_rot < head_dim),
   * NEOX or with frequency factors alike, which the fused slot keeps as rope does. */
  if (vt->rope_kv_store && c->n_decode >= c->n_rows && k_all_heads(c, k, cfg)) {
    CALL("rope, kv_store",
         vt->rope_kv_store(be, q, k, v, &c->k_cache[il], &c->v_cache[il], b, &cfg->rope));
  } else {
    CALL("rope q", vt->rope(be, q, &b->pos, &cfg->rope));
    CALL("rope k", vt->rope(be, k, &b->pos, &rope_k));
    CALL("kv_store", vt->kv_store(be, &c->k_cache[il], &c->v_cache[il], k, v, b));
  }
  return attend(c, il, q, attn, cfg, gate, err);
}

memra_status memra_blk_rope_attend(memra_ctx *c, int il, const memra_tensor *q,
                                   const memra_tensor *k, const memra_tensor *v,
                                   const memra_tensor *attn, const memra_attn_cfg *cfg,
                                   memra_err *err) {
  return rope_attend(c, il, q, k, v, attn, cfg, NULL, err);
}

memra_status memra_blk_rope_attend_gated(memra_ctx *c, int il, const memra_tensor *q,
                                         const memra_tensor *k, const memra_tensor *v,
                                         const memra_tensor *attn, const memra_attn_cfg *cfg,
                                         const memra_tensor *gate, memra_err *err) {
  return rope_attend(c, il, q, k, v, attn, cfg, gate, err);
}

int memra_blk_same_type_groups(const memra_tensor *w, int n, int *group) {
  int n_grp = 0;
  for (int i = 0; i < n; ++i) {
    group[i] = -1;
    for (int j = 0; j < i && group[i] < 0; ++j)
      if (w[j].type == w[i].type && w[j].ne0 == w[i].ne0) group[i] = group[j];
    if (group[i] < 0) group[i] = n_grp++;
  }
  return n_grp;
}

/* Whether a layer's q / k norms go with rope and kv_store into one ABI 1.19 rmsnorm_qk_rope_kv
 * call: the decode-only steps that take rope_kv_store (memra_blk_rope_attend's rule), unless
 * rope_kv_attend takes them, with q's heads of the rope's head_dim (rmsnorm_qk's per-head views).
 */
static bool qk_rope_kv_takes(const memra_ctx *c, const memra_tensor *k, const memra_attn_cfg *cfg) {
  const memra_backend_vt *vt = c->m->vt;
  return vt->rmsnorm_qk_rope_kv && vt->rope_kv_store && c->n_decode >= c->n_rows &&
         k_all_heads(c, k, cfg) && !rope_kv_attend_takes(c, k, cfg) &&
         cfg->rope.head_dim == c->m->hp.head_dim;
}

/* How many of q, k, v one ABI 1.16 matmul_n_rope_kv call projects with their rope and KV store
 * in this step: 3 when wq, wk, wv share a type, 2 when only wq and wk do (v projected first, as
 * memra_blk_matmuls makes a group of its own), 0 to keep the calls of memra_blk_attention. Only
 * in decode-only steps of layers with no q/k norm between projection and rope (llama, qwen2),
 * no norm waiting to go with the projections (ABI 1.14) and none that rope_kv_attend takes. */
static int qkv_rope_kv_n(const memra_ctx *c, const memra_layer *l, const memra_tensor *k,
                         const memra_attn_cfg *cfg) {
  const memra_backend_vt *vt = c->m->vt;
  if (!vt->matmul_n_rope_kv || !vt->matmul_n || c->n_decode < c->n_rows || l->q_norm.buf ||
      c->norm_defer.on || !k_all_heads(c, k, cfg) || rope_kv_attend_takes(c, k, cfg))
    return 0;
  if (l->wk.type != l->wq.type || l->wk.ne0 != l->wq.ne0) return 0;
  return l->wv.type == l->wq.type && l->wv.ne0 == l->wq.ne0 ? 3 : 2;
}

memra_status memra_blk_attention(memra_ctx *c, int il, const memra_tensor *xn,
                                 const memra_tensor *out, const memra_attn_cfg *cfg,
                                 memra_err *err) {
  const memra_model *m = c->m;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const memra_layer *l = &m->layers[il];
  const int64_t n = c->n_rows;
  const bool bias = cfg->qkv_bias;
  memra_tensor q = memra_rows(c->q, n), k = memra_rows(c->k, n), v = memra_rows(c->v, n),
               attn = memra_rows(c->attn, n);
  const int fused = qkv_rope_kv_n(c, l, &k, cfg);
  if (fused) {
    /* decode-only: the projections, rope and kv_store in one call (ABI 1.16, the bits of
     * matmul_n and rope_kv_store); a v of another type first, as memra_blk_matmuls would */
    const memra_tensor ys[3] = {q, k, v}, ws[3] = {l->wq, l->wk, l->wv};
    const memra_tensor bs[3] = {l->bq, l->bk, l->bv};
    if (fused == 2) {
      MEMRA_TRY(memra_blk_matmuls(c, "matmul v", 1, &v, xn, &l->wv, bias ? &l->bv : NULL, err));
    } else {
      MEMRA_TRY(memra_blk_proj_flush(c, err));
      MEMRA_TRY(memra_blk_norm_flush(c, err));
    }
    CALL(fused == 3 ? "matmul q, k, v, rope, kv_store" : "matmul q, k, rope, kv_store",
         vt->matmul_n_rope_kv(be, fused, ys, xn, ws, bias ? bs : NULL, &c->k_cache[il],
                              &c->v_cache[il], &c->batch, &cfg->rope));
    MEMRA_TRY(attend(c, il, &q, &attn, cfg, NULL, err));
    MEMRA_TRY(memra_blk_proj_matmul(c, "matmul o", out, &attn, &l->wo, err));
    return MEMRA_OK;
  }
  /* one fused call per group of same-type weights in decode-only steps (ABI 1.3 matmul_n,
   * bit-identical to the matmuls), e.g. q, k (Q4_K) and v (Q6_K) in half a Q4_K_M file's
   * layers; gemm_n for prompt rows */
  {
    const memra_tensor ys[3] = {q, k, v}, ws[3] = {l->wq, l->wk, l->wv};
    const memra_tensor bs[3] = {l->bq, l->bk, l->bv};
    MEMRA_TRY(memra_blk_matmuls(c, "matmul q, k, v", 3, ys, xn, ws, bias ? bs : NULL, err));
  }
  MEMRA_TRY(l->q_norm.buf
                ? memra_blk_qk_norm_rope_attend(c, il, &q, NULL, &k, &v, &attn, cfg, NULL, err)
                : memra_blk_rope_attend(c, il, &q, &k, &v, &attn, cfg, err));
  MEMRA_TRY(memra_blk_proj_matmul(c, "matmul o", out, &attn, &l->wo, err));
  return MEMRA_OK;
}

memra_status memra_blk_qk_norm_rope_attend(memra_ctx *c, int il, const memra_tensor *q,
                                           const memra_tensor *q_in, const memra_tensor *k,
                                           const memra_tensor *v, const memra_tensor *attn,
                                           const memra_attn_cfg *cfg, const memra_tensor *gate,
                                           memra_err *err) {
  const memra_model *m = c->m;
  const memra_hparams *hp = &m->hp;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const memra_layer *l = &m->layers[il];
  const memra_tensor none = {0};
  if (qk_rope_kv_takes(c, k, cfg)) {
    /* decode-only: the q / k norms, rope and kv_store in one call (ABI 1.19, their bits) */
    CALL("q/k norm, rope, kv_store",
         vt->rmsnorm_qk_rope_kv(be, q, q_in, &l->q_norm, k, &l->k_norm, hp->eps, v, &c->k_cache[il],
                                &c->v_cache[il], &c->batch, &cfg->rope));
    return attend(c, il, q, attn, cfg, gate, err);
  }
  const int64_t n = c->n_rows;
  memra_tensor qh = memra_per_head(*q, n, hp->head_dim), kh = memra_per_head(*k, n, hp->head_dim);
  if (q_in) { /* q from rows elsewhere (Qwen3-Next's q + gate rows): the two norms apart */
    CALL("q norm", vt->rmsnorm(be, &qh, q_in, &none, &l->q_norm, hp->eps));
    CALL("k norm", vt->rmsnorm(be, &kh, &kh, &none, &l->k_norm, hp->eps));
  } else if (vt->rmsnorm_qk) { /* ABI 1.8: both norms in one call, their bits */
    CALL("q/k norm", vt->rmsnorm_qk(be, &qh, &l->q_norm, &kh, &l->k_norm, hp->eps));
  } else {
    CALL("q norm", vt->rmsnorm(be, &qh, &qh, &none, &l->q_norm, hp->eps));
    CALL("k norm", vt->rmsnorm(be, &kh, &kh, &none, &l->k_norm, hp->eps));
  }
  return rope_attend(c, il, q, k, v, attn, cfg, gate, err);
}

/* True when the prompt rows of this step may take gemm_glu (ABI 1.6) for the layer's
 * gate and up: no decode rows, the plugin has it, the weights share type and shape and
 * have a 16-bit operand type that x is in (or x is F32). */
static bool use_gemm_glu(const memra_ctx *c, const memra_layer *l, const memra_tensor *xn) {
  const memra_backend_vt *vt = c->m->vt;
  if (!vt->gemm_glu || !vt->gemm_x_type || c->n_decode > 0 || c->n_rows < 1) return false;
  if (l->w_up.type != l->w_gate.type || l->w_up.ne0 != l->w_gate.ne0 ||
      l->w_up.ne1 != l->w_gate.ne1)
    return false;
  const int32_t t = vt->gemm_x_type(c->m->be, l->w_gate.type);
  return (t == MEMRA_TYPE_F16 || t == MEMRA_TYPE_BF16) &&
         (xn->type == MEMRA_TYPE_F32 || xn->type == t);
}

memra_status memra_blk_glu_ffn(memra_ctx *c, const memra_layer *l, const memra_tensor *xn,
                               const memra_tensor *out, memra_act act, memra_err *err) {
  MEMRA_TRY(memra_blk_proj_flush(c, err));
  const memra_model *m = c->m;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const int64_t n = c->n_rows, ff = m->hp.n_ff;
  const memra_tensor none = {0};
  /* the buffers are as wide as the widest FFN of the model (the shared expert may be) */
  memra_tensor gate = memra_rows(c->gate, n), up = memra_rows(c->up, n);
  gate.ne0 = up.ne0 = ff;
  gate.nb1 = up.nb1 = 4u * (uint64_t)ff;
  /* down's x: its 16-bit operand when the step allows (written by glu or gemm_glu) */
  const int32_t t = ff <= c->op16_ff.ne0 ? memra_blk_op16_type(c, 1, &l->w_down) : MEMRA_TYPE_F32;
  const memra_tensor g = t == MEMRA_TYPE_F32 ? gate : op16_view(c, &c->op16_ff, t, ff);
  const bool paired = l->w_up.type == l->w_gate.type && l->w_up.ne0 == l->w_gate.ne0;
  if (norm_defer_takes(c, xn) && paired && t == MEMRA_TYPE_F32 && c->proj_defer.ok && acc_mode(c)) {
    /* the deferred norm with gate and up (ABI 1.14), glu, and down waiting for matmul_acc */
    const memra_tensor ys[2] = {gate, up}, ws[2] = {l->w_gate, l->w_up};
    c->norm_defer.on = false;
    CALL("ffn rmsnorm, gate, up",
         vt->rmsnorm_matmul_n(be, &c->norm_defer.xn, &c->norm_defer.x, &c->norm_defer.res,
                              &c->norm_defer.w, m->hp.eps, 2, ys, ws, NULL));
    CALL("glu", vt->glu(be, &g, &gate, &up, act));
    return memra_blk_proj_matmul(c, "matmul down", out, &g, &l->w_down, err);
  }
  if (norm_defer_takes(c, xn) && paired && t == MEMRA_TYPE_F32) {
    /* the deferred norm, gate, up, glu and down in one call (ABI 1.14) */
    c->norm_defer.on = false;
    CALL("ffn rmsnorm, gate, up, glu, down",
         vt->rmsnorm_ffn_glu(be, &c->norm_defer.xn, &c->norm_defer.x, &c->norm_defer.res,
                             &c->norm_defer.w, m->hp.eps, out, &gate, &up, &l->w_gate, &l->w_up,
                             &l->w_down, act));
    return MEMRA_OK;
  }
  MEMRA_TRY(memra_blk_norm_flush(c, err));
  if (use_gemm_glu(c, l, xn)) { /* prompt rows: gate, up and glu in one call (ABI 1.6) */
    CALL("gemm gate, up, glu", vt->gemm_glu(be, &g, xn, &l->w_gate, &l->w_up, act));
    MEMRA_TRY(memra_blk_matmul(c, "matmul down", out, &g, &l->w_down, &none, err));
    return MEMRA_OK;
  }
  if (vt->ffn_glu && c->n_decode >= c->n_rows && paired && t == MEMRA_TYPE_F32) {
    /* decode-only: gate, up, glu and down in one call (ABI 1.12), h into gate */
    CALL("ffn gate, up, glu, down",
         vt->ffn_glu(be, out, &gate, &up, xn, &l->w_gate, &l->w_up, &l->w_down, act));
    return MEMRA_OK;
  }
  if (vt->matmul_n && c->n_decode >= c->n_rows && paired) {
    /* decode-only: one fused call (ABI 1.3 matmul_n) */
    const memra_tensor ys[2] = {gate, up}, ws[2] = {l->w_gate, l->w_up};
    CALL("matmul gate, up", vt->matmul_n(be, 2, ys, xn, ws, NULL));
  } else if (use_gemm_n(c, 2, (const memra_tensor[2]){l->w_gate, l->w_up})) {
    const memra_tensor ys[2] = {gate, up}, ws[2] = {l->w_gate, l->w_up};
    MEMRA_TRY(split_gemm_n(c, "gemm gate, up", 2, ys, xn, ws, NULL, err));
  } else {
    MEMRA_TRY(memra_blk_matmul(c, "matmul gate", &gate, xn, &l->w_gate, &none, err));
    MEMRA_TRY(memra_blk_matmul(c, "matmul up", &up, xn, &l->w_up, &none, err));
  }
  CALL("glu", vt->glu(be, &g, &gate, &up, act));
  MEMRA_TRY(memra_blk_proj_matmul(c, "matmul down", out, &g, &l->w_down, err));
  return MEMRA_OK;
}

memra_status memra_blk_logits(memra_ctx *c, const memra_tensor *x, const memra_tensor *xn,
                              const memra_tensor *pending, memra_err *err) {
  const memra_model *m = c->m;
  const memra_backend_vt *vt = m->vt;
  memra_backend *be = m->be;
  const memra_tensor none = {0};
  MEMRA_TRY(memra_blk_norm_flush(c, err));
  if (combine_defer_takes(c, pending) && xn->type == MEMRA_TYPE_F32) {
    MEMRA_TRY(combine_norm(c, "output rmsnorm", xn, x, &m->output_norm, err));
  } else if (proj_defer_takes(c, pending) && xn->type == MEMRA_TYPE_F32) {
    MEMRA_TRY(memra_blk_combine_flush(c, err));
    MEMRA_TRY(proj_norm(c, "output rmsnorm", xn, x, &m->output_norm, err));
  } else {
    MEMRA_TRY(memra_blk_combine_flush(c, err));
    MEMRA_TRY(memra_blk_proj_flush(c, err));
    CALL("output rmsnorm", vt->rmsnorm(be, xn, x, pending, &m->output_norm, m->hp.eps));
  }
  if (c->n_out <= 0) return MEMRA_OK;
  memra_tensor sel = memra_rows(c->sel, c->n_out), logits = memra_rows(c->logits, c->n_out),
               out_rows = c->out_rows;
  out_rows.ne0 = c->n_out;
  CALL("select rows", vt->get_rows(be, &sel, xn, &out_rows));
  /* The selected rows are not the step's rows: GEMM only when none is a decode row. */
  MEMRA_TRY(split_matmul(c, "matmul output", &logits, &sel, &m->output, &none,
                         c->n_decode > 0 ? c->n_out : 0, err));
  return MEMRA_OK;
}
