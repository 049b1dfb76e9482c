/* matmul_q8b.cuh — matmul v8b for Q8_0 weights (included by matmul.cu only; v8, kept for a
 * bitwise A/B as MEMRA_GEMV_Q8=v8a, is matmul_q8.cuh, whose layout and helpers this reuses).
 *
 * Why (docs/PERF.md): v8 at M > 1 read each lane's 32 x values from global memory (L1) once
 * per (weight row, x row): 14336x4096 at M = 8 took 535 us, 21x its M = 1 time.
 *
 * Same layout as v8 (4 warps, R rows per block, warp w takes steps w, w + 4, ... of 32 Q8_0
 * blocks; lane l owns block l of a step), two changes:
 * - M > 1 (matmul_v8b_kernel): the step's x of all the group's rows (M x 4 KiB, v8's swizzle
 *   per row) is copied into the warp's shared memory with the weights, as M = 1 does for its
 *   one row. Each weight row's block is unpacked once per step; groups of RG rows then run
 *   k = 0..7 (four elements each): one LDS.128 per x row, the RG rows' four quants as floats,
 *   and the M x RG FFMA chains advance by four elements. An x value read from shared memory
 *   feeds RG weight rows, a decoded quant M x rows. Blocks are launched x-group-fastest
 *   (block b = weight block b / groups, x group b % groups), so the groups of one weight
 *   block run at once and all but the first read its bytes from L2.
 * - M = 1 (matmul_v8b_ring_kernel): persistent blocks (as many as fit at once), each warp
 *   running its steps of the block's weight blocks as one sequence through a 2-stage
 *   cp.async ring: the next unit's copies (the next step, or the next weight block's first)
 *   are issued into the other stage before this one is computed (cp.async.wait_group 1),
 *   so copies overlap the arithmetic and the reductions; v8 waited for each step's copies
 *   with nothing else to do.
 * Arithmetic (exactness, batch invariance): per (x row, weight row) and lane, s = sum_i q_i
 * x_i is the FFMA chain fmaf(q_i, x_i, s) from 0 in element order (q_i the exact float of
 * memra_byte_f, as in mq8_block), then acc = fmaf(d, s, acc), over the lane's blocks in step
 * order; then v8's butterfly and warp-order sum (mm_reduce_store). That is v8's M = 1
 * sequence, operation by operation, whatever M, the group, R, the ring or the grid: each
 * row's result is bit-identical to v8 at M = 1 and to itself alone. Rows past the batch (x
 * copied as zeros) are computed and never stored. */
#ifndef MEMRA_CUDA_MATMUL_Q8B_CUH
#define MEMRA_CUDA_MATMUL_Q8B_CUH

#include "plugins/cuda/matmul_q8.cuh"

enum { MQ8B_RG = 4 };

/* Bytes of one stage of a warp: the step's x of M rows, then its span of R weight rows. */
__host__ __device__ constexpr int mq8b_stage(int M, int R) { return M * MQ8_XSPAN + R * MQ8_SPAN; }

/* Dynamic shared memory of a block, and with its static partials (mm_reduce_store). */
static inline int mq8b_smem(int M, int R, int S) { return MQ8_WARPS * S * mq8b_stage(M, R); }
static inline int mq8b_smem_all(int M, int R, int S) {
  return mq8b_smem(M, R, S) + (int)sizeof(float) * MQ8_WARPS * M * R;
}

/* One step's copies (step s, nb of its blocks) into a warp's stage at shared address xs: the
 * x of M rows (xl[m]: row m's lane-0 element + 4 lane; rows m >= mrows zero-filled), then
 * the span of R weight rows (wr[r]: row r). */
