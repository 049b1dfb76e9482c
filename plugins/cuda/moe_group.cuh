/* moe_group.cuh — matmul_id v4: the rows of a prompt gathered per expert, each expert tile
 * applied to up to MIDG_M of its rows at once (included by moe.cu only, after moe_tc.cuh).
 *
 * Why (docs/PERF.md): v3 (moe_tc.cuh) walks units (row, tile): every row that chose an expert
 * copies and decodes that expert's tiles again. A decode step has a row or a few per expert and
 * loses nothing; a prompt of 512 tokens choosing 8 of 128 experts has 32 rows an expert, and
 * v3 copies each tile 32 times (7 GB of tile copies in a Qwen3-30B-A3B gate/up launch for 0.2
 * GB of weights). v4 sorts the rows by expert first, then walks units (group, tile), a group
 * up to MIDG_M rows of one expert:
 *  - matmul_id_group_kernel (one block): counts the rows of each expert, lays the groups out
 *    by an exclusive scan (expert order; rows whose id is out of range go to a last bucket of
 *    groups with expert -1) and scatters the row indices into perm;
 *  - matmul_id_tcg_kernel: v3's ring (a producer warp bulk-copies the group's expert tile) and
 *    v7's batch arithmetic (tcq<T>::body<M>: one tile decode applied to M rows of x, the x of
 *    the group's rows split once a group into shared memory).
 * Bits: a row's sum is v3's (warp w takes super-blocks w, w + 4, ...; body<M> runs each row's
 * MMAs and epilogue as body<1> does; the quad butterfly, then the warps in order), whatever
 * its group, the order the scatter gave it, or the batch: v4 == v3 bitwise (opcheck_families'
 * "matmul_id alone == batched" cases, a row alone on v3 against its batch on v4). */
#ifndef MEMRA_CUDA_MOE_GROUP_CUH
#define MEMRA_CUDA_MOE_GROUP_CUH

#include "plugins/cuda/moe_tc.cuh"

/* Rows of a group: 4 or 8 (build_variant.sh -DMEMRA_MIDG_M=4 for an A/B: Q4_K at 8 takes ~253
 * registers, one block an SM). */
#ifndef MEMRA_MIDG_M
#define MEMRA_MIDG_M 8
#endif
enum {
  MIDG_M = MEMRA_MIDG_M,
  MIDG_SORT_THREADS = 1024,
  MIDG_MAX_EXPERTS = 8191 /* the sort's counts in 32 KB of shared memory */
};

/* The sort's output in the workspace: the group count, the groups (start in perm, rows,
 * expert or -1), the rows of y in expert order. */
static_assert(MIDG_M == 4 || MIDG_M == 8, "groups of 4 or 8 rows");

struct midg_table {
  int32_t *n_grp;
  int4 *grp;
  int32_t *perm;
};

/* Workspace bytes and layout for a launch of `rows` rows over n_expert experts: at most one
 * partial group an expert (and the out-of-range bucket) beyond rows / MIDG_M full ones. */
static inline int64_t midg_max_groups(int64_t rows, int64_t n_expert) {
  return rows / MIDG_M + n_expert + 2;
}
static inline uint64_t midg_ws_bytes(int64_t rows, int64_t n_expert) {
  return 16u + 16u * (uint64_t)midg_max_groups(rows, n_expert) + 4u * (uint64_t)rows;
}
static inline midg_table midg_table_at(void *ws, int64_t rows, int64_t n_expert) {
  midg_table t;
  t.n_grp = (int32_t *)ws;
  t.grp = (int4 *)((uint8_t *)ws + 16);
  t.perm = (int32_t *)((uint8_t *)ws + 16 + 16 * midg_max_groups(rows, n_expert));
  return t;
}

/* Exclusive prefix sums of (a, b) over the block's threads (a multiple of 32, <= 1024), and the
 * totals in *tot (shared). */
__device__ __forceinline__ int2 midg_scan2(int a, int b, int2 *tot) {
  __shared__ int2 wsum[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int ia = a, ib = b;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int na = __shfl_up_sync(0xffffffffu, ia, o), nb = __shfl_up_sync(0xffffffffu, ib, o);
    if (lane >= o) ia += na, ib += nb;
  }
  if (lane == 31) wsum[warp] = make_int2(ia, ib);
  __syncthreads();
  if (warp == 0) {
    const int2 v = lane < (int)(blockDim.x >> 5) ? wsum[lane] : make_int2(0, 0);
    int sa = v.x, sb = v.y;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int na = __shfl_up_sync(0xffffffffu, sa, o), nb = __shfl_up_sync(0xffffffffu, sb, o);
      if (lane >= o) sa += na, sb += nb;
    }
    wsum[lane] = make_int2(sa - v.x, sb - v.y);
    if (lane == 31) *tot = make_int2(sa, sb);
  }
  __syncthreads();
  const int2 wo = wsum[warp];
  return make_int2(wo.x + ia - a, wo.y + ib - b);
}

