/* matmul_tc11.cuh — matmul v11: v7's Q4_K tensor-core arithmetic for one row of x (decode),
 * fed by a ring of bulk copies in shared memory (included by matmul.cu only).
 *
 * Why (docs/PERF.md): v5 is issue-bound (~6 instructions a weight); v9 streamed v5's
 * arithmetic through a cp.async ring and was no faster; v7 halves the instructions but at one
 * row waited on its prep kernel and kept one super-block of loads in flight per warp. v11
 * takes v7's arithmetic unchanged and changes only how bytes arrive:
 *  - persistent blocks (up to 4 per SM) walk 16-row tiles; a producer warp keeps T11_ST
 *    stages of 16 rows x 16 (K > 4096: 8) super-blocks in flight by bulk copies (the copy
 *    engine: no load instructions, no registers), one issued before the PDL wait since weights
 *    are constant. A tile of K <= 4096 is one contiguous copy, longer rows a copy per row
 *    (stages of 4 super-blocks, 576-byte copies, took 18% longer on the output matrix: the
 *    copies' count, not their bytes, looked like the limit);
 *  - x is split (tc_split8) once per block into shared memory while the first stages land.
 * Bits: warp w takes super-blocks w, w + 4, ... of every tile, through tc_chunk, the quad
 * butterfly and the warp-order sum: exactly v7's sequence with v7's prep values, so v11
 * alone == v7 at any M (opcheck's invariance checks compare them bitwise), and v7 serves
 * the batches. */
#ifndef MEMRA_CUDA_MATMUL_TC11_CUH
#define MEMRA_CUDA_MATMUL_TC11_CUH

#include "plugins/cuda/matmul_norm13.cuh"
#include "plugins/cuda/matmul_rkv.cuh"
#include "plugins/cuda/matmul_tc.cuh"
#include "plugins/cuda/matmul_dyn.cuh"
#include "plugins/cuda/mbarrier.cuh"

enum {
  T11_ST = 2,   /* stages in the ring */
  T11_XB = 4,   /* x loads in flight per consumer thread (elements e, e + 1024, ...) */
  T11_XW = 2048 /* XW: elements of an x window (8 super-blocks, a stage) */
};
/* The consumer warps of a block are v7's split of K for its rows (tc_dense_warps); XW: groups of
 * 8 elements a consumer thread a window. */
template <int CW> __host__ __device__ constexpr int t11_xi() { return T11_XW / (8 * 32 * CW); }
static_assert(T11_XW % (8 * 32 * 8) == 0, "a window: whole groups a thread");

/* Tiles a block stores together (G; a build define, -DMEMRA_T11_GRP=1 gives the one-tile
 * form). A block's consumer warps meet at two barriers a tile (the partials written, then read
 * by the storing warp): ~10% of a Q4_K v11 block's stall samples (ncu, H200, docs/PERF.md).
 * With G > 1 the partials of G tiles go to G buffers and warp k stores the group's tile k after
 * one barrier pair a group: the same sums in the same order, a G-th of the barriers (H100,
 * tg128: Llama Q4_K_M +1.8%, MoE +1.1%). Not with conv or rope (their stores are per tile). */
#ifndef MEMRA_T11_GRP
#define MEMRA_T11_GRP 4
#endif
static_assert(MEMRA_T11_GRP >= 1 && MEMRA_T11_GRP <= TC_WARPS, "a group's tiles: one a warp");

/* EXPERIMENT (a build define, 0: off): bytes of shared memory after each row of a ring stage.
 * A stage's rows lie 2304 (K 4096) or 1152 bytes apart, multiples of 128, so thread (g, t)'s
 * header and q loads of rows g = 0..7 fall in the same banks (the header's eight 16-byte loads
 * eight wavefronts instead of one); padded rows are copied one by one. H100 (twenty-seventh
 * session, 64): a lone tile -3%, the step even; for the consumer-bound H200. */
#ifndef MEMRA_T11_PAD
#define MEMRA_T11_PAD 0
#endif
/* EXPERIMENT, a timing probe only (1: WRONG results): v11 skips its Q4_K stages' arithmetic, so
 * an A/B prices the consumers in the step (docs/PERF.md: H100 Llama Q4_K_M +14%). Never shipped. */