template <int M, int R>
__device__ __forceinline__ void mq8b_issue(uint32_t xs, const float *const (&xl)[M], int64_t mrows,
                                           const uint8_t *const (&wr)[R], int64_t s, int nb,
                                           int lane) {
  const int bytes = 34 * nb, n16 = (bytes + 15) >> 4;
#pragma unroll
  for (int m = 0; m < M; ++m) /* 8 nb of the step's 256 x chunks, v8's swizzle */
    mq8_issue_x(xs + MQ8_XSPAN * m, xl[m], s, nb, lane, m < mrows ? 16 : 0);
  const uint32_t ws = xs + M * MQ8_XSPAN + 16 * lane;
  const uint64_t off = (uint64_t)MQ8_SPAN * s + 16 * lane;
#pragma unroll
  for (int r = 0; r < R; ++r) { /* n16 <= 68 chunks: lane, lane + 32, lane + 64 */
    const uint8_t *src = wr[r] + off;
    if (nb == 32) { /* whole step: 68 whole chunks */
      memra_cp_async16(ws + MQ8_SPAN * r, src, 16);
      memra_cp_async16(ws + MQ8_SPAN * r + 512, src + 512, 16);
      if (lane < 4) memra_cp_async16(ws + MQ8_SPAN * r + 1024, src + 1024, 16);
    } else { /* the row's last step: its last chunk may be partial */
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        const int c = lane + 32 * k, left = bytes - 16 * c;
        if (c < n16)
          memra_cp_async16(ws + MQ8_SPAN * r + 512 * k, src + 512 * k, left < 16 ? left : 16);
      }
    }
  }
}

/* Lane's block of one staged step (x of M rows at xs, then R weight spans) into acc. */
template <int M, int R>
__device__ __forceinline__ void mq8b_compute(float (&acc)[M][R], const uint8_t *xs, int lane) {
  const uint8_t *ws = xs + M * MQ8_XSPAN;
  if constexpr (M == 1 || MEMRA_Q8_DP) { /* v8's M = 1 step per row of x (DP: split once) */
#pragma unroll
    for (int m = 0; m < M; ++m)
      mq8_step1<R>(acc[m], xs + MQ8_XSPAN * m, ws, lane);
  } else { /* RG weight rows at a time against all M rows, four elements a round */
#pragma unroll
    for (int g = 0; g < R; g += MQ8B_RG) {
      uint32_t q[MQ8B_RG][8];
      float d[MQ8B_RG], sv[M][MQ8B_RG];
#pragma unroll
      for (int j = 0; j < MQ8B_RG; ++j)
        mq8_unpack(ws + MQ8_SPAN * (g + j), lane, q[j], &d[j]);
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int j = 0; j < MQ8B_RG; ++j)
          sv[m][j] = 0.f;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        float xk[M][4];
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const float4 t = *(const float4 *)(xs + MQ8_XSPAN * m + 16 * mq8_xswz(8 * lane + k));
          xk[m][0] = t.x;
          xk[m][1] = t.y;
          xk[m][2] = t.z;
          xk[m][3] = t.w;
        }
#pragma unroll
        for (int j = 0; j < MQ8B_RG; ++j) {
          const uint32_t u = q[j][k] ^ 0x80808080u; /* int8 -> q + 128 */
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float wq = memra_byte_f(u, i, 128.f);
#pragma unroll
            for (int m = 0; m < M; ++m)
              sv[m][j] = fmaf(wq, xk[m][i], sv[m][j]);
          }
        }
      }
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int j = 0; j < MQ8B_RG; ++j)
          acc[m][g + j] = fmaf(d[j], sv[m][j], acc[m][g + j]);
    }
  }
}

__device__ __forceinline__ int mq8b_nb(int64_t nblk, int64_t s) {
  return nblk - 32 * s < 32 ? (int)(nblk - 32 * s) : 32;
}

