/* matmul_q13.cuh — matmul v13: Q8_0 GEMV for one row of x, v8's arithmetic fed by a ring of bulk
 * copies in shared memory (included by matmul.cu only).
 *
 * Why (docs/PERF.md): v8b streams each warp's steps through a 2-stage cp.async ring (2-3 copies
 * of 16 bytes a lane a row a step): gate/up at ~71% of the copy bandwidth, q/o ~50%, while F16 on
 * v12's bulk-copy ring reached 98% / 80%. The ring alone changed little per kernel (its copies
 * start before the PDL wait: tg128 +5%); what held the consumers was re-copying x for every
 * tile (below). v13 is v12's scheme with v8's steps: persistent blocks walk tiles of V13_R rows; a
 * producer warp keeps V13_ST stages of V13_R rows x V13_CW steps (4352 bytes a row, one bulk copy
 * each) in flight, one issued before the PDL wait since weights are constant; four consumer warps
 * run v8's step on x in their own 4 KiB (v8's swizzle, cp.async). At K 4096 a warp's one step is
 * the same in every tile, so its x is copied once (H200: gate/up 20.3 -> 17.7 us, output 152.4
 * -> 128.8, Llama-8B Q8_0 tg128 @ d512 303-305 -> 336-338); longer rows copy a step's x per tile,
 * overlapping the stage's wait (keeping all of a warp's steps, 134 KB a block at K 14336, one
 * block an SM, made the down projection 19.6 -> 25.9 us).
 * Bits: consumer warp w takes steps w, w + 4, ... of every row (lane l block l of a step) through
 * mq8_step1, memra_warp_sum and the warps in order (+ bias): v8's M = 1 sequence exactly, so
 * v13 alone == v8 == v8b at any M (v8b serves the batches). Rows need K % 256 == 0 (a stage's
 * bytes whole 16-byte pieces) and K >= 4096 (every consumer warp has a step). */
#ifndef MEMRA_CUDA_MATMUL_Q13_CUH
#define MEMRA_CUDA_MATMUL_Q13_CUH

#include "plugins/cuda/matmul_dyn.cuh"
#include "plugins/cuda/matmul_norm13.cuh"
#include "plugins/cuda/matmul_q8b.cuh"
#include "plugins/cuda/matmul_rkv.cuh"
#include "plugins/cuda/mbarrier.cuh"

/* Tiles a block stores together (G; a build define, -DMEMRA_V13_GRP=1 the one-tile form):
 * matmul_tc11.cuh's MEMRA_T11_GRP for v13, the G tiles' partials in G buffers and one barrier
 * pair a group (mm_group_store) instead of two a tile; the same sums in the same order (H100:
 * Llama Q8_0 tg128 +0.8%). Not with conv or rope (their stores are per tile). */
#ifndef MEMRA_V13_GRP
#define MEMRA_V13_GRP 4
#endif

enum {
  V13_CW = MQ8_WARPS,           /* consumer warps: v8's split of K into steps */
  V13_R = 8,                    /* rows a tile */
  V13_ROWB = V13_CW * MQ8_SPAN, /* bytes of a row in one stage: 4 steps, 4352 */
  V13_ST = 2,                   /* stages in the ring (2 blocks an SM) */
  V13_STAGE = V13_R * V13_ROWB, /* bytes of a stage */
  V13_XS = V13_ST * V13_STAGE,  /* the consumers' x buffers */
  V13_PART = V13_XS + V13_CW * MQ8_XSPAN,
  V13_SMEM = V13_PART + 4 * MEMRA_V13_GRP * V13_CW * V13_R + 16 * V13_ST
};
static_assert(MEMRA_V13_GRP >= 1 && MEMRA_V13_GRP <= V13_CW, "a group's tiles: one a warp");

__device__ __forceinline__ void v13_consumers_sync() { mm_consumers_sync<V13_CW>(); }

