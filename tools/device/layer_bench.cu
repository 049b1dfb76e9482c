/* layer_bench.cu — what a decode step's GEMV chain would gain as one persistent program instead of
 * one launch a GEMV: the bound for issue 4's "one persistent program a layer" (docs/PERF.md),
 * measured before it is written.
 *
 * A Llama-3.1-8B layer's four projections in Q4_K (o 4096 x 4096, gate+up 28672 x 4096, down
 * 4096 x 14336, q/k/v 6144 x 4096), 32 layers of their own weights (~3.9 GB, so nothing is read
 * from L2), chained: each projection's x is the one before's y (no norm, glu, rope or attention
 * between them, so the values are not a model's; the bytes and the dependencies are). Every GEMV
 * runs v11's Q4_K arithmetic (tc_stage_apply: the same super-blocks, warps and order, so every
 * mode below gives the same bits) in lb_chain_kernel, whose block holds P groups of four consumer
 * warps, each group with a producer warp and a ring of S stages of 16 rows x SB super-blocks; the
 * groups share the block's split of x. A program is a list of GEMVs; a block takes tiles
 * blockIdx.x + j gridDim.x of each, group j % P; a GEMV whose x another one of the same launch
 * writes waits for that one's count of finished blocks (release / acquire), and the producers never
 * wait on data (weights are constant), so they stream the next GEMV's tiles while the last ones
 * finish. Modes, each a CUDA graph of one step (32 layers) launched with PDL:
 *   launch  a launch a GEMV (128 launches; the program of one GEMV)
 *   layer   a launch a layer (32 launches of four GEMVs)
 *   step    one launch of the 128 GEMVs (then with the count's forms, lb_bm)
 *   nowait  the step with no waits (wrong values: the ring's streaming bound)
 *   consume nowait without the copies (wrong values: the consumers' own bound, lb_bm 8)
 * (A chunk-level dataflow form, 256-row counts instead of one a GEMV, lost in four variants and
 * was removed; docs/PERF.md, thirty-fifth session.)
 * Checks: every mode's last y bitwise equal to the launch mode's; layer 0's four GEMVs against a
 * double-precision reference from dequantized weights (relative error printed).
 * A device experiment built by nvcc alone (tools/device/pack.sh), not by Bazel. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/matmul_tc.cuh"
#include "plugins/cuda/mbarrier.cuh"

#include "tools/device/bench_util.cuh"

enum { LB_CW = 4, LB_SBB = 144, LB_LAYERS = 32, LB_OPS = 4, LB_MAX_OPS = LB_LAYERS * LB_OPS };

struct lb_op {
  const uint8_t *w; /* N rows of K / 256 Q4_K super-blocks, back to back */
  const float *x;   /* K floats */
  float *y;         /* N floats */
  int64_t N, K;
  int wait; /* the op (of this launch) whose y x is, or -1: x was written before the launch */
};

__device__ __forceinline__ int lb_ld_acquire_cta(const int *p) {
  int v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];"
               : "=r"(v)
               : "r"(memra_smem_addr(p))
               : "memory");
  return v;
}
__device__ __forceinline__ void lb_st_release_cta(int *p, int v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(memra_smem_addr(p)), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t lb_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
template <int NT> __device__ __forceinline__ void lb_bar(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(NT) : "memory");
}

/* The grid-wide count's form (bits; 0: the default): 1 the release alone, without a
 * __threadfence before it; 2 a 32 ns sleep between polls; 4 a producer issues an op's first copy
 * only once its group's consumers began their last tile of the op before (fewer bytes in flight
 * while the count travels). 8 (a probe, with the nowait program: WRONG values) the producers
 * copy nothing, each stage's barrier completes on their arrival alone: the consumers' own rate,
 * the bound where they and not the bytes are the limit (the H200's Q4_K tiles; an H100 measures
 * it for the H200, whose SMs are the same). */
__device__ int lb_bm;

