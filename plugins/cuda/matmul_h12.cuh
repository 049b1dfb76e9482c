/* matmul_h12.cuh — matmul v12: F16 / BF16 GEMV for one row of x, v6's arithmetic fed by a ring of
 * bulk copies in shared memory (included by matmul.cu only).
 *
 * Why (docs/PERF.md): v6 holds two steps of weights in registers per warp and ends every block
 * with a reduction, so a Llama-8B F16 step's gate/up ran at ~72% of the copy bandwidth and q/o at
 * ~56% (ncu), with blocks of 8 rows starting and draining in ~7 waves. v12 takes the Q4_K v11
 * scheme (matmul_tc11.cuh): persistent blocks walk tiles of V12_R rows; a producer warp keeps up to
 * V12_ST stages of V12_R rows x V12_KC elements in flight by bulk copies (one per row), issued
 * before the PDL wait since weights are constant; four consumer warps apply x from L1/L2.
 * Bits: consumer warp w takes steps w, w + 4, ... of every row (a step = 32 groups of 8 elements,
 * lane l group 32 s + l), through mv6_dot, memra_warp_sum and the warps in order (+ bias): v6's
 * sequence exactly, so v12 alone == v6 at any M (v6 serves the batches). */
#ifndef MEMRA_CUDA_MATMUL_H12_CUH
#define MEMRA_CUDA_MATMUL_H12_CUH

#include "plugins/cuda/matmul_dyn.cuh"
#include "plugins/cuda/matmul_v6.cuh"
#include "plugins/cuda/mbarrier.cuh"

/* Tiles a block stores together (G; a build define, -DMEMRA_V12_GRP=1 the one-tile form): v11's
 * and v13's grouped store (mm_group_store, matmul_jobs.cuh) for v12, one barrier pair a group of
 * G tiles instead of two a tile; the same sums in the same order (H100: Llama F16 tg128 +1.0%,
 * the hybrid F16 +0.2%). Not with conv (its stores are per tile). */
#ifndef MEMRA_V12_GRP
#define MEMRA_V12_GRP 4
#endif

enum {
  V12_CW = MV6_WARPS,              /* consumer warps: v6's split of K into steps */
  V12_R = 8,                       /* rows a tile */
  V12_SPW = 2,                     /* steps a consumer warp takes from one stage */
  V12_KC = 256 * V12_CW * V12_SPW, /* elements of a row in one stage (2048: 4 KB of F16) */
  V12_ST = 3,                      /* stages in the ring */
  V12_STAGE = V12_R * V12_KC * 2,  /* bytes of a stage */
  V12_SMEM = V12_ST * V12_STAGE + 4 * MEMRA_V12_GRP * V12_CW * V12_R + 16 * V12_ST
};
static_assert(MEMRA_V12_GRP >= 1 && MEMRA_V12_GRP <= V12_CW, "a group's tiles: one a warp");

/* The ring units v12's producer issues before its PDL wait (MEMRA_RING_PRE_H12, a build define: 2
 * of the V12_ST stages by default; 0: all, the form before 2026-12-06). As for v11 / v13
 * (matmul_dyn.cuh, MEMRA_RING_PRE): fewer copies ahead of the small kernel before the GEMV. H100
 * tg128 @ d512 against all three (docs/PERF.md, twenty-fourth session): Llama-8B F16 +0.9%,
 * hybrid F16 +0.5% (even in a second call); one stage lost (-1.3% / -0.6%). The same bits. */
#ifndef MEMRA_RING_PRE_H12
#define MEMRA_RING_PRE_H12 2
#endif
__device__ __forceinline__ void v12_consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(V12_CW * 32) : "memory");
}

