/* moe_tc.cuh — matmul_id v3: Q4_K and Q6_K expert rows on the tensor cores (included by moe.cu
 * only).
 *
 * Why (docs/PERF.md): matmul_id v2 runs v5's float arithmetic (~6 instructions a weight) in a
 * grid of about one short wave: 9-13 us a launch at 13-20% of the DRAM bandwidth on the
 * hybrid's and the MoE's experts. The dense Q4_K GEMV left the same arithmetic for v7's
 * tensor-core form (matmul_tc.cuh) fed by v11's ring of bulk copies (matmul_tc11.cuh); v3 is
 * that scheme over the chosen experts (H200: MoE tg128 +4%, pp512 +15%; the hybrid's decode
 * unchanged, its expert launches a latency chain of ids -> copy -> 2 super-blocks a warp):
 *  - persistent blocks, each a contiguous range of units u = (row rj = u / tpr, tile u % tpr),
 *    so consecutive units mostly share their x row (x is split into shared memory again only
 *    when it changes: once a block for a decode step's gate/up, whose x is the token's);
 *  - a producer warp reads the unit's expert id and bulk-copies its 16-row tile (whole rows:
 *    K <= 4096) into a ring of up to MIDTC_ST stages, as far ahead as the ring allows;
 *  - four consumer warps run v7's per-row arithmetic from shared memory (v11's loop).
 * A tile is 16 weight rows of the expert: rows 16 i .. 16 i + 15 (matmul_id), or (GLU,
 * matmul_id_glu) gate rows 8 i .. 8 i + 7 in slots 0-7 and their up rows F + 8 i .. in slots
 * 8-15, so the thread holding an output's gate sum (row g) holds its up sum (row g + 8) too.
 * Bits: a row's sum is v7's for that row (warp w takes super-blocks w, w + 4, ..., the quad
 * butterfly, then the warps in order), whatever its tile, the batch or the grid: matmul_id of
 * one row == the same row in a batch, matmul_id_glu == matmul_id then glu (act(gate) * up in
 * glu's expression), and a row's value is the dense tensor-core GEMV's for the expert's matrix. */
#ifndef MEMRA_CUDA_MOE_TC_CUH
#define MEMRA_CUDA_MOE_TC_CUH

#include "plugins/cuda/matmul_tc.cuh"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/moe_id.cuh"
#include "plugins/cuda/moe_route.cuh"

/* Units a block stores together (G; a build define, -DMEMRA_MIDTC_GRP=1 the one-unit form): as
 * matmul_tc11.cuh's MEMRA_T11_GRP, the G units' partials in G buffers and one barrier pair a
 * group (midtc_group_store) instead of two a unit; a unit here is 2 super-blocks a warp at the
 * MoE's and the hybrid's K 2048 (1 at K 512), so its fixed work weighs more than v11's. The same
 * sums in the same order (H100 tg128: MoE +0.4%, hybrid +0.5%, means of three rounds). */
#ifndef MEMRA_MIDTC_GRP
#define MEMRA_MIDTC_GRP 4
#endif

enum {
  MIDTC_CW = TC_WARPS, /* consumer warps: v7's split of K */
  MIDTC_ST = 4,        /* stages in the ring, at most */
  MIDTC_XB = 4         /* x loads in flight per consumer thread while splitting */
};

/* A launch's layout: units (rows x tiles a row), the contiguous range a block takes, the ring. */
struct midtc_plan {
  int64_t tpr, units, per;
  uint32_t stage; /* bytes of a stage: 16 whole weight rows */
  int st;         /* stages */
};

/* The expert of row rj, read from ids once a row (a block's consecutive units mostly share it:
 * one dependent load a row, not a unit, on the producer's path to its next copy). */
struct midtc_expert {
  int64_t row = -1;
  int e = -1;
  __device__ __forceinline__ int at(const mmid_args &a, int64_t rj) {
    if (rj != row) {
      e = mmid_expert(a, rj);
      row = rj;
    }
    return e;
  }
  /* the same through L2 only (ld.global.cg): read before the wait, so no line of this SM's L1
   * from an earlier kernel may answer */
  __device__ __forceinline__ int at_cg(const mmid_args &a, int64_t rj) {
    if (rj != row) {
      const int32_t v = __ldcg(a.ids + (rj / a.k) * a.ids_ld + rj % a.k);
      e = v < 0 || v >= a.n_expert ? -1 : v;
      row = rj;
    }
    return e;
  }
};

