/* families.h — the ABI minor 1 ops of the mixture-of-experts (moe.cu) and Gated DeltaNet
 * (gdn.cu) families, and the host-side checks their op files share. */
#ifndef MEMRA_CUDA_FAMILIES_H
#define MEMRA_CUDA_FAMILIES_H

#include <stdio.h>

#include "plugins/cuda/cuda_common.h"

memra_status memra_cu_moe_route(memra_backend *be, const memra_tensor *ids,
                                const memra_tensor *weights, const memra_tensor *logits,
                                int32_t normalize);
/* moe_route's argument checks and messages, nothing launched. */
memra_status memra_cu_moe_route_check(memra_backend *be, const memra_tensor *ids,
                                      const memra_tensor *weights, const memra_tensor *logits);
memra_status memra_cu_matmul_id(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                const memra_tensor *w, const memra_tensor *ids, int32_t n_expert);
memra_status memra_cu_moe_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                  const memra_tensor *weights);
memra_status memra_cu_matmul_id_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *w, const memra_tensor *ids,
                                    int32_t n_expert, int32_t act);
/* ABI 1.21 (moe.cu): the route inside the experts' gate / up launch */
memra_status memra_cu_moe_route_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *w, const memra_tensor *ids,
                                    int32_t n_expert, int32_t act, const memra_tensor *weights,
                                    const memra_tensor *logits, int32_t normalize);
memra_status memra_cu_moe_combine_gated(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *x, const memra_tensor *weights,
                                        const memra_tensor *sh, const memra_tensor *g);
memra_status memra_cu_moe_combine_shexp(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *x, const memra_tensor *weights,
                                        const memra_tensor *g);
/* ABI 1.20: a MoE layer's combine and the norm that adds it in one launch (rmsnorm.cu). */
memra_status memra_cu_moe_combine_rmsnorm(memra_backend *be, const memra_tensor *xn,
                                          const memra_tensor *x, const memra_tensor *w_norm,
                                          float eps, const memra_tensor *y,
                                          const memra_tensor *down, const memra_tensor *weights,
                                          const memra_tensor *logit);
memra_status memra_cu_matmul_id_combine(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *x, const memra_tensor *w,
                                        const memra_tensor *ids, int32_t n_expert,
                                        const memra_tensor *weights, const memra_tensor *g);
memra_status memra_cu_sigmoid_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *g);
memra_status memra_cu_ssm_conv(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *state,
                               const memra_batch *batch);
memra_status memra_cu_gated_delta_rule_norm(memra_backend *be, const memra_tensor *out,
                                            const memra_tensor *q, const memra_tensor *k,
                                            const memra_tensor *v, const memra_tensor *a,
                                            const memra_tensor *b, const memra_tensor *a_log,
                                            const memra_tensor *dt_bias, const memra_tensor *state,
                                            const memra_batch *batch, const memra_gdn_params *p,
                                            const memra_tensor *norm_w, const memra_tensor *z,
                                            float eps, int32_t act);
/* ssm_conv with y as its own x (the conv in place: matmul_n_conv's composition). */
memra_status memra_cu_ssm_conv_in_place(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *w, const memra_tensor *state,
                                        const memra_batch *batch);
memra_status memra_cu_gated_delta_rule(memra_backend *be, const memra_tensor *out,
                                       const memra_tensor *q, const memra_tensor *k,
                                       const memra_tensor *v, const memra_tensor *a,
                                       const memra_tensor *b, const memra_tensor *a_log,
                                       const memra_tensor *dt_bias, const memra_tensor *state,
                                       const memra_batch *batch, const memra_gdn_params *p);

/* An F32 (or I32: type) tensor checked as memra_cu_check_tensor does, with whole-float
 * row strides, 4-byte alignment and the shape [ne1, ne0] (a negative value: any), the
 * messages of the CPU plugin's cpu_check_shape ("op: name has shape [..], expected [..]"). */
static inline memra_status memra_cu_check_f(memra_backend *be, const char *op, const char *name,
                                            const memra_tensor *t, int32_t type, int64_t ne0,
                                            int64_t ne1) {
  char what[96];
  snprintf(what, sizeof what, "%s: %s", op, name);
  memra_status st = memra_cu_check_tensor(be, t, what, type);
  if (st != MEMRA_OK) return st;
  if ((ne0 >= 0 && t->ne0 != ne0) || (ne1 >= 0 && t->ne1 != ne1)) {
    char w0[24] = "*", w1[24] = "*";
    if (ne0 >= 0) snprintf(w0, sizeof w0, "%lld", (long long)ne0);
    if (ne1 >= 0) snprintf(w1, sizeof w1, "%lld", (long long)ne1);
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s has shape [%lld, %lld], expected [%s, %s]", what,
                         (long long)t->ne1, (long long)t->ne0, w1, w0);
  }
  if (t->nb1 % 4 || (uintptr_t)memra_cu_ptr(t) % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: rows are not 4-byte aligned", what);
  return MEMRA_OK;
}

#endif /* MEMRA_CUDA_FAMILIES_H */
