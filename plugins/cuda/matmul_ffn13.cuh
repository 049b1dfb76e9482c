/* matmul_ffn13.cuh — ABI 1.12 ffn_glu for one row of x and Q8_0 weights: gate and up, glu and
 * down in ONE persistent launch of v13's ring (included by matmul.cu, after matmul_q13.cuh).
 *
 * Why (docs/PERF.md, the ablation of 2026-12-02 evening): a dense FFN's decode is three launches
 * (gate/up, glu, down). The down GEMV's blocks can start only when gate/up's leave (two v13 blocks
 * fill an SM's registers), so the DRAM idles from gate/up's last bytes until down's first copies
 * land, and glu sits between them on the dependency chain (1.8 us a layer). Here the producer
 * warp streams down's weights into the ring right after gate/up's: they are in flight while the
 * gate/up tail and the hidden row are finished; down's consumers wait on a grid-wide count of
 * blocks done with gate/up (every block resident: the grid is sized by occupancy).
 *
 * Work: block b takes gate/up pairs b, b + G, ... (the gate tile of rows [8 p, 8 p + 8), then the
 * up tile of the same rows: the storing thread keeps the gate value and writes glu's element of
 * h), then down tiles b, b + G, ...: v13's tiles, steps and sums throughout.
 * Bits: every row of gate, up and down has v13's arithmetic (== v8 == v8b), h[n] glu_v2's
 * act(g) * u: the bits of matmul_n, glu and matmul on this plugin, alone or in a batch.
 * The count: ffn13_ctr[0] counts blocks done with gate/up (their h stores fenced first), [1]
 * blocks done; the last block resets both, and the next launch reads them only after its PDL
 * wait (its predecessors complete), so eager and replayed steps start from 0.
 * Measured (docs/PERF.md, 2026-12-03): alone 55.4 us at Llama-8B's shape against 60.2 for the
 * three kernels, but a live step under PDL is slower (tg128 295 vs 337), hence opt-in
 * (MEMRA_FFN_GLU=1). The count needs every block resident: a GPU shared with other work (MPS,
 * green contexts) could starve it, one more reason it is not the default. The DOWN false form
 * (MEMRA_FFN_GLU=2, and rmsnorm_ffn_glu's) stops after h: gate, up and glu in one launch, down a
 * plain v13 launch after it (no count); also slower live (tg128 350-352 vs 356, 2026-12-03). */
#ifndef MEMRA_CUDA_MATMUL_FFN13_CUH
#define MEMRA_CUDA_MATMUL_FFN13_CUH

#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/matmul_q13.cuh"

__device__ unsigned int ffn13_ctr[2];

struct ffn13_args {
  const uint8_t *wg, *wu, *wd; /* gate, up [F rows of Ki]; down [No rows of F] */
  uint64_t wg_nb1, wu_nb1, wd_nb1;
  const float *x; /* [Ki] */
  float *h;       /* [F]: act(x wg^T) * (x wu^T) */
  float *y;       /* [No]: h wd^T */
  int64_t Ki, F, No;
  mm_norm nm; /* NORM (rmsnorm_ffn_glu, Ki 4096): x's norm made here (matmul_norm13.cuh) */
};

__device__ __forceinline__ unsigned ffn13_load_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* DOWN false: gate, up and glu only (h written), the down projection left to a v13 launch after
 * it: no count, the glu launch gone from the chain. */
