/* gemm_wgmma.cu — the sm_90a tensor-core GEMM behind the gemm op (gemm.h):
 *   C [m, n] (f32) = A [m, k] . B [n, k]^T (+ bias), A and B f16 or bf16, both K-major.
 *
 * ver  idea                                                       H200 (docs/PERF.md)
 *  1   persistent CTAs (grid = SMs) over BM x BN output tiles in grouped order (16 m-tiles
 *      share a band of n-tiles, so the weight tiles of concurrent CTAs are read from L2);
 *      one producer warp issues TMA loads (128B swizzle, out-of-bounds rows and the K
 *      tail zero-filled by the copy engine) into a ring of 4-8 stages guarded by full /
 *      empty mbarriers; NC consumer warpgroups (64 rows each) issue wgmma m64nBNk16 from
 *      shared-memory descriptors, one k-block in flight while the previous stage is
 *      released; setmaxnreg moves registers from the producer to the consumers; the
 *      epilogue adds bias and stores f32 straight from the accumulators (bounds-checked).
 *      Tile shape (64 or 128 rows x 64..256 columns) of least estimated time: rounds of
 *      SM-count tiles times the tile's work over its throughput (gw_pick).
 *      Jobs (gemm_n): up to 4 weights sharing A in one launch, the n-tiles of all of them
 *      in one tile order (gw_jobs), so small projections (k, v: N = 1024) fill the wave
 *      with the large one instead of running alone on a quarter of the SMs.
 * Each output element is reduced over k in one order (k-blocks of 64 in order, 4 k16 steps
 * each, one accumulator): no split-K, so a row's bits never depend on m or the tile shape.
 * The whole file is sm_90a only (wgmma, setmaxnreg). */
#if MEMRA_CUDA_CC_MAJOR == 9
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/gemm.h"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/tensor_map.h"

namespace {

constexpr int GW_BK = 64;           /* k elements per stage: one 128-byte swizzle row */
constexpr int GW_SMEM = 227 * 1024; /* dynamic shared memory an sm_90 block may opt into */

template <int NC, int BN> struct gw_cfg {
  static constexpr int BM = 64 * NC;
  static constexpr int A_BYTES = BM * GW_BK * 2, B_BYTES = BN * GW_BK * 2;
  static constexpr int STAGE = A_BYTES + B_BYTES;
  static constexpr int STAGES0 = (GW_SMEM - 1024) / STAGE;
  static constexpr int STAGES = STAGES0 > 8 ? 8 : STAGES0;
  static constexpr int SMEM = STAGES * STAGE + 1024; /* + slack to align the ring to 1 KiB */
  static constexpr int THREADS = 128 * (NC + 1);
};

/* One box of a 2-D tensor map (x = k element, y = row) into shared memory; completion is
 * counted in bytes on bar. */
__device__ __forceinline__ void gw_tma_load(void *dst, const CUtensorMap *map, uint64_t *bar, int x,
                                            int y) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];" ::"r"(memra_smem_addr(dst)),
               "l"((uint64_t)map), "r"(memra_smem_addr(bar)), "r"(x), "r"(y)
               : "memory");
}

/* wgmma shared-memory descriptor of a K-major tile with 128-byte rows, 128B swizzle: start
 * address >> 4, leading offset unused (1), stride 1024 bytes between 8-row groups. */
