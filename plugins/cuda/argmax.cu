/* argmax.cu — ids[r] = argmax over logits row r, lowest index on ties; NaN never wins
 * (a row of only NaN gives 0). Oracle: plugins/cpu argmax.
 * ver 1: one block of 512 threads per row, fixed-order (value, index) reduction. <- vtable */
#include <math.h>

#include "plugins/cuda/cuda_common.h"

__device__ __forceinline__ void am_take(float &bv, int64_t &bi, float v, int64_t i) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

__global__ void __launch_bounds__(512)
    argmax_v1_kernel(int32_t *ids, const float *logits, int64_t ld, int64_t ne0) {
  __shared__ float sv[32];
  __shared__ int64_t si[32];
  const int64_t r = blockIdx.x;
  const float *x = logits + r * ld;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
  for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x)
    am_take(bv, bi, x[i], i);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    am_take(bv, bi, ov, oi);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (warp == 0) {
    bv = lane < (int)(blockDim.x >> 5) ? sv[lane] : -INFINITY;
    bi = lane < (int)(blockDim.x >> 5) ? si[lane] : INT64_MAX;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      am_take(bv, bi, ov, oi);
    }
    if (lane == 0) ids[r] = bi == INT64_MAX ? 0 : (int32_t)bi;
  }
}

memra_status memra_cu_argmax(memra_backend *be, const memra_tensor *ids,
                             const memra_tensor *logits) {
  memra_status st = memra_cu_check_tensor(be, logits, "argmax: logits", MEMRA_TYPE_F32);
  const int32_t *idp = NULL;
  if (st != MEMRA_OK ||
      (st = memra_cu_check_i32_vec(be, ids, logits->ne1, "argmax: ids", &idp)) != MEMRA_OK)
    return st;
  if (logits->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "argmax: logits stride not whole floats");
  if (logits->ne0 > INT32_MAX)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "argmax: rows of %lld exceed I32 ids",
                         (long long)logits->ne0);
  if (logits->ne1 == 0) return MEMRA_OK;
  if (logits->ne1 > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "argmax: %lld rows", (long long)logits->ne1);
  argmax_v1_kernel<<<(unsigned)logits->ne1, 512, 0, be->stream>>>(
      (int32_t *)idp, (const float *)memra_cu_ptr(logits), (int64_t)(logits->nb1 / 4), logits->ne0);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