/* ROUTE (ABI 1.21 moe_route_glu): the routed ids come from the logits. The producer warp routes
 * the block's tokens (at most MIDTC_RT: midtc_launch keeps a block's units within them) with the
 * route launch's function (route_warp: its bits) into shared memory, ids' columns past kr (the
 * stacked shared expert's, preset) read beside them; write: it also stores the ids and weights of
 * each token whose first unit is the block's, and the consumers take the ids from shared memory
 * after a named barrier. (Every warp routing for itself, 2026-12-05, cost the hybrid 13%: fifteen
 * warps an SM on the route's dependent chain; this form still loses 5.5%, even without the down
 * launch's route: docs/PERF.md.) Without write (the down projection after, EARLY) the producer
 * routes before its wait and the consumers read the ids the launch before stored. */
struct midtc_route {
  const float *logits;
  int64_t l_ld;
  int32_t *ids; /* a.ids, written (write) */
  float *w;
  int64_t w_ld;
  int ne, kr, normalize, write;
};
enum { MIDTC_RT = 2 };

__device__ __forceinline__ void midtc_route_arrive() {
  asm volatile("bar.arrive 2, %0;" ::"n"((MIDTC_CW + 1) * 32) : "memory");
}
__device__ __forceinline__ void midtc_route_wait() {
  asm volatile("bar.sync 2, %0;" ::"n"((MIDTC_CW + 1) * 32) : "memory");
}

/* The producer warp's routing of tokens t0 .. t0 + nt - 1 (nt <= MIDTC_RT) into rids. */
template <int NPL, bool CG>
__device__ __forceinline__ void midtc_route_tokens(const mmid_args &a, const midtc_route &q,
                                                   int64_t t0, int64_t nt, int64_t u0, int64_t ku,
                                                   int lane, int (*rids)[32]) {
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t r = t0 + t;
    int id;
    float w;
    route_warp<NPL, CG>(q.logits + r * q.l_ld, q.ne, q.kr, q.normalize, lane, &id, &w);
    if (lane < a.k) rids[t][lane] = lane < q.kr ? id : a.ids[r * a.ids_ld + lane];
    if (q.write && r * ku >= u0 && lane < q.kr) { /* the token's first unit is this block's */
      q.ids[r * a.ids_ld + lane] = id;
      q.w[r * q.w_ld + lane] = w;
    }
  }
  __syncwarp();
}

__device__ __forceinline__ int midtc_valid(const mmid_args &a, int e) {
  return e < 0 || e >= a.n_expert ? -1 : e;
}

__device__ __forceinline__ void midtc_consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(MIDTC_CW * 32) : "memory");
}

/* Unit (row rj, tile) of expert e stored from its warps' partials part[w][r] (in warp order:
 * mm_store_parts' sum) by lanes r < 16 (GLU: r < 8, act(gate) * up) of the calling threads. */
template <bool GLU>
__device__ __forceinline__ void midtc_store_unit(const mmid_args &a,
                                                 const float (&part)[MIDTC_CW][TC_ROWS], int64_t rj,
                                                 int64_t tile, int e, int r) {
  float *yr = a.y + rj * a.y_ld;
  if (!GLU && r < TC_ROWS) {
    float v = part[0][r];
#pragma unroll
    for (int w = 1; w < MIDTC_CW; ++w)
      v = __fadd_rn(v, part[w][r]);
    yr[16 * tile + r] = e < 0 ? MOE_NAN : v;
  } else if (GLU && r < TC_ROWS / 2) {
    float gs = part[0][r], us = part[0][r + 8];
#pragma unroll
    for (int w = 1; w < MIDTC_CW; ++w) {
      gs = __fadd_rn(gs, part[w][r]);
      us = __fadd_rn(us, part[w][r + 8]);
    }
    yr[8 * tile + r] = e < 0 ? MOE_NAN : memra_act_silu(gs) * us;
  }
}

/* A group of np units stored after one barrier pair (G > 1): warp k stores the group's unit k
 * (my_rj, my_tile, my_e: recorded by it at the unit), lane r its row r. Every consumer calls it. */