__device__ __forceinline__ uint64_t gw_desc(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void gw_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void gw_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void gw_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving accumulator reads or writes across an asynchronous wgmma. */
template <int R> __device__ __forceinline__ void gw_pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

/* wgmma.mma_async m64nNk16, f32 += f16/bf16 x f16/bf16, A and B from shared memory: one
 * "+f" operand per accumulator register, then the two descriptors and scale-d. The
 * register lists are spelled out because inline asm wants literal strings. */
#define GW_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define GW_R16 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define GW_R32 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define GW_R48 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GW_R64 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define GW_R80 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define GW_R96                                                                                     \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define GW_R112                                                                                    \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define GW_REGS_32 GW_R0 ", " GW_R16
#define GW_REGS_64 GW_REGS_32 ", " GW_R32 ", " GW_R48
#define GW_REGS_96 GW_REGS_64 ", " GW_R64 ", " GW_R80
#define GW_REGS_112 GW_REGS_96 ", " GW_R96
#define GW_REGS_128 GW_REGS_112 ", " GW_R112
#define GW_D8(b)                                                                                   \
  "+f"(d[(b) + 0]), "+f"(d[(b) + 1]), "+f"(d[(b) + 2]), "+f"(d[(b) + 3]), "+f"(d[(b) + 4]),        \
      "+f"(d[(b) + 5]), "+f"(d[(b) + 6]), "+f"(d[(b) + 7])
#define GW_D32(b) GW_D8(b), GW_D8((b) + 8), GW_D8((b) + 16), GW_D8((b) + 24)
#define GW_ACC_32 GW_D32(0)
#define GW_ACC_64 GW_ACC_32, GW_D32(32)
#define GW_ACC_96 GW_ACC_64, GW_D32(64)
#define GW_ACC_112 GW_ACC_96, GW_D8(96), GW_D8(104)
#define GW_ACC_128 GW_ACC_96, GW_D32(96)
#define GW_STR(x) #x
/* gw_mma_n<N>_<T>: R accumulator registers; operands R, R + 1 are the descriptors, R + 2
 * the scale-d flag (0: D = A B, 1: D += A B). */
#define GW_MMA_DEF(N, R, R1, R2, T)                                                                \
  __device__ __forceinline__ void gw_mma_n##N##_##T(float(&d)[R], uint64_t da, uint64_t db,        \
                                                    int scale_d) {                                 \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" GW_STR(                                      \
                     R2) ", 0;\n"                                                                  \
                         "wgmma.mma_async.sync.aligned.m64n" GW_STR(N) "k16.f32." GW_STR(          \
                             T) "." GW_STR(T) " {" GW_REGS_##R                                     \
                 "}, %" GW_STR(R) ", %" GW_STR(R1) ", p, 1, 1, 0, 0;\n}\n"                         \
                 : GW_ACC_##R                                                                      \
                 : "l"(da), "l"(db), "r"(scale_d));                                                \
  }
/* gw_mma<BN, BF>::run: the wrapper for BN columns, f16 (BF 0) or bf16 (BF 1). */
template <int BN, int BF> struct gw_mma;
#define GW_MMA(N, R, R1, R2)                                                                       \
  GW_MMA_DEF(N, R, R1, R2, f16)                                                                    \
  GW_MMA_DEF(N, R, R1, R2, bf16)                                                                   \
  template <> struct gw_mma<N, 0> {                                                                \
    static __device__ __forceinline__ void run(float (&d)[R], uint64_t a, uint64_t b, int s) {     \
      gw_mma_n##N##_f16(d, a, b, s);                                                               \
    }                                                                                              \
  };                                                                                               \
  template <> struct gw_mma<N, 1> {                                                                \
    static __device__ __forceinline__ void run(float (&d)[R], uint64_t a, uint64_t b, int s) {     \
      gw_mma_n##N##_bf16(d, a, b, s);                                                              \
    }                                                                                              \
  };
GW_MMA(64, 32, 33, 34)
GW_MMA(128, 64, 65, 66)
GW_MMA(192, 96, 97, 98)
GW_MMA(224, 112, 113, 114)
GW_MMA(256, 128, 129, 130)

/* Tile t of the grouped order: GW_GROUP m-tiles form a band that walks all n-tiles, m
 * fastest, so the CTAs running at once share few B (weight) tiles and few A tiles. */
constexpr int GW_GROUP = 16;
__device__ __forceinline__ void gw_tile(int t, int tiles_m, int tiles_n, int *tm, int *tn) {
  const int band = GW_GROUP * tiles_n, g = t / band, first = g * GW_GROUP;
  const int rows = tiles_m - first < GW_GROUP ? tiles_m - first : GW_GROUP;
  const int r = t - g * band;
  *tm = first + r % rows;
  *tn = r / rows;
}

/* The products of one launch (gemm_n: several weights sharing A; gemm: one). Job j owns
 * the global n-tiles [tile0[j], tile0[j + 1]); its tiles are those of a one-job launch. */
struct gw_jobs {
  CUtensorMap map_b[MEMRA_CU_GEMM_MAX_JOBS];
  float *c[MEMRA_CU_GEMM_MAX_JOBS];
  int64_t ldc[MEMRA_CU_GEMM_MAX_JOBS];
  const float *bias[MEMRA_CU_GEMM_MAX_JOBS];
  int n[MEMRA_CU_GEMM_MAX_JOBS], vec2[MEMRA_CU_GEMM_MAX_JOBS];
  int tile0[MEMRA_CU_GEMM_MAX_JOBS + 1];
  int n_jobs;
  /* glu launches (GLU = 1): map_b[0] gate, map_b[1] up (boxes of BN / 2 rows each, stacked
   * in one B stage), one job of BN / 2 output columns per tile; y = act(gate) * up by the
   * glu op's arithmetic, stored as f32 (c) or a 16-bit gemm operand (y16, ldy) */
  int act, out16; /* MEMRA_ACT_*; 0 f32, 1 f16, 2 bf16 */
  void *y16;
  int64_t ldy;
  const float *bias_up;
};