/* A consumer warp's share of one tile of V13_R rows: logical warp lw's steps (lw, lw + 4, ...)
 * of the tile's nkc ring units into acc (u, the block's running unit, advances by nkc). x of a
 * step from physical warp xw's own buffer at xs (x_once: copied there before the first tile,
 * else copied from xl now). */
__device__ __forceinline__ void v13_tile_steps(float (&acc)[V13_R], uint8_t *sm, uint64_t *full,
                                               uint64_t *empty, uint32_t xs, const float *xl,
                                               int64_t nblk, int64_t steps, int64_t nkc,
                                               bool x_once, int64_t &u, int lw, int xw, int lane,
                                               const float *ss = NULL) {
#pragma unroll
  for (int r = 0; r < V13_R; ++r)
    acc[r] = 0.f;
  for (int64_t c = 0; c < nkc; ++c, ++u) {
    const int s = (int)(u % V13_ST);
    const int64_t st = c * V13_CW + lw; /* v8's order: warp w's steps w, w + 4, ... */
    const int nb = st < steps ? mq8b_nb(nblk, st) : 0;
    if (nb && !x_once) {
      mq8_issue_x(xs, xl, st, nb, lane, 16);
      memra_cp_async_commit();
    }
    memra_mbar_wait(&full[s], (uint32_t)(u / V13_ST) & 1);
    if (nb) {
      if (!x_once) memra_cp_async_wait<0>();
      __syncwarp();
      if (lane < nb) {
#if MEMRA_Q8_DP
        if (ss) /* x_once, split in place (mq8_split_in_place) */
          mq8_step1s<V13_R, V13_ROWB>(acc, sm + V13_XS + xw * MQ8_XSPAN, ss,
                                      sm + s * V13_STAGE + lw * MQ8_SPAN, lane);
        else
#endif
          mq8_step1<V13_R, V13_ROWB>(acc, sm + V13_XS + xw * MQ8_XSPAN,
                                     sm + s * V13_STAGE + lw * MQ8_SPAN, lane);
      }
    }
    __syncwarp(); /* the stage and x read by every lane before they are refilled */
    if (lane == 0) memra_mbar_arrive(&empty[s]);
  }
}

/* The warp's sums of its tile's rows (butterfly) into part[warp], lane 0 storing. */
__device__ __forceinline__ void
v13_warp_parts(const float (&acc)[V13_R], float (&part)[V13_CW][1][V13_R], int warp, int lane) {
#pragma unroll
  for (int r = 0; r < V13_R; ++r) {
    const float v = memra_warp_sum(acc[r]);
    if (lane == 0) part[warp][0][r] = v;
  }
}

/* 112 registers (118 unbounded, no spills either way): a v13 block is 5 warps, attention v5's
 * Llama block 8 warps of 112, so two v13 blocks fit in an SM's 65,536 registers beside one
 * attention block (64,512; at 118, allocated as 120, 67,072 do not) and the o projection launched
 * early under PDL gets both blocks resident, its copies in flight, while the attention runs. */
