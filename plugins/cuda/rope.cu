/* rope.cu — rotary position embedding in place on x [n_rows, n_head * head_dim].
 * Oracle: plugins/cpu rope. Pair i of a head rotates by
 * theta_i = pos * freq_scale * base^(-2i / n_rot) / freq_factors[i]; NORM pairs
 * (2i, 2i+1), NEOX pairs (i, i + n_rot/2); the arithmetic is memra_rope_pair
 * (rope_kv.cuh), shared with the fused rope_kv_store (rope_kv.cu).
 * ver 1: one thread per pair, a row per blockIdx.y.  <- in the vtable */
#include <stdio.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/rope_kv.cuh"

__global__ void rope_v1_kernel(float *x, int64_t x_ld, const int32_t *pos, int n_head, int head_dim,
                               int n_rot, int neox, float freq_base, float freq_scale,
                               const float *ff) {
  memra_pdl_enter_early();
  const int64_t r = blockIdx.y;
  const int half = n_rot / 2;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_head * half) return;
  const int h = t / half, i = t % half;
  float *xh = x + r * x_ld + (int64_t)h * head_dim;
  int a, b;
  memra_rope_pair_at(i, half, neox, &a, &b);
  memra_rope_pair(&xh[a], &xh[b], pos[r], i, n_rot, freq_base, freq_scale, ff);
}

memra_status memra_cu_rope_check(memra_backend *be, const char *what, const memra_tensor *x,
                                 const memra_tensor *pos, const memra_rope_params *p,
                                 const int32_t **pos_out, const float **ff_out) {
  memra_status st;
  char name[96];
  if (!p) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: params are NULL", what);
  snprintf(name, sizeof name, "%s: x", what);
  if ((st = memra_cu_check_tensor(be, x, name, MEMRA_TYPE_F32)) != MEMRA_OK) return st;
  snprintf(name, sizeof name, "%s: pos", what);
  if ((st = memra_cu_check_i32_vec(be, pos, x->ne1, name, pos_out)) != MEMRA_OK) return st;
  if (p->n_head <= 0 || p->head_dim <= 0 || (int64_t)p->n_head * p->head_dim != x->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %d heads x %d dims, rows have %lld elements",
                         what, p->n_head, p->head_dim, (long long)x->ne0);
  if (p->n_rot <= 0 || p->n_rot > p->head_dim || p->n_rot % 2)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: n_rot %d must be even and in (0, %d]", what,
                         p->n_rot, p->head_dim);
  if (p->mode != MEMRA_ROPE_NORM && p->mode != MEMRA_ROPE_NEOX)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: mode %d is neither NORM (0) nor NEOX (2)", what,
                         p->mode);
  if (!(p->freq_base > 0.f) || !(p->freq_scale > 0.f))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: freq_base %g and freq_scale %g must be > 0",
                         what, p->freq_base, p->freq_scale);
  *ff_out = NULL;
  if (memra_cu_present(&p->freq_factors)) {
    snprintf(name, sizeof name, "%s: freq_factors", what);
    if ((st = memra_cu_check_tensor(be, &p->freq_factors, name, MEMRA_TYPE_F32)) != MEMRA_OK)
      return st;
    if (p->freq_factors.ne0 < p->n_rot / 2)
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: freq_factors has %lld elements, need %d", what,
                           (long long)p->freq_factors.ne0, p->n_rot / 2);
    *ff_out = (const float *)memra_cu_ptr(&p->freq_factors);
  }
  if (x->nb1 % 4) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: x stride not whole floats", what);
  if (x->ne1 > 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: %lld rows, at most 65535", what,
                         (long long)x->ne1);
  return MEMRA_OK;
}

memra_status memra_cu_rope(memra_backend *be, const memra_tensor *x, const memra_tensor *pos,
                           const memra_rope_params *p) {
  memra_status st;
  const int32_t *pp = NULL;
  const float *ff = NULL;
  if ((st = memra_cu_rope_check(be, "rope", x, pos, p, &pp, &ff)) != MEMRA_OK) return st;
  if (x->ne1 == 0) return MEMRA_OK;
  const int pairs = p->n_head * (p->n_rot / 2), threads = 128;
  dim3 grid((unsigned)((pairs + threads - 1) / threads), (unsigned)x->ne1);
  (void)memra_cu_launch(be, rope_v1_kernel, grid, dim3(threads), 0, (float *)memra_cu_ptr(x),
                        (int64_t)(x->nb1 / 4), pp, p->n_head, p->head_dim, p->n_rot,
                        p->mode == MEMRA_ROPE_NEOX, p->freq_base, p->freq_scale, ff);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