/* M > 1: block b is weight block b / groups, x group b % groups; one stage. */
template <int M, int R>
__global__ void __launch_bounds__(MQ8_WARPS * 32, 2)
    matmul_v8b_kernel(const mm_jobs J, const float *__restrict__ x, int64_t x_ld, int64_t K,
                      int64_t rows, unsigned groups) {
  static_assert(M > 1 && R % MQ8B_RG == 0, "batch kernel: row groups of RG");
  extern __shared__ __align__(16) uint8_t mq8_smem[];
  __shared__ float part[MQ8_WARPS][M][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const mm_job jb = mm_pick_at(J, (int64_t)(blockIdx.x / groups));
  const int64_t n0 = jb.b * R, m0 = (int64_t)(blockIdx.x % groups) * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t nblk = K / 32, steps = (nblk + 31) / 32;
  const uint8_t *wr[R];
  mm_rows_enter<R, MQ8_WARPS * 32>(wr, jb, n0);
  uint8_t *const xs = mq8_smem + warp * mq8b_stage(M, R);
  const float *xl[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    xl[m] = x + (m0 + (m < mrows ? m : 0)) * x_ld + 4 * lane;
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;
  for (int64_t s = warp; s < steps; s += MQ8_WARPS) {
    const int nb = mq8b_nb(nblk, s);
    mq8b_issue<M, R>(memra_smem_u32(xs), xl, mrows, wr, s, nb, lane);
    memra_cp_async_commit();
    memra_cp_async_wait<0>();
    __syncwarp();
    if (lane < nb) mq8b_compute<M, R>(acc, xs, lane);
    __syncwarp(); /* every lane is done with the span before the next step's copies */
  }
  mm_reduce_store<MQ8_WARPS>(acc, part, n0, jb.N, m0, mrows, jb.y, jb.y_ld, jb.bias);
}

/* M = 1, persistent: block b takes weight blocks b, b + gridDim.x, ... < nwb, and each warp
 * runs its steps of them (w, w + 4, ... of each, K / 1024 >= 4 steps: every warp has one)
 * as one sequence through a 2-stage ring: the unit after the one computed is always in
 * flight, also across weight blocks and their reductions. */
template <int R>
__global__ void __launch_bounds__(MQ8_WARPS * 32, R == 2 ? 4 : 2)
    matmul_v8b_ring_kernel(const mm_jobs J, const float *__restrict__ x, int64_t K, int64_t nwb) {
  constexpr int STAGE = mq8b_stage(1, R);
  extern __shared__ __align__(16) uint8_t mq8_smem[];
  __shared__ float part[MQ8_WARPS][1][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nblk = K / 32, steps = (nblk + 31) / 32;
  uint8_t *const sm = mq8_smem + warp * 2 * STAGE;
  const uint32_t sm32 = memra_smem_u32(sm);
  const float *const xl[1] = {x + 4 * lane};
  /* The issue cursor: weight block ib, step is, its rows iw; one unit ahead of the compute. */
  int64_t ib = blockIdx.x, is = warp;
  const uint8_t *iw[R];
  {
    const mm_job j0 = mm_pick_at(J, ib);
    mm_rows_enter<R, MQ8_WARPS * 32>(iw, j0, j0.b * R);
  }
  mq8b_issue<1, R>(sm32, xl, 1, iw, is, mq8b_nb(nblk, is), lane);
  memra_cp_async_commit();
  int st = 0;
  for (int64_t b = blockIdx.x; b < nwb; b += gridDim.x) {
    const mm_job jb = mm_pick_at(J, b);
    float acc[1][R];
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[0][r] = 0.f;
    for (int64_t s = warp; s < steps; s += MQ8_WARPS) {
      is += MQ8_WARPS; /* the next unit: this block's next step or the next block's first */
      if (is >= steps) {
        is = warp;
        ib += gridDim.x;
        if (ib < nwb) {
          const mm_job ji = mm_pick_at(J, ib);
#pragma unroll
          for (int r = 0; r < R; ++r)
            iw[r] = ji.w + (uint64_t)(ji.b * R + r < ji.N ? ji.b * R + r : ji.N - 1) * ji.w_nb1;
        }
      }
      if (ib < nwb)
        mq8b_issue<1, R>(sm32 + (st ^ 1) * STAGE, xl, 1, iw, is, mq8b_nb(nblk, is), lane);
      memra_cp_async_commit();
      memra_cp_async_wait<1>(); /* all but the unit just issued: this one has landed */
      __syncwarp();
      const int nb = mq8b_nb(nblk, s);
      if (lane < nb) mq8b_compute<1, R>(acc, sm + st * STAGE, lane);
      __syncwarp(); /* every lane is done with the stage before copies into it are issued */
      st ^= 1;
    }
    mm_reduce_store<MQ8_WARPS>(acc, part, jb.b * R, jb.N, 0, 1, jb.y, jb.y_ld, jb.bias);
    __syncthreads(); /* part is rewritten for the next weight block */
  }
}

/* Ring blocks resident per SM, from the device's shared memory (no API call, so nothing
 * new runs during graph capture), capped at what __launch_bounds__ promises for registers.
 * Only the speed depends on it: blocks past the resident ones simply wait their turn. */
static int mq8b_ring_per_sm(const memra_backend *be, int R) {
  const int64_t per = mq8b_smem_all(1, R, 2) + (int64_t)be->prop.reservedSharedMemPerBlock;
  const int64_t fit = (int64_t)be->prop.sharedMemPerMultiprocessor / per, lb = R == 2 ? 4 : 2;
  return fit < 1 ? 1 : fit < lb ? (int)fit : (int)lb;
}

/* M > 1: groups of 1, 2, else 4 rows of x (8 would take 166 KB per block: one block per SM
 * on the H200, none on the sm120a family's ~100 KB), 2 where 4 does not fit; R = 8.
 * M = 1: the ring kernel when every warp has a step (K > 3072), the ring fits and either a
 * warp has several steps (K > 4096) or the weight blocks are more than v8 holds at once
 * (4 per SM); else v8's kernel itself (R the caller's: 2 under 4096 rows in all, else 8).
 * Returns false when the grid is too large; *err: the attribute call's error (no launch). */
static bool mq8b_launch(int64_t M, int R, const memra_backend *be, mm_jobs J, const float *x,
                        int64_t x_ld, int64_t K, int64_t rows, cudaError_t *err) {
  int64_t optin = (int64_t)be->prop.sharedMemPerBlockOptin;
#ifdef MEMRA_CUDA_FAMILY_SM120 /* the family's 99 KB a block, also in its sm_90a test build */
  if (optin > 99 * 1024) optin = 99 * 1024;
#endif
  const int64_t steps = (K / 32 + 31) / 32;
  *err = cudaSuccess;
  if (M == 1) {
    const int64_t gx = mm_jobs_layout(&J, R);
    if (gx == 0) return false;
    if (steps < MQ8_WARPS || mq8b_smem_all(1, R, 2) > optin ||
        (steps == MQ8_WARPS && gx <= 4 * (int64_t)be->n_sms))
      return mq8_launch(1, R, be, J, x, x_ld, K, rows, err);
#define MQ8B_RING(RR)                                                                              \
  do {                                                                                             \
    const int smem = mq8b_smem(1, RR, 2);                                                          \
    *err = cudaFuncSetAttribute(matmul_v8b_ring_kernel<RR>,                                        \
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem);                \
    if (*err != cudaSuccess) break;                                                                \
    const int64_t slots = (int64_t)mq8b_ring_per_sm(be, RR) * be->n_sms;                           \
    const dim3 grid((unsigned)(gx < slots ? gx : slots));                                          \
    (void)memra_cu_launch(be, matmul_v8b_ring_kernel<RR>, grid, dim3(MQ8_WARPS * 32), smem, J, x,  \
                          K, gx);                                                                  \
  } while (0)
    if (R == 2)
      MQ8B_RING(2);
    else
      MQ8B_RING(MQ8_R);
#undef MQ8B_RING
    return true;
  }
  const int mt = M == 2 || mq8b_smem_all(4, MQ8_R, 1) > optin ? 2 : 4;
  const int64_t gx = mm_jobs_layout(&J, MQ8_R), gy = (rows + mt - 1) / mt;
  if (gx == 0 || gy > 0x7fffffff / gx) return false;
  const dim3 grid((unsigned)(gx * gy));
  const unsigned groups = (unsigned)gy;
#define MQ8B_GO(MM)                                                                                \
  do {                                                                                             \
    const int smem = mq8b_smem(MM, MQ8_R, 1);                                                      \
    *err = cudaFuncSetAttribute(matmul_v8b_kernel<MM, MQ8_R>,                                      \
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem);                \
    if (*err == cudaSuccess)                                                                       \
      (void)memra_cu_launch(be, matmul_v8b_kernel<MM, MQ8_R>, grid, dim3(MQ8_WARPS * 32), smem, J, \
                            x, x_ld, K, rows, groups);                                             \
  } while (0)
  if (mt == 2)
    MQ8B_GO(2);
  else
    MQ8B_GO(4);
#undef MQ8B_GO
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_Q8B_CUH */
