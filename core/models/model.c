#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/models/model.h"

enum { WEIGHT_ALIGN = 256 }; /* every tensor starts 256-byte aligned on the device */

typedef struct weight_ref {
  memra_tensor *dst;
  const memra_gguf_tensor *src;
} weight_ref;

typedef struct loader {
  const memra_gguf *g;
  weight_ref *refs;
  size_t n_refs, cap;
  uint64_t total;
  memra_err *err;
} loader;

/* Finds name, checks its shape is [ne0, ne1] (ne1 = 1 for vectors) and records it.
 * An optional tensor that is absent leaves dst absent (buf NULL). */
static memra_status want(loader *L, memra_tensor *dst, const char *name, int64_t ne0, int64_t ne1,
                         bool optional) {
  memset(dst, 0, sizeof *dst);
  const memra_gguf_tensor *t = memra_gguf_tensor_find(L->g, name);
  if (!t) {
    if (optional) return MEMRA_OK;
    return memra_errf(L->err, MEMRA_E_FORMAT, "missing tensor '%s'", name);
  }
  int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
  if (t->ne[0] != ne0 || rows != ne1)
    return memra_errf(L->err, MEMRA_E_FORMAT,
                      "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
                      (long long)t->ne[0], (long long)rows, (long long)ne0, (long long)ne1);
  if (ne1 == 1 && ne0 > 0 && t->type != MEMRA_TYPE_F32)
    return memra_errf(L->err, MEMRA_E_UNSUPPORTED, "tensor '%s' is %s, expected F32", name,
                      memra_type_info(t->type).name ? memra_type_info(t->type).name : "?");
  if (L->n_refs == L->cap) {
    size_t cap = L->cap ? 2 * L->cap : 64;
    weight_ref *r = memra_realloc(L->refs, cap * sizeof *r);
    if (!r) return memra_errf(L->err, MEMRA_E_OOM, "out of memory listing tensors");
    L->refs = r;
    L->cap = cap;
  }
  dst->type = t->type;
  dst->ne0 = t->ne[0];
  dst->ne1 = rows;
  dst->nb1 = memra_type_row_bytes(t->type, t->ne[0]);
  dst->offset = L->total;
  L->total += (t->nbytes + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
  L->refs[L->n_refs++] = (weight_ref){dst, t};
  return MEMRA_OK;
}

static memra_status want_layer(loader *L, const memra_hparams *hp, int il, memra_layer *l) {
  char n[96];
  const int64_t E = hp->n_embd, QD = (int64_t)hp->n_head * hp->head_dim,
                KD = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
  const bool qwen2 = hp->arch == MEMRA_ARCH_QWEN2, gemma3 = hp->arch == MEMRA_ARCH_GEMMA3,
             moe = hp->n_expert > 0,
             qwen3 = hp->arch == MEMRA_ARCH_QWEN3 || gemma3 || hp->arch == MEMRA_ARCH_QWEN3MOE;
  const int64_t NX = hp->n_expert, FX = hp->n_ff_exp;
  memra_status st;
#define W(field, suffix, ne0, ne1, opt)                                                            \
  snprintf(n, sizeof n, "blk.%d." suffix, il);                                                     \
  if ((st = want(L, &l->field, n, ne0, ne1, opt))) return st;
  W(attn_norm, "attn_norm.weight", E, 1, false)
  W(wq, "attn_q.weight", E, QD, false)
  W(wk, "attn_k.weight", E, KD, false)
  W(wv, "attn_v.weight", E, KD, false)
  W(wo, "attn_output.weight", QD, E, false)
  W(bq, "attn_q.bias", QD, 1, !qwen2)
  W(bk, "attn_k.bias", KD, 1, !qwen2)
  W(bv, "attn_v.bias", KD, 1, !qwen2)
  W(q_norm, "attn_q_norm.weight", hp->head_dim, 1, !qwen3)
  W(k_norm, "attn_k_norm.weight", hp->head_dim, 1, !qwen3)
  W(ffn_norm, "ffn_norm.weight", E, 1, false)
  W(w_gate, "ffn_gate.weight", E, F, moe)
  W(w_up, "ffn_up.weight", E, F, moe)
  W(w_down, "ffn_down.weight", F, E, moe)
  W(ffn_gate_inp, "ffn_gate_inp.weight", E, NX, !moe)
  W(ffn_gate_exps, "ffn_gate_exps.weight", E, FX * NX, !moe)
  W(ffn_up_exps, "ffn_up_exps.weight", E, FX * NX, !moe)
  W(ffn_down_exps, "ffn_down_exps.weight", FX, E * NX, !moe)
  W(post_attn_norm, "post_attention_norm.weight", E, 1, !gemma3)
  W(post_ffn_norm, "post_ffw_norm.weight", E, 1, !gemma3)
#undef W
  return MEMRA_OK;
}

/* Whether layer il's shared expert can join its routed stacks (stack_shexp): the routed
 * experts' width and, matrix by matrix, their type. Its matrices are then planned each right
 * after its stack; otherwise gate and up stay back to back for fuse_gate_up. */
static bool shexp_stackable(const loader *L, int il, int64_t FX, int64_t FS) {
  static const char *const pair[3][2] = {{"ffn_gate_exps", "ffn_gate_shexp"},
                                         {"ffn_up_exps", "ffn_up_shexp"},
                                         {"ffn_down_exps", "ffn_down_shexp"}};
  if (FS <= 0 || FS != FX) return false;
  for (int i = 0; i < 3; ++i) {
    char a[96], b[96];
    snprintf(a, sizeof a, "blk.%d.%s.weight", il, pair[i][0]);
    snprintf(b, sizeof b, "blk.%d.%s.weight", il, pair[i][1]);
    const memra_gguf_tensor *ta = memra_gguf_tensor_find(L->g, a),
                            *tb = memra_gguf_tensor_find(L->g, b);
    if (!ta || !tb || ta->type != tb->type) return false;
  }
  return true;
}

/* Hybrids (llama.cpp qwen3next.cpp / qwen35.cpp loaders): a GDN or a gated attention
 * mixer per layer, then a routed + shared expert FFN (qwen3next, qwen35moe) or a dense
 * SwiGLU (qwen35). The FFN norm is named post_attention_norm in these files. */
static memra_status want_layer_hybrid(loader *L, const memra_hparams *hp, int il, memra_layer *l) {
  char n[96];
  const int64_t E = hp->n_embd, QD = (int64_t)hp->n_head * hp->head_dim,
                KD = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff, D = hp->head_dim;
  const int64_t d = hp->ssm_head_dim, HV = hp->ssm_v_heads, VD = HV * d,
                C = 2 * (int64_t)hp->ssm_k_heads * d + VD, NX = hp->n_expert, FX = hp->n_ff_exp,
                FS = hp->n_ff_shexp;
  const bool gdn = memra_hparams_layer_recurrent(hp, il), moe = hp->n_expert > 0,
             next = hp->arch == MEMRA_ARCH_QWEN3NEXT;
  memra_status st;
#define W(field, suffix, ne0, ne1, opt)                                                            \
  snprintf(n, sizeof n, "blk.%d." suffix, il);                                                     \
  if ((st = want(L, &l->field, n, ne0, ne1, opt))) return st;
  W(attn_norm, "attn_norm.weight", E, 1, false)
  W(ffn_norm, "post_attention_norm.weight", E, 1, false)
  if (gdn) {
    W(ssm_qkv, "attn_qkv.weight", E, C, false)
    W(ssm_z, "attn_gate.weight", E, VD, false)
    if (next) { /* fused [b x r, a x r] per k-head group: split after upload */
      W(ssm_beta, "ssm_ba.weight", E, 2 * HV, false)
    } else {
      W(ssm_beta, "ssm_beta.weight", E, HV, false)
      W(ssm_alpha, "ssm_alpha.weight", E, HV, false)
    }
    W(ssm_conv1d, "ssm_conv1d.weight", hp->ssm_conv, C, false)
    if (l->ssm_conv1d.type != MEMRA_TYPE_F32)
      return memra_errf(L->err, MEMRA_E_UNSUPPORTED, "blk.%d.ssm_conv1d.weight must be F32", il);
    W(ssm_a, "ssm_a", HV, 1, false)
    W(ssm_dt, "ssm_dt.bias", HV, 1, false)
    W(ssm_norm, "ssm_norm.weight", d, 1, false)
    W(ssm_out, "ssm_out.weight", VD, E, false)
  } else {
    W(wq, "attn_q.weight", E, 2 * QD, false)
    W(wk, "attn_k.weight", E, KD, false)
    W(wv, "attn_v.weight", E, KD, false)
    W(wo, "attn_output.weight", QD, E, false)
    W(q_norm, "attn_q_norm.weight", D, 1, false)
    W(k_norm, "attn_k_norm.weight", D, 1, false)
  }
  if (moe && shexp_stackable(L, il, FX, FS)) { /* each shared matrix after its stack */
    W(ffn_gate_inp, "ffn_gate_inp.weight", E, NX, false)
    W(ffn_gate_exps, "ffn_gate_exps.weight", E, FX * NX, false)
    W(ffn_gate_shexp, "ffn_gate_shexp.weight", E, FS, false)
    W(ffn_up_exps, "ffn_up_exps.weight", E, FX * NX, false)
    W(ffn_up_shexp, "ffn_up_shexp.weight", E, FS, false)
    W(ffn_down_exps, "ffn_down_exps.weight", FX, E * NX, false)
    W(ffn_down_shexp, "ffn_down_shexp.weight", FS, E, false)
    W(ffn_gate_inp_shexp, "ffn_gate_inp_shexp.weight", E, 1, false)
  } else if (moe) { /* gate and up back to back (fuse_gate_up) */
    W(ffn_gate_inp, "ffn_gate_inp.weight", E, NX, false)
    W(ffn_gate_exps, "ffn_gate_exps.weight", E, FX * NX, false)
    W(ffn_up_exps, "ffn_up_exps.weight", E, FX * NX, false)
    W(ffn_down_exps, "ffn_down_exps.weight", FX, E * NX, false)
    if (FS > 0) {
      W(ffn_gate_inp_shexp, "ffn_gate_inp_shexp.weight", E, 1, false)
      W(ffn_gate_shexp, "ffn_gate_shexp.weight", E, FS, false)
      W(ffn_up_shexp, "ffn_up_shexp.weight", E, FS, false)
      W(ffn_down_shexp, "ffn_down_shexp.weight", FS, E, false)
    }
  } else {
    W(w_gate, "ffn_gate.weight", E, F, false)
    W(w_up, "ffn_up.weight", E, F, false)
    W(w_down, "ffn_down.weight", F, E, false)
  }
#undef W
  return MEMRA_OK;
}

/* qwen3next's ssm_ba rows come per k-head group kh as [b of its r v-heads, a of them];
 * reorder them on the device to [b of v-heads 0..H_v-1, a of them] and view the halves. */
static memra_status split_ba(memra_model *m, memra_layer *l, memra_err *err) {
  const memra_hparams *hp = &m->hp;
  const int64_t hv = hp->ssm_v_heads, r = hv / hp->ssm_k_heads;
  memra_tensor ba = l->ssm_beta;
  memra_buf *tmp;
  memra_status st = m->vt->buf_alloc(m->be, ba.nb1 * (uint64_t)ba.ne1, &tmp);
  if (st) return memra_errf(err, st, "ssm_ba reorder: %s", m->vt->last_error(m->be));
  for (int64_t h = 0; h < hv && !st; ++h) {
    int64_t kh = h / r, i = h % r;
    int64_t src_b = kh * 2 * r + i, src_a = kh * 2 * r + r + i;
    st = m->vt->buf_copy(m->be, tmp, (uint64_t)h * ba.nb1, ba.buf, ba.offset + src_b * ba.nb1,
                         ba.nb1);
    if (!st)
      st = m->vt->buf_copy(m->be, tmp, (uint64_t)(hv + h) * ba.nb1, ba.buf,
                           ba.offset + src_a * ba.nb1, ba.nb1);
  }
  if (!st) st = m->vt->buf_copy(m->be, ba.buf, ba.offset, tmp, 0, ba.nb1 * (uint64_t)ba.ne1);
  m->vt->buf_free(m->be, tmp);
  if (st) return memra_errf(err, st, "ssm_ba reorder: %s", m->vt->last_error(m->be));
  l->ssm_beta.ne1 = l->ssm_alpha.ne1 = hv;
  l->ssm_alpha = l->ssm_beta;
  l->ssm_alpha.offset += (uint64_t)hv * ba.nb1;
  return MEMRA_OK;
}

/* A MoE layer's shared expert joins its routed stacks as expert n_expert when it has their
 * width and types and each of its matrices lies right after its stack (want_layer_hybrid
 * plans them so; the stack's bytes must fill its 256-byte alignment): no byte moves, the
 * stacks just grow by one expert, and the shared expert's tensors stay views of its rows.
 * With ABI 1.9 moe_combine_shexp the combine takes it as every token's (k+1)-th row, so the
 * expert launches compute it (moe_ffn.c): a layer's shared glu and shared down launches go
 * away; a backend without the slot reads the routed experts and the views apart. */
static void stack_shexp(memra_model *m, memra_layer *l) {
  if (!l->ffn_gate_shexp.buf) return;
  memra_tensor *st[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
  const memra_tensor *sh[3] = {&l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp};
  for (int i = 0; i < 3; ++i)
    if (!st[i]->buf || sh[i]->buf != st[i]->buf || sh[i]->type != st[i]->type ||
        sh[i]->ne0 != st[i]->ne0 || sh[i]->nb1 != st[i]->nb1 ||
        sh[i]->ne1 * m->hp.n_expert != st[i]->ne1 ||
        sh[i]->offset != st[i]->offset + st[i]->nb1 * (uint64_t)st[i]->ne1)
      return;
  for (int i = 0; i < 3; ++i)
    st[i]->ne1 += sh[i]->ne1;
  l->shexp_stacked = true;
}

/* A MoE layer's gate and up expert stacks, when they share type and shape and lie back to back
 * in the weights buffer, are interleaved per expert on the device ([gate_e | up_e] for each e)
 * into one stack: one matmul_id launch computes a token's gate and up rows for its experts (a
 * row's arithmetic is matmul_id's per row either way: the same bits). MEMRA_MOE_FUSE=0 keeps
 * them apart, as does a failed scratch allocation (2 x the stack's bytes, freed per layer). */
static memra_status fuse_gate_up(memra_model *m, memra_layer *l, memra_err *err) {
  const memra_tensor g = l->ffn_gate_exps, u = l->ffn_up_exps;
  const char *env = getenv("MEMRA_MOE_FUSE");
  if ((env && env[0] == '0') || !g.buf || g.buf != u.buf || g.type != u.type || g.ne0 != u.ne0 ||
      g.ne1 != u.ne1 || g.nb1 != u.nb1 || u.offset != g.offset + g.nb1 * (uint64_t)g.ne1)
    return MEMRA_OK;
  const int64_t E = m->hp.n_expert + l->shexp_stacked; /* the shared expert is one more */
  const uint64_t part = g.nb1 * (uint64_t)(g.ne1 / E), all = 2 * g.nb1 * (uint64_t)g.ne1;
  memra_buf *tmp;
  /* no room for the scratch copy (a model that only just fits): keep the stacks apart */
  if (m->vt->buf_alloc(m->be, all, &tmp) != MEMRA_OK) return MEMRA_OK;
  memra_status st = MEMRA_OK;
  for (int64_t e = 0; e < E && !st; ++e) {
    st = m->vt->buf_copy(m->be, tmp, 2 * e * part, g.buf, g.offset + e * part, part);
    if (!st) st = m->vt->buf_copy(m->be, tmp, (2 * e + 1) * part, u.buf, u.offset + e * part, part);
  }
  if (!st) st = m->vt->buf_copy(m->be, g.buf, g.offset, tmp, 0, all);
  m->vt->buf_free(m->be, tmp);
  if (st) return memra_errf(err, st, "gate/up interleave: %s", m->vt->last_error(m->be));
  l->ffn_gate_up_exps = g;
  l->ffn_gate_up_exps.ne1 = 2 * g.ne1;
  if (l->shexp_stacked) { /* the shared expert's gate and up rows moved with it: expert E - 1 */
    l->ffn_gate_shexp.offset = g.offset + 2 * (uint64_t)(E - 1) * part;
    l->ffn_up_shexp.offset = l->ffn_gate_shexp.offset + part;
  }
  memset(&l->ffn_gate_exps, 0, sizeof l->ffn_gate_exps);
  memset(&l->ffn_up_exps, 0, sizeof l->ffn_up_exps);
  return MEMRA_OK;
}

static memra_status plan(loader *L, memra_model *m) {
  memra_hparams *hp = &m->hp;
  const memra_gguf_tensor *emb = memra_gguf_tensor_find(L->g, "token_embd.weight");
  if (!emb) return memra_errf(L->err, MEMRA_E_FORMAT, "missing tensor 'token_embd.weight'");
  if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
    return memra_errf(L->err, MEMRA_E_FORMAT, "token_embd.weight has %lld rows",
                      (long long)emb->ne[1]);
  hp->n_vocab = (int32_t)emb->ne[1];
  memra_status st;
  if ((st = want(L, &m->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, false))) return st;
  if ((st = want(L, &m->output_norm, "output_norm.weight", hp->n_embd, 1, false))) return st;
  if ((st = want(L, &m->output, "output.weight", hp->n_embd, hp->n_vocab, true))) return st;
  if ((st = want(L, &m->rope_freqs, "rope_freqs.weight", hp->n_rot / 2, 1, true))) return st;
  for (int il = 0; il < hp->n_layer; ++il)
    if ((st = memra_hparams_hybrid(hp) ? want_layer_hybrid(L, hp, il, &m->layers[il])
                                       : want_layer(L, hp, il, &m->layers[il])))
      return st;
  return MEMRA_OK;
}

/* model.h's step_weight_bytes from the tensors listed. */
static uint64_t step_weight_bytes(const loader *L, const memra_hparams *hp) {
  const bool tied = !memra_gguf_tensor_find(L->g, "output.weight");
  double b = 0;
  for (size_t i = 0; i < L->n_refs; ++i) {
    const memra_gguf_tensor *t = L->refs[i].src;
    const memra_str nm = t->name;
    if (memra_str_eq(nm, "token_embd.weight") && !tied) {
      b += (double)L->refs[i].dst->nb1; /* get_rows reads one row */
    } else if (hp->n_expert > 0 && nm.len >= 12 &&
               !memcmp(nm.ptr + nm.len - 12, "_exps.weight", 12)) {
      b += (double)t->nbytes * hp->n_expert_used / hp->n_expert; /* the routed share */
    } else {
      b += (double)t->nbytes;
    }
  }
  return (uint64_t)(b + 0.5);
}

/* Ops beyond ABI minor 0 are optional slots: refuse a model whose ops the backend lacks
 * before uploading anything (older plugins and the GPU plugins may not have them). */
static memra_status check_ops(const memra_backend_vt *vt, const memra_hparams *hp, memra_err *err) {
  const char *missing = NULL;
  if (hp->n_expert > 0)
    missing = !vt->moe_route     ? "moe_route"
              : !vt->matmul_id   ? "matmul_id"
              : !vt->moe_combine ? "moe_combine"
                                 : NULL;
  if (!missing && memra_hparams_hybrid(hp))
    missing = !vt->sigmoid_gate       ? "sigmoid_gate"
              : !vt->ssm_conv         ? "ssm_conv"
              : !vt->gated_delta_rule ? "gated_delta_rule"
                                      : NULL;
  if (missing)
    return memra_errf(err, MEMRA_E_UNSUPPORTED, "backend %s has no %s op, which %s models need",
                      vt->name, missing, hp->arch_name);
  return MEMRA_OK;
}

memra_status memra_model_load(const memra_gguf *g, const memra_backend_vt *vt, memra_backend *be,
                              memra_progress_fn progress, void *user, memra_model **out,
                              memra_err *err) {
  *out = NULL;
  memra_model *m = memra_calloc(1, sizeof *m);
  if (!m) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  m->vt = vt;
  m->be = be;
  loader L = {.g = g, .err = err};
  memra_status st = memra_hparams_read(g, &m->hp, err);
  if (st) goto fail;
  if ((st = check_ops(vt, &m->hp, err))) goto fail;
  m->layers = memra_calloc((size_t)m->hp.n_layer, sizeof *m->layers);
  if (!m->layers) {
    st = memra_errf(err, MEMRA_E_OOM, "out of memory");
    goto fail;
  }
  if ((st = plan(&L, m))) goto fail;
  if ((st = vt->buf_alloc(be, L.total, &m->weights))) {
    memra_errf(err, st, "cannot allocate %.1f MiB for weights on %s: %s", L.total / 1048576.0,
               vt->name, vt->last_error(be));
    goto fail;
  }
  m->weights_bytes = L.total;
  m->step_weight_bytes = step_weight_bytes(&L, &m->hp);
  uint64_t done = 0;
  for (size_t i = 0; i < L.n_refs; ++i) {
    weight_ref *r = &L.refs[i];
    r->dst->buf = m->weights;
    if ((st = vt->buf_upload(be, m->weights, r->dst->offset, r->src->data, r->src->nbytes))) {
      memra_errf(err, st, "uploading '%.*s': %s", (int)r->src->name.len, r->src->name.ptr,
                 vt->last_error(be));
      goto fail;
    }
    done += r->src->nbytes;
    if (progress) progress(user, done, L.total);
  }
  if (!m->output.buf) m->output = m->tok_embd; /* tied embeddings */
  if (m->hp.arch == MEMRA_ARCH_QWEN3NEXT)
    for (int il = 0; il < m->hp.n_layer; ++il)
      if (memra_hparams_layer_recurrent(&m->hp, il) && (st = split_ba(m, &m->layers[il], err)))
        goto fail;
  if (m->hp.n_expert > 0)
    for (int il = 0; il < m->hp.n_layer; ++il) {
      stack_shexp(m, &m->layers[il]);
      if ((st = fuse_gate_up(m, &m->layers[il], err))) goto fail;
    }
  memra_free(L.refs);
  *out = m;
  return MEMRA_OK;
fail:
  memra_free(L.refs);
  memra_model_free(m);
  return st;
}

void memra_model_free(memra_model *m) {
  if (!m) return;
  if (m->weights) m->vt->buf_free(m->be, m->weights);
  memra_free(m->layers);
  memra_free(m);
}