template <int ACT, bool DOWN, bool NORM = false>
__global__ void __launch_bounds__((V13_CW + 1) * 32) matmul_ffn13_kernel(const ffn13_args a) {
  static_assert(!(NORM && DOWN), "the norm's x write-back re-reads res, which down may write");
  extern __shared__ __align__(128) uint8_t sm[];
  float(&part)[V13_CW][1][V13_R] = *(float(*)[V13_CW][1][V13_R])(sm + V13_PART);
  uint64_t *full = (uint64_t *)(&part[V13_CW - 1][0][V13_R - 1] + 1), *empty = full + V13_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t G = gridDim.x, b = blockIdx.x;
  /* gate/up (A): rows of Ki; down (B): rows of F */
  const int64_t nblkA = a.Ki / 32, stepsA = (nblkA + 31) / 32,
                nkcA = (stepsA + V13_CW - 1) / V13_CW;
  const int64_t nblkB = a.F / 32, stepsB = (nblkB + 31) / 32, nkcB = (stepsB + V13_CW - 1) / V13_CW;
  const int64_t pairs = (a.F + V13_R - 1) / V13_R, tilesB = (a.No + V13_R - 1) / V13_R;
  const int64_t my_pairs = (pairs - b + G - 1) / G, my_b = DOWN ? (tilesB - b + G - 1) / G : 0;
  const int64_t unitsA = my_pairs * 2 * nkcA, units = unitsA + my_b * nkcB;
  memra_ring_init(full, empty, V13_ST, V13_CW);

  if (warp == V13_CW) { /* producer: lane r < V13_R copies row r's chunk of each unit */
    for (int64_t u = 0; u < units; ++u) {
      const int s = (int)(u % V13_ST);
      if (u >= V13_ST) memra_mbar_wait(&empty[s], (uint32_t)(u / V13_ST - 1) & 1);
      const uint8_t *w;
      uint64_t nb1;
      int64_t n0, N, off, rowbytes;
      if (u < unitsA) {
        const int64_t t = u / nkcA, c = u % nkcA; /* t: pair t / 2, gate (even) or up (odd) */
        w = t & 1 ? a.wu : a.wg;
        nb1 = t & 1 ? a.wu_nb1 : a.wg_nb1;
        n0 = (b + (t >> 1) * G) * V13_R;
        N = a.F;
        off = c * V13_ROWB;
        rowbytes = 34 * nblkA;
      } else {
        const int64_t v = u - unitsA, t = v / nkcB, c = v % nkcB;
        w = a.wd;
        nb1 = a.wd_nb1;
        n0 = (b + t * G) * V13_R;
        N = a.No;
        off = c * V13_ROWB;
        rowbytes = 34 * nblkB;
      }
      const uint32_t rowb = (uint32_t)(rowbytes - off < V13_ROWB ? rowbytes - off : V13_ROWB);
      if (lane == 0) memra_mbar_expect(&full[s], V13_R * rowb);
      __syncwarp();
      if (lane < V13_R) { /* rows past N: the last row (computed, never stored) */
        const int64_t n = n0 + lane < N ? n0 + lane : N - 1;
        memra_bulk_load(sm + s * V13_STAGE + lane * V13_ROWB, w + (uint64_t)n * nb1 + (uint64_t)off,
                        rowb, &full[s]);
      }
      if (u == (units < V13_ST ? units : V13_ST) - 1) memra_pdl_enter();
    }
    if (units == 0) memra_pdl_enter();
    return;
  }

  __shared__ float shn[32];
  __shared__ int n13_flag;
  float4 gw[N13_J]; /* NORM only (unused otherwise) */
  unsigned ticket = 0;
  if (NORM) n13_load_w(a.nm, gw, warp, lane);
  memra_pdl_enter(); /* x comes from the kernel before */
  const uint32_t xs = memra_smem_u32(sm + V13_XS + warp * MQ8_XSPAN);
  const bool xa_once = nkcA == 1; /* v13's rule: a row of one stage copies its x once */
  if (NORM) {
    n13_norm_x<V13_CW>(a.nm, gw, sm + V13_XS + warp * MQ8_XSPAN, shn, &ticket, warp, lane);
  } else if (xa_once && warp < stepsA) {
    mq8_issue_x(xs, a.x + 4 * lane, warp, mq8b_nb(nblkA, warp), lane, 16);
    memra_cp_async_commit();
    memra_cp_async_wait<0>();
    __syncwarp();
  }
  int64_t u = 0;
  float acc[V13_R];
  for (int64_t i = 0; i < my_pairs; ++i) {
    const int64_t n = (b + i * G) * V13_R + threadIdx.x; /* the storing thread's row */
    float g = 0.f;
    for (int half = 0; half < 2; ++half) {
      v13_tile_steps(acc, sm, full, empty, xs, a.x + 4 * lane, nblkA, stepsA, nkcA, xa_once, u,
                     warp, warp, lane);
      v13_warp_parts(acc, part, warp, lane);
      v13_consumers_sync();
      if (threadIdx.x < V13_R && n < a.F) { /* mm_store_parts' sum for the row */
        const float v = mm_sum_parts<V13_CW, 1, V13_R>(part, 0, threadIdx.x);
        if (half == 0)
          g = v;
        else
          a.h[n] = (ACT == MEMRA_ACT_SILU ? memra_act_silu(g) : memra_act_gelu_tanh(g)) * v;
      }
      v13_consumers_sync();
    }
  }
  if (NORM) n13_finish<V13_CW>(a.nm, ticket, &n13_flag, warp, lane);
  if (!DOWN) return;
  /* h complete for this block's rows: publish, then wait for every block's */
  __threadfence();
  v13_consumers_sync();
  if (threadIdx.x == 0) {
    atomicAdd(&ffn13_ctr[0], 1u);
    while (ffn13_load_acquire(&ffn13_ctr[0]) < (unsigned)G)
      ;
    __threadfence();
  }
  v13_consumers_sync();
  const bool xb_once = nkcB == 1;
  if (xb_once && warp < stepsB && my_b > 0) {
    mq8_issue_x(xs, a.h + 4 * lane, warp, mq8b_nb(nblkB, warp), lane, 16);
    memra_cp_async_commit();
    memra_cp_async_wait<0>();
    __syncwarp();
  }
  for (int64_t i = 0; i < my_b; ++i) {
    const int64_t n0 = (b + i * G) * V13_R;
    v13_tile_steps(acc, sm, full, empty, xs, a.h + 4 * lane, nblkB, stepsB, nkcB, xb_once, u, warp,
                   warp, lane);
    v13_warp_parts(acc, part, warp, lane);
    v13_consumers_sync();
    mm_store_parts<V13_CW, 1, V13_R>(part, n0, a.No, 0, 1, a.y, 0, NULL);
    v13_consumers_sync();
  }
  if (threadIdx.x == 0 && atomicAdd(&ffn13_ctr[1], 1u) == (unsigned)G - 1) {
    ffn13_ctr[0] = 0; /* every block is past its wait: the next launch starts from 0 */
    ffn13_ctr[1] = 0;
  }
}