template <bool GLU>
__device__ __forceinline__ void
midtc_group_store(const mmid_args &a, const float (&partg)[MEMRA_MIDTC_GRP][MIDTC_CW][TC_ROWS],
                  int np, int64_t my_rj, int64_t my_tile, int my_e, int warp, int lane) {
  midtc_consumers_sync();
  if (warp < np) midtc_store_unit<GLU>(a, partg[warp], my_rj, my_tile, my_e, lane);
  midtc_consumers_sync();
}

/* The producer's copy of unit tile of expert e into a ring stage (full: its barrier): 16 whole
 * rows, or (GLU) 8 gate rows and their 8 up rows; e < 0 (an id out of range, the consumers write
 * NaN) copies nothing and the phase completes on the arrival alone. */
template <bool GLU>
__device__ __forceinline__ void midtc_copy_tile(const mmid_args &a, int e, int64_t tile,
                                                uint32_t rowb, uint8_t *dst, uint64_t *full) {
  if (e < 0) {
    memra_mbar_expect(full, 0);
    return;
  }
  const uint8_t *we = a.w + (uint64_t)e * (uint64_t)a.N * rowb;
  memra_mbar_expect(full, 16 * rowb);
  if (!GLU) {
    memra_bulk_load(dst, we + (uint64_t)(16 * tile) * rowb, 16 * rowb, full);
  } else {
    memra_bulk_load(dst, we + (uint64_t)(8 * tile) * rowb, 8 * rowb, full);
    memra_bulk_load(dst + 8 * rowb, we + (uint64_t)(a.F + 8 * tile) * rowb, 8 * rowb, full);
  }
}

/* EARLY: the producer reads ids and copies before the PDL wait (midtc_ids_early). NPL > 0: ROUTE
 * (midtc_route), the warp form's logits a lane; with EARLY the logits are read before the wait
 * (midtc_route_early: the launch before wrote the ids from the same logits). */