/* Group g's producer: its tiles of every op into its S stages, in order, never waiting on data. */
template <int P, int S, int SB>
__device__ __forceinline__ void lb_produce(const lb_op *__restrict__ ops, int n_ops, int g,
                                           int lane, uint8_t *sm, uint64_t *full, uint64_t *empty,
                                           const int *last = NULL) {
  constexpr int STAGE = TC_ROWS * SB * LB_SBB;
  uint64_t u = 0;
  for (int i = 0; i < n_ops; ++i) {
    const lb_op o = ops[i];
    if (last && i > 0 && (lb_bm & 4)) { /* the group's consumers on their last tile of op i - 1 */
      while (lb_ld_acquire_cta(&last[g]) < i)
        ;
    }
    const int64_t nsb = o.K / 256, ngrp = (nsb + SB - 1) / SB, rb = nsb * LB_SBB;
    const int64_t tiles = (o.N + TC_ROWS - 1) / TC_ROWS;
    for (int64_t t = blockIdx.x + (int64_t)g * gridDim.x; t < tiles; t += (int64_t)P * gridDim.x)
      for (int64_t gi = 0; gi < ngrp; ++gi, ++u) {
        const int s = (int)(u % S);
        if (u >= S) memra_mbar_wait(&empty[g * S + s], (uint32_t)(u / S - 1) & 1);
        const int64_t n0 = t * TC_ROWS, sb0 = SB * gi, nv = nsb - sb0 < SB ? nsb - sb0 : SB;
        const int64_t nrows = o.N - n0 < TC_ROWS ? o.N - n0 : TC_ROWS;
        const uint32_t rowb = (uint32_t)(nv * LB_SBB);
        uint8_t *dst = sm + (uint64_t)(g * S + s) * STAGE;
        if (lb_bm & 8) { /* the consumers alone: a stage is its arrival, its bytes stale */
          if (lane == 0) memra_mbar_arrive(&full[g * S + s]);
          continue;
        }
        const bool one = nv == nsb; /* the tile's rows are one contiguous range */
        if (lane == 0)
          memra_mbar_expect(&full[g * S + s], (uint32_t)(one ? nrows : TC_ROWS) * rowb);
        __syncwarp();
        if (one) {
          if (lane == 0)
            memra_bulk_load(dst, o.w + n0 * rb, (uint32_t)nrows * rowb, &full[g * S + s]);
        } else if (lane < TC_ROWS) {
          const int64_t n = n0 + lane < o.N ? n0 + lane : o.N - 1;
          memra_bulk_load(dst + lane * rowb, o.w + n * rb + sb0 * LB_SBB, rowb, &full[g * S + s]);
        }
      }
  }
}

/* A tile's end: each warp's quad sums into its group's partials pg, then warp 0's lanes r < 16
 * store row n0 + r's sum over the CW warps in order (the group's own barrier, bar 2 + g). */
template <int CW>
__device__ __forceinline__ void lb_tile_store(const float (&acc)[1][2], float *pg, int g, int wg,
                                              int lane, float *y, int64_t n0, int64_t N) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float v = tc_quad_sum(acc[0][r]);
    if ((lane & 3) == 0) pg[wg * TC_ROWS + (lane >> 2) + 8 * r] = v;
  }
  lb_bar<CW * 32>(2 + g);
  if (wg == 0 && lane < TC_ROWS && n0 + lane < N) {
    float s = pg[lane];
#pragma unroll
    for (int w = 1; w < CW; ++w)
      s = __fadd_rn(s, pg[w * TC_ROWS + lane]);
    y[n0 + lane] = s;
  }
}

/* Shared memory of a block: P S stages, x's split at kmax, the partials, 2 P S barriers. */
static uint64_t lb_smem(int P, int S, int SB, int64_t kmax, int CW = LB_CW) {
  return (uint64_t)P * S * TC_ROWS * SB * LB_SBB + tc_prep_bytes<float2>(kmax) +
         sizeof(float) * P * CW * TC_ROWS + 16u * P * S;
}

