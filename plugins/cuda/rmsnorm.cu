/* rmsnorm.cu — optional fused residual (x += res, written back), then
 * y = x / sqrt(mean(x^2) + eps) * w per row. Oracle: plugins/cpu rmsnorm.
 * ver 1: one block of 256 threads per row, fixed-order block sum. <- in the vtable */
#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/device_util.cuh"

__global__ void __launch_bounds__(256)
    rmsnorm_v1_kernel(float *y, int64_t y_ld, float *x, int64_t x_ld, const float *res,
                      int64_t r_ld, const float *w, int64_t ne0, float eps) {
  __shared__ float sh[32];
  const int64_t r = blockIdx.x;
  float *xr = x + r * x_ld;
  float *yr = y + r * y_ld;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
    float v = xr[i];
    if (res) {
      v += res[r * r_ld + i];
      xr[i] = v;
    }
    ss = fmaf(v, v, ss);
  }
  ss = memra_block_sum(ss, sh);
  const float inv = rsqrtf(ss / (float)ne0 + eps);
  for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x)
    yr[i] = xr[i] * inv * w[i];
}

memra_status memra_cu_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *res, const memra_tensor *w, float eps) {
  memra_status st;
  if ((st = memra_cu_check_tensor(be, y, "rmsnorm: y", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, x, "rmsnorm: x", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, w, "rmsnorm: w", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_same_shape(be, y, x, "rmsnorm: y and x")) != MEMRA_OK)
    return st;
  if (w->ne0 != x->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: w has %lld elements, rows have %lld",
                         (long long)w->ne0, (long long)x->ne0);
  const float *rp = NULL;
  int64_t r_ld = 0;
  if (memra_cu_present(res)) {
    if ((st = memra_cu_check_tensor(be, res, "rmsnorm: res", MEMRA_TYPE_F32)) != MEMRA_OK ||
        (st = memra_cu_check_same_shape(be, res, x, "rmsnorm: res and x")) != MEMRA_OK)
      return st;
    if (res->nb1 % 4)
      return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: res stride not whole floats");
    rp = (const float *)memra_cu_ptr(res);
    r_ld = (int64_t)(res->nb1 / 4);
  }
  if (x->nb1 % 4 || y->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: x or y stride not whole floats");
  if (!(eps >= 0.f)) return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: eps %g is negative", eps);
  if (x->ne1 == 0) return MEMRA_OK;
  if (x->ne1 > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "rmsnorm: %lld rows", (long long)x->ne1);
  rmsnorm_v1_kernel<<<(unsigned)x->ne1, 256, 0, be->stream>>>(
      (float *)memra_cu_ptr(y), (int64_t)(y->nb1 / 4), (float *)memra_cu_ptr(x),
      (int64_t)(x->nb1 / 4), rp, r_ld, (const float *)memra_cu_ptr(w), x->ne0, eps);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
