/* matmul_q8b.cuh — matmul v8b for Q8_0 weights (included by matmul.cu only; v8, kept for a
 * bitwise A/B as MEMRA_GEMV_Q8=v8a, is matmul_q8.cuh, whose layout and helpers this reuses).
 *
 * Why (docs/PERF.md): v8 at M > 1 read each lane's 32 x values from global memory (L1) once
 * per (weight row, x row): 14336x4096 at M = 8 took 535 us, 21x its M = 1 time.
 *
 * Same layout as v8 (4 warps, R rows per block, warp w takes steps w, w + 4, ... of 32 Q8_0
 * blocks; lane l owns block l of a step), two changes:
 * - M > 1: the step's x of all the group's rows (M x 4 KiB, v8's swizzle per row) is copied
 *   into the warp's shared memory with the weights, as M = 1 does for its one row. Each
 *   weight row's block is unpacked once per step; groups of RG rows then run k = 0..7 (four
 *   elements each): one LDS.128 per x row, the RG rows' four quants as floats, and the M x RG
 *   FFMA chains advance by four elements. An x value read from shared memory feeds RG rows, a
 *   decoded weight M rows.
 * - M = 1 with more than one step per warp (K > 4096): a 2-stage ring. Step s + 4's copies are
 *   issued into the other stage before step s is computed (cp.async.wait_group 1), so the
 *   copies of one step overlap the arithmetic of the previous one.
 * Arithmetic (exactness, batch invariance): per (x row, weight row) and lane, s = sum_i q_i
 * x_i is the FFMA chain fmaf(q_i, x_i, s) from 0 in element order (q_i the exact float of
 * memra_byte_f, as in mq8_block), then acc = fmaf(d, s, acc), over the lane's blocks in step
 * order; then v8's butterfly and warp-order sum (mm_reduce_store). That is v8's M = 1
 * sequence, operation by operation, whatever M, the group, R or the stage count: each row's
 * result is bit-identical to v8 at M = 1 and to itself alone. Rows past the batch (x copied
 * as zeros) are computed and never stored.
 *
 * Groups are launched row-group-fastest (block b = weight block b / groups, x group
 * b % groups), so the groups of one weight block run at once and all but the first read its
 * bytes from L2. */
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

