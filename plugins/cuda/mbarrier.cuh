/* mbarrier.cuh — shared-memory transaction barriers and bulk copies (sm_90+): the pieces a
 * producer/consumer ring in shared memory is built from (gemm_wgmma.cu's TMA tiles, the
 * Q4_K GEMV v11's weight ring). A barrier completes a phase when its arrivals are in and the
 * bytes announced by expect_tx have landed; waiters poll a phase's parity. */
#ifndef MEMRA_CUDA_MBARRIER_CUH
#define MEMRA_CUDA_MBARRIER_CUH

#include <stdint.h>

#include "plugins/cuda/l2_policy.cuh"

__device__ __forceinline__ uint32_t memra_smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void memra_mbar_init(uint64_t *b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(memra_smem_addr(b)), "r"(count));
}
/* Makes the initialized barriers visible to the async proxy (the bulk copies' completion). */
__device__ __forceinline__ void memra_mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void memra_mbar_expect(uint64_t *b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(memra_smem_addr(b)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void memra_mbar_arrive(uint64_t *b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(memra_smem_addr(b)) : "memory");
}
__device__ __forceinline__ void memra_mbar_wait(uint64_t *b, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(memra_smem_addr(b)), "r"(parity)
                 : "memory");
  } while (!done);
}

/* A ring's barriers, by thread 0, then the block synchronized: full[s] completes on the
 * producer's one arrival (with its bytes), empty[s] on the consumers' `consumers` arrivals. */
__device__ __forceinline__ void memra_ring_init(uint64_t *full, uint64_t *empty, int stages,
                                                int consumers) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      memra_mbar_init(&full[s], 1);
      memra_mbar_init(&empty[s], consumers);
    }
    memra_mbar_fence_init();
  }
  __syncthreads();
}

/* The lines of every bulk copy are marked evict-first in L2 (a build define; 0: the plain copy).
 * The ring GEMVs' weights are read once a step, so L2 keeps what is read again instead: x and
 * the residual between launches, the KV cache, the recurrent states (H100, tg128 @ d512: Llama
 * Q4_K_M +1.6%, Q8_0 +1.2%, the hybrid +2.6%, the MoE +1.7%; docs/PERF.md, thirtieth session). */
#ifndef MEMRA_BULK_EVICT_FIRST
#define MEMRA_BULK_EVICT_FIRST 1
#endif

/* bytes (a multiple of 16; both addresses 16-byte aligned) from global src to shared dst by
 * the copy engine; completion is counted in bytes on bar. */
__device__ __forceinline__ void memra_bulk_load(void *dst, const void *src, uint32_t bytes,
                                                uint64_t *bar) {
#if MEMRA_BULK_EVICT_FIRST
  const uint64_t pol = memra_l2_evict_first();
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
               "[%0], [%1], %2, [%3], %4;" ::"r"(memra_smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(memra_smem_addr(bar)), "l"(pol)
               : "memory");
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
               "[%3];" ::"r"(memra_smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(memra_smem_addr(bar))
               : "memory");
#endif
}

#endif /* MEMRA_CUDA_MBARRIER_CUH */
