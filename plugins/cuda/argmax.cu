/* argmax.cu — ids[r] = argmax over logits row r, lowest index on ties; NaN never wins
 * (a row of only NaN gives 0). Oracle: plugins/cpu argmax. The (max, lowest index) of a
 * set does not depend on the order it is reduced in, so every version is exact.
 * ver 1: one block of 512 threads per row, fixed-order (value, index) reduction.
 *   H200 (ncu): 96 us on a 128256-wide row, one SM pulling 0.5 MB.
 * ver 2: the row cut into chunks of ~4096 (at most 1024 chunks), a block of 1024 threads
 *   per (row, chunk) with 4 loads in flight per thread, partials (value, index) into the
 *   workspace; a second kernel reduces a row's partials.                     <- vtable */
#include <math.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/launch.cuh"

enum { AM_THREADS = 1024, AM_CHUNK = 4096, AM_MAX_CHUNKS = 1024, AM_FINAL_THREADS = 256 };

struct am_part {
  float v;
  int32_t i; /* INT32_MAX: nothing taken (only NaN, or an empty chunk) */
};

__device__ __forceinline__ void am_take(float &bv, int64_t &bi, float v, int64_t i) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

/* (value, index) of the block's best, in every thread of warp 0. */
__device__ __forceinline__ void am_block(float &bv, int64_t &bi, float *sv, int64_t *si) {
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
  }
}

/* Block (row r = blockIdx.x, chunk c = blockIdx.y): the best of [c chunk, (c+1) chunk). */
__global__ void __launch_bounds__(AM_THREADS)
    argmax_part_v2_kernel(am_part *part, const float *logits, int64_t ld, int64_t ne0,
                          int64_t chunk) {
  __shared__ float sv[32];
  __shared__ int64_t si[32];
  memra_pdl_enter();
  const int64_t r = blockIdx.x, c = blockIdx.y;
  const float *x = logits + r * ld;
  const int64_t b = c * chunk, e = b + chunk < ne0 ? b + chunk : ne0;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
#pragma unroll 4
  for (int64_t i = b + threadIdx.x; i < e; i += AM_THREADS)
    am_take(bv, bi, __ldg(x + i), i);
  am_block(bv, bi, sv, si);
  if (threadIdx.x == 0)
    part[r * gridDim.y + c] = am_part{bv, bi == INT64_MAX ? INT32_MAX : (int32_t)bi};
}

__global__ void __launch_bounds__(AM_FINAL_THREADS)
    argmax_final_v2_kernel(int32_t *ids, const am_part *part, int n_chunks) {
  __shared__ float sv[32];
  __shared__ int64_t si[32];
  memra_pdl_enter();
  const int64_t r = blockIdx.x;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
  for (int c = threadIdx.x; c < n_chunks; c += AM_FINAL_THREADS) {
    const am_part p = part[r * n_chunks + c];
    if (p.i != INT32_MAX) am_take(bv, bi, p.v, p.i);
  }
  am_block(bv, bi, sv, si);
  if (threadIdx.x == 0) ids[r] = bi == INT64_MAX ? 0 : (int32_t)bi;
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
  if (logits->ne0 > INT32_MAX - 1)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "argmax: rows of %lld exceed I32 ids",
                         (long long)logits->ne0);
  if (logits->ne1 == 0) return MEMRA_OK;
  if (logits->ne1 > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "argmax: %lld rows", (long long)logits->ne1);
  const int64_t ne0 = logits->ne0 > 0 ? logits->ne0 : 1;
  int64_t n_chunks = (ne0 + AM_CHUNK - 1) / AM_CHUNK;
  if (n_chunks > AM_MAX_CHUNKS) n_chunks = AM_MAX_CHUNKS;
  const int64_t chunk = (ne0 + n_chunks - 1) / n_chunks;
  void *ws = NULL;
  if ((st = memra_cu_workspace(be, (uint64_t)logits->ne1 * (uint64_t)n_chunks * sizeof(am_part),
                               &ws)) != MEMRA_OK)
    return st;
  (void)memra_cu_launch(be, argmax_part_v2_kernel, dim3((unsigned)logits->ne1, (unsigned)n_chunks),
                        dim3(AM_THREADS), 0, (am_part *)ws, (const float *)memra_cu_ptr(logits),
                        (int64_t)(logits->nb1 / 4), logits->ne0, chunk);
  MEMRA_CU_LAUNCHED();
  (void)memra_cu_launch(be, argmax_final_v2_kernel, dim3((unsigned)logits->ne1),
                        dim3(AM_FINAL_THREADS), 0, (int32_t *)idp, (const am_part *)ws,
                        (int)n_chunks);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