/* One block: the rows of a (r k + j, the op's row order) grouped by expert into tb. */
__global__ void __launch_bounds__(MIDG_SORT_THREADS)
    matmul_id_group_kernel(const mmid_args a, const midg_table tb) {
  __shared__ int32_t cnt[MIDG_MAX_EXPERTS + 1]; /* counts, then each expert's next slot */
  __shared__ int2 tot;
  const int E = a.n_expert + 1; /* bucket n_expert: ids out of range */
  memra_pdl_enter();            /* ids come from the route before */
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    cnt[e] = 0;
  __syncthreads();
  for (int64_t rj = threadIdx.x; rj < a.rows; rj += blockDim.x) {
    const int e = mmid_expert(a, rj);
    atomicAdd(&cnt[e < 0 ? a.n_expert : e], 1);
  }
  __syncthreads();
  /* thread i owns experts [e0, e1): their rows and groups, then the block's scan */
  const int per = (E + (int)blockDim.x - 1) / (int)blockDim.x;
  const int e0 = (int)threadIdx.x * per, e1 = e0 + per < E ? e0 + per : E;
  int rs = 0, gs = 0;
  for (int e = e0; e < e1; ++e)
    rs += cnt[e], gs += (cnt[e] + MIDG_M - 1) / MIDG_M;
  const int2 ex = midg_scan2(rs, gs, &tot);
  int r = ex.x, q = ex.y;
  for (int e = e0; e < e1; ++e) {
    const int c = cnt[e];
    cnt[e] = r;
    for (int i = 0; i < c; i += MIDG_M)
      tb.grp[q++] = make_int4(r + i, c - i < MIDG_M ? c - i : MIDG_M, e < a.n_expert ? e : -1, 0);
    r += c;
  }
  if (threadIdx.x == 0) *tb.n_grp = tot.y;
  __syncthreads();
  /* the order within an expert is the atomics': a row's bits do not depend on its group */
  for (int64_t rj = threadIdx.x; rj < a.rows; rj += blockDim.x) {
    const int e = mmid_expert(a, rj);
    tb.perm[atomicAdd(&cnt[e < 0 ? a.n_expert : e], 1)] = (int32_t)rj;
  }
}

/* A launch's layout: tiles an expert, the ring's stages. Units (group, tile) are counted on
 * the device (the groups are the sort's), and each block takes a contiguous range of them. */
struct midg_plan {
  int64_t tpr;
  uint32_t stage; /* bytes of a stage: 16 whole weight rows */
  int st;
};

/* Shared memory of a v4 block: the ring, MIDG_M rows of x split, the warps' partials of MIDG_M
 * rows, the group's rows, the barriers. */
template <int T> static inline uint64_t midg_smem(int64_t K, uint64_t rowb, int st) {
  return (uint64_t)st * 16u * rowb + MIDG_M * tc_prep_bytes<typename tcq<T>::xs_t>(K) +
         sizeof(float) * MIDTC_CW * MIDG_M * TC_ROWS + 4u * MIDG_M + 16u * MIDTC_ST;
}

/* A stage's tile applied to the group's first M rows of x (M the group's count rounded up to
 * 1, 2, 4 or 8; rows past the count read the last row's x: computed, never stored), each row's
 * warp partials into part. The stage is released as soon as the arithmetic has read it. */
template <int T, int M>
__device__ __forceinline__ void midg_unit(float (*part)[MIDG_M][TC_ROWS], const uint8_t *stage,
                                          int rowb, int64_t nsb, const uint8_t *xsp, uint64_t pb,
                                          int64_t K, int cnt, bool live, const tc_role &ro,
                                          int warp, int lane, uint64_t *empty) {
  typedef tcq<T> Q;
  typedef typename Q::xs_t XS;
  float acc[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
    acc[m][0] = acc[m][1] = 0.f;
#define MIDG_XB(m) ((const uint4 *)(xsp + (uint64_t)((m) < cnt ? (m) : cnt - 1) * pb))
#define MIDG_XS(m) ((const XS *)(xsp + (uint64_t)((m) < cnt ? (m) : cnt - 1) * pb + K * 4))
  if (live) {
    for (int64_t j = warp; j < nsb; j += TC_WARPS) {
      const uint8_t *b0 = stage + ro.g * rowb + j * Q::SBB;
      typename Q::raw cur;
      typename Q::xin x0;
      Q::template load<false>(cur, b0, b0 + 8 * rowb, ro);
      Q::load_x(x0, MIDG_XB(0), MIDG_XS(0), j, ro);
      Q::template body<M, TC_NS_ID>(
          acc, cur, x0,
          [&](int m) {
            typename Q::xin xm;
            Q::load_x(xm, MIDG_XB(m), MIDG_XS(m), j, ro);
            return xm;
          },
          ro);
    }
  }
#undef MIDG_XB
#undef MIDG_XS
  __syncwarp();
  if (lane == 0) memra_mbar_arrive(empty);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float v = tc_quad_sum(acc[m][r]);
      if (t == 0 && m < cnt) part[warp][m][g + 8 * r] = v;
    }
}