template <bool CV, bool NORM, bool TAIL = false, bool RK = false>
__global__ void __maxnreg__(112)
    matmul_v13_kernel(const mm_jobs J, const float *__restrict__ x, int64_t K, int64_t n_tiles,
                      bool v13_x_per_tile, bool v13_rotate, const mm_norm nm, int dslot) {
  extern __shared__ __align__(128) uint8_t sm[];
  uint8_t *ring = sm;
  constexpr int G = CV || RK ? 1 : MEMRA_V13_GRP; /* tiles stored together */
  float(&partg)[MEMRA_V13_GRP][V13_CW][1][V13_R] =
      *(float(*)[MEMRA_V13_GRP][V13_CW][1][V13_R])(sm + V13_PART);
  float(&part)[V13_CW][1][V13_R] = partg[0];
  uint64_t *full = (uint64_t *)(&partg[MEMRA_V13_GRP - 1][V13_CW - 1][0][V13_R - 1] + 1),
           *empty = full + V13_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nblk = K / 32, steps = (nblk + 31) / 32, nkc = (steps + V13_CW - 1) / V13_CW;
  const int64_t rowbytes = 34 * nblk;
  const int64_t my_tiles = (n_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const int64_t units = my_tiles * nkc;
  /* dslot >= 0: dynamic tiles (matmul_dyn.cuh); stage s's tile, -1 past the last */
  const bool dyn = dslot >= 0;
  __shared__ int64_t stile[V13_ST];
  memra_ring_init(full, empty, V13_ST, V13_CW);

  if (warp == V13_CW) { /* producer: lane r < V13_R copies row r's chunk */
    int64_t tile = 0, next = dyn && lane == 0 ? mm_dyn_grab(dslot, n_tiles) : 0;
    const int pre = mm_ring_pre_k(V13_ST, K); /* units issued before the wait */
    for (int64_t u = 0; dyn || u < units; ++u) {
      const int s = (int)(u % V13_ST);
      if (u >= V13_ST) memra_mbar_wait(&empty[s], (uint32_t)(u / V13_ST - 1) & 1);
      if (!dyn) {
        tile = blockIdx.x + (u / nkc) * gridDim.x;
      } else if (!mm_dyn_produce(dslot, n_tiles, u % nkc == 0, lane, &tile, &next, &stile[s],
                                 &full[s])) {
        if (u < pre) memra_pdl_enter(); /* past the last tile: the consumers stop here */
        break;
      }
      const mm_job jb = mm_pick_at(J, tile);
      const int64_t n0 = jb.b * V13_R, off = (u % nkc) * V13_ROWB;
      const uint32_t rowb = (uint32_t)(rowbytes - off < V13_ROWB ? rowbytes - off : V13_ROWB);
      if (lane == 0) memra_mbar_expect(&full[s], V13_R * rowb);
      __syncwarp();
      if (lane < V13_R) { /* rows past N: the last row (computed, never stored) */
        const int64_t n = n0 + lane < jb.N ? n0 + lane : jb.N - 1;
        memra_bulk_load(ring + s * V13_STAGE + lane * V13_ROWB,
                        jb.w + (uint64_t)n * jb.w_nb1 + (uint64_t)off, rowb, &full[s]);
      }
      if (u == (dyn || units >= pre ? pre : units) - 1) memra_pdl_enter();
    }
    if (units == 0 && !dyn) memra_pdl_enter();
    return;
  }

  /* NORM (ABI 1.14, K 4096): rmsnorm's row made here from x (+ res), its weight loaded first */
  __shared__ float shn[32];
  __shared__ int n13_flag;
  float4 gw[N13_J]; /* NORM only (unused otherwise) */
  unsigned ticket = 0;
  if (NORM) n13_load_w(nm, gw, warp, lane);
  if (TAIL) n13_tail_hint(nm, warp, lane);
  /* RK (ABI 1.16 matmul_n_rope_kv): the rope angles and cache slots before the wait */
  __shared__ typename rkv_smem_if<RK, V13_R>::type rks;
  if constexpr (RK)
    if (warp == 0) rkv_prologue<V13_R>(J, my_tiles, rks, lane);
  memra_pdl_enter(); /* x comes from the kernel before */
  const uint32_t xs = memra_smem_u32(sm + V13_XS + warp * MQ8_XSPAN);
  const float *xl = x + 4 * lane;
  /* K <= 4096: a row is one stage, so a warp's one step is the same for every tile and its x is
   * copied once (MEMRA_V13_X=tile copies it per tile, the first form: A/B) */
  const bool x_once = NORM || (nkc == 1 && !(v13_x_per_tile));
  if (NORM) {
    n13_norm_x<V13_CW>(nm, gw, sm + V13_XS + warp * MQ8_XSPAN, shn, &ticket, warp, lane);
  } else if (x_once && warp < steps) {
    mq8_issue_x(xs, xl, warp, mq8b_nb(nblk, warp), lane, 16);
    memra_cp_async_commit();
    memra_cp_async_wait<0>();
    __syncwarp();
  }
#if MEMRA_Q8_DP
  /* x_once: each lane's block of x split once, in place, its power of two here */
  __shared__ float v13_ss[V13_CW][32];
  if (x_once && warp < steps) {
    __syncwarp();
    if (lane < mq8b_nb(nblk, warp))
      mq8_split_in_place(sm + V13_XS + warp * MQ8_XSPAN, v13_ss[warp], lane);
    __syncwarp();
  }
  const float *ss = x_once ? v13_ss[warp] : NULL;
#else
  const float *ss = NULL;
#endif
  MEMRA_TRACE_MARK(1); /* warp 0's head done (trace builds only) */
  /* Rows of steps % 4 != 0 steps give warps 0 .. rem - 1 one step more a tile (K 14336: 4, 4,
   * 3, 3): the logical warps rotate over the physical ones tile by tile, so every physical warp
   * takes its share of the longer ones (each logical warp's steps and sums as before) */
  const int rem = v13_rotate && !x_once ? (int)(steps % V13_CW) : 0;
  int64_t u = 0;
  int np = 0;          /* G > 1: the open group's tiles so far */
  int64_t my_tile = 0; /* G > 1: the group's tile this warp stores, and y's old values */
  float my_xo = 0.f;
  for (int64_t i = 0; dyn || i < my_tiles; ++i) {
    const int lw = (int)((warp + i * rem) % V13_CW);
    int64_t tile = blockIdx.x + i * gridDim.x;
    if (dyn && (tile = mm_dyn_consume(full, stile, u, V13_ST)) < 0) break; /* past the last */
    const mm_job jb = mm_pick_at(J, tile);
    const bool cj = CV && jb.y == J.y[0]; /* matmul_n_conv's job: its conv inputs now */
    const mm_conv_in ci =
        mm_conv_load(J.cv, cj && threadIdx.x < V13_R && jb.b * V13_R + threadIdx.x < jb.N, 0,
                     jb.b * V13_R + threadIdx.x);
    const float xo = G == 1 ? mm_acc_load<V13_R>(J.acc, jb.y, jb.b * V13_R, jb.N) : 0.f;
    if (G > 1 && np == warp) {
      const int64_t n = jb.b * V13_R + lane;
      my_tile = tile;
      my_xo = J.acc && lane < V13_R && n < jb.N ? jb.y[n] : 0.f;
    }
    float acc[V13_R];
    v13_tile_steps(acc, sm, full, empty, xs, xl, nblk, steps, nkc, x_once, u, lw, warp, lane, ss);
    v13_warp_parts(acc, partg[G == 1 ? 0 : np], lw, lane);
    if constexpr (G > 1) {
      if (++np == G || (!dyn && i + 1 == my_tiles)) {
        mm_group_store(partg, J, np, my_tile, my_xo, warp, lane);
        np = 0;
      }
      continue;
    }
    v13_consumers_sync();
    if constexpr (RK)
      rkv_store<V13_CW, V13_R>(part, J, jb, i, rks);
    else
      mm_store_parts<V13_CW, 1, V13_R>(part, jb.b * V13_R, jb.N, 0, 1, jb.y, jb.y_ld, jb.bias, ci,
                                       cj, J.acc ? MM_ACC_XO : MM_ACC_NONE, xo);
    v13_consumers_sync();
  }
  if constexpr (G > 1) /* dynamic tiles end when the tickets do: the last group */
    if (np > 0) mm_group_store(partg, J, np, my_tile, my_xo, warp, lane);
  if (NORM) n13_finish<V13_CW>(nm, ticket, &n13_flag, warp, lane);
  if (TAIL) n13_tail<V13_CW, V13_R>(nm, &n13_flag, shn, warp, lane);
  MEMRA_TRACE_MARK(2); /* the block's end */
}

/* Whether v13 may take a Q8_0 matmul of one row of x with this K and row stride: whole 16-byte
 * stage pieces (K % 256, rows 16-byte aligned), a step for every consumer warp, the ring fits. */
static inline bool m13_fits(const memra_backend *be, int64_t K, uint64_t w_nb1) {
  return K % 256 == 0 && K / 1024 >= V13_CW && w_nb1 % 16 == 0 &&
         (int64_t)be->prop.sharedMemPerBlockOptin >= (int64_t)V13_SMEM + 1024;
}

/* Resident blocks an SM of a v13-ring kernel (its shared memory opted in first), at most 2, into
 * *bps once (0: not asked yet; left 0 on an error, which is returned). */
template <typename Kernel> static cudaError_t v13_blocks_per_sm(Kernel kernel, int *bps) {
  if (*bps > 0) return cudaSuccess;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, V13_SMEM);
  int n = 0;
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, (V13_CW + 1) * 32, V13_SMEM);
  if (e == cudaSuccess) *bps = n > 2 ? 2 : n < 1 ? 1 : n;
  return e;
}