template <int P, int S, int SB, int CW>
__global__ void __launch_bounds__(P *(CW + 1) * 32, 1)
    lb_chain_kernel(const lb_op *__restrict__ ops, int n_ops, int64_t kmax, unsigned *done,
                    uint64_t *rec) {
  constexpr int STAGE = TC_ROWS * SB * LB_SBB, NC = P * CW;
  extern __shared__ __align__(128) uint8_t sm[];
  uint4 *xb = (uint4 *)(sm + (uint64_t)P * S * STAGE);
  float2 *xs = (float2 *)((uint8_t *)xb + kmax * 4);
  float *part = (float *)((uint8_t *)xb + tc_prep_bytes<float2>(kmax)); /* [P][CW][16] */
  uint64_t *full = (uint64_t *)(part + P * CW * TC_ROWS), *empty = full + P * S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __shared__ int lb_last[P]; /* op + 1 whose last tile group g's consumers began (lb_bm & 4) */
  if (threadIdx.x < P) lb_last[threadIdx.x] = 0;
  memra_ring_init(full, empty, P * S, CW);

  if (warp >= NC) { /* group g's producer: its tiles of every op, in order, never waiting on data */
    lb_produce<P, S, SB>(ops, n_ops, warp - NC, lane, sm, full, empty, lb_last);
    return;
  }

  const int g = warp / CW, wg = warp % CW, ctid = threadIdx.x;
  const tc_role ro = tc_role_of(lane >> 2, lane & 3);
  memra_pdl_enter();
  uint64_t u = 0;
  for (int i = 0; i < n_ops; ++i) {
    const lb_op o = ops[i];
    if (o.wait >= 0 && ctid == 0)
      while (bench_ld_acquire(&done[o.wait]) < gridDim.x)
        if (lb_bm & 2) __nanosleep(32);
    lb_bar<NC * 32>(1); /* x ready, and every group past the last op's use of the split */
    if (rec && ctid == 0) rec[(i * gridDim.x + blockIdx.x) * 3 + 2] = lb_now();
    for (int64_t e = 8 * (int64_t)ctid; e < o.K; e += 8 * NC * 32) {
      const float4 a = __ldcg((const float4 *)(o.x + e)), b = __ldcg((const float4 *)(o.x + e) + 1);
      const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      tc_split_put(v, xb, xs, e);
    }
    lb_bar<NC * 32>(1);
    if (rec && ctid == 0) rec[(i * gridDim.x + blockIdx.x) * 3] = lb_now();
    const int64_t nsb = o.K / 256, ngrp = (nsb + SB - 1) / SB;
    const int64_t tiles = (o.N + TC_ROWS - 1) / TC_ROWS;
    if (wg == 0 && lane == 0 && blockIdx.x + (int64_t)g * gridDim.x >= tiles)
      lb_st_release_cta(&lb_last[g], i + 1); /* no tile of op i: the producer may go on */
    for (int64_t t = blockIdx.x + (int64_t)g * gridDim.x; t < tiles; t += (int64_t)P * gridDim.x) {
      if (wg == 0 && lane == 0 && t + (int64_t)P * gridDim.x >= tiles)
        lb_st_release_cta(&lb_last[g], i + 1); /* the group's last tile of op i */
      float acc[1][2] = {{0.f, 0.f}};
      for (int64_t gi = 0; gi < ngrp; ++gi, ++u) {
        const int s = (int)(u % S);
        memra_mbar_wait(&full[g * S + s], (uint32_t)(u / S) & 1);
        const int64_t sb0 = SB * gi, nv = nsb - sb0 < SB ? nsb - sb0 : SB;
        /* warp wg takes super-blocks wg, wg + CW, ... (CW 4: tc_stage_apply's, v11's order) */
        for (int j = wg; j < nv; j += CW)
          tc_sb_apply<MEMRA_TYPE_Q4_K, TC_NS_MM>(acc, sm + (uint64_t)(g * S + s) * STAGE,
                                                 (int)nv * LB_SBB, j, sb0, xb, xs, ro);
        __syncwarp();
        if (lane == 0) memra_mbar_arrive(&empty[g * S + s]);
      }
      lb_tile_store<CW>(acc, part + g * CW * TC_ROWS, g, wg, lane, o.y, t * TC_ROWS, o.N);
      lb_bar<CW * 32>(2 + g);
    }
    lb_bar<NC * 32>(1); /* the block's stores of op i done */
    if (rec && ctid == 0) rec[(i * gridDim.x + blockIdx.x) * 3 + 1] = lb_now();
    if (ctid == 0) {
      if (!(lb_bm & 1)) __threadfence();
      bench_red_release(&done[i], 1);
    }
  }
  if (ctid == 0) { /* the last block out resets the counts for the next launch */
    __threadfence();
    if (atomicAdd(&done[n_ops], 1u) == gridDim.x - 1) {
      for (int i = 0; i <= n_ops; ++i)
        done[i] = 0;
      __threadfence();
    }
  }
}

