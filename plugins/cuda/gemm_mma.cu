/* gemm_mma.cu — memra_cu_gemm_mma (gemm.h): C = A . B^T (+ bias) on warp-level tensor
 * cores, the GEMM of the sm120a family (no wgmma there) and of its sm_90a test build.
 * Oracle: plugins/cpu matmul (through the gemm op, tools/device/mma_check.c).
 *
 * ver 1: CTA tile 128x128x32, 8 warps as 2 (m) x 4 (n), each a 64x32 warp tile (4 x 4
 *   mma.m16n8k16 per k16 step, 64 f32 accumulators per thread); A and B staged through a
 *   4-stage cp.async pipeline (64 KiB of shared memory, 2 CTAs per SM), read by ldmatrix
 *   from rows of 64 bytes whose four 16-byte chunks are XOR-swizzled by (row / 2) % 4, so
 *   the 8 rows of one 8x8 ldmatrix read fall in 8 different bank groups. Tiles are walked
 *   in groups of 8 m-tiles so that CTAs in flight share B (weight) tiles in L2.
 * Exactness: each output element is one thread's accumulator over k in a fixed order
 * (k-tile by k-tile, mma by mma); no split-K, so a row's result depends on neither m nor
 * its position. Out-of-range rows and k chunks are zero-filled by cp.async (k % 8 == 0:
 * a 16-byte chunk of 8 elements is all in or all out).
 *
 * Below, behind MEMRA_CUDA_CC_MAJOR >= 12: the FP8 e4m3 and NVFP4 block-scaled GEMMs of
 * sm_120a (mma_sync.cuh), compiled and SASS-checked here but NOT yet run on hardware. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "plugins/cuda/gemm.h"
#include "plugins/cuda/mma_sync.cuh"

enum {
  GM_BM = 128,
  GM_BN = 128,
  GM_BK = 32, /* elements: 64-byte smem rows of four 16-byte chunks */
  GM_STAGES = 4,
  GM_THREADS = 256,
  GM_WARP_M = 64,
  GM_WARP_N = 32,
  GM_MI = GM_WARP_M / 16, /* m16 tiles per warp */
  GM_NI = GM_WARP_N / 8,  /* n8 tiles per warp */
  GM_GROUP_M = 8,
  GM_TILE_ELEMS = GM_BM * GM_BK, /* = GM_BN * GM_BK */
  GM_SMEM = GM_STAGES * 2 * GM_TILE_ELEMS * 2
};
static_assert(GM_BM == GM_BN, "A and B tiles share one loader");
static_assert(GM_SMEM <= 227 * 1024, "gemm_mma: over the shared-memory limit");

/* Offset in elements of (row, 16-byte chunk) inside a swizzled [128][32] tile. */
__device__ __forceinline__ int gm_swz(int row, int chunk) {
  return row * GM_BK + ((chunk ^ ((row >> 1) & 3)) << 3);
}

/* One k-tile of A (rows m0..) and B (rows n0..) into stage buffers sa, sb: 512 chunks each,
 * 2 per thread per operand. */
__device__ __forceinline__ void gm_load_tile(uint32_t sa, uint32_t sb, const uint16_t *a,
                                             int64_t lda, const uint16_t *b, int64_t ldb, int m,
                                             int n, int k, int m0, int n0, int k0) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = threadIdx.x + i * GM_THREADS, row = idx >> 2, chunk = idx & 3;
    const int gk = k0 + chunk * 8;
    const bool ka = gk < k;
    const int off = gm_swz(row, chunk) * 2;
    const bool va = ka && m0 + row < m, vb = ka && n0 + row < n;
    /* An out-of-range chunk copies 0 bytes from a valid address (the matrix base). */
    memra_cp_async16(sa + off, va ? a + (int64_t)(m0 + row) * lda + gk : a, va ? 16 : 0);
    memra_cp_async16(sb + off, vb ? b + (int64_t)(n0 + row) * ldb + gk : b, vb ? 16 : 0);
  }
}