/* The job of global n-tile tn (a handful of compares, uniform over the CTA). */
__device__ __forceinline__ int gw_job(const gw_jobs &J, int tn) {
  int j = 0;
#pragma unroll
  for (int i = 1; i < MEMRA_CU_GEMM_MAX_JOBS; ++i)
    if (i < J.n_jobs && tn >= J.tile0[i]) j = i;
  return j;
}

/* One glu output pair (columns col, col + 1 of a row; `two` = col + 1 is in range) from the
 * gate and up accumulators: the glu op's arithmetic on gemm's f32 results (bias first). */
__device__ __forceinline__ void gw_glu_store(const gw_jobs &J, int64_t row, int col, int two,
                                             float g0, float g1, float u0, float u1) {
  if (J.bias[0]) {
    g0 += J.bias[0][col];
    if (two) g1 += J.bias[0][col + 1];
  }
  if (J.bias_up) {
    u0 += J.bias_up[col];
    if (two) u1 += J.bias_up[col + 1];
  }
  const bool silu = J.act == 0;
  const float y0 = (silu ? memra_act_silu(g0) : memra_act_gelu_tanh(g0)) * u0;
  const float y1 = (silu ? memra_act_silu(g1) : memra_act_gelu_tanh(g1)) * u1;
  if (J.out16) {
    uint16_t *yr = (uint16_t *)J.y16 + row * J.ldy;
    const uint16_t h0 = J.out16 == 2 ? memra_op16<1>(y0) : memra_op16<0>(y0);
    const uint16_t h1 = J.out16 == 2 ? memra_op16<1>(y1) : memra_op16<0>(y1);
    if (two && J.vec2[0])
      *(uint32_t *)(yr + col) = h0 | ((uint32_t)h1 << 16);
    else {
      yr[col] = h0;
      if (two) yr[col + 1] = h1;
    }
  } else {
    float *yr = J.c[0] + row * J.ldc[0];
    if (two && J.vec2[0])
      *(float2 *)(yr + col) = make_float2(y0, y1);
    else {
      yr[col] = y0;
      if (two) yr[col + 1] = y1;
    }
  }
}

