/* l2_policy.cuh — L2 cache policies for the loads and bulk copies of data whose reuse we know:
 * a decode step reads each weight once and streams ~145 MB a Llama layer through a 50 MB L2, so
 * the weights go evict-first and L2 keeps what the next launches read again (docs/PERF.md,
 * thirtieth session). */
#ifndef MEMRA_CUDA_L2_POLICY_CUH
#define MEMRA_CUDA_L2_POLICY_CUH

#include <stdint.h>

/* A policy under which the lines an access brings in are the first to go (data read once a
 * step). */
__device__ __forceinline__ uint64_t memra_l2_evict_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

/* A policy that marks the given fraction (0, 1] of the lines an access brings in evict-last and
 * leaves the others' priority unchanged (data read again next step, more than L2 holds). */
__device__ __forceinline__ uint64_t memra_l2_evict_last(float fraction) {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_last.L2::evict_unchanged.b64 %0, %1;"
      : "=l"(pol)
      : "f"(fraction));
  return pol;
}

/* A 16-byte load through the read-only path under an L2 policy. */
__device__ __forceinline__ uint4 memra_ldg_policy(const void *p, uint64_t pol) {
  uint4 v;
  asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(pol));
  return v;
}

#endif /* MEMRA_CUDA_L2_POLICY_CUH */