template <int T, bool VEC, bool GLU>
__global__ void __launch_bounds__((MIDTC_CW + 1) * 32)
    matmul_id_tcg_kernel(const mmid_args a, const midg_table tb, const midg_plan p) {
  typedef tcq<T> Q;
  typedef typename Q::xs_t XS;
  extern __shared__ __align__(128) uint8_t sm[];
  const int64_t K = a.K, nsb = K / 256;
  const uint32_t rowb = (uint32_t)a.w_nb1; /* whole rows (midtc_fits) */
  const uint64_t pb = tc_prep_bytes<XS>(K);
  uint8_t *ring = sm, *xsp = sm + (uint64_t)p.st * p.stage;
  float(*part)[MIDG_M][TC_ROWS] = (float(*)[MIDG_M][TC_ROWS])(xsp + MIDG_M * pb);
  int32_t *rjs = (int32_t *)(part + MIDTC_CW); /* the group's rows of y */
  uint64_t *full = (uint64_t *)(rjs + MIDG_M), *empty = full + MIDTC_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  memra_ring_init(full, empty, p.st, MIDTC_CW);
  memra_pdl_enter(); /* the groups come from the sort before */
  const int64_t units = (int64_t)*tb.n_grp * p.tpr;
  const int64_t per = (units + gridDim.x - 1) / gridDim.x;
  const int64_t u0 = (int64_t)blockIdx.x * per;
  const int64_t u1 = u0 + per < units ? u0 + per : units;

  if (warp == MIDTC_CW) { /* producer: one or (GLU) two copies a unit, by lane 0 */
    if (lane != 0) return;
    int64_t qc = -1;
    int e = -1;
    for (int64_t u = u0, i = 0; u < u1; ++u, ++i) {
      const int s = (int)(i % p.st);
      const int64_t q = u / p.tpr, tile = u % p.tpr;
      if (q != qc) e = tb.grp[q].z, qc = q;
      if (i >= p.st) memra_mbar_wait(&empty[s], (uint32_t)(i / p.st - 1) & 1);
      midtc_copy_tile<GLU>(a, e, tile, rowb, ring + (uint64_t)s * p.stage, &full[s]);
    }
    return;
  }

  const tc_role ro = tc_role_of(lane >> 2, lane & 3);
  int64_t qc = -1;
  int cnt = 0, e = -1;
  for (int64_t u = u0, i = 0; u < u1; ++u, ++i) {
    const int s = (int)(i % p.st);
    const int64_t q = u / p.tpr, tile = u % p.tpr;
    if (q != qc) { /* block-uniform; the last unit's readers of xsp and rjs have synced */
      const int4 gr = tb.grp[q];
      cnt = gr.y;
      e = gr.z;
      for (int m = 0; m < cnt; ++m) {
        const int64_t rj = tb.perm[gr.x + m], xr = a.shared_x ? rj / a.k : rj;
        uint8_t *xm = xsp + (uint64_t)m * pb;
        tc_split_row<VEC, MIDTC_XB>(a.x + xr * a.x_ld, K, (uint4 *)xm, (XS *)(xm + K * 4));
      }
      if (threadIdx.x < cnt) rjs[threadIdx.x] = tb.perm[gr.x + threadIdx.x];
      midtc_consumers_sync();
      qc = q;
    }
    memra_mbar_wait(&full[s], (uint32_t)(i / p.st) & 1);
    const uint8_t *stage = ring + (uint64_t)s * p.stage;
    const bool live = e >= 0;
    if (cnt <= 1)
      midg_unit<T, 1>(part, stage, (int)rowb, nsb, xsp, pb, K, cnt, live, ro, warp, lane,
                      &empty[s]);
    else if (cnt <= 2)
      midg_unit<T, 2>(part, stage, (int)rowb, nsb, xsp, pb, K, cnt, live, ro, warp, lane,
                      &empty[s]);
    else if (MIDG_M == 4 || cnt <= 4)
      midg_unit<T, 4>(part, stage, (int)rowb, nsb, xsp, pb, K, cnt, live, ro, warp, lane,
                      &empty[s]);
    else
      midg_unit<T, MIDG_M>(part, stage, (int)rowb, nsb, xsp, pb, K, cnt, live, ro, warp, lane,
                           &empty[s]);
    midtc_consumers_sync();
    /* the warps' partials in order (mm_store_parts' sum), a thread an output of a row */
    if (!GLU && (int)threadIdx.x < TC_ROWS * cnt) {
      const int m = threadIdx.x / TC_ROWS, r = threadIdx.x % TC_ROWS;
      float v = part[0][m][r];
#pragma unroll
      for (int w = 1; w < MIDTC_CW; ++w)
        v = __fadd_rn(v, part[w][m][r]);
      a.y[rjs[m] * a.y_ld + 16 * tile + r] = live ? v : MOE_NAN;
    } else if (GLU && (int)threadIdx.x < TC_ROWS / 2 * cnt) {
      const int m = threadIdx.x / (TC_ROWS / 2), r = threadIdx.x % (TC_ROWS / 2);
      float gs = part[0][m][r], us = part[0][m][r + 8];
#pragma unroll
      for (int w = 1; w < MIDTC_CW; ++w) {
        gs = __fadd_rn(gs, part[w][m][r]);
        us = __fadd_rn(us, part[w][m][r + 8]);
      }
      a.y[rjs[m] * a.y_ld + 8 * tile + r] = live ? memra_act_silu(gs) * us : MOE_NAN;
    }
    midtc_consumers_sync();
  }
}