/* Random Q4_K super-blocks: d, dmin in [2^-9, 2^-7), random scales and quants. */
__device__ __forceinline__ uint32_t lb_hash(uint64_t v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdULL;
  v ^= v >> 33;
  v *= 0xc4ceb9fe1a85ec53ULL;
  v ^= v >> 33;
  return (uint32_t)v;
}
__global__ void lb_fill_q4k(uint8_t *w, int64_t nblk, uint64_t seed) {
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < nblk;
       b += (int64_t)gridDim.x * blockDim.x) {
    uint32_t *p = (uint32_t *)(w + b * LB_SBB);
    for (int i = 0; i < LB_SBB / 4; ++i)
      p[i] = lb_hash(seed * 0x9E3779B97F4A7C15ULL + (uint64_t)b * 64 + i);
    const float d = ldexpf(1.f + (lb_hash(seed + 7 * b) & 1023) / 1024.f, -9);
    const float m = ldexpf(1.f + (lb_hash(seed + 7 * b + 3) & 1023) / 1024.f, -9);
    __half2 h = __floats2half2_rn(d, m);
    p[0] = *(uint32_t *)&h;
  }
}
__global__ void lb_fill_x(float *x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    x[i] = (float)((int)(lb_hash(seed + i) % 2001) - 1000) / 1000.f;
}

/* The reference: y = W x in double from the dequantized weights, a warp a row. */
__device__ void lb_scale_min(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
__global__ void lb_ref_gemv(const uint8_t *w, const double *x, double *y, int64_t N, int64_t K) {
  const int64_t n = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  double s = 0;
  for (int64_t b = lane; b < K / 256; b += 32) {
    const uint8_t *p = w + (n * (K / 256) + b) * LB_SBB;
    const float d = __half2float(*(const __half *)p), dm = __half2float(*(const __half *)(p + 2));
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      lb_scale_min(j, p + 4, &sc, &m);
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = p[16 + 32 * (j / 2) + l];
        const int v = j & 1 ? q >> 4 : q & 15;
        s += ((double)d * sc * v - (double)dm * m) * x[b * 256 + 32 * j + l];
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) y[n] = s;
}
__global__ void lb_to_double(const float *x, double *y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i];
}

typedef void (*lb_kernel_t)(const lb_op *, int, int64_t, unsigned *, uint64_t *);
struct lb_cfg {
  const char *name;
  lb_kernel_t k;
  int P, S, SB, CW;
};

static void lb_launch(const lb_cfg &c, int grid, size_t smem, cudaStream_t st, const lb_op *ops,
                      int n, int64_t kmax, unsigned *done, uint64_t *rec = NULL) {
  cudaLaunchConfig_t lc = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  lc.gridDim = dim3(grid);
  lc.blockDim = dim3(c.P * (c.CW + 1) * 32);
  lc.dynamicSmemBytes = smem;
  lc.stream = st;
  lc.attrs = at;
  lc.numAttrs = 1;
  CK(cudaLaunchKernelEx(&lc, c.k, ops, n, kmax, done, rec));
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}
/* Per op of a layer (means over layers 4..27, us): the blocks' work (end - start, median), the
 * spread of their starts, the drain (last end - median end), the gap (next op's median start -
 * this op's last end). */