/* The v13 grid over J's V13_R-row tiles: as many blocks as are resident (by shared memory, at
 * most 2 an SM), every block the same number of tiles. False when the grid is too large; *err:
 * the attribute or occupancy call's error (no launch then). */
static bool m13_launch(const memra_backend *be, mm_jobs J, const float *x, int64_t K,
                       cudaError_t *err, const mm_norm *nm = NULL, bool tail = false) {
  *err = cudaSuccess;
  const int64_t tiles = mm_jobs_layout(&J, V13_R);
  if (tiles == 0) return false;
  /* J's conv (matmul_n_conv) and the norm (rmsnorm_matmul_n: K 4096, no conv) in their own
   * instantiations, so the plain kernel's code stays as it was */
  const bool cv = J.cv.w != NULL;
  /* tail (ABI 1.15 matmul_rmsnorm): the norm after the row, by the last block; J.rk.on (ABI 1.16
   * matmul_n_rope_kv): rope and the cache stores at the tiles' stores */
  const int ki = J.rk.on ? 4 : nm ? (tail ? 3 : 2) : cv;
  void (*kernel)(const mm_jobs, const float *, int64_t, int64_t, bool, bool, const mm_norm, int) =
      J.rk.on      ? matmul_v13_kernel<false, false, false, true>
      : nm && tail ? matmul_v13_kernel<false, false, true>
      : nm         ? matmul_v13_kernel<false, true>
      : cv         ? matmul_v13_kernel<true, false>
                   : matmul_v13_kernel<false, false>;
  static int bps[5] = {0, 0, 0, 0, 0}; /* resident blocks an SM, asked once per instantiation */
  if ((*err = v13_blocks_per_sm(kernel, &bps[ki])) != cudaSuccess) return true;
  const int64_t slots = (int64_t)(be->n_sms > 0 ? be->n_sms : 1) * bps[ki];
  const int64_t per = (tiles + slots - 1) / slots;
  int64_t grid = (tiles + per - 1) / per;
  /* dynamic tiles (matmul_dyn.cuh; not with rope or the norm tail; v13 is never padded) */
  const int dslot = mm_dyn_plan(be, !J.rk.on && !(nm && tail), true, tiles, slots, &grid, NULL);
  /* A/B switches, read once: MEMRA_V13_X=tile copies x per tile, MEMRA_V13_ROT=0 keeps each
   * warp on its own steps */
  static const bool per_tile = memra_cu_env_is("MEMRA_V13_X", "tile"),
                    rotate = !memra_cu_env_is("MEMRA_V13_ROT", "0");
  (void)memra_cu_launch(be, kernel, dim3((unsigned)grid), dim3((V13_CW + 1) * 32), (size_t)V13_SMEM,
                        J, x, K, tiles, per_tile, rotate, nm ? *nm : mm_norm{}, dslot);
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_Q13_CUH */