#ifndef MEMRA_T11_SKIP
#define MEMRA_T11_SKIP 0
#endif
/* EXPERIMENT, a timing probe only (1: WRONG results): v11's producer copies nothing, a stage's
 * barrier completes on its arrival alone, so gemv_bench times the consumers by themselves: the
 * limit of a Q4_K tile on the H200, measured on an H100 (the same SMs). Never shipped. */
#ifndef MEMRA_T11_NOCOPY
#define MEMRA_T11_NOCOPY 0
#endif

/* EXPERIMENT (a build define; 16: the default): super-blocks a stage of Q4_K rows of K <= 4096.
 * At 8 a block's ring is two half tiles (36.9 KB) and up to four blocks share an SM: twice the
 * consumer warps where a launch has the tiles, for the H200 whose Q4_K tiles wait on their
 * consumers. H100 (thirty-fifth session): the same bits, q/out 6.2 -> 5.4 us, gate/up 12.8 ->
 * 14.0, Llama Q4_K_M -3.2% (the SMs' shared memory full again); owed an H200 A/B. */
#ifndef MEMRA_T11_SB4K
#define MEMRA_T11_SB4K 16
#endif
static_assert(MEMRA_T11_SB4K == 16 || MEMRA_T11_SB4K == 8, "a stage: a tile or half of one");

/* Super-blocks per stage: 16 when K <= 4096 (a whole tile is one stage, one copy); 8 above,
 * so a block's ring + x stay under half an H200 SM's shared memory and two blocks share an SM
 * (K 14336 at 16: one block an SM, 19.0 us; at 8: 16.0 us, H200). */
template <int T> static inline int t11_sb(int64_t K) {
  /* Q6_K (K <= 4096 only, mm_check): 16 x 16 x 210 bytes would be 53 KB a stage */
  return T == MEMRA_TYPE_Q4_K && K <= 4096 ? MEMRA_T11_SB4K : 8;
}

/* Shared memory of a v11 block: the ring, x's split (tc_prep_bytes), the warps' partials and
 * the ring's 2 T11_ST barriers. */
template <int T> static inline uint64_t t11_smem(int64_t K, int SB, bool xw = false) {
  return (uint64_t)T11_ST * TC_ROWS * (SB * tcq<T>::SBB + MEMRA_T11_PAD) +
         (xw ? 2 * tc_prep_bytes<typename tcq<T>::xs_t>(T11_XW)
             : tc_prep_bytes<typename tcq<T>::xs_t>(K)) +
         sizeof(float) * MEMRA_T11_GRP * tc_dense_warps(K) * TC_ROWS + 16u * T11_ST;
}

/* XW (Q4_K and Q6_K of K > 4096: the down projections; Q6_K as matmul.cu mm_q6tc_for says): x's
 * split by windows of T11_XW elements, a ring stage's 8 super-blocks, two windows double-buffered,
 * instead of the whole row's: a Q6_K block at K 14336 needs 72 KB instead of 118 (x's split alone
 * is 64.5 KB), so two share an SM; Q4_K's 55 KB would let four (m11_launch holds a launch to the
 * blocks an SM its grid needs: two). Each window holds the values the whole split holds for its
 * elements (the same threads, quads and groups: a window starts at a multiple of 1024), so the
 * same bits. Thread i loads its two groups of 8 (elements 8 i and 8 i + 1024 of the window) one
 * stage ahead, splits them after the stage. */
/* Window k's split (xb, then xs after its T11_XW * 4 bytes) in the XW area at xb. */
template <typename XS> __device__ __forceinline__ uint8_t *t11_xw_at(uint4 *xb, int64_t k) {
  return (uint8_t *)xb + (k & 1) * tc_prep_bytes<XS>(T11_XW);
}
template <bool VEC, int CW>
__device__ __forceinline__ void t11_xw_load(float (&v)[t11_xi<CW>()][8],
                                            const float *__restrict__ x, int64_t w) {
#pragma unroll
  for (int i = 0; i < t11_xi<CW>(); ++i)
    memra_ldg8<VEC>(x + T11_XW * w + 8 * threadIdx.x + 8 * 32 * CW * i, v[i]);
}
template <int CW, typename XS>
__device__ __forceinline__ void t11_xw_split(float (&v)[t11_xi<CW>()][8], uint4 *xb, XS *xs) {
#pragma unroll
  for (int i = 0; i < t11_xi<CW>(); ++i)
    tc_split_put(v[i], xb, xs, 8 * (int64_t)threadIdx.x + 8 * 32 * CW * i);
}