template <int T, bool VEC, bool GLU, bool EARLY, int NPL = 0>
__global__ void __launch_bounds__((MIDTC_CW + 1) * 32)
    matmul_id_tc_kernel(const mmid_args a, const midtc_plan p, const midtc_route q) {
  constexpr bool ROUTE = NPL > 0;
  constexpr int RNPL = ROUTE ? NPL : 1;
  static_assert(!ROUTE || GLU != EARLY, "ROUTE: gate / up writes the ids, down routes early");
  typedef tcq<T> Q;
  typedef typename Q::xs_t XS;
  extern __shared__ __align__(128) uint8_t sm[];
  const int64_t K = a.K, nsb = K / 256;
  const uint32_t rowb = (uint32_t)a.w_nb1; /* whole rows: nsb Q::SBB bytes (midtc_fits) */
  uint8_t *ring = sm;
  uint4 *xb = (uint4 *)(sm + (uint64_t)p.st * p.stage);
  XS *xs = (XS *)((uint8_t *)xb + (uint64_t)K * 4);
  constexpr int G = MEMRA_MIDTC_GRP; /* units stored together */
  float(&partg)[G][MIDTC_CW][TC_ROWS] =
      *(float(*)[G][MIDTC_CW][TC_ROWS])((uint8_t *)xb + tc_prep_bytes<XS>(K));
  uint64_t *full = (uint64_t *)(&partg[G - 1][MIDTC_CW - 1][TC_ROWS - 1] + 1),
           *empty = full + MIDTC_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t u0 = (int64_t)blockIdx.x * p.per;
  const int64_t u1 = u0 + p.per < p.units ? u0 + p.per : p.units;
  memra_ring_init(full, empty, p.st, MIDTC_CW);
  /* ids and x come from the kernels before: nothing is read before the wait, unless the launch
   * says the ids are older than the kernel before (early: only the producer, which writes no
   * global memory, goes on without it and streams the weights while that kernel ends) */
  if (!EARLY) memra_pdl_enter();

  __shared__ int rids[ROUTE ? MIDTC_RT : 1][32];
  const int64_t ku = (int64_t)a.k * p.tpr, t0 = u0 / ku; /* ROUTE: the block's first token */
  if (warp == MIDTC_CW) { /* producer: one or (GLU) two copies a unit, by lane 0 */
    if (!ROUTE && lane != 0) return;
    if constexpr (ROUTE) {
      midtc_route_tokens<RNPL, EARLY>(a, q, t0, u0 < u1 ? (u1 - 1) / ku - t0 + 1 : 0, u0, ku, lane,
                                      rids);
      if (!EARLY) midtc_route_arrive();
      if (lane != 0) return;
    }
    midtc_expert ex;
    for (int64_t u = u0, i = 0; u < u1; ++u, ++i) {
      const int s = (int)(i % p.st);
      const int64_t rj = u / p.tpr, tile = u % p.tpr;
      const int e = ROUTE   ? midtc_valid(a, rids[rj / a.k - t0][rj % a.k])
                    : EARLY ? ex.at_cg(a, rj)
                            : ex.at(a, rj);
      if (i >= p.st) memra_mbar_wait(&empty[s], (uint32_t)(i / p.st - 1) & 1);
      midtc_copy_tile<GLU>(a, e, tile, rowb, ring + (uint64_t)s * p.stage, &full[s]);
    }
    return;
  }

  if (EARLY) memra_pdl_enter();
  const int g = lane >> 2, t = lane & 3;
  const tc_role ro = tc_role_of(g, t);
  int64_t xrow = -1;
  midtc_expert ex;
  int np = 0; /* G > 1: the open group's units, and the one this warp stores */
  int64_t my_rj = 0, my_tile = 0;
  int my_e = 0;
  for (int64_t u = u0, i = 0; u < u1; ++u, ++i) {
    const int s = (int)(i % p.st);
    const int64_t rj = u / p.tpr, tile = u % p.tpr;
    const int64_t xr = a.shared_x ? rj / a.k : rj;
    if (G > 1 && xr != xrow && np > 0) { /* the open group's readers of xb / xs sync here */
      midtc_group_store<GLU>(a, partg, np, my_rj, my_tile, my_e, warp, lane);
      np = 0;
    }
    if (xr != xrow) { /* block-uniform; the last unit's readers of xb / xs have synced */
      tc_split_row<VEC, MIDTC_XB>(a.x + xr * a.x_ld, K, xb, xs);
      midtc_consumers_sync();
      xrow = xr;
    }
    if (ROUTE && !EARLY && i == 0) midtc_route_wait(); /* the producer's rids */
    const int e = ROUTE && !EARLY ? midtc_valid(a, rids[rj / a.k - t0][rj % a.k]) : ex.at(a, rj);
    memra_mbar_wait(&full[s], (uint32_t)(i / p.st) & 1);
    float acc[1][2] = {{0.f, 0.f}};
    if (e >= 0)
      tc_stage_apply<T, TC_NS_ID>(acc, ring + (uint64_t)s * p.stage, (int)rowb, nsb, 0, xb, xs, ro,
                                  warp);
    __syncwarp();
    if (lane == 0) memra_mbar_arrive(&empty[s]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float v = tc_quad_sum(acc[0][r]);
      if (t == 0) partg[G == 1 ? 0 : np][warp][g + 8 * r] = v;
    }
    if constexpr (G > 1) {
      if (np == warp) {
        my_rj = rj;
        my_tile = tile;
        my_e = e;
      }
      if (++np == G || u + 1 == u1) {
        midtc_group_store<GLU>(a, partg, np, my_rj, my_tile, my_e, warp, lane);
        np = 0;
      }
      continue;
    }
    midtc_consumers_sync();
    /* the warps' partials in order (mm_store_parts' sum) */
    midtc_store_unit<GLU>(a, partg[0], rj, tile, e, threadIdx.x);
    midtc_consumers_sync();
  }
}

/* Shared memory of a v3 block with st stages of 16 whole rows of K: the ring, x's split, the
 * warps' partials, the barriers. */
template <int T> static inline uint64_t midtc_smem(int64_t K, uint64_t rowb, int st) {
  return (uint64_t)st * 16u * rowb + tc_prep_bytes<typename tcq<T>::xs_t>(K) +
         sizeof(float) * MEMRA_MIDTC_GRP * MIDTC_CW * TC_ROWS + 16u * MIDTC_ST;
}

/* Whether v3 takes this expert stack: a type of tcq, whole rows of K <= 4096 (a tile is one or,
 * GLU, two contiguous copies), 16-byte aligned, tiles that cut the experts' rows evenly. A
 * property of the matrix alone (never of the batch); GLU and plain agree on a gate/up stack
 * (F % 8 == 0 exactly when N = 2 F % 16 == 0). */