static void lb_report(const uint64_t *r, int grid) {
  double work[LB_OPS] = {0}, sspread[LB_OPS] = {0}, drain[LB_OPS] = {0}, gap[LB_OPS] = {0},
         seen[LB_OPS] = {0};
  uint64_t *a = (uint64_t *)malloc(sizeof(uint64_t) * grid),
           *b = (uint64_t *)malloc(sizeof(uint64_t) * grid);
  int nl = 0;
  for (int l = 4; l < 28; ++l, ++nl)
    for (int j = 0; j < LB_OPS; ++j) {
      const int i = l * LB_OPS + j;
      for (int k = 0; k < grid; ++k) {
        a[k] = r[(3 * (int64_t)i * grid) + 3 * k];
        b[k] = r[(3 * (int64_t)i * grid) + 3 * k + 1] - a[k];
      }
      qsort(b, grid, sizeof(uint64_t), cmp_u64);
      work[j] += b[grid / 2] / 1e3;
      qsort(a, grid, sizeof(uint64_t), cmp_u64);
      sspread[j] += (a[grid - 1] - a[0]) / 1e3;
      for (int k = 0; k < grid; ++k)
        b[k] = r[(3 * (int64_t)i * grid) + 3 * k + 1];
      qsort(b, grid, sizeof(uint64_t), cmp_u64);
      drain[j] += (b[grid - 1] - b[grid / 2]) / 1e3;
      const uint64_t last = b[grid - 1];
      for (int k = 0; k < grid; ++k)
        a[k] = r[(3 * (int64_t)(i + 1) * grid) + 3 * k];
      qsort(a, grid, sizeof(uint64_t), cmp_u64);
      gap[j] += ((double)a[grid / 2] - (double)last) / 1e3;
      for (int k = 0; k < grid; ++k) /* the next op's count seen (its blocks' barrier passed) */
        a[k] = r[(3 * (int64_t)(i + 1) * grid) + 3 * k + 2];
      qsort(a, grid, sizeof(uint64_t), cmp_u64);
      seen[j] += ((double)a[grid / 2] - (double)last) / 1e3;
    }
  printf("    op: work / start spread / drain / gap (of it the count seen) (us):");
  for (int j = 0; j < LB_OPS; ++j)
    printf(" %d: %.2f / %.2f / %.2f / %.2f (%.2f);", j, work[j] / nl, sspread[j] / nl,
           drain[j] / nl, gap[j] / nl, seen[j] / nl);
  printf("\n");
  free(a);
  free(b);
}

static int cmp_f(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Every block of a launch resident at once (the counts are polled): the kernel's shared memory
 * raised to smem and the grid of the blocks an SM holds, or 0 (said why) when smem does not fit. */
static int lb_grid(const void *k, int threads, size_t smem, const cudaDeviceProp &prop,
                   const char *name) {
  if (smem > prop.sharedMemPerBlockOptin) {
    printf("%s: %zu bytes of shared memory, more than %zu\n", name, smem,
           (size_t)prop.sharedMemPerBlockOptin);
    return 0;
  }
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, smem));
  return per_sm * prop.multiProcessorCount;
}

/* The median time of reps replays of graph gr (after one to warm), us; the executable graph freed.
 */
static double lb_replay_us(cudaStream_t st, cudaGraph_t gr, int reps, cudaEvent_t e0,
                           cudaEvent_t e1) {
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, gr, 0));
  float t[256];
  const int n = reps < 1 ? 1 : reps < 256 ? reps : 256;
  CK(cudaGraphLaunch(ge, st));
  for (int r = 0; r < n; ++r) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  qsort(t, n, sizeof(float), cmp_f);
  CK(cudaGraphExecDestroy(ge));
  return 1e3 * t[n / 2];
}