/* Whether v4 takes a launch v3 would (midtc_fits checked): rows enough to share tiles (two an
 * expert on average), the sort's limits. The default (MEMRA_MMID_GROUP=0 keeps v3 for A/B
 * timing); the same bits either way. */
static bool midg_wanted(const mmid_args &a) {
  static const bool on = !memra_cu_env_is("MEMRA_MMID_GROUP", "0");
  return on && a.rows >= 2 * (int64_t)a.n_expert && a.rows >= 4 * MIDG_M &&
         a.n_expert <= MIDG_MAX_EXPERTS && a.rows <= 0x7fffffff;
}

/* The sort, then v4 over it; ws: midg_ws_bytes. False (nothing launched) when the ring cannot
 * hold two stages beside the rows of x; *err: an attribute or occupancy call's error. */
template <int T, bool VEC, bool GLU>
static bool midg_launch(const memra_backend *be, const mmid_args &a, void *ws, cudaError_t *err) {
  *err = cudaSuccess;
  const uint64_t rowb = a.w_nb1, optin = (uint64_t)be->prop.sharedMemPerBlockOptin;
  const uint64_t fixed = midg_smem<T>(a.K, rowb, 0);
  if (optin < fixed + 1024 + 2 * 16 * rowb) return false;
  int st_max = (int)((optin - 1024 - fixed) / (16 * rowb));
  st_max = st_max > MIDTC_ST ? MIDTC_ST : st_max;
  void (*kernel)(const mmid_args, const midg_table, const midg_plan) =
      matmul_id_tcg_kernel<T, VEC, GLU>;
  static bool raised; /* one per instantiation */
  if (!raised) {
    *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)optin - 1024);
    if (*err != cudaSuccess) return true;
    raised = true;
  }
  /* the most stages an SM (blocks x stages), ties to more blocks: more warps on the tiles */
  int best_st = 2, best_bps = 0;
  for (int st = 2; st <= st_max; ++st) {
    int bps = 0;
    *err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, (MIDTC_CW + 1) * 32,
                                                         (size_t)midg_smem<T>(a.K, rowb, st));
    if (*err != cudaSuccess) return true;
    bps = bps > 4 ? 4 : bps;
    if (bps * st > best_bps * best_st) best_st = st, best_bps = bps;
  }
  if (best_bps < 1) return false;
  midg_plan p;
  p.tpr = GLU ? a.F / 8 : a.N / 16;
  p.stage = (uint32_t)(16 * rowb);
  p.st = best_st;
  const int64_t max_units = midg_max_groups(a.rows, a.n_expert) * p.tpr;
  int64_t grid = (int64_t)(be->n_sms > 0 ? be->n_sms : 1) * best_bps;
  grid = grid < max_units ? grid : max_units;
  const midg_table tb = midg_table_at(ws, a.rows, a.n_expert);
  (void)memra_cu_launch(be, matmul_id_group_kernel, dim3(1), dim3(MIDG_SORT_THREADS), 0, a, tb);
  (void)memra_cu_launch(be, kernel, dim3((unsigned)grid), dim3((MIDTC_CW + 1) * 32),
                        (size_t)midg_smem<T>(a.K, rowb, p.st), a, tb, p);
  return true;
}

#endif /* MEMRA_CUDA_MOE_GROUP_CUH */
