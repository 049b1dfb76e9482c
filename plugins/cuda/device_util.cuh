/* device_util.cuh — small device helpers shared by the op files. */
#ifndef MEMRA_CUDA_DEVICE_UTIL_CUH
#define MEMRA_CUDA_DEVICE_UTIL_CUH

#include <stdint.h>

#include "plugins/include/memra_types.h"

/* Sum over the warp in a fixed butterfly order: every lane gets the same bits. */
__device__ __forceinline__ float memra_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float memra_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Sum over a block of blockDim.x threads (a multiple of 32, at most 1024) in a fixed order;
 * every thread gets the result. sh holds 32 floats. */
__device__ __forceinline__ float memra_block_sum(float v, float *sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = memra_warp_sum(v);
  __syncthreads(); /* sh may still be read by a previous call */
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : 0.f;
  return memra_warp_sum(v);
}

#endif
