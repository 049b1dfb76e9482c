/* bench_util.cuh — what the device experiments nvcc builds alone (ring_bench, chain_bench,
 * layer_bench) share: CK(x), a CUDA runtime call that ends the program with the call, its error
 * and the line when it fails; and the gpu-scope acquire load / release add their counts use. */
#ifndef MEMRA_TOOLS_DEVICE_BENCH_UTIL_CUH
#define MEMRA_TOOLS_DEVICE_BENCH_UTIL_CUH

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s: %s: %s (line %d)\n", __FILE__, #x, cudaGetErrorString(e_), __LINE__);   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

__device__ __forceinline__ unsigned bench_ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void bench_red_release(unsigned *p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

#endif /* MEMRA_TOOLS_DEVICE_BENCH_UTIL_CUH */