template <int NC, int BN, int BF, int GLU>
__global__ void __launch_bounds__(gw_cfg<NC, BN>::THREADS, 1)
    gemm_wgmma_v1_kernel(const __grid_constant__ CUtensorMap map_a,
                         const __grid_constant__ gw_jobs jobs, int m, int k) {
  using C = gw_cfg<NC, BN>;
  constexpr int S = C::STAGES;
  extern __shared__ uint8_t gw_dyn[];
  __shared__ __align__(8) uint64_t full[S], empty[S];
  uint8_t *ring = (uint8_t *)(((uintptr_t)gw_dyn + 1023) & ~(uintptr_t)1023);
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  memra_ring_init(full, empty, S, NC);
  const int tiles_m = (m + C::BM - 1) / C::BM, tiles_n = jobs.tile0[jobs.n_jobs];
  const int tiles = tiles_m * tiles_n, kblocks = (k + GW_BK - 1) / GW_BK;

  if (wg == 0) { /* producer: one thread issues every copy */
    if (NC == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
      uint32_t it = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        gw_tile(t, tiles_m, tiles_n, &tm, &tn);
        const int j = gw_job(jobs, tn);
        const CUtensorMap *map_b = &jobs.map_b[j];
        tn -= jobs.tile0[j];
        for (int kb = 0; kb < kblocks; ++kb, ++it) {
          const uint32_t s = it % S, round = it / S;
          if (round > 0) memra_mbar_wait(&empty[s], (round - 1) & 1);
          uint8_t *sa = ring + s * C::STAGE, *sb = sa + C::A_BYTES;
          memra_mbar_expect(&full[s], C::STAGE);
          gw_tma_load(sa, &map_a, &full[s], kb * GW_BK, tm * C::BM);
          if (GLU) { /* gate rows, then the same rows of up: one B tile of BN rows */
            gw_tma_load(sb, &jobs.map_b[0], &full[s], kb * GW_BK, tn * (BN / 2));
            gw_tma_load(sb + (BN / 2) * GW_BK * 2, &jobs.map_b[1], &full[s], kb * GW_BK,
                        tn * (BN / 2));
          } else {
            gw_tma_load(sb, map_b, &full[s], kb * GW_BK, tn * BN);
          }
        }
      }
    }
  } else { /* consumer warpgroup cw: rows [64 cw, 64 cw + 64) of each tile */
    if (NC == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1, warp = tid / 32, lane = tid % 32;
    float acc[BN / 2];
    uint32_t it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      gw_tile(t, tiles_m, tiles_n, &tm, &tn);
      const int j = gw_job(jobs, tn);
      tn -= jobs.tile0[j];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i)
        acc[i] = 0.f;
      uint32_t prev = 0;
      for (int kb = 0; kb < kblocks; ++kb, ++it) {
        const uint32_t s = it % S;
        memra_mbar_wait(&full[s], (it / S) & 1);
        const uint32_t a0 = memra_smem_addr(ring + s * C::STAGE) + cw * 64 * 128;
        const uint32_t b0 = memra_smem_addr(ring + s * C::STAGE + C::A_BYTES);
        gw_pin(acc);
        gw_fence();
#pragma unroll
        for (int kk = 0; kk < GW_BK / 16; ++kk) /* 16 k elements = 32 bytes along the row */
          gw_mma<BN, BF>::run(acc, gw_desc(a0 + 32 * kk), gw_desc(b0 + 32 * kk), 1);
        gw_commit();
        gw_wait<1>(); /* the previous k-block is done: its stage goes back to the producer */
        gw_pin(acc);
        if (kb > 0 && tid == 0) memra_mbar_arrive(&empty[prev]);
        prev = s;
      }
      gw_wait<0>();
      gw_pin(acc);
      if (tid == 0) memra_mbar_arrive(&empty[prev]);

      /* Accumulator i of this thread: row 16 warp + lane / 4 + 8 ((i / 2) % 2), column
       * 8 (i / 4) + 2 (lane % 4) + i % 2 (the wgmma D fragment). */
      if (GLU) { /* columns j < BN / 16 hold gate, j + BN / 16 the same columns of up */
        const int n = jobs.n[0];
        const int r0 = tm * C::BM + cw * 64 + warp * 16 + lane / 4;
        const int c0 = tn * (BN / 2) + 2 * (lane % 4);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = r0 + 8 * h;
          if (row >= m) continue;
#pragma unroll
          for (int q = 0; q < BN / 16; ++q) {
            const int col = c0 + 8 * q, u = q + BN / 16;
            if (col < n)
              gw_glu_store(jobs, row, col, col + 1 < n, acc[4 * q + 2 * h], acc[4 * q + 2 * h + 1],
                           acc[4 * u + 2 * h], acc[4 * u + 2 * h + 1]);
          }
        }
        continue;
      }
      float *__restrict__ c = jobs.c[j];
      const float *__restrict__ bias = jobs.bias[j];
      const int64_t ldc = jobs.ldc[j];
      const int n = jobs.n[j], vec2 = jobs.vec2[j];
      const int r0 = tm * C::BM + cw * 64 + warp * 16 + lane / 4;
      const int c0 = tn * BN + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = r0 + 8 * h;
        if (row >= m) continue;
        float *crow = c + (int64_t)row * ldc;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = c0 + 8 * j;
          float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
          if (col + 1 < n) {
            if (bias) {
              v0 += bias[col];
              v1 += bias[col + 1];
            }
            if (vec2)
              *(float2 *)(crow + col) = make_float2(v0, v1);
            else {
              crow[col] = v0;
              crow[col + 1] = v1;
            }
          } else if (col < n) {
            crow[col] = bias ? v0 + bias[col] : v0;
          }
        }
      }
    }
  }
}

