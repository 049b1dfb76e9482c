/* matmul_tc11mx.cuh — v11 over jobs of two weight types in one launch, with rmsnorm in its head
 * (ABI 1.23 rmsnorm_matmul_mixed; included by matmul.cu after matmul_tc11.cuh).
 *
 * Why (docs/PERF.md): in half the layers of a Q4_K_M file attn_v is Q6_K while q and k are Q4_K,
 * so a decode layer ran q / k (v11 with the norm head) and then v as a launch of its own (v5, the
 * H200 trace's 3.7 us a layer, 16 layers of Llama-3.1-8B). Here the Q6_K jobs' tiles come first and
 * the Q4_K jobs' after them, in one grid (t11mx_tile_at's order): the head normalizes x once and
 * splits it into both prep forms (Q4_K's f16 halves, TC_Q6I's byte digits), the producer sizes each
 * tile's stages by its type (16 Q4_K super-blocks a stage, as v11's K 4096 rows; 8 of Q6_K), and
 * the consumers apply each stage with its type's tc_stage_apply. Bits: a Q4_K tile's sums are v11's
 * (the norm-head kernel's), a Q6_K tile's are TC_Q6I's on v11 / v7 (tcq<TC_Q6I>): the same for one
 * row here and for a batch on v7, so every row of a mixed call is a function of x's row and its
 * matrix alone (the slot's contract). One row of K 4096, 16-byte aligned; no conv, rope, tail or
 * dynamic tiles; tiles stored one at a time. */
#ifndef MEMRA_CUDA_MATMUL_TC11MX_CUH
#define MEMRA_CUDA_MATMUL_TC11MX_CUH

#include "plugins/cuda/matmul_norm13.cuh"
#include "plugins/cuda/matmul_tc11.cuh"

enum { T11MX_K = 4096, T11MX_NSB = T11MX_K / 256, T11MX_SB2 = 8 };
/* Super-blocks a stage of the Q4_K tiles here (a build define): 8, half a tile, so the ring's
 * stages are the Q6_K ones' size (26.9 KB) and a block ~86 KB; at 16 (v11's) a block took ~110 KB,
 * two filled an SM and the kernels after the launch could not become resident beside it (H100,
 * thirty-seventh session: tg128 -1.2% at 16, +1.6% at 8 against the q / k and v launches). */
#ifndef MEMRA_T11MX_SB4
#define MEMRA_T11MX_SB4 8
#endif
static_assert(MEMRA_T11MX_SB4 == 16 || MEMRA_T11MX_SB4 == 8, "a stage: a tile or half of one");
/* EXPERIMENT (a build define, 0: off): rmsnorm_matmul_n's q, k, v of Q4_K alone on this kernel too
 * (no Q6_K tiles), for the room its ~86 KB block leaves beside it (matmul.cu). */
#ifndef MEMRA_T11MX_ALL
#define MEMRA_T11MX_ALL 0
#endif

/* A ring stage: the larger of a Q4_K stage (MEMRA_T11MX_SB4 super-blocks) and a Q6_K one. */
__host__ __device__ constexpr int t11mx_stage() {
  return TC_ROWS * (MEMRA_T11MX_SB4 * 144 > T11MX_SB2 * 210 ? MEMRA_T11MX_SB4 * 144 + MEMRA_T11_PAD
                                                            : T11MX_SB2 * 210 + MEMRA_T11_PAD);
}
/* Shared memory: the ring, x in both prep forms, the warps' partials, the ring's barriers. */
template <int CW> static inline uint64_t t11mx_smem() {
  return (uint64_t)T11_ST * t11mx_stage() + tc_prep_bytes<tc4_xs_t>(T11MX_K) +
         tc_prep_bytes<tc6i_xs>(T11MX_K) + sizeof(float) * CW * TC_ROWS + 16u * T11_ST;
}

/* A tile's job and type: tiles [0, tiles6) are Q6_K (J's Q6_K jobs come first), the rest Q4_K;
 * super-blocks a stage (sb) and bytes a super-block (sbb). */