template <int BF16>
__global__ void __launch_bounds__(GM_THREADS, 2) gemm_mma_v1_kernel(memra_cu_gemm_args g) {
  extern __shared__ __align__(128) uint16_t gm_smem[];
  const int tiles_m = (g.m + GM_BM - 1) / GM_BM, tiles_n = (g.n + GM_BN - 1) / GM_BN;
  /* Grouped raster: GM_GROUP_M m-tiles walk the n-tiles together. */
  const int tile = blockIdx.x, per_group = GM_GROUP_M * tiles_n;
  const int first_m = (tile / per_group) * GM_GROUP_M;
  const int group_m = tiles_m - first_m < GM_GROUP_M ? tiles_m - first_m : GM_GROUP_M;
  const int tm = first_m + (tile % per_group) % group_m, tn = (tile % per_group) / group_m;
  const int m0 = tm * GM_BM, n0 = tn * GM_BN;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp & 1, wn = warp >> 1;
  const uint16_t *a = (const uint16_t *)g.a, *b = (const uint16_t *)g.b;
  const uint32_t s0 = memra_smem_u32(gm_smem);
  const uint32_t stage_bytes = 2 * GM_TILE_ELEMS * 2, b_off = GM_TILE_ELEMS * 2;
  const int n_kt = (g.k + GM_BK - 1) / GM_BK;

  float acc[GM_MI][GM_NI][4];
#pragma unroll
  for (int i = 0; i < GM_MI; ++i)
#pragma unroll
    for (int j = 0; j < GM_NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < GM_STAGES - 1; ++s) {
    if (s < n_kt)
      gm_load_tile(s0 + s * stage_bytes, s0 + s * stage_bytes + b_off, a, g.lda, b, g.ldb, g.m, g.n,
                   g.k, m0, n0, s * GM_BK);
    memra_cp_async_commit(); /* empty groups keep the wait count uniform */
  }

  /* ldmatrix row/chunk of this lane: A x4 = rows 0-15 at chunks (c, c+1) of a k16 step;
   * B x4 = two n8 tiles x two k8 halves. */
  const int a_row = wm * GM_WARP_M + (lane & 15), a_chunk = lane >> 4;
  const int b_row = wn * GM_WARP_N + (lane & 7) + ((lane >> 4) << 3), b_chunk = (lane >> 3) & 1;

  for (int kt = 0; kt < n_kt; ++kt) {
    memra_cp_async_wait<GM_STAGES - 2>();
    __syncthreads(); /* tile kt visible; every warp is done with tile kt - 1's stage */
    {
      const int nk = kt + GM_STAGES - 1, ns = nk % GM_STAGES;
      if (nk < n_kt)
        gm_load_tile(s0 + ns * stage_bytes, s0 + ns * stage_bytes + b_off, a, g.lda, b, g.ldb, g.m,
                     g.n, g.k, m0, n0, nk * GM_BK);
      memra_cp_async_commit();
    }
    const uint32_t sa = s0 + (kt % GM_STAGES) * stage_bytes, sb = sa + b_off;
#pragma unroll
    for (int kk = 0; kk < GM_BK / 16; ++kk) {
      uint32_t af[GM_MI][4], bfr[GM_NI][2];
#pragma unroll
      for (int i = 0; i < GM_MI; ++i)
        memra_ldmatrix_x4(af[i], sa + gm_swz(a_row + i * 16, kk * 2 + a_chunk) * 2);
#pragma unroll
      for (int j = 0; j < GM_NI / 2; ++j) {
        uint32_t r[4];
        memra_ldmatrix_x4(r, sb + gm_swz(b_row + j * 16, kk * 2 + b_chunk) * 2);
        bfr[2 * j][0] = r[0];
        bfr[2 * j][1] = r[1];
        bfr[2 * j + 1][0] = r[2];
        bfr[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < GM_MI; ++i)
#pragma unroll
        for (int j = 0; j < GM_NI; ++j)
          memra_mma_16816<BF16>(acc[i][j], af[i], bfr[j]);
    }
  }
  memra_cp_async_wait<0>();

  /* Epilogue straight from the accumulators: (acc + bias), bounds-checked. */
  const int g_row = lane >> 2, g_col = (lane & 3) * 2;
#pragma unroll
  for (int j = 0; j < GM_NI; ++j) {
    const int col = n0 + wn * GM_WARP_N + j * 8 + g_col;
    const float b0 = g.bias && col < g.n ? g.bias[col] : 0.f;
    const float b1 = g.bias && col + 1 < g.n ? g.bias[col + 1] : 0.f;
#pragma unroll
    for (int i = 0; i < GM_MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm * GM_WARP_M + i * 16 + g_row + h * 8;
        if (row >= g.m) continue;
        float *c = g.c + (int64_t)row * g.ldc;
        if (col < g.n) c[col] = acc[i][j][2 * h] + b0;
        if (col + 1 < g.n) c[col + 1] = acc[i][j][2 * h + 1] + b1;
      }
  }
}

cudaError_t memra_cu_gemm_mma(const memra_cu_gemm_args *g, cudaStream_t st, int n_sms) {
  (void)n_sms; /* one tile per CTA; the grid is sized by the problem, not the chip */
  if (!g || g->m < 0 || g->n <= 0 || g->k <= 0 || g->k % 8 || g->lda < g->k || g->ldb < g->k ||
      g->ldc < g->n || g->lda % 8 || g->ldb % 8 || (uintptr_t)g->a % 16 || (uintptr_t)g->b % 16)
    return cudaErrorInvalidValue; /* 16-byte cp.async chunks need aligned rows */
  if (g->m == 0) return cudaSuccess;
  const int64_t tiles =
      (int64_t)((g->m + GM_BM - 1) / GM_BM) * (int64_t)((g->n + GM_BN - 1) / GM_BN);
  if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
  cudaError_t e;
  if (g->bf16) {
    if ((e = cudaFuncSetAttribute(gemm_mma_v1_kernel<1>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, GM_SMEM)) !=
        cudaSuccess)
      return e;
    gemm_mma_v1_kernel<1><<<(unsigned)tiles, GM_THREADS, GM_SMEM, st>>>(*g);
  } else {
    if ((e = cudaFuncSetAttribute(gemm_mma_v1_kernel<0>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, GM_SMEM)) !=
        cudaSuccess)
      return e;
    gemm_mma_v1_kernel<0><<<(unsigned)tiles, GM_THREADS, GM_SMEM, st>>>(*g);
  }
  return cudaGetLastError();
}

#if MEMRA_CUDA_CC_MAJOR >= 12
/* --- sm_120a only: NOT yet run on hardware. Minimal kernels: a warp per 16x32 output tile
 * (four n8 tiles), fragments read straight from global memory; correctness of layout is
 * what they are for, speed comes later (smem staging as in the f16 kernel above). --- */
enum { LP_WARPS = 4, LP_TN = 4 };

__device__ __forceinline__ uint32_t lp_ld32(const uint8_t *p, int64_t ld, int row, int rows,
                                            int64_t byte) {
  return row < rows ? *(const uint32_t *)(p + (int64_t)row * ld + byte) : 0u;
}

__device__ __forceinline__ void lp_store(const memra_cu_gemm_lp_args &g, int r0, int c0,
                                         const float d[4]) {
  const int lane = threadIdx.x & 31, row = r0 + (lane >> 2), col = c0 + (lane & 3) * 2;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (row + 8 * h < g.m && col + e < g.n)
        g.c[(int64_t)(row + 8 * h) * g.ldc + col + e] = g.alpha * d[2 * h + e];
}

/* e4m3 m16n8k32: a0 (row g, k 4t..4t+3), a1 (row g+8), a2/a3 (k + 16); b0 (n g, k 4t),
 * b1 (k + 16). */
__global__ void __launch_bounds__(LP_WARPS * 32) gemm_mma_f8_v1_kernel(memra_cu_gemm_lp_args g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  const int lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x * LP_WARPS + (threadIdx.x >> 5);
  const int tiles_n = (g.n + 8 * LP_TN - 1) / (8 * LP_TN);
  const int r0 = (tile / tiles_n) * 16, c0 = (tile % tiles_n) * 8 * LP_TN;
  if (r0 >= g.m) return;
  float d[LP_TN][4] = {};
  for (int k0 = 0; k0 < g.k; k0 += 32) {
    uint32_t a[4];
    a[0] = lp_ld32(g.a, g.lda, r0 + gr, g.m, k0 + 4 * t);
    a[1] = lp_ld32(g.a, g.lda, r0 + gr + 8, g.m, k0 + 4 * t);
    a[2] = lp_ld32(g.a, g.lda, r0 + gr, g.m, k0 + 16 + 4 * t);
    a[3] = lp_ld32(g.a, g.lda, r0 + gr + 8, g.m, k0 + 16 + 4 * t);
#pragma unroll
    for (int j = 0; j < LP_TN; ++j) {
      const int n = c0 + j * 8 + gr;
      const uint32_t b0 = lp_ld32(g.b, g.ldb, n, g.n, k0 + 4 * t);
      const uint32_t b1 = lp_ld32(g.b, g.ldb, n, g.n, k0 + 16 + 4 * t);
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, "
                   "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                   : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
  }
#pragma unroll
  for (int j = 0; j < LP_TN; ++j)
    lp_store(g, r0, c0 + j * 8, d[j]);
#endif
}

/* e2m1 m16n8k64 (8 nibbles per register): a0 (row g, k 8t..8t+7), a1 (row g+8), a2/a3
 * (k + 32); b0 (n g, k 8t), b1 (k + 32). Scales, scale_vec::4X with selectors 0: each
 * thread passes the four ue4m3 bytes (k 0-15, 16-31, 32-47, 48-63) of A row g + 8 (t & 1)
 * and of B row (n) g. */
__global__ void __launch_bounds__(LP_WARPS * 32) gemm_mma_nvfp4_v1_kernel(memra_cu_gemm_lp_args g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  const int lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x * LP_WARPS + (threadIdx.x >> 5);
  const int tiles_n = (g.n + 8 * LP_TN - 1) / (8 * LP_TN);
  const int r0 = (tile / tiles_n) * 16, c0 = (tile % tiles_n) * 8 * LP_TN;
  if (r0 >= g.m) return;
  const int64_t ld_sf = g.k / 16;
  float d[LP_TN][4] = {};
  const uint16_t sel = 0;
  for (int k0 = 0; k0 < g.k; k0 += 64) {
    const int64_t kb = k0 / 2; /* bytes */
    uint32_t a[4];
    a[0] = lp_ld32(g.a, g.lda, r0 + gr, g.m, kb + 4 * t);
    a[1] = lp_ld32(g.a, g.lda, r0 + gr + 8, g.m, kb + 4 * t);
    a[2] = lp_ld32(g.a, g.lda, r0 + gr, g.m, kb + 16 + 4 * t);
    a[3] = lp_ld32(g.a, g.lda, r0 + gr + 8, g.m, kb + 16 + 4 * t);
    const uint32_t sfa = lp_ld32(g.sfa, ld_sf, r0 + gr + 8 * (t & 1), g.m, k0 / 16);
#pragma unroll
    for (int j = 0; j < LP_TN; ++j) {
      const int n = c0 + j * 8 + gr;
      const uint32_t b0 = lp_ld32(g.b, g.ldb, n, g.n, kb + 4 * t);
      const uint32_t b1 = lp_ld32(g.b, g.ldb, n, g.n, kb + 16 + 4 * t);
      const uint32_t sfb = lp_ld32(g.sfb, ld_sf, n, g.n, k0 / 16);
      asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"
                   ".f32.e2m1.e2m1.f32.ue4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                   "{%0, %1, %2, %3}, {%10}, {%11, %12}, {%13}, {%14, %15};\n"
                   : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sfa),
                     "h"(sel), "h"(sel), "r"(sfb), "h"(sel), "h"(sel));
    }
  }
#pragma unroll
  for (int j = 0; j < LP_TN; ++j)
    lp_store(g, r0, c0 + j * 8, d[j]);
#endif
}