int main(int argc, char **argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  /* a layer: o, gate+up (one matrix of 2 x 14336 rows), down, q/k/v (one of 6144) */
  const int64_t NN[LB_OPS] = {4096, 28672, 4096, 6144}, KK[LB_OPS] = {4096, 4096, 14336, 4096};
  const int64_t kmax = 14336;
  uint64_t wbytes = 0, off[LB_LAYERS][LB_OPS];
  for (int l = 0; l < LB_LAYERS; ++l)
    for (int j = 0; j < LB_OPS; ++j) {
      off[l][j] = wbytes;
      wbytes += (uint64_t)NN[j] * KK[j] / 256 * LB_SBB;
    }
  uint8_t *w;
  CK(cudaMalloc(&w, wbytes));
  lb_fill_q4k<<<4096, 256>>>(w, (int64_t)(wbytes / LB_SBB), 1);
  /* activations: x0 (the attention's row), then each op's y */
  float *x0, *y[LB_OPS];
  CK(cudaMalloc(&x0, 4096 * sizeof(float)));
  lb_fill_x<<<16, 256>>>(x0, 4096, 2);
  for (int j = 0; j < LB_OPS; ++j)
    CK(cudaMalloc(&y[j], NN[j] * sizeof(float)));
  /* the step's ops: o reads x0 in layer 0, q/k/v's first 4096 after that */
  lb_op h[LB_MAX_OPS];
  for (int l = 0; l < LB_LAYERS; ++l)
    for (int j = 0; j < LB_OPS; ++j) {
      lb_op &o = h[l * LB_OPS + j];
      o.w = w + off[l][j];
      o.x = j == 0 ? (l == 0 ? x0 : y[3]) : y[j - 1];
      o.y = y[j];
      o.N = NN[j];
      o.K = KK[j];
      o.wait = -1;
    }
  lb_op *dops;
  unsigned *done;
  CK(cudaMalloc(&dops, sizeof(h) * 3));
  CK(cudaMalloc(&done, (LB_MAX_OPS + 1) * sizeof(unsigned) * 5));
  CK(cudaMemset(done, 0, (LB_MAX_OPS + 1) * sizeof(unsigned) * 5));
  /* three copies of the program, by mode: waits none (launch), within a layer (layer), all (step)
   */
  lb_op hm[3][LB_MAX_OPS];
  for (int m = 0; m < 3; ++m)
    for (int i = 0; i < LB_MAX_OPS; ++i) {
      hm[m][i] = h[i];
      hm[m][i].wait = m == 0 ? -1 : m == 1 ? (i % LB_OPS == 0 ? -1 : i % LB_OPS - 1) : i - 1;
    }
  CK(cudaMemcpy(dops, hm, sizeof(hm), cudaMemcpyHostToDevice));

  /* layer 0's chain in double */
  double *rx, *ry[LB_OPS];
  CK(cudaMalloc(&rx, 4096 * sizeof(double)));
  for (int j = 0; j < LB_OPS; ++j)
    CK(cudaMalloc(&ry[j], NN[j] * sizeof(double)));
  lb_to_double<<<16, 256>>>(x0, rx, 4096);
  CK(cudaDeviceSynchronize());

  const lb_cfg cfgs[] = {
      {"P2 S2 SB16", lb_chain_kernel<2, 2, 16, 4>, 2, 2, 16, 4},
      {"P1 S4 SB16", lb_chain_kernel<1, 4, 16, 4>, 1, 4, 16, 4},
      {"P3 S2 SB8", lb_chain_kernel<3, 2, 8, 4>, 3, 2, 8, 4},
      {"P4 S2 SB8", lb_chain_kernel<4, 2, 8, 4>, 4, 2, 8, 4},
      /* eight warps a tile: other sums (not v11's bits), the tile's latency halved */
      {"P1 S4 SB16 CW8", lb_chain_kernel<1, 4, 16, 8>, 1, 4, 16, 8},
      {"P2 S2 SB16 CW8", lb_chain_kernel<2, 2, 16, 8>, 2, 2, 16, 8},
      {"P2 S2 SB8 CW8", lb_chain_kernel<2, 2, 8, 8>, 2, 2, 8, 8},
  };
  const char *mname[5] = {"launch", "layer", "step", "nowait", "consume"};
  float *last = (float *)malloc(NN[3] * sizeof(float)),
        *got = (float *)malloc(NN[3] * sizeof(float));
  float *last8 = (float *)malloc(NN[3] * sizeof(float)); /* CW 8's sums: their own bits */
  bool have_last = false, have_last8 = false, all_same = true;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  uint64_t *rec, *hrec = (uint64_t *)malloc(sizeof(uint64_t) * 3 * LB_MAX_OPS * 1024);
  CK(cudaMalloc(&rec, sizeof(uint64_t) * 3 * LB_MAX_OPS * 1024));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  { /* the copy rate (bytes read + written), the floor's measure in memra bench */
    const size_t cb = (size_t)1 << 30;
    void *ca, *cbuf;
    CK(cudaMalloc(&ca, cb));
    CK(cudaMalloc(&cbuf, cb));
    float best = 1e9f;
    for (int r = 0; r < 5; ++r) {
      float ms;
      CK(cudaEventRecord(e0, st));
      CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms, e0, e1));
      best = ms < best ? ms : best;
    }
    printf("copy: %.0f GB/s; a layer's %.1f MB at that rate: %.2f us\n", 2.0 * cb / best / 1e6,
           wbytes / (double)LB_LAYERS / 1e6, wbytes / (double)LB_LAYERS / (2.0 * cb / best / 1e3));
    CK(cudaFree(ca));
    CK(cudaFree(cbuf));
  }
  printf("config | mode | us a step (median of %d) | us a layer | GB/s | y == launch P2\n", reps);
  for (const lb_cfg &c : cfgs) {
    const size_t smem = lb_smem(c.P, c.S, c.SB, kmax, c.CW);
    const int grid = lb_grid((const void *)c.k, c.P * (c.CW + 1) * 32, smem, prop, c.name);
    if (grid == 0) continue;
    for (int m = 0; m < 5; ++m) {
      /* nowait: the step's launch with the launch mode's program (no op waits: wrong values, the
       * bound of the stream with no dependencies); consume: nowait with no copies (lb_bm 8) */
      const int bm = m == 4 ? 8 : 0;
      CK(cudaMemcpyToSymbol(lb_bm, &bm, sizeof(int)));
      const lb_op *po = dops + (m >= 3 ? 0 : m) * LB_MAX_OPS;
      unsigned *dn = done + m * (LB_MAX_OPS + 1);
      cudaGraph_t gr;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      if (m == 0)
        for (int i = 0; i < LB_MAX_OPS; ++i)
          lb_launch(c, grid, smem, st, po + i, 1, kmax, dn);
      else if (m == 1)
        for (int l = 0; l < LB_LAYERS; ++l)
          lb_launch(c, grid, smem, st, po + l * LB_OPS, LB_OPS, kmax, dn);
      else
        lb_launch(c, grid, smem, st, po, LB_MAX_OPS, kmax, dn);
      CK(cudaStreamEndCapture(st, &gr));
      const double us = lb_replay_us(st, gr, reps, e0, e1);
      CK(cudaMemcpy(got, y[3], NN[3] * sizeof(float), cudaMemcpyDeviceToHost));
      const char *same = "first";
      if (m >= 3) {
        same = "(no waits: not compared)";
      } else if (!(c.CW == 8 ? have_last8 : have_last)) {
        memcpy(c.CW == 8 ? last8 : last, got, NN[3] * sizeof(float));
        (c.CW == 8 ? have_last8 : have_last) = true;
      } else {
        const bool eq = memcmp(c.CW == 8 ? last8 : last, got, NN[3] * sizeof(float)) == 0;
        same = eq ? "same" : "DIFF";
        all_same = all_same && eq;
      }
      printf("%s | %s | %.1f | %.2f | %.0f | %s (grid %d)\n", c.name, mname[m], us, us / LB_LAYERS,
             wbytes / us / 1e3, same, grid);
      /* the blocks' marks of one more step, launched as the graph did */
      CK(cudaMemset(rec, 0, sizeof(uint64_t) * 3 * LB_MAX_OPS * grid));
      if (m == 0)
        for (int i = 0; i < LB_MAX_OPS; ++i)
          lb_launch(c, grid, smem, st, po + i, 1, kmax, dn, rec + 3 * (int64_t)grid * i);
      else if (m == 1)
        for (int l = 0; l < LB_LAYERS; ++l)
          lb_launch(c, grid, smem, st, po + l * LB_OPS, LB_OPS, kmax, dn,
                    rec + 3 * (int64_t)grid * LB_OPS * l);
      else
        lb_launch(c, grid, smem, st, po, LB_MAX_OPS, kmax, dn, rec);
      CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(hrec, rec, sizeof(uint64_t) * 3 * LB_MAX_OPS * grid, cudaMemcpyDeviceToHost));
      lb_report(hrec, grid);
      CK(cudaGraphDestroy(gr));
    }
    const int zero = 0;
    CK(cudaMemcpyToSymbol(lb_bm, &zero, sizeof(int)));
  }
  /* the count's forms, step mode */
  for (int ci : {2, 3, 4}) {
    const lb_cfg &c = cfgs[ci];
    const size_t smem = lb_smem(c.P, c.S, c.SB, kmax, c.CW);
    const int grid = lb_grid((const void *)c.k, c.P * (c.CW + 1) * 32, smem, prop, c.name);
    for (int bm : {1, 3, 5}) {
      if (grid == 0) break;
      CK(cudaMemcpyToSymbol(lb_bm, &bm, sizeof(int)));
      const lb_op *po = dops + 2 * LB_MAX_OPS;
      unsigned *dn = done + 2 * (LB_MAX_OPS + 1);
      cudaGraph_t gr;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      lb_launch(c, grid, smem, st, po, LB_MAX_OPS, kmax, dn);
      CK(cudaStreamEndCapture(st, &gr));
      const double us = lb_replay_us(st, gr, reps, e0, e1);
      CK(cudaMemcpy(got, y[3], NN[3] * sizeof(float), cudaMemcpyDeviceToHost));
      const bool eq = memcmp(last, got, NN[3] * sizeof(float)) == 0;
      all_same = all_same && eq;
      printf("%s | step, count form %d | %.1f | %.2f | %.0f | %s\n", c.name, bm, us, us / LB_LAYERS,
             wbytes / us / 1e3, eq ? "same" : "DIFF");
      CK(cudaMemset(rec, 0, sizeof(uint64_t) * 3 * LB_MAX_OPS * grid));
      lb_launch(c, grid, smem, st, po, LB_MAX_OPS, kmax, dn, rec);
      CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(hrec, rec, sizeof(uint64_t) * 3 * LB_MAX_OPS * grid, cudaMemcpyDeviceToHost));
      lb_report(hrec, grid);
      CK(cudaGraphDestroy(gr));
    }
    const int zero = 0;
    CK(cudaMemcpyToSymbol(lb_bm, &zero, sizeof(int)));
  }
  /* layer 0 against double: run layer 0 alone (the layer mode of the first config, and of the
   * first with eight warps a tile) and compare */
  double worst = 0;
  for (int ci : {0, 4}) {
    const lb_cfg &c = cfgs[ci];
    const size_t smem = lb_smem(c.P, c.S, c.SB, kmax, c.CW);
    const int grid = lb_grid((const void *)c.k, c.P * (c.CW + 1) * 32, smem, prop, c.name);
    if (grid == 0) continue;
    lb_launch(c, grid, smem, st, dops + LB_MAX_OPS, LB_OPS, kmax,
              done + LB_MAX_OPS + 1); /* the layer mode's program: op j waits for op j - 1 */
    CK(cudaStreamSynchronize(st));
    const double *xin = rx;
    for (int j = 0; j < LB_OPS; ++j) {
      /* each op's reference from the GPU's own input (x of op j = the GPU's y of op j - 1), so the
       * error is one GEMV's */
      if (j > 0) {
        lb_to_double<<<64, 256>>>(y[j - 1], ry[j - 1], NN[j - 1]);
        xin = ry[j - 1];
      }
      double *ref;
      CK(cudaMalloc(&ref, NN[j] * sizeof(double)));
      lb_ref_gemv<<<(unsigned)((NN[j] + 7) / 8), 256>>>(w + off[0][j], xin, ref, NN[j], KK[j]);
      CK(cudaDeviceSynchronize());
      double *hr = (double *)malloc(NN[j] * sizeof(double));
      float *hy = (float *)malloc(NN[j] * sizeof(float));
      CK(cudaMemcpy(hr, ref, NN[j] * sizeof(double), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hy, y[j], NN[j] * sizeof(float), cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (int64_t i = 0; i < NN[j]; ++i) {
        num += (hy[i] - hr[i]) * (hy[i] - hr[i]);
        den += hr[i] * hr[i];
      }
      const double rel = sqrt(num / (den > 0 ? den : 1));
      printf("%s: layer 0 op %d (%lld x %lld): relative error %.2e against double\n", c.name, j,
             (long long)NN[j], (long long)KK[j], rel);
      worst = rel > worst ? rel : worst;
      free(hr);
      free(hy);
      CK(cudaFree(ref));
    }
  }
  printf("bits across modes and configs (by warps a tile): %s; worst relative error %.2e: %s\n",
         all_same ? "all the same" : "DIFFER", worst, worst < 1e-5 ? "ok" : "FAIL");
  return all_same && worst < 1e-5 ? 0 : 1;
}