static inline bool midtc_fits(int32_t type, const uint8_t *w, uint64_t nb1, int64_t N, int64_t K) {
  const uint64_t sbb = type == MEMRA_TYPE_Q4_K ? 144 : type == MEMRA_TYPE_Q6_K ? 210 : 0;
  if (sbb == 0 || K % 256 != 0 || K > 4096 || nb1 != (uint64_t)(K / 256) * sbb) return false;
  if ((uintptr_t)w % 16 != 0) return false;
  return N % 16 == 0;
}

/* Whether this launch's expert ids may be read before its PDL wait: the launch before it on the
 * stream is a v3 launch (its blocks pass their own wait before they trigger, so when ours start,
 * every kernel before that one has completed) that did not write the ids. Then the ids' writer
 * is done and the producer can copy the chosen experts' tiles while that launch ends: a decode
 * step's down projection after its gate / up. Any other launch between, or none with the PDL
 * attribute, and ours waits first. H200 tg128 @ d512 (docs/PERF.md, sixteenth session): hybrid
 * +1.4%, MoE +0.4%, the same tokens; MEMRA_MMID_EARLY=0 waits first always. */
static bool midtc_early_on(const memra_backend *be) {
  static const bool on = !memra_cu_env_is("MEMRA_MMID_EARLY", "0");
  return on && be->pdl && be->n_launch > 0 && be->n_launch == be->mmid_after;
}
static bool midtc_ids_early(const memra_backend *be, const mmid_args &a) {
  if (!midtc_early_on(be) || a.k < 1 || a.rows < 1) return false;
  if (be->mroute_after == be->n_launch) return false; /* it wrote ids: midtc_route_early's case */
  const uintptr_t i0 = (uintptr_t)a.ids,
                  i1 = i0 + (uintptr_t)((a.rows / a.k - 1) * a.ids_ld + a.k) * sizeof(int32_t);
  return i1 <= be->mmid_y0 || i0 >= be->mmid_y1;
}

/* The same after a launch that routed for itself (moe_route_glu's experts' gate / up) over these
 * ids: the logits it routed from were written before it (its blocks waited on that), so this
 * launch routes from them before its wait (ld.global.cg) into the same ids, and writes none. */
static bool midtc_route_early(const memra_backend *be, const mmid_args &a, midtc_route *q) {
  static const bool on = !memra_cu_env_is("MEMRA_ROUTE_DOWN", "0"); /* A/B: wait, read the ids */
  const auto &m = be->mroute;
  if (!on || !midtc_early_on(be) || be->mroute_after != be->n_launch || a.ids != m.ids ||
      a.ids_ld != m.ids_ld || a.k != m.k || a.rows != m.rows * m.k)
    return false;
  *q = midtc_route{m.logits, m.l_ld, NULL, NULL, 0, m.ne, m.kr, m.normalize, 0};
  return true;
}

/* The dynamic shared memory limit of a kernel raised once to all a block may have. */
template <typename K> static cudaError_t midtc_raise(K kernel, uint64_t optin) {
  static const void *done[64];
  static int n;
  for (int i = 0; i < n; ++i)
    if (done[i] == (const void *)kernel) return cudaSuccess;
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)optin - 1024);
  if (e == cudaSuccess && n < 64) done[n++] = (const void *)kernel;
  return e;
}

typedef void (*midtc_kernel_t)(const mmid_args, const midtc_plan, const midtc_route);

/* The ROUTE instantiation for ne experts (route_npl), EARLY for a launch after the one that
 * routed; x rows 16-byte aligned only (a decode step's). */
template <int T, bool GLU, bool EARLY> static midtc_kernel_t midtc_route_kernel(int ne) {
  switch (route_npl(ne)) {
  case 4: return matmul_id_tc_kernel<T, true, GLU, EARLY, 4>;
  case 8: return matmul_id_tc_kernel<T, true, GLU, EARLY, 8>;
  case 16: return matmul_id_tc_kernel<T, true, GLU, EARLY, 16>;
  case 32: return matmul_id_tc_kernel<T, true, GLU, EARLY, 32>;
  default: return NULL;
  }
}

/* Launches v3 over a (rows a.rows, outputs a.F). False (nothing launched) when the ring cannot
 * hold two stages, or rq is given and no ROUTE form takes it; *err: the attribute or occupancy
 * call's error (no launch then). rq (GLU: moe_route_glu): the launch routes for itself and
 * writes the ids and weights; without it a plain launch right after such a launch over the same
 * ids routes for itself too (midtc_route_early). */
