/* get_rows.cu — y[r] = dequant(table row ids[r]): the embedding lookup.
 * Oracle: plugins/cpu get_rows, bit-exact (the EXACT dequantizers). An id outside the table writes
 * NaN to its row (the host cannot see device ids without a sync; NaN makes the fault visible
 * downstream). */
#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/dequant.cuh"

/* Quantized tables: one thread per 32-element unit. */
template <int T>
__global__ void get_rows_v1_kernel(float *y, int64_t y_ld, const uint8_t *table, uint64_t t_nb1,
                                   int64_t t_rows, const int32_t *ids, int64_t ne0) {
  memra_pdl_enter_early();
  const int64_t r = blockIdx.y;
  const int64_t units = ne0 / 32;
  const int32_t id = ids[r];
  float *yr = y + r * y_ld;
  for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < units;
       u += (int64_t)gridDim.x * blockDim.x) {
    float w[32];
    if (id < 0 || id >= t_rows) {
#pragma unroll
      for (int i = 0; i < 32; ++i)
        w[i] = __int_as_float(0x7fc00000);
    } else {
      memra_deq32<T, false, true>(table + (uint64_t)id * t_nb1, u, w);
    }
#pragma unroll
    for (int i = 0; i < 32; ++i)
      yr[32 * u + i] = w[i];
  }
}

/* Float tables (any width): one thread per element. */
template <int T>
__global__ void get_rows_float_v1_kernel(float *y, int64_t y_ld, const uint8_t *table,
                                         uint64_t t_nb1, int64_t t_rows, const int32_t *ids,
                                         int64_t ne0) {
  memra_pdl_enter_early();
  const int64_t r = blockIdx.y;
  const int32_t id = ids[r];
  float *yr = y + r * y_ld;
  const uint8_t *row = table + (uint64_t)(id < 0 ? 0 : id) * t_nb1;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ne0;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v;
    if (id < 0 || id >= t_rows)
      v = __int_as_float(0x7fc00000);
    else if (T == MEMRA_TYPE_F32)
      v = ((const float *)row)[i];
    else if (T == MEMRA_TYPE_F16)
      v = __half2float(__ushort_as_half(((const uint16_t *)row)[i]));
    else
      v = memra_bf2f(((const uint16_t *)row)[i]);
    yr[i] = v;
  }
}

memra_status memra_cu_get_rows(memra_backend *be, const memra_tensor *y, const memra_tensor *table,
                               const memra_tensor *ids) {
  memra_status st;
  const int32_t *idp = NULL;
  if ((st = memra_cu_check_tensor(be, y, "get_rows: y", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, table, "get_rows: table", -1)) != MEMRA_OK ||
      (st = memra_cu_check_i32_vec(be, ids, y->ne1, "get_rows: ids", &idp)) != MEMRA_OK)
    return st;
  if (!memra_cu_type_supported(table->type))
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "get_rows: no CUDA kernel for %s tables",
                         memra_type_info(table->type).name);
  if (y->ne0 != table->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "get_rows: y rows have %lld elements, table %lld",
                         (long long)y->ne0, (long long)table->ne0);
  if (y->nb1 % 4) return memra_cu_errf(be, MEMRA_E_INVALID, "get_rows: y stride not whole floats");
  const uint8_t *tp = (const uint8_t *)memra_cu_ptr(table);
  if (memra_cu_align_of(tp, table->nb1 * (table->ne1 > 1)) < memra_cu_type_align(table->type))
    return memra_cu_errf(be, MEMRA_E_INVALID, "get_rows: table is misaligned for %s",
                         memra_type_info(table->type).name);
  const int64_t n = y->ne1, ne0 = y->ne0;
  if (n == 0) return MEMRA_OK;
  if (n > 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "get_rows: %lld rows, at most 65535",
                         (long long)n);
  float *yp = (float *)memra_cu_ptr(y);
  const int64_t y_ld = (int64_t)(y->nb1 / 4);
  const bool is_float = table->type == MEMRA_TYPE_F32 || table->type == MEMRA_TYPE_F16 ||
                        table->type == MEMRA_TYPE_BF16;
  const int64_t work = is_float ? ne0 : ne0 / 32;
  const int threads = 128;
  int64_t gx = (work + threads - 1) / threads;
  if (gx > 1024) gx = 1024;
  dim3 grid((unsigned)gx, (unsigned)n);
#define GR_CASE(TY, K)                                                                             \
  case TY:                                                                                         \
    (void)memra_cu_launch(be, K<TY>, grid, dim3(threads), 0, yp, y_ld, tp, table->nb1, table->ne1, \
                          idp, ne0);                                                               \
    break;
  switch (table->type) {
    GR_CASE(MEMRA_TYPE_F32, get_rows_float_v1_kernel)
    GR_CASE(MEMRA_TYPE_F16, get_rows_float_v1_kernel)
    GR_CASE(MEMRA_TYPE_BF16, get_rows_float_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q8_0, get_rows_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q4_0, get_rows_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q4_1, get_rows_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q5_0, get_rows_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q5_1, get_rows_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q4_K, get_rows_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q5_K, get_rows_v1_kernel)
    GR_CASE(MEMRA_TYPE_Q6_K, get_rows_v1_kernel)
  default: break;
  }
#undef GR_CASE
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