/* Whether the fused FFN takes these weights for one row: Q8_0 gate, up and down that v13 takes
 * alone (K % 256, K >= 4096, 16-byte rows). */
static inline bool ffn13_fits(const memra_backend *be, int64_t Ki, int64_t F, uint64_t wg_nb1,
                              uint64_t wu_nb1, uint64_t wd_nb1) {
  return m13_fits(be, Ki, wg_nb1) && m13_fits(be, Ki, wu_nb1) && m13_fits(be, F, wd_nb1);
}

/* The launch: G blocks, every one resident (the occupancy of the kernel, at most 2 an SM; the
 * count waits on them all), pairs spread evenly. False when the occupancy query failed (*err). */
template <int ACT, bool DOWN, bool NORM = false>
static bool ffn13_launch(const memra_backend *be, const ffn13_args &a, cudaError_t *err) {
  static int bps = 0; /* resident blocks an SM, asked once per instantiation */
  if ((*err = v13_blocks_per_sm(matmul_ffn13_kernel<ACT, DOWN, NORM>, &bps)) != cudaSuccess)
    return false;
  const int64_t slots = (int64_t)(be->n_sms > 0 ? be->n_sms : 1) * bps;
  const int64_t pairs = (a.F + V13_R - 1) / V13_R;
  const int64_t per = (pairs + slots - 1) / slots, grid = (pairs + per - 1) / per;
  (void)memra_cu_launch(be, matmul_ffn13_kernel<ACT, DOWN, NORM>, dim3((unsigned)grid),
                        dim3((V13_CW + 1) * 32), (size_t)V13_SMEM, a);
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_FFN13_CUH */
