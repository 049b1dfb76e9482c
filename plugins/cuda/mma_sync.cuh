/* mma_sync.cuh — warp-level tensor-core helpers (sm_80 and later: every GPU plugin) shared
 * by gemm_mma.cu and attention_prefill.cu: cp.async into shared memory, ldmatrix and
 * mma.sync m16n8k16 with f32 accumulation, plus the entry points of the sm_120a-only
 * low-precision GEMMs (FP8 e4m3, NVFP4 block-scaled), which exist in the sm120a build only.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 .row.col), g = lane / 4, t = lane % 4:
 *   A 16x16: a0 (row g, k 2t..2t+1), a1 (row g+8), a2 (row g, k 8+2t), a3 (row g+8, k 8+2t)
 *   B 16x8 stored [n][k]: b0 (n g, k 2t..2t+1), b1 (n g, k 8+2t)
 *   C 16x8: c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8)
 * ldmatrix.x4 hands lane i's address to matrix i / 8, so lanes 0-15 naming rows 0-15 at k 0
 * and lanes 16-31 rows 0-15 at k 8 yield a0..a3 in order. */
#ifndef MEMRA_CUDA_MMA_SYNC_CUH
#define MEMRA_CUDA_MMA_SYNC_CUH

#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ uint32_t memra_smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, bypassing L1; src_bytes 0 zero-fills (out-of-range tiles). */
__device__ __forceinline__ void memra_cp_async16(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void memra_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void memra_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void memra_ldmatrix_x4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
/* Transposed: for an operand stored [k][n] (V in attention), yields the [n][k] fragments. */
__device__ __forceinline__ void memra_ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* d += a . b for a 16x8x16 tile, f16 (BF16 = 0) or bf16 (BF16 = 1) operands, f32 accumulators. */
template <int BF16>
__device__ __forceinline__ void memra_mma_16816(float d[4], const uint32_t a[4],
                                                const uint32_t b[2]) {
  if (BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Two floats as one register of two f16 (lo in the low half). */
__device__ __forceinline__ uint32_t memra_pack_half2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#if MEMRA_CUDA_CC_MAJOR >= 12
/* --- sm_120a only: compiled and SASS-checked, NOT yet run on hardware (no sm_120 card) ---
 * C [m, n] (f32, row stride ldc) = alpha * A [m, k] . B [n, k]^T, both operands row-major.
 *
 * FP8: A and B OCP e4m3 bytes (lda, ldb in bytes, multiples of 4, k % 32 == 0);
 *   mma.sync.aligned.m16n8k32 .e4m3.e4m3 -> f32.
 * NVFP4: A and B e2m1 nibbles, two per byte (lower k in the low nibble; lda, ldb in bytes,
 *   k % 64 == 0), each run of 16 elements of a row scaled by one ue4m3 byte: sfa [m, k/16],
 *   sfb [n, k/16] (row-major); mma.sync ... kind::mxf4nvf4.block_scale.scale_vec::4X. */
typedef struct memra_cu_gemm_lp_args {
  const uint8_t *a;
  int64_t lda;
  const uint8_t *b;
  int64_t ldb;
  const uint8_t *sfa; /* NVFP4 only */
  const uint8_t *sfb;
  float *c;
  int64_t ldc;
  float alpha;
  int m, n, k;
} memra_cu_gemm_lp_args;

cudaError_t memra_cu_gemm_mma_f8(const memra_cu_gemm_lp_args *g, cudaStream_t st);
cudaError_t memra_cu_gemm_mma_nvfp4(const memra_cu_gemm_lp_args *g, cudaStream_t st);
#endif

#endif /* MEMRA_CUDA_MMA_SYNC_CUH */