/* A ring stage's copies by the producer warp: rowb bytes from byte off of the tile's rows n0 ..
 * n0 + 15 (rows past N: the last row) into dst, rows MEMRA_T11_PAD apart, full expecting them. K
 * within one stage (whole) and rows back to back (GGUF tensors): the tile's rows are one contiguous
 * range, one copy; else a copy per row by lanes r < 16. */
__device__ __forceinline__ void t11_stage_copy(uint8_t *dst, const mm_job &jb, int64_t n0,
                                               uint64_t off, uint32_t rowb, bool whole,
                                               uint64_t *full, int lane) {
  const int64_t nrows = jb.N - n0 < TC_ROWS ? jb.N - n0 : TC_ROWS;
  const bool one = MEMRA_T11_PAD == 0 && whole && jb.w_nb1 == (uint64_t)rowb;
  if (lane == 0) memra_mbar_expect(full, (uint32_t)(one ? nrows : TC_ROWS) * rowb);
  __syncwarp();
  if (one) {
    if (lane == 0)
      memra_bulk_load(dst, jb.w + (uint64_t)n0 * jb.w_nb1, (uint32_t)nrows * rowb, full);
  } else if (lane < TC_ROWS) {
    const int64_t n = n0 + lane < jb.N ? n0 + lane : jb.N - 1;
    memra_bulk_load(dst + lane * (rowb + MEMRA_T11_PAD), jb.w + (uint64_t)n * jb.w_nb1 + off, rowb,
                    full);
  }
}

template <int T, bool VEC, int T11_SB, bool CV, bool NORM = false, bool XW = false,
          bool TAIL = false, bool RK = false, int T11_CW = TC_WARPS>
