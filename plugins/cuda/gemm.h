/* gemm.h — the tensor-core GEMM kernels behind the gemm op (ABI 1.3, prefill batches):
 *   C [m, n] (f32, row stride ldc) = A [m, k] . B [n, k]^T (+ bias [n])
 * A (activations) and B (weights) are both f16, or both bf16, row-major with row strides
 * lda / ldb in elements. gemm.cu converts x to A, dequantizes quantized weights into B
 * and calls the kernel of its architecture:
 *   memra_cu_gemm_wgmma  sm_90a: TMA + mbarrier pipeline + wgmma (gemm_wgmma.cu)
 *   memra_cu_gemm_mma    any arch >= 8.0: ldmatrix + mma.sync m16n8k16 (gemm_mma.cu)
 * Both reduce k in one fixed order per output element (no split-K chosen by shape), so a
 * row's result never depends on m or on the other rows. */
#ifndef MEMRA_CUDA_GEMM_H
#define MEMRA_CUDA_GEMM_H

#include <cuda_runtime.h>
#include <stdint.h>

typedef struct memra_cu_gemm_args {
  const void *a; /* __half or __nv_bfloat16 [m, lda] */
  int64_t lda;
  const void *b; /* same element type, [n, ldb] */
  int64_t ldb;
  float *c;
  int64_t ldc;
  const float *bias; /* NULL = none */
  int m, n, k;
  int bf16; /* 0: f16 operands, 1: bf16 */
} memra_cu_gemm_args;

/* Several products sharing A (gemm_n: q, k, v or gate, up of prompt rows): C_j [m, n_j] =
 * A . B_j^T (+ bias_j) for j < n_jobs, one persistent launch over all jobs' tiles on sm_90a
 * (fewer, fuller waves than one launch per weight at small m). Each element's bits are those
 * of the one-job call: same k order, whatever the tile shape. */
enum { MEMRA_CU_GEMM_MAX_JOBS = 4 };
typedef struct memra_cu_gemm_job {
  const void *b; /* A's element type, [n, ldb] */
  int64_t ldb;
  float *c;
  int64_t ldc;
  const float *bias; /* NULL = none */
  int n;
} memra_cu_gemm_job;
typedef struct memra_cu_gemm_group {
  const void *a;
  int64_t lda;
  int m, k, bf16, n_jobs;
  memra_cu_gemm_job job[MEMRA_CU_GEMM_MAX_JOBS];
  /* glu (sm_90a, gemm_glu): with n_jobs 2 (gate, up of equal n), one output y [m, n] =
   * act(C_0) * C_1 by the glu op's arithmetic on those f32 results, into job[0].c (f32,
   * out16 0) or y16 (ldy elements apart; out16 1 = f16, 2 = bf16 by the memra_op16 rule);
   * job[1].c is unused. Each element's bits are those of the two products and glu. */
  int glu, act, out16;
  void *y16;
  int64_t ldy;
} memra_cu_gemm_group;

#if MEMRA_CUDA_CC_MAJOR == 9
cudaError_t memra_cu_gemm_wgmma(const memra_cu_gemm_args *g, cudaStream_t st, int n_sms);
cudaError_t memra_cu_gemm_wgmma_n(const memra_cu_gemm_group *g, cudaStream_t st, int n_sms);
#endif
cudaError_t memra_cu_gemm_mma(const memra_cu_gemm_args *g, cudaStream_t st, int n_sms);

#endif