template <int T, bool CV>
__global__ void __launch_bounds__((V12_CW + 1) * 32)
    matmul_v12_kernel(const mm_jobs J, const float *__restrict__ x, int64_t K, int64_t n_tiles) {
  extern __shared__ __align__(128) uint8_t sm[];
  uint8_t *ring = sm;
  constexpr int GR = CV ? 1 : MEMRA_V12_GRP; /* tiles stored together */
  float(&partg)[MEMRA_V12_GRP][V12_CW][1][V12_R] =
      *(float(*)[MEMRA_V12_GRP][V12_CW][1][V12_R])(sm + V12_ST * V12_STAGE);
  float(&part)[V12_CW][1][V12_R] = partg[0];
  uint64_t *full = (uint64_t *)(&partg[MEMRA_V12_GRP - 1][V12_CW - 1][0][V12_R - 1] + 1),
           *empty = full + V12_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t G = K / 8, nkc = (K + V12_KC - 1) / V12_KC;
  const int64_t my_tiles = (n_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const int64_t units = my_tiles * nkc;
  memra_ring_init(full, empty, V12_ST, V12_CW);

  if (warp == V12_CW) { /* producer: lane r < V12_R copies row r's chunk */
    for (int64_t u = 0; u < units; ++u) {
      const int s = (int)(u % V12_ST);
      if (u >= V12_ST) memra_mbar_wait(&empty[s], (uint32_t)(u / V12_ST - 1) & 1);
      const mm_job jb = mm_pick_at(J, blockIdx.x + (u / nkc) * gridDim.x);
      const int64_t n0 = jb.b * V12_R, k0 = (u % nkc) * V12_KC;
      const uint32_t rowb = (uint32_t)(2 * (K - k0 < V12_KC ? K - k0 : V12_KC));
      if (lane == 0) memra_mbar_expect(&full[s], V12_R * rowb);
      __syncwarp();
      if (lane < V12_R) { /* rows past N: the last row (computed, never stored) */
        const int64_t n = n0 + lane < jb.N ? n0 + lane : jb.N - 1;
        memra_bulk_load(ring + s * V12_STAGE + lane * (2 * V12_KC),
                        jb.w + (uint64_t)n * jb.w_nb1 + 2 * (uint64_t)k0, rowb, &full[s]);
      }
      /* units issued before the wait */
      constexpr int pre = mm_pre_units(MEMRA_RING_PRE_H12, V12_ST);
      if (u == (units < pre ? units : pre) - 1) memra_pdl_enter();
    }
    if (units == 0) memra_pdl_enter();
    return;
  }

  memra_pdl_enter(); /* x comes from the kernel before */
  int64_t u = 0;
  int np = 0;          /* GR > 1: the open group's tiles so far */
  int64_t my_tile = 0; /* GR > 1: the group's tile this warp stores, and y's old values */
  float my_xo = 0.f;
  for (int64_t i = 0; i < my_tiles; ++i) {
    const int64_t tile = blockIdx.x + i * gridDim.x;
    const mm_job jb = mm_pick_at(J, tile);
    const bool cj = CV && jb.y == J.y[0]; /* matmul_n_conv's job: its conv inputs now */
    const mm_conv_in ci =
        mm_conv_load(J.cv, cj && threadIdx.x < V12_R && jb.b * V12_R + threadIdx.x < jb.N, 0,
                     jb.b * V12_R + threadIdx.x);
    const float xo = GR == 1 ? mm_acc_load<V12_R>(J.acc, jb.y, jb.b * V12_R, jb.N) : 0.f;
    if (GR > 1 && np == warp) {
      const int64_t n = jb.b * V12_R + lane;
      my_tile = tile;
      my_xo = J.acc && lane < V12_R && n < jb.N ? jb.y[n] : 0.f;
    }
    float acc[1][V12_R];
#pragma unroll
    for (int r = 0; r < V12_R; ++r)
      acc[0][r] = 0.f;
    for (int64_t c = 0; c < nkc; ++c, ++u) {
      const int s = (int)(u % V12_ST);
      memra_mbar_wait(&full[s], (uint32_t)(u / V12_ST) & 1);
#pragma unroll
      for (int j = 0; j < V12_SPW; ++j) { /* steps c KC / 256 + V12_CW j + warp: v6's order */
        const int64_t g = (c * (V12_KC / 256) + V12_CW * j + warp) * 32 + lane;
        if (g >= G) continue; /* the row's last step: lanes past its end */
        float xv[8];
        memra_ldg8<true>(x + 8 * g, xv);
        const uint8_t *b = ring + s * V12_STAGE + 16 * (g - c * (V12_KC / 8));
#pragma unroll
        for (int r = 0; r < V12_R; ++r)
          acc[0][r] = mv6_dot<T>(*(const uint4 *)(b + r * (2 * V12_KC)), xv, acc[0][r]);
      }
      __syncwarp();
      if (lane == 0) memra_mbar_arrive(&empty[s]);
    }
#pragma unroll
    for (int r = 0; r < V12_R; ++r) {
      const float v = memra_warp_sum(acc[0][r]);
      if (lane == 0) partg[GR == 1 ? 0 : np][warp][0][r] = v;
    }
    if constexpr (GR > 1) {
      if (++np == GR || i + 1 == my_tiles) {
        mm_group_store(partg, J, np, my_tile, my_xo, warp, lane);
        np = 0;
      }
      continue;
    }
    v12_consumers_sync();
    mm_store_parts<V12_CW, 1, V12_R>(part, jb.b * V12_R, jb.N, 0, 1, jb.y, jb.y_ld, jb.bias, ci, cj,
                                     J.acc ? MM_ACC_XO : MM_ACC_NONE, xo);
    v12_consumers_sync();
  }
}

/* Whether v12 may take this matmul: the ring's shared memory fits a block. */
static inline bool m12_fits(const memra_backend *be) {
  return (int64_t)be->prop.sharedMemPerBlockOptin >= (int64_t)V12_SMEM + 1024;
}

/* The v12 grid over J's V12_R-row tiles for one row of x: as many blocks as are resident (by
 * shared memory and registers, at most 4 an SM), every block the same number of tiles. False when
 * the grid is too large; *err: the attribute or occupancy call's error (no launch then). */
template <int T>
static bool m12_launch(const memra_backend *be, mm_jobs J, const float *x, int64_t K,
                       cudaError_t *err) {
  *err = cudaSuccess;
  const int64_t tiles = mm_jobs_layout(&J, V12_R);
  if (tiles == 0) return false;
  /* J's conv (matmul_n_conv) in its own instantiation, so the plain kernel's code stays as it was
   */
  const bool cv = J.cv.w != NULL;
  void (*kernel)(const mm_jobs, const float *, int64_t, int64_t) =
      cv ? matmul_v12_kernel<T, true> : matmul_v12_kernel<T, false>;
  static int bps[2] = {0, 0}; /* resident blocks an SM, asked once per instantiation */
  if (bps[cv] == 0) {
    *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, V12_SMEM);
    if (*err == cudaSuccess)
      *err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps[cv], kernel, (V12_CW + 1) * 32,
                                                           V12_SMEM);
    if (*err != cudaSuccess) return true;
    bps[cv] = bps[cv] > 4 ? 4 : bps[cv] < 1 ? 1 : bps[cv];
  }
  const int64_t slots = (int64_t)(be->n_sms > 0 ? be->n_sms : 1) * bps[cv];
  const int64_t per = (tiles + slots - 1) / slots, grid = (tiles + per - 1) / per;
  (void)memra_cu_launch(be, kernel, dim3((unsigned)grid), dim3((V12_CW + 1) * 32), (size_t)V12_SMEM,
                        J, x, K, tiles);
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_H12_CUH */