__global__ void __launch_bounds__((T11_CW + 1) * 32)
    matmul_v11_kernel(const mm_jobs J, const float *__restrict__ x, int64_t K, int64_t n_tiles,
                      const mm_norm nm, int dslot) {
  typedef tcq<T> Q;
  static_assert(!XW || (T11_SB * 256 == T11_XW && !NORM), "an x window is one stage");
  constexpr int T11_XI = t11_xi<T11_CW>();
  constexpr int T11_SBB = Q::SBB, T11_STAGE = TC_ROWS * (T11_SB * T11_SBB + MEMRA_T11_PAD);
  extern __shared__ __align__(128) uint8_t sm[];
  uint8_t *ring = sm;
  typedef typename Q::xs_t XS;
  /* the whole row's split, or XW's two windows (each T11_XW elements: xb then xs) */
  const int64_t xk = XW ? T11_XW : K;
  uint4 *xb = (uint4 *)(sm + (uint64_t)T11_ST * T11_STAGE);
  XS *xs = (XS *)((uint8_t *)xb + (uint64_t)xk * 4);
  constexpr int G = CV || RK ? 1 : MEMRA_T11_GRP; /* tiles stored together */
  float(&partg)[MEMRA_T11_GRP][T11_CW][1][TC_ROWS] = *(float(*)[MEMRA_T11_GRP][T11_CW][1][TC_ROWS])(
      sm + (uint64_t)T11_ST * T11_STAGE + (XW ? 2 : 1) * tc_prep_bytes<XS>(xk));
  float(&part)[T11_CW][1][TC_ROWS] = partg[0];
  uint64_t *full = (uint64_t *)(&partg[MEMRA_T11_GRP - 1][T11_CW - 1][0][TC_ROWS - 1] + 1),
           *empty = full + T11_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nsb = K / 256, ngrp = (nsb + T11_SB - 1) / T11_SB;
  const int64_t my_tiles = (n_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const int64_t units = my_tiles * ngrp;
  /* dslot >= 0: dynamic tiles (matmul_dyn.cuh); stage s's tile, -1 past the last */
  const bool dyn = dslot >= 0;
  __shared__ int64_t stile[T11_ST];
  memra_ring_init(full, empty, T11_ST, T11_CW);

  if (warp == T11_CW) { /* producer: one copy per stage, or lane r < 16 copies row r */
    int64_t tile = 0, next = dyn && lane == 0 ? mm_dyn_grab(dslot, n_tiles) : 0;
    const int pre = mm_ring_pre_k(T11_ST, K); /* units issued before the wait */
    for (int64_t u = 0; dyn || u < units; ++u) {
      const int s = (int)(u % T11_ST);
      const int64_t round = u / T11_ST, gi = u % ngrp;
      if (round > 0) memra_mbar_wait(&empty[s], (uint32_t)(round - 1) & 1);
      if (!dyn) {
        tile = blockIdx.x + (u / ngrp) * gridDim.x;
      } else if (!mm_dyn_produce(dslot, n_tiles, gi == 0, lane, &tile, &next, &stile[s],
                                 &full[s])) {
        if (u < pre) memra_pdl_enter(); /* past the last tile: the consumers stop here */
        break;
      }
      const mm_job jb = mm_pick_at(J, tile);
      const int64_t n0 = jb.b * TC_ROWS, sb0 = T11_SB * gi;
      const int64_t nv = nsb - sb0 < T11_SB ? nsb - sb0 : T11_SB;
      const uint32_t rowb = (uint32_t)(nv * T11_SBB); /* a row's bytes in this stage */
      if (MEMRA_T11_NOCOPY) { /* the timing probe: the stage's arrival alone */
        if (lane == 0) memra_mbar_arrive(&full[s]);
      } else {
        t11_stage_copy(ring + s * T11_STAGE, jb, n0, (uint64_t)sb0 * T11_SBB, rowb, nv == nsb,
                       &full[s], lane);
      }
      if (u == (dyn || units >= pre ? pre : units) - 1) memra_pdl_enter();
    }
    return;
  }

  /* consumers: x split once, into the prep layout (NORM, ABI 1.14, K 4096: rmsnorm's row made
   * here first, matmul_norm13.cuh, its weight loaded before the wait) */
  __shared__ float shn[32];
  __shared__ int n13_flag;
  float4 gw[N13_J]; /* NORM only */
  unsigned ticket = 0;
  /* the norm head (K 4096) is rmsnorm_v2's 128 threads: consumer warps 0..3 */
  if (NORM && (T11_CW == 4 || warp < 4)) n11_load_w(nm, gw);
  if (TAIL) n13_tail_hint(nm, warp, lane);
  /* RK (ABI 1.16 matmul_n_rope_kv): the rope angles and cache slots before the wait */
  __shared__ typename rkv_smem_if<RK, TC_ROWS>::type rks;
  if constexpr (RK)
    if (warp == 0) rkv_prologue<TC_ROWS>(J, my_tiles, rks, lane);
  memra_pdl_enter();
  float xv[T11_XI][8]; /* XW: the next window's x */
  if (NORM) {
    if (T11_CW == 4 || warp < 4) n11_norm_split<4>(nm, gw, xb, xs, shn, &ticket);
  } else if (XW) {
    t11_xw_load<VEC, T11_CW>(xv, x, 0);
    t11_xw_split<T11_CW>(xv, xb, xs);
  } else {
    tc_split_row<VEC, T11_XB, XS, T11_CW>(x, K, xb, xs);
  }
  if (T11_CW == 4) /* (more warps: another barrier than the norm head's bar 1 of 128 threads) */
    mm_consumers_sync<T11_CW>();
  else
    asm volatile("bar.sync 3, %0;" ::"n"(T11_CW * 32) : "memory");
  MEMRA_TRACE_MARK(1); /* the head done (trace builds only) */

  const int g = lane >> 2, t = lane & 3;
  const tc_role ro = tc_role_of(g, t);
  int64_t u = 0;
  int np = 0;          /* G > 1: the open group's tiles so far */
  int64_t my_tile = 0; /* G > 1: the group's tile this warp stores, and y's old values */
  float my_xo = 0.f;
  for (int64_t i = 0; dyn || i < my_tiles; ++i) {
    int64_t tile = blockIdx.x + i * gridDim.x;
    if (dyn && (tile = mm_dyn_consume(full, stile, u, T11_ST)) < 0) break; /* past the last */
    const mm_job jb = mm_pick_at(J, tile);
    const bool cj = CV && jb.y == J.y[0]; /* matmul_n_conv's job: its conv inputs now */
    const mm_conv_in ci =
        mm_conv_load(J.cv, cj && threadIdx.x < TC_ROWS && jb.b * TC_ROWS + threadIdx.x < jb.N, 0,
                     jb.b * TC_ROWS + threadIdx.x);
    const float xo = G == 1 ? mm_acc_load<TC_ROWS>(J.acc, jb.y, jb.b * TC_ROWS, jb.N) : 0.f;
    if (G > 1 && np == warp) {
      const int64_t n = jb.b * TC_ROWS + lane;
      my_tile = tile;
      my_xo = J.acc && lane < TC_ROWS && n < jb.N ? jb.y[n] : 0.f;
    }
    float acc[1][2] = {{0.f, 0.f}};
    for (int64_t gi = 0; gi < ngrp; ++gi, ++u) {
      const int s = (int)(u % T11_ST);
      if (XW)
        t11_xw_load<VEC, T11_CW>(xv, x, (u + 1) % ngrp); /* the next stage's window, in flight */
      memra_mbar_wait(&full[s], (uint32_t)(u / T11_ST) & 1);
      const int64_t sb0 = T11_SB * gi, nv = nsb - sb0 < T11_SB ? nsb - sb0 : T11_SB;
      const int rowb = (int)nv * T11_SBB + MEMRA_T11_PAD; /* a row's stride in the stage */
      if (XW) {
        const uint8_t *wb = t11_xw_at<XS>(xb, u);
        tc_stage_apply<T, TC_NS_MM, T11_CW>(acc, ring + s * T11_STAGE, rowb, nv, 0,
                                            (const uint4 *)wb, (const XS *)(wb + T11_XW * 4), ro,
                                            warp);
      } else if (!(MEMRA_T11_SKIP && T == MEMRA_TYPE_Q4_K)) {
        tc_stage_apply<T, TC_NS_MM, T11_CW>(acc, ring + s * T11_STAGE, rowb, nv, sb0, xb, xs, ro,
                                            warp);
      }
      __syncwarp();
      if (lane == 0) memra_mbar_arrive(&empty[s]);
      if (XW) { /* every warp is past window u - 1 (the sync of the last stage), so refill it */
        uint8_t *wn = t11_xw_at<XS>(xb, u + 1);
        t11_xw_split<T11_CW>(xv, (uint4 *)wn, (XS *)(wn + T11_XW * 4));
        mm_consumers_sync<T11_CW>();
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float v = tc_quad_sum(acc[0][r]);
      if (t == 0) partg[G == 1 ? 0 : np][warp][0][g + 8 * r] = v;
    }
    if constexpr (G > 1) {
      if (++np == G || (!dyn && i + 1 == my_tiles)) {
        mm_group_store(partg, J, np, my_tile, my_xo, warp, lane);
        np = 0;
      }
      continue;
    }
    mm_consumers_sync<T11_CW>();
    if constexpr (RK)
      rkv_store<T11_CW, TC_ROWS>(part, J, jb, i, rks);
    else
      mm_store_parts<T11_CW, 1, TC_ROWS>(part, jb.b * TC_ROWS, jb.N, 0, 1, jb.y, jb.y_ld, jb.bias,
                                         ci, cj, J.acc ? MM_ACC_XO : MM_ACC_NONE, xo);
    mm_consumers_sync<T11_CW>();
  }
  if constexpr (G > 1) /* dynamic tiles end when the tickets do: the last group */
    if (np > 0) mm_group_store(partg, J, np, my_tile, my_xo, warp, lane);
  if (NORM && (T11_CW == 4 || warp < 4)) n13_finish<4>(nm, ticket, &n13_flag, warp, lane);
  if (TAIL) n13_tail<T11_CW, TC_ROWS>(nm, &n13_flag, shn, warp, lane);
  MEMRA_TRACE_MARK(2); /* the block's end */
}

/* Whether v11 can run a matmul of K columns here (its block's shared memory). */
template <int T> static inline bool m11_fits(const memra_backend *be, int64_t K, bool xw = false) {
  return (int64_t)be->prop.sharedMemPerBlockOptin >=
         (int64_t)t11_smem<T>(K, t11_sb<T>(K), xw) + 1024;
}

/* Whether x may go by windows (XW) for this T and K: Q4_K and Q6_K rows of whole windows
 * (K > 4096). */
template <int T> static inline bool m11_xw_ok(int64_t K) {
  return (T == MEMRA_TYPE_Q6_K || T == MEMRA_TYPE_Q4_K) && K > 4096 && K % T11_XW == 0 &&
         t11_sb<T>(K) * 256 == T11_XW;
}

typedef void (*m11_kernel_t)(const mm_jobs, const float *, int64_t, int64_t, const mm_norm, int);
/* The v11 instance for a launch of CW consumer warps (m11_launch checked the combination): J's
 * conv (matmul_n_conv), the norm head (rmsnorm_matmul_n: Q4_K, K 4096, one stage a tile), the
 * norm tail, x by windows and the rope stores each in instances of their own, so the plain
 * kernels stay as they were; Q6_K has stages of 8 super-blocks (t11_sb). */
template <int T, bool VEC, int CW>
static m11_kernel_t m11_pick(int SB, bool cv, const mm_norm *nm, bool tail, bool xw, bool rk) {
  constexpr int SB16 = T == MEMRA_TYPE_Q4_K ? MEMRA_T11_SB4K : 8;
  m11_kernel_t kernel =
      SB == 16 ? (cv ? matmul_v11_kernel<T, VEC, SB16, true, false, false, false, false, CW>
                     : matmul_v11_kernel<T, VEC, SB16, false, false, false, false, false, CW>)
               : (cv ? matmul_v11_kernel<T, VEC, 8, true, false, false, false, false, CW>
                     : matmul_v11_kernel<T, VEC, 8, false, false, false, false, false, CW>);
  if constexpr (T == MEMRA_TYPE_Q4_K && VEC) {
    if (nm && !tail) kernel = matmul_v11_kernel<T, VEC, SB16, false, true, false, false, false, CW>;
    if constexpr (CW == 4)
      if (tail)
        kernel = SB == 16 ? matmul_v11_kernel<T, VEC, SB16, false, false, false, true, false, CW>
                          : matmul_v11_kernel<T, VEC, 8, false, false, false, true, false, CW>;
  }
  if constexpr (T == MEMRA_TYPE_Q6_K || T == MEMRA_TYPE_Q4_K) {
    if (xw) kernel = matmul_v11_kernel<T, VEC, 8, false, false, true, false, false, CW>;
  }
  if constexpr (T == MEMRA_TYPE_Q4_K && CW == 4) {
    if (rk)
      kernel = SB == 16 ? matmul_v11_kernel<T, VEC, SB16, false, false, false, false, true, CW>
                        : matmul_v11_kernel<T, VEC, 8, false, false, false, false, true, CW>;
  }
  return kernel;
}

/* The v11 grid over J's 16-row tiles for one row of x: blocks per SM from the shared memory
 * (at most 4), every block the same number of tiles. (One stage when every block has one
 * tile, 4 blocks an SM, was faster per kernel, q/o 5.7 -> 4.6 us, and slower in a decode step:
 * 352 -> 343 tok/s, the SMs' shared memory full so the next kernel could not start beside
 * them.) False when the grid is too large; *err: the attribute call's error (no launch then). */
template <int T, bool VEC>
static bool m11_launch(const memra_backend *be, mm_jobs J, const float *x, int64_t K,
                       cudaError_t *err, const mm_norm *nm = NULL, bool xw = false,
                       bool tail = false) {
  *err = cudaSuccess;
  const int cw = tc_dense_warps(K); /* consumer warps (XW rows are longer than 4096: TC_WARPS) */
  /* the tail and rope stores (opt-in) are written for four consumer warps */
  if (cw != 4 && (tail || J.rk.on)) return false;
  const bool cv = J.cv.w != NULL;
  if (nm && !(T == MEMRA_TYPE_Q4_K && VEC)) return false; /* Q4_K, 16-byte rows of x only */
  /* J.rk.on (ABI 1.16 matmul_n_rope_kv, Q4_K, no conv or norm): rope and the cache stores at the
   * tiles' stores */
  const bool rk = T == MEMRA_TYPE_Q4_K && J.rk.on && !cv && !nm;
  if (J.rk.on && !rk) return false; /* the caller passes rk for Q4_K alone */
  const int64_t tiles = mm_jobs_layout(&J, TC_ROWS);
  if (tiles == 0) return false;
  const int SB = t11_sb<T>(K);
  xw = xw && !nm; /* the caller checked m11_xw_ok and that there is no conv */
  int64_t smem = (int64_t)t11_smem<T>(K, SB, xw);
  const int64_t slots = mm_block_slots(be, smem + 1024, 4);
  /* MEMRA_T11_PER_MIN (EXPERIMENT, run-time; 1 unless set): at least this many tiles a block for
   * rows of K <= 4096, so a launch of one tile a slot (Llama's o) runs one block an SM (the padding
   * below) and leaves room for a block of the next GEMV to become resident and fill its ring */
  static const int64_t per_min = memra_cu_env_int("MEMRA_T11_PER_MIN", 1, 1, 8);
  int64_t per = (tiles + slots - 1) / slots;
  if (K <= 4096 && per < per_min) per = per_min;
  int64_t grid = (tiles + per - 1) / per;
  /* dynamic tiles (matmul_dyn.cuh; not with rope or the norm tail): modes 2 and 3 unpadded */
  int dyn;
  const int dslot = mm_dyn_plan(be, !J.rk.on && !(tail && nm), false, tiles, slots, &grid, &dyn);
  /* At most ceil(grid / SMs) blocks an SM (the shared memory asked for says so): where more fit,
   * the hardware places a launch's blocks where room is when it starts, behind the kernel
   * before it under PDL, so some SMs take three or four and the launch lasts as long as they
   * do (H200: Q4_K down by windows 18.3 us at up to four an SM, 14.0 at two; the hybrid's and
   * the MoE's K 2048 and N 2048 launches +1.3% / +2.7% a step). Deeper rings in the room the
   * padding leaves (XW: 4-5 stages Q4_K, 3 Q6_K) measured slower in the step. */
  if (be->n_sms > 0 && dyn < 2) {
    const int64_t need = (grid + be->n_sms - 1) / be->n_sms;
    if (need < slots / be->n_sms) {
      const int64_t lim = mm_sm_bytes(be) / (need + 1) - 1024 + 128;
      if (smem < lim) smem = lim;
    }
  }
  /* tail (ABI 1.15 matmul_rmsnorm, no conv): the norm after the row, by the last block */
  tail = tail && nm && !cv;
  const int ki = nm ? 2 : cv;
  const m11_kernel_t kernel = cw == TC_WARPS
                                  ? m11_pick<T, VEC, TC_WARPS>(SB, cv, nm, tail, xw, rk)
                                  : m11_pick<T, VEC, TC_WARPS_4K>(SB, cv, nm, tail, xw, rk);
  /* the shared-memory limit is raised once per kernel, to all a block may have (a host call
   * per eager matmul otherwise) */
  static bool raised[2][2][6];
  const int kr = rk ? 5 : tail ? 4 : xw ? 3 : ki;
  if (!raised[cw != TC_WARPS][SB == 16][kr]) {
    cudaFuncAttributes fa = {};
    *err = cudaFuncGetAttributes(&fa, kernel); /* the opt-in bounds static plus dynamic bytes */
    if (*err != cudaSuccess) return true;
    const size_t st = fa.sharedSizeBytes > 1024 ? fa.sharedSizeBytes : 1024;
    *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)(be->prop.sharedMemPerBlockOptin - st));
    if (*err != cudaSuccess) return true;
    raised[cw != TC_WARPS][SB == 16][kr] = true;
  }
  (void)memra_cu_launch(be, kernel, dim3((unsigned)grid), dim3((cw + 1) * 32), (size_t)smem, J, x,
                        K, tiles, nm ? *nm : mm_norm{}, dslot);
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_TC11_CUH */