template <int T, bool VEC, bool GLU>
static bool midtc_launch(const memra_backend *be, const mmid_args &a, cudaError_t *err,
                         const midtc_route *rq = NULL) {
  *err = cudaSuccess;
  const uint64_t rowb = a.w_nb1, optin = (uint64_t)be->prop.sharedMemPerBlockOptin;
  const uint64_t fixed = midtc_smem<T>(a.K, rowb, 0);
  if (optin < fixed + 1024 + 2 * 16 * rowb) return false;
  int st_max = (int)((optin - 1024 - fixed) / (16 * rowb));
  st_max = st_max > MIDTC_ST ? MIDTC_ST : st_max;
  midtc_route q = {};
  midtc_kernel_t kernel = matmul_id_tc_kernel<T, VEC, GLU, false>;
  if (rq) {
    midtc_kernel_t k = NULL;
    if constexpr (VEC && GLU) k = midtc_route_kernel<T, true, false>(rq->ne);
    if (!k) return false;
    kernel = k;
    q = *rq;
  } else if (midtc_route_early(be, a, &q)) {
    midtc_kernel_t k = NULL; /* none: wait first, the ids are in memory then */
    if constexpr (VEC && !GLU) k = midtc_route_kernel<T, false, true>(q.ne);
    if (k) kernel = k;
  } else if (midtc_ids_early(be, a)) {
    kernel = matmul_id_tc_kernel<T, VEC, GLU, true>;
  }
  if ((*err = midtc_raise(kernel, optin)) != cudaSuccess) return true;
  midtc_plan p;
  p.tpr = GLU ? a.F / 8 : a.N / 16;
  p.units = a.rows * p.tpr;
  p.stage = (uint32_t)(16 * rowb);
  /* As many blocks as are resident at once (by registers and shared memory, at most 4 an SM:
   * the grid is one wave), each a contiguous range of units; the fewest stages that hold a
   * block's whole range (a decode step: every copy in flight at once, and more blocks an SM),
   * else all that fit (prompts stream). */
  int64_t per = 0, grid = 0;
  for (int st = 2; st <= st_max; ++st) {
    int bps = 0;
    *err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, (MIDTC_CW + 1) * 32,
                                                         (size_t)midtc_smem<T>(a.K, rowb, st));
    if (*err != cudaSuccess) return true;
    bps = bps > 4 ? 4 : bps < 1 ? 1 : bps;
    const int64_t slots = (int64_t)(be->n_sms > 0 ? be->n_sms : 1) * bps;
    per = (p.units + slots - 1) / slots;
    grid = (p.units + per - 1) / per;
    p.st = st;
    if (per <= st) break;
  }
  p.per = per;
  if (grid > 0x7fffffff) return false;
  if (q.logits && p.per > (int64_t)a.k * p.tpr) { /* a block would span more than MIDTC_RT tokens */
    if (rq) return false;
    kernel = matmul_id_tc_kernel<T, VEC, GLU, false>; /* wait, then read the ids */
    q = midtc_route{};
  }
  (void)memra_cu_launch(be, kernel, dim3((unsigned)grid), dim3((MIDTC_CW + 1) * 32),
                        (size_t)midtc_smem<T>(a.K, rowb, p.st), a, p, q);
  memra_backend *mb = (memra_backend *)be; /* what the next launch may rely on */
  mb->mmid_after = mb->n_launch;
  mb->mmid_y0 = (uintptr_t)a.y;
  mb->mmid_y1 = (uintptr_t)(a.y + (a.rows - 1) * a.y_ld + a.F);
  if (rq) {
    mb->mroute_after = mb->n_launch;
    mb->mroute.logits = rq->logits;
    mb->mroute.ids = a.ids;
    mb->mroute.l_ld = rq->l_ld;
    mb->mroute.ids_ld = a.ids_ld;
    mb->mroute.rows = a.rows / a.k;
    mb->mroute.ne = rq->ne;
    mb->mroute.kr = rq->kr;
    mb->mroute.k = a.k;
    mb->mroute.normalize = rq->normalize;
  }
  return true;
}

#endif /* MEMRA_CUDA_MOE_TC_CUH */