/* rows x k elements, ld elements apart, boxes of GW_BK x box_rows. */
cudaError_t gw_map(CUtensorMap *map, const void *p, int64_t rows, int64_t k, int64_t ld,
                   int box_rows, int bf16) {
  memra_tmap_encode_fn enc;
  cudaError_t e = memra_tmap_encoder(&enc);
  if (e != cudaSuccess) return e;
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)ld * 2};
  const cuuint32_t box[2] = {GW_BK, (cuuint32_t)box_rows};
  const cuuint32_t estr[2] = {1, 1};
  CUresult r = enc(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                   2, (void *)p, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <int NC, int BN, int BF, int GLU>
cudaError_t gw_launch(const memra_cu_gemm_group *g, cudaStream_t st, int n_sms) {
  using C = gw_cfg<NC, BN>;
  static bool attr = false; /* the opt-in above 48 KiB, once per instance */
  if (!attr) {
    cudaError_t e = cudaFuncSetAttribute(gemm_wgmma_v1_kernel<NC, BN, BF, GLU>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
    if (e != cudaSuccess) return e;
    attr = true;
  }
  CUtensorMap ma;
  gw_jobs J;
  memset(&J, 0, sizeof J);
  cudaError_t e;
  if ((e = gw_map(&ma, g->a, g->m, g->k, g->lda, C::BM, BF)) != cudaSuccess) return e;
  int64_t tiles_n = 0;
  if (GLU) { /* gate and up in one B stage, BN / 2 rows each; one output job */
    const memra_cu_gemm_job *gt = &g->job[0], *up = &g->job[1];
    if ((e = gw_map(&J.map_b[0], gt->b, gt->n, g->k, gt->ldb, BN / 2, BF)) != cudaSuccess ||
        (e = gw_map(&J.map_b[1], up->b, up->n, g->k, up->ldb, BN / 2, BF)) != cudaSuccess)
      return e;
    J.c[0] = gt->c;
    J.ldc[0] = gt->ldc;
    J.bias[0] = gt->bias;
    J.bias_up = up->bias;
    J.n[0] = gt->n;
    J.act = g->act;
    J.out16 = g->out16;
    J.y16 = g->y16;
    J.ldy = g->ldy;
    J.vec2[0] = g->out16 ? ((uintptr_t)g->y16 % 4 == 0 && g->ldy % 2 == 0)
                         : ((uintptr_t)gt->c % 8 == 0 && gt->ldc % 2 == 0);
    tiles_n = (gt->n + BN / 2 - 1) / (BN / 2);
    J.tile0[1] = (int)tiles_n;
    J.n_jobs = 1;
  } else {
    for (int j = 0; j < g->n_jobs; ++j) {
      const memra_cu_gemm_job *b = &g->job[j];
      if ((e = gw_map(&J.map_b[j], b->b, b->n, g->k, b->ldb, BN, BF)) != cudaSuccess) return e;
      J.c[j] = b->c;
      J.ldc[j] = b->ldc;
      J.bias[j] = b->bias;
      J.n[j] = b->n;
      J.vec2[j] = ((uintptr_t)b->c % 8 == 0 && b->ldc % 2 == 0) ? 1 : 0;
      J.tile0[j] = (int)tiles_n;
      tiles_n += (b->n + BN - 1) / BN;
    }
    J.tile0[g->n_jobs] = (int)tiles_n;
    J.n_jobs = g->n_jobs;
  }
  const int64_t tiles = ((int64_t)g->m + C::BM - 1) / C::BM * tiles_n;
  if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
  const int grid = (int)(tiles < n_sms ? tiles : n_sms);
  gemm_wgmma_v1_kernel<NC, BN, BF, GLU><<<grid, C::THREADS, C::SMEM, st>>>(ma, J, g->m, g->k);
  return cudaGetLastError();
}

/* The tile shapes the dispatcher chooses from, with a guess of their relative per-SM
 * throughput (bigger tiles reuse each operand byte more; one consumer warpgroup leaves the
 * tensor cores idle during its own waits). docs/PERF.md has the measured table. */
typedef cudaError_t (*gw_launch_fn)(const memra_cu_gemm_group *, cudaStream_t, int);
struct gw_shape {
  int bm, bn;
  double eff;
  gw_launch_fn f16, bf16, glu_f16, glu_bf16;
};
#define GW_SHAPE(NC, BN, EFF)                                                                      \
  {                                                                                                \
    64 * NC, BN, EFF, gw_launch<NC, BN, 0, 0>, gw_launch<NC, BN, 1, 0>, gw_launch<NC, BN, 0, 1>,   \
        gw_launch<NC, BN, 1, 1>                                                                    \
  }
const gw_shape gw_shapes[] = {
    GW_SHAPE(2, 256, 1.00), GW_SHAPE(2, 224, 0.97), GW_SHAPE(2, 192, 0.94), GW_SHAPE(2, 128, 0.88),
    GW_SHAPE(1, 256, 0.70), GW_SHAPE(1, 128, 0.62), GW_SHAPE(1, 64, 0.45)};
#undef GW_SHAPE

/* The shape of least estimated time: rounds of n_sms tiles (all jobs' tiles together), each
 * tile's work (its k-blocks plus about 4 k-blocks of fill and epilogue) over its efficiency.
 * MEMRA_GEMM_TILE=BMxBN (e.g. 128x224) forces a shape, for benchmarks. */
const gw_shape *gw_pick(const memra_cu_gemm_group *g, int n_sms) {
  const int m = g->m, k = g->k;
  const char *env = getenv("MEMRA_GEMM_TILE");
  if (env && *env)
    for (const gw_shape &s : gw_shapes) {
      char name[16];
      snprintf(name, sizeof name, "%dx%d", s.bm, s.bn);
      if (!strcmp(env, name)) return &s;
    }
  const gw_shape *best = NULL;
  double best_t = 0;
  const double kw = (double)((k + GW_BK - 1) / GW_BK + 4) * GW_BK;
  for (const gw_shape &s : gw_shapes) {
    int64_t tiles_n = 0;
    if (g->glu) /* a glu tile is bn / 2 output columns over both weights */
      tiles_n = (g->job[0].n + s.bn / 2 - 1) / (s.bn / 2);
    else
      for (int j = 0; j < g->n_jobs; ++j)
        tiles_n += (g->job[j].n + s.bn - 1) / s.bn;
    const int64_t tiles = ((int64_t)m + s.bm - 1) / s.bm * tiles_n;
    const int64_t rounds = (tiles + n_sms - 1) / n_sms;
    const double t = (double)rounds * s.bm * s.bn * kw / s.eff;
    if (!best || t < best_t) {
      best = &s;
      best_t = t;
    }
  }
  return best;
}

} // namespace

/* Needs a and every b 16-byte aligned, lda and every ldb multiples of 8 (the copy engine's
 * rules); the caller (gemm.cu) guarantees them. Any tile shape gives every output element
 * the same bits (k reduced in the same order), so the choice may follow m freely, and a
 * job's bits do not depend on the other jobs of its launch. */
cudaError_t memra_cu_gemm_wgmma_n(const memra_cu_gemm_group *g, cudaStream_t st, int n_sms) {
  if (g->n_jobs < 1 || g->n_jobs > MEMRA_CU_GEMM_MAX_JOBS || n_sms <= 0 || (uintptr_t)g->a % 16 ||
      g->lda % 8 || g->lda < g->k)
    return cudaErrorInvalidValue;
  if (g->m <= 0 || g->k <= 0) return cudaSuccess;
  memra_cu_gemm_group h = *g; /* the jobs with columns */
  h.n_jobs = 0;
  for (int j = 0; j < g->n_jobs; ++j) {
    const memra_cu_gemm_job *b = &g->job[j];
    if ((uintptr_t)b->b % 16 || b->ldb % 8 || b->ldb < g->k) return cudaErrorInvalidValue;
    if (b->n > 0) h.job[h.n_jobs++] = *b;
  }
  if (h.n_jobs == 0) return cudaSuccess;
  if (g->glu) {
    if (h.n_jobs != 2 || g->job[0].n != g->job[1].n || g->out16 < 0 || g->out16 > 2 ||
        (g->out16 && (!g->y16 || (uintptr_t)g->y16 % 2)))
      return cudaErrorInvalidValue;
    const gw_shape *s = gw_pick(&h, n_sms);
    return (h.bf16 ? s->glu_bf16 : s->glu_f16)(&h, st, n_sms);
  }
  const gw_shape *s = gw_pick(&h, n_sms);
  return (h.bf16 ? s->bf16 : s->f16)(&h, st, n_sms);
}

cudaError_t memra_cu_gemm_wgmma(const memra_cu_gemm_args *g, cudaStream_t st, int n_sms) {
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) return cudaSuccess;
  memra_cu_gemm_group h;
  memset(&h, 0, sizeof h);
  h.a = g->a;
  h.lda = g->lda;
  h.m = g->m;
  h.k = g->k;
  h.bf16 = g->bf16;
  h.n_jobs = 1;
  h.job[0].b = g->b;
  h.job[0].ldb = g->ldb;
  h.job[0].c = g->c;
  h.job[0].ldc = g->ldc;
  h.job[0].bias = g->bias;
  h.job[0].n = g->n;
  return memra_cu_gemm_wgmma_n(&h, st, n_sms);
}

#endif /* MEMRA_CUDA_CC_MAJOR == 9 */