static cudaError_t lp_launch(const memra_cu_gemm_lp_args *g, cudaStream_t st, int k_mult,
                             int nvfp4) {
  if (!g || g->m < 0 || g->n <= 0 || g->k <= 0 || g->k % k_mult || g->lda % 4 || g->ldb % 4 ||
      (uintptr_t)g->a % 4 || (uintptr_t)g->b % 4 ||
      (nvfp4 && (!g->sfa || !g->sfb || (uintptr_t)g->sfa % 4 || (uintptr_t)g->sfb % 4)))
    return cudaErrorInvalidValue;
  if (g->m == 0) return cudaSuccess;
  const int64_t tiles =
      (int64_t)((g->m + 15) / 16) * (int64_t)((g->n + 8 * LP_TN - 1) / (8 * LP_TN));
  const int64_t blocks = (tiles + LP_WARPS - 1) / LP_WARPS;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  if (nvfp4)
    gemm_mma_nvfp4_v1_kernel<<<(unsigned)blocks, LP_WARPS * 32, 0, st>>>(*g);
  else
    gemm_mma_f8_v1_kernel<<<(unsigned)blocks, LP_WARPS * 32, 0, st>>>(*g);
  return cudaGetLastError();
}

cudaError_t memra_cu_gemm_mma_f8(const memra_cu_gemm_lp_args *g, cudaStream_t st) {
  return lp_launch(g, st, 32, 0);
}
cudaError_t memra_cu_gemm_mma_nvfp4(const memra_cu_gemm_lp_args *g, cudaStream_t st) {
  return lp_launch(g, st, 64, 1);
}
#endif