struct t11mx_tile {
  mm_job jb;
  bool q6;
  int sb, sbb;
};
__device__ __forceinline__ t11mx_tile t11mx_tile_of(const mm_jobs &J, int64_t tile,
                                                    int64_t tiles6) {
  const bool q6 = tile < tiles6;
  return {mm_pick_at(J, tile), q6, q6 ? (int)T11MX_SB2 : MEMRA_T11MX_SB4, q6 ? 210 : 144};
}
/* This block's i-th tile, -1 past its last: rounds of one tile a block, every other round in
 * reverse block order, so the blocks that took a (larger) Q6_K tile in round 0 take their round-1
 * tile last of all (Llama's q, k, v: 64 Q6_K + 320 Q4_K tiles on 264 blocks, none with two of
 * them beside the Q6_K). */
__device__ __forceinline__ int64_t t11mx_tile_at(int64_t i, int64_t n_tiles) {
  const int64_t b = blockIdx.x, g = gridDim.x, tile = i * g + (i & 1 ? g - 1 - b : b);
  return tile < n_tiles ? tile : -1;
}

template <int CW>
__global__ void __launch_bounds__((CW + 1) * 32)
    matmul_v11mx_kernel(const mm_jobs J, int64_t n_tiles, int64_t tiles6, const mm_norm nm) {
  constexpr int STAGE = t11mx_stage();
  extern __shared__ __align__(128) uint8_t sm[];
  uint8_t *ring = sm;
  uint4 *xb = (uint4 *)(sm + (uint64_t)T11_ST * STAGE);
  tc4_xs_t *xs = (tc4_xs_t *)((uint8_t *)xb + T11MX_K * 4);
  uint4 *xb2 = (uint4 *)((uint8_t *)xb + tc_prep_bytes<tc4_xs_t>(T11MX_K));
  tc6i_xs *xs2 = (tc6i_xs *)((uint8_t *)xb2 + T11MX_K * 4);
  float(&part)[CW][1][TC_ROWS] =
      *(float(*)[CW][1][TC_ROWS])((uint8_t *)xb2 + tc_prep_bytes<tc6i_xs>(T11MX_K));
  uint64_t *full = (uint64_t *)(&part[CW - 1][0][TC_ROWS - 1] + 1), *empty = full + T11_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  memra_ring_init(full, empty, T11_ST, CW);

  if (warp == CW) { /* producer: a tile's stages by its type */
    const int pre = mm_ring_pre_k(T11_ST, T11MX_K);
    int64_t u = 0;
    for (int64_t i = 0, tile; (tile = t11mx_tile_at(i, n_tiles)) >= 0; ++i) {
      const t11mx_tile tl = t11mx_tile_of(J, tile, tiles6);
      const uint32_t rowb = (uint32_t)(tl.sb * tl.sbb); /* 4096 is whole stages of either type */
      for (int gi = 0; gi < T11MX_NSB / tl.sb; ++gi, ++u) {
        const int s = (int)(u % T11_ST);
        if (u >= T11_ST) memra_mbar_wait(&empty[s], (uint32_t)(u / T11_ST - 1) & 1);
        t11_stage_copy(ring + s * STAGE, tl.jb, tl.jb.b * TC_ROWS, (uint64_t)gi * rowb, rowb,
                       tl.sb == T11MX_NSB, &full[s], lane);
        if (u == pre - 1) memra_pdl_enter();
      }
    }
    if (u < pre) memra_pdl_enter(); /* fewer stages than the ring issues before the wait */
    return;
  }

  /* consumers: the norm head (warps 0..3, rmsnorm_v2's 128 threads) into both forms */
  __shared__ float shn[32];
  __shared__ int n13_flag;
  float4 gw[N13_J];
  unsigned ticket = 0;
  if (CW == 4 || warp < 4) n11_load_w(nm, gw);
  memra_pdl_enter();
  if (CW == 4 || warp < 4)
    n11_norm_split<4, tc4_xs_t, tc6i_xs>(nm, gw, xb, xs, shn, &ticket, xb2, xs2);
  if (CW == 4)
    mm_consumers_sync<CW>();
  else
    asm volatile("bar.sync 3, %0;" ::"n"(CW * 32) : "memory");

  const int g = lane >> 2, t = lane & 3;
  const tc_role ro = tc_role_of(g, t);
  int64_t u = 0;
  for (int64_t i = 0, tile; (tile = t11mx_tile_at(i, n_tiles)) >= 0; ++i) {
    const t11mx_tile tl = t11mx_tile_of(J, tile, tiles6);
    const int sb = tl.sb;
    const mm_job &jb = tl.jb;
    float acc[1][2] = {{0.f, 0.f}};
    for (int gi = 0; gi < T11MX_NSB / sb; ++gi, ++u) {
      const int s = (int)(u % T11_ST);
      memra_mbar_wait(&full[s], (uint32_t)(u / T11_ST) & 1);
      const uint8_t *stage = ring + s * STAGE;
      const int rowb = sb * tl.sbb + MEMRA_T11_PAD;
      if (tl.q6)
        tc_stage_apply<TC_Q6I, TC_NS_MM, CW>(acc, stage, rowb, sb, (int64_t)sb * gi, xb2, xs2, ro,
                                             warp);
      else
        tc_stage_apply<MEMRA_TYPE_Q4_K, TC_NS_MM, CW>(acc, stage, rowb, sb, (int64_t)sb * gi, xb,
                                                      xs, ro, warp);
      __syncwarp();
      if (lane == 0) memra_mbar_arrive(&empty[s]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float v = tc_quad_sum(acc[0][r]);
      if (t == 0) part[warp][0][g + 8 * r] = v;
    }
    mm_consumers_sync<CW>();
    mm_store_parts<CW, 1, TC_ROWS>(part, jb.b * TC_ROWS, jb.N, 0, 1, jb.y, jb.y_ld, jb.bias);
    mm_consumers_sync<CW>();
  }
  if (CW == 4 || warp < 4) n13_finish<4>(nm, ticket, &n13_flag, warp, lane);
}

/* The mixed launch for J (its n_q6 >= 0 Q6_K jobs first), x of 4096 with the norm nm:
 * every block resident, at most ceil(grid / SMs) an SM (m11_launch's rule). False when the grid is
 * too large; *err: the attribute call's error (no launch then). */
static bool m11mx_launch(const memra_backend *be, mm_jobs J, int n_q6, cudaError_t *err,
                         const mm_norm &nm) {
  *err = cudaSuccess;
  constexpr int CW = tc_dense_warps(T11MX_K);
  const int64_t tiles = mm_jobs_layout(&J, TC_ROWS);
  if (tiles == 0 || n_q6 < 0 || n_q6 >= J.n) return false;
  const int64_t tiles6 = J.blk0[n_q6];
  int64_t smem = (int64_t)t11mx_smem<CW>();
  const int64_t slots = mm_block_slots(be, smem + 1024, 4);
  const int64_t per = (tiles + slots - 1) / slots, grid = (tiles + per - 1) / per;
  if (be->n_sms > 0) {
    const int64_t need = (grid + be->n_sms - 1) / be->n_sms;
    if (need < slots / be->n_sms) {
      const int64_t lim = mm_sm_bytes(be) / (need + 1) - 1024 + 128;
      if (smem < lim) smem = lim;
    }
  }
  static bool raised = false;
  if (!raised) {
    cudaFuncAttributes fa = {};
    *err = cudaFuncGetAttributes(&fa, matmul_v11mx_kernel<CW>);
    if (*err != cudaSuccess) return true;
    const size_t st = fa.sharedSizeBytes > 1024 ? fa.sharedSizeBytes : 1024;
    *err =
        cudaFuncSetAttribute(matmul_v11mx_kernel<CW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)(be->prop.sharedMemPerBlockOptin - st));
    if (*err != cudaSuccess) return true;
    raised = true;
  }
  (void)memra_cu_launch(be, matmul_v11mx_kernel<CW>, dim3((unsigned)grid), dim3((CW + 1) * 32),
                        (size_t)smem, J, tiles, tiles6, nm);
  return true;
}

/* Whether the mixed launch's block fits this device. */
static inline bool m11mx_fits(const memra_backend *be) {
  return (int64_t)be->prop.sharedMemPerBlockOptin >=
         (int64_t)t11mx_smem<tc_dense_warps(T11MX_K)>() + 1024;
}

#endif /* MEMRA_CUDA_MATMUL_TC11MX_CUH */