template <int M, int R, int S>
__global__ void __launch_bounds__(MQ8_WARPS * 32, M == 1 ? 4 : 2)
    matmul_v8b_kernel(const mm_jobs J, const float *__restrict__ x, int64_t x_ld, int64_t K,
                      int64_t rows, unsigned groups) {
  static_assert(S == 1 || S == 2, "one or two stages");
  static_assert(M == 1 || R % MQ8B_RG == 0, "row groups of RG");
  constexpr int STAGE = mq8b_stage(M, R);
  extern __shared__ __align__(16) uint8_t mq8_smem[];
  __shared__ float part[MQ8_WARPS][M][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const mm_job jb = mm_pick_at(J, (int64_t)(blockIdx.x / groups));
  float *__restrict__ y = jb.y;
  const float *__restrict__ bias = jb.bias;
  const int64_t y_ld = jb.y_ld, N = jb.N;
  const int64_t n0 = jb.b * R;
  const int64_t m0 = (int64_t)(blockIdx.x % groups) * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t nblk = K / 32, steps = (nblk + 31) / 32;
  const uint8_t *wr[R];
  mm_rows_enter<R, MQ8_WARPS * 32>(wr, jb, n0);
  uint8_t *const sm = mq8_smem + warp * S * STAGE;
  const uint32_t sm32 = memra_smem_u32(sm);
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;

  /* x chunk c = lane + 32 k of a row goes to swizzled chunk 32 k + (lane ^ ((lane / 8) |
   * 4 (k % 2))) (mq8_xswz); rows past the batch read row m0 with 0 bytes (zero fill). */
  const uint32_t xo[2] = {16u * (lane ^ (lane >> 3)), 16u * (lane ^ ((lane >> 3) | 4))};
  const float *xl[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    xl[m] = x + (m0 + (m < mrows ? m : 0)) * x_ld + 4 * lane;

  /* Step s's copies into stage st (one commit group is made by the caller). */
  auto issue = [&](int64_t s, int st) {
    const int nb = nblk - 32 * s < 32 ? (int)(nblk - 32 * s) : 32;
    const int bytes = 34 * nb, n16 = (bytes + 15) >> 4;
    const uint32_t xs = sm32 + st * STAGE, ws = xs + M * MQ8_XSPAN + 16 * lane;
#pragma unroll
    for (int m = 0; m < M; ++m) /* 8 nb of the step's 256 x chunks */
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (nb == 32 || lane + 32 * k < 8 * nb)
          memra_cp_async16(xs + MQ8_XSPAN * m + xo[k & 1] + 512 * k, xl[m] + 1024 * s + 128 * k,
                           m < mrows ? 16 : 0);
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
  };

  int64_t s = warp;
  if (S == 2) {
    if (s < steps) issue(s, 0);
    memra_cp_async_commit();
  }
  for (int it = 0; s < steps; s += MQ8_WARPS, ++it) {
    const int st = S == 2 ? (it & 1) : 0;
    if (S == 2) { /* the next step into the other stage, then wait for this one only */
      if (s + MQ8_WARPS < steps) issue(s + MQ8_WARPS, st ^ 1);
      memra_cp_async_commit();
      memra_cp_async_wait<1>();
    } else {
      issue(s, 0);
      memra_cp_async_commit();
      memra_cp_async_wait<0>();
    }
    __syncwarp();
    const int nb = nblk - 32 * s < 32 ? (int)(nblk - 32 * s) : 32;
    const uint8_t *xs = sm + st * STAGE, *ws = xs + M * MQ8_XSPAN;
    if (lane < nb) {
      if (M == 1) { /* v8's M = 1 step: x once, then all R rows */
        float xv[32];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float4 t = *(const float4 *)(xs + 16 * mq8_xswz(8 * lane + i));
          xv[4 * i] = t.x;
          xv[4 * i + 1] = t.y;
          xv[4 * i + 2] = t.z;
          xv[4 * i + 3] = t.w;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          uint32_t q[8];
          float d;
          mq8_unpack(ws + MQ8_SPAN * r, lane, q, &d);
          acc[0][r] = mq8_block(acc[0][r], q, d, xv);
        }
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
    __syncwarp(); /* every lane is done with the stage before copies into it are issued */
  }
  mm_reduce_store<MQ8_WARPS>(acc, part, n0, N, m0, mrows, y, y_ld, bias);
}

/* Rows of x per group: 1, 2, else 4 (8 would take 166 KB per block: one block per SM on the
 * H200, none on the sm120a family's ~100 KB), 2 where 4 does not fit. Stages: 2 at M = 1
 * when a warp has more than one step (K > 4096) and the ring fits, else 1 (that is v8's
 * M = 1 kernel, launched as such). R as v8 (the
 * caller's: 2 under 4096 rows in all at M = 1, else 8). Returns false when the grid is too
 * large; *err: the attribute call's error (no launch then). */
static bool mq8b_launch(int64_t M, int R, const memra_backend *be, mm_jobs J, const float *x,
                        int64_t x_ld, int64_t K, int64_t rows, cudaError_t *err) {
  const int64_t optin = (int64_t)be->prop.sharedMemPerBlockOptin;
  int mt = M == 1 ? 1 : M == 2 ? 2 : 4;
  if (mt == 4 && mq8b_smem_all(4, MQ8_R, 1) > optin) mt = 2;
  if (mt > 1) R = MQ8_R;
  const int64_t steps = (K / 32 + 31) / 32;
  const int S = mt == 1 && steps > MQ8_WARPS && mq8b_smem_all(1, R, 2) <= optin ? 2 : 1;
  if (S == 1 && mt == 1) /* v8b's M = 1 step is v8's: v8 itself (fewer registers) */
    return mq8_launch(1, R, be, J, x, x_ld, K, rows, err);
  const int64_t gx = mm_jobs_layout(&J, R), gy = (rows + mt - 1) / mt;
  *err = cudaSuccess;
  if (gx == 0 || gy > 0x7fffffff / gx) return false;
  const dim3 grid((unsigned)(gx * gy));
  const unsigned groups = (unsigned)gy;
#define MQ8B_GO(MM, RR, SS)                                                                        \
  do {                                                                                             \
    const int smem = mq8b_smem(MM, RR, SS);                                                        \
    *err = cudaFuncSetAttribute(matmul_v8b_kernel<MM, RR, SS>,                                     \
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem);                \
    if (*err == cudaSuccess)                                                                       \
      (void)memra_cu_launch(be, matmul_v8b_kernel<MM, RR, SS>, grid, dim3(MQ8_WARPS * 32), smem,   \
                            J, x, x_ld, K, rows, groups);                                          \
  } while (0)
  if (mt == 1) {
    if (R == 2)
      MQ8B_GO(1, 2, 2);
    else
      MQ8B_GO(1, MQ8_R, 2);
  } else if (mt == 2) {
    MQ8B_GO(2, MQ8_R, 1);
  } else {
    MQ8B_GO(4, MQ8_R, 1);
  }
#undef MQ8B_GO
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_Q8B_CUH */
