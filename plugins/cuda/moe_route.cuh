/* moe_route.cuh — one token's route by one warp (moe_route v3's selection): the kernel of the
 * route launch (moe.cu) and the experts' launches that route for themselves (moe_tc.cuh ROUTE,
 * ABI 1.21 moe_route_glu) run this one function, so their ids and weights are the same bits.
 *
 * The selection on the hardware warp reductions (REDUX, sm_80+): a logit becomes an
 * order-preserving 32-bit key (-0 as +0, NaN below -inf), a round takes the warp's largest key,
 * then the lowest index among the lanes holding it: two __reduce_*_sync and one shuffle; the
 * winning lane refinds its best untaken logit by a 4-level tree over (key, ~index) pairs. The
 * rule: logit descending, index ascending (the CPU's repeated selection). */
#ifndef MEMRA_CUDA_MOE_ROUTE_CUH
#define MEMRA_CUDA_MOE_ROUTE_CUH

#include <math.h>
#include <stdint.h>

#include "plugins/cuda/device_util.cuh"

enum { ROUTE2_MAX = 1024 }; /* most experts of the warp form (NPL 32 logits a lane) */

__device__ __forceinline__ uint32_t route_key(float v) {
  if (v != v) return 0u; /* NaN: never above a number */
  const uint32_t u = __float_as_uint(v == 0.f ? 0.f : v);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}

template <int NPL>
__device__ __forceinline__ uint64_t route_best(const uint64_t (&kv)[NPL], uint32_t taken) {
  uint64_t t[NPL];
#pragma unroll
  for (int i = 0; i < NPL; ++i)
    t[i] = taken >> i & 1 ? 0u : kv[i];
#pragma unroll
  for (int w = 1; w < NPL; w <<= 1)
#pragma unroll
    for (int i = 0; i + w < NPL; i += 2 * w)
      t[i] = t[i + w] > t[i] ? t[i + w] : t[i];
  return t[0];
}

/* Token logits lr (ne <= 32 NPL experts, k <= 32 chosen): lane j < k gets the j-th chosen expert
 * in *id and its weight in *w (renormalised over the k when normalize); every lane of the warp
 * calls it. CG: the logits through L2 only (ld.global.cg, a caller reading them before its PDL
 * wait, so no line of this SM's L1 from an earlier kernel may answer). */
template <int NPL, bool CG = false>
__device__ __forceinline__ void route_warp(const float *__restrict__ lr, int ne, int k,
                                           int normalize, int lane, int *id, float *w) {
  float l[NPL];
  uint64_t kv[NPL]; /* (key << 32 | ~index), 0 past ne */
  uint32_t taken = 0;
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int e = lane + 32 * i;
    l[i] = e < ne ? (CG ? __ldcg(lr + e) : lr[e]) : -INFINITY;
    if (e < ne) mx = fmaxf(mx, l[i]);
  }
  mx = memra_warp_max(mx);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int e = lane + 32 * i;
    if (e < ne) s += expf(l[i] - mx);
    kv[i] = e < ne ? (uint64_t)route_key(l[i]) << 32 | (uint32_t)~e : 0u;
  }
  const float sum = memra_warp_sum(s);
  uint64_t c = route_best(kv, 0u);
  float ksum = 0.f, pj = 0.f; /* lane j keeps selection j's weight and id */
  int idj = -1;
  for (int j = 0; j < k; ++j) {
    const uint32_t ck = (uint32_t)(c >> 32);
    const uint32_t m = __reduce_max_sync(0xffffffffu, ck);
    /* c == 0: nothing left in this lane (k <= ne keeps some lane's c non-zero) */
    const uint32_t lo = __reduce_max_sync(0xffffffffu, c != 0 && ck == m ? (uint32_t)c : 0u);
    const int bi = (int)~lo;
    if ((bi & 31) == lane) {
      taken |= 1u << (bi >> 5);
      c = route_best(kv, taken);
    }
    /* the key's inverse: the logit itself (a -0 read back as +0 gives the same expf) */
    const float bv = __uint_as_float(m & 0x80000000u ? m ^ 0x80000000u : ~m);
    const float p = expf(bv - mx) / sum; /* the same bits in every lane */
    ksum += p;
    if (lane == j) {
      pj = p;
      idj = bi;
    }
  }
  const float d = ksum > 6.1e-5f ? ksum : 6.1e-5f;
  *id = idj;
  *w = normalize ? pj / d : pj;
}

/* The warp form's logits a lane for ne experts (0: past ROUTE2_MAX, the block form's). */
static inline int route_npl(int64_t ne) {
  return ne <= 128 ? 4 : ne <= 256 ? 8 : ne <= 512 ? 16 : ne <= ROUTE2_MAX ? 32 : 0;
}

#endif /* MEMRA_CUDA_MOE_ROUTE_CUH */
