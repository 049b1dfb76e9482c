/* fp8.cuh — an FP8 e4m3 cache element for the templated KV kernels: one byte that
 * converts from and to float with plugins/quant/fp8.h, the very arithmetic the CPU
 * oracle uses, so a GPU cache holds the same bytes as the CPU one. */
#ifndef MEMRA_CUDA_FP8_CUH
#define MEMRA_CUDA_FP8_CUH

#include <stdint.h>

#include "plugins/quant/fp8.h"

struct memra_f8 {
  uint8_t b;
  memra_f8() = default;
  __host__ __device__ explicit memra_f8(float f) : b(memra_f32_to_fp8_e4m3(f)) {}
  __host__ __device__ operator float() const { return memra_fp8_e4m3_to_f32(b); }
};
static_assert(sizeof(memra_f8) == 1, "memra_f8 must be one byte");

#endif /* MEMRA_CUDA_FP8_CUH */
