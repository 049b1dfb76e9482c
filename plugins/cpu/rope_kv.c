/* rope_kv.c — ABI 1.4 rope_kv_store: rope(q), rope(k), kv_store(k, v) in one call, ABI
 * 1.10 rope_kv_attend: that, then attention, and ABI 1.11 attention_gate: attention, then its
 * output gate, and ABI 1.19 rmsnorm_qk_rope_kv: the per-head q / k norms, then rope_kv_store.
 * The oracle is the composition itself (GPU
 * plugins fuse them into one kernel and must give these bits). The shape facts the three calls do
 * not check between each other (same rows, k's heads) are checked first; a later refusal (a bad
 * slot) may leave q and k rotated, as the ABI allows. */
#include <inttypes.h>
#include <math.h>

#include "plugins/cpu/cpu_backend.h"

memra_status cpu_rope_kv_store(memra_backend *be, const memra_tensor *q, const memra_tensor *k,
                               const memra_tensor *v, const memra_tensor *k_cache,
                               const memra_tensor *v_cache, const memra_batch *batch,
                               const memra_rope_params *p) {
  if (!q || !k || !v || !batch || !p)
    return cpu_fail(be, MEMRA_E_INVALID, "rope_kv_store: q, k, v, batch and params are required");
  if (p->head_dim < 1 || k->ne0 % p->head_dim != 0)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "rope_kv_store: k rows have %" PRId64
                    " elements, not a multiple of head_dim %d",
                    k->ne0, p->head_dim);
  if (q->ne1 != batch->n_rows || k->ne1 != batch->n_rows || v->ne1 != batch->n_rows)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "rope_kv_store: q, k, v have %" PRId64 ", %" PRId64 ", %" PRId64
                    " rows, batch %d",
                    q->ne1, k->ne1, v->ne1, batch->n_rows);
  memra_rope_params pk = *p;
  pk.n_head = (int32_t)(k->ne0 / p->head_dim);
  memra_status st;
  if ((st = cpu_rope(be, q, &batch->pos, p)) || (st = cpu_rope(be, k, &batch->pos, &pk)) ||
      (st = cpu_kv_store(be, k_cache, v_cache, k, v, batch)))
    return st;
  return MEMRA_OK;
}

/* A packed F32 row tensor as rmsnorm's per-head view: [rows x heads, d]. */
static memra_tensor per_head(memra_tensor t, int64_t d) {
  t.ne1 *= t.ne0 / d;
  t.ne0 = d;
  t.nb1 = 4u * (uint64_t)d;
  return t;
}

/* ABI 1.19 rmsnorm_qk_rope_kv: the per-head q and k norms (rmsnorm_qk over heads of head_dim),
 * then rope_kv_store; the composition it stands for. */
memra_status cpu_rmsnorm_qk_rope_kv(memra_backend *be, const memra_tensor *q,
                                    const memra_tensor *q_in, const memra_tensor *wq,
                                    const memra_tensor *k, const memra_tensor *wk, float eps,
                                    const memra_tensor *v, const memra_tensor *k_cache,
                                    const memra_tensor *v_cache, const memra_batch *batch,
                                    const memra_rope_params *p) {
  const char *op = "rmsnorm_qk_rope_kv";
  if (!q || !wq || !k || !wk || !p)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: q, wq, k, wk and params are required", op);
  const int64_t d = p->head_dim;
  if (d < 1 || q->ne0 % d || k->ne0 % d)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: q, k rows of %" PRId64 ", %" PRId64
                    " elements, not whole heads of %" PRId64,
                    op, q->ne0, k->ne0, d);
  if (q->type != MEMRA_TYPE_F32 || k->type != MEMRA_TYPE_F32 ||
      (q->ne1 > 1 && q->nb1 != 4u * (uint64_t)q->ne0) ||
      (k->ne1 > 1 && k->nb1 != 4u * (uint64_t)k->ne0))
    return cpu_fail(be, MEMRA_E_INVALID, "%s: q and k must be F32 with packed rows", op);
  const memra_tensor qh = per_head(*q, d), kh = per_head(*k, d);
  memra_status st;
  if (q_in) { /* q from rows elsewhere: the two rmsnorm calls */
    if (q_in->ne0 != d || q_in->ne1 != qh.ne1)
      return cpu_fail(be, MEMRA_E_INVALID,
                      "%s: q_in has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64
                      ", %" PRId64 "]",
                      op, q_in->ne1, q_in->ne0, qh.ne1, d);
    if (cpu_overlap(q_in, q) || cpu_overlap(q_in, k))
      return cpu_fail(be, MEMRA_E_INVALID, "%s: q_in overlaps q or k", op);
    if (!(eps >= 0.0f) || isinf(eps))
      return cpu_fail(be, MEMRA_E_INVALID, "%s: eps %g is not a finite value >= 0", op, eps);
    st = cpu_rmsnorm(be, &qh, q_in, NULL, wq, eps);
    if (!st) st = cpu_rmsnorm(be, &kh, &kh, NULL, wk, eps);
  } else {
    st = cpu_rmsnorm_qk(be, &qh, wq, &kh, wk, eps);
  }
  return st ? st : cpu_rope_kv_store(be, q, k, v, k_cache, v_cache, batch, p);
}

memra_status cpu_rope_kv_attend(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k, const memra_tensor *v,
                                const memra_tensor *k_cache, const memra_tensor *v_cache,
                                const memra_batch *batch, const memra_rope_params *rope,
                                const memra_attn_params *attn) {
  memra_status st = cpu_rope_kv_store(be, q, k, v, k_cache, v_cache, batch, rope);
  return st ? st : cpu_attention(be, out, q, k_cache, v_cache, batch, attn);
}

/* ABI 1.11 attention_gate: the composition, the gate over out's per-head view. */
memra_status cpu_attention_gate(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k_cache, const memra_tensor *v_cache,
                                const memra_batch *batch, const memra_attn_params *p,
                                const memra_tensor *gate) {
  if (!p || !out || !gate)
    return cpu_fail(be, MEMRA_E_INVALID, "attention_gate: params, out or gate are NULL");
  const uint64_t row = 4u * (uint64_t)p->n_head * (uint64_t)p->head_dim;
  if (out->ne1 > 1 && out->nb1 != row)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "attention_gate: out rows %" PRIu64 " bytes apart (need them packed: %" PRIu64
                    ")",
                    out->nb1, row);
  if (cpu_overlap(out, gate))
    return cpu_fail(be, MEMRA_E_INVALID, "attention_gate: out overlaps gate");
  memra_status st = cpu_attention(be, out, q, k_cache, v_cache, batch, p);
  if (st) return st;
  memra_tensor oh = *out;
  oh.ne0 = p->head_dim;
  oh.ne1 = out->ne1 * p->n_head;
  oh.nb1 = 4u * (uint64_t)p->head_dim;
  return cpu_sigmoid_gate(be, &oh, &oh, gate);
}
