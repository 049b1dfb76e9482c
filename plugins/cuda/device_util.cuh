/* device_util.cuh — small device helpers shared by the op files. */
#ifndef MEMRA_CUDA_DEVICE_UTIL_CUH
#define MEMRA_CUDA_DEVICE_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "plugins/include/memra_types.h"

/* A 16-bit gemm operand from f32 (ABI 1.6, the memra_op16 rule): bf16 round to nearest
 * even, or f16 round to nearest even with values beyond +-65504 (infinities too) saturated (NaN
 * stays NaN). gemm's x conversion and the ops that write gemm operands share it. */
template <int BF> __device__ __forceinline__ uint16_t memra_op16(float v) {
  if (BF) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  if (fabsf(v) > 65504.f) v = copysignf(65504.f, v);
  return __half_as_ushort(__float2half_rn(v));
}

/* The gate activations of glu (MEMRA_ACT_*), with the accurate expf/tanhf: every kernel
 * that applies one (glu, the fused gate/up gemm epilogue) uses these, so they agree
 * bit for bit. */
__device__ __forceinline__ float memra_act_silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float memra_act_gelu_tanh(float x) {
  const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* Sum over the warp in a fixed butterfly order: every lane gets the same bits. */
__device__ __forceinline__ float memra_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* A float4's sum of squares, one fmaf chain in element order (rmsnorm's thread partial). */
__device__ __forceinline__ float memra_sumsq4(float4 v) {
  float ss = 0.f;
  ss = fmaf(v.x, v.x, ss);
  ss = fmaf(v.y, v.y, ss);
  ss = fmaf(v.z, v.z, ss);
  ss = fmaf(v.w, v.w, ss);
  return ss;
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

/* x[0..8) through the read-only path: two 16-byte loads (VEC: xp 16-byte aligned) or eight
 * scalar ones; the same values either way, so a kernel's bits do not depend on x's layout. */
template <bool VEC> __device__ __forceinline__ void memra_ldg8(const float *xp, float xv[8]) {
  if (VEC) {
    const float4 a = __ldg((const float4 *)xp), b = __ldg((const float4 *)xp + 1);
    xv[0] = a.x;
    xv[1] = a.y;
    xv[2] = a.z;
    xv[3] = a.w;
    xv[4] = b.x;
    xv[5] = b.y;
    xv[6] = b.z;
    xv[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      xv[i] = __ldg(xp + i);
  }
}

/* acc + w[0..8) . x[0..8), in element order (one fmaf each), x read through the read-only
 * path (VEC: two 16-byte loads, x 16-byte aligned). The GEMV kernels' inner step. */
template <bool VEC>
__device__ __forceinline__ float memra_fma8(float acc, const float *xp, const float w[8]) {
  float xv[8];
  memra_ldg8<VEC>(xp, xv);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    acc = fmaf(w[i], xv[i], acc);
  return acc;
}

#endif
