/* matmul_jobs.cuh — up to 4 matmuls sharing x in one launch (the matmul_n slot): the v5 and
 * v6 kernels take their weight rows from the job that owns blockIdx.x, so q, k and v run as
 * one grid. A plain matmul is one job. A job's rows get exactly the arithmetic they get
 * alone: the job only chooses pointers. */
#ifndef MEMRA_CUDA_MATMUL_JOBS_CUH
#define MEMRA_CUDA_MATMUL_JOBS_CUH

#include <stdint.h>

#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/launch.cuh"

/* An rmsnorm a ring GEMV (v13, v11) or v6 takes into its launch (ABI 1.14: one row, 16-byte
 * aligned; x NULL: none). */
struct mm_norm {
  float *x;         /* the residual row: += res (written back by the last block) */
  const float *res; /* NULL: nothing added */
  const float *w;   /* the norm's weight [K] */
  float *xn;        /* rmsnorm's output row, written by block 0 */
  float eps;
};

enum { MM_MAX_JOBS = 4 };

/* ABI 1.11 matmul_n_conv: the first job's outputs go through a Gated DeltaNet layer's causal conv
 * of width 4 in the kernels' last step (mm_store_parts), each row against its sequence's state:
 * ssm_conv_v1_kernel<3>'s arithmetic on the value the row would store. w NULL: no conv. */
struct mm_conv {
  const float *w; /* [C rows of 4] */
  float *state;   /* [n_seqs rows of 3 C] */
  const int32_t *pos, *seq;
  int64_t w_ld, s_ld;
  int32_t n_seqs;
};

/* ABI 1.16 matmul_n_rope_kv: jobs 0 (q) and 1 (k) turned by rope at the store and k cast into its
 * cache, v (job 2, or v_src when its projection came before) into its own: rope_kv_v1_kernel's
 * arithmetic on the values the rows would store, so the bits of matmul_n then rope_kv_store. NORM
 * pairs only (rows 2i, 2i + 1 of a head: one tile holds both); one row of x. on false: none. */
struct mm_rkv {
  char *kc, *vc;
  uint64_t k_nb1, v_nb1;
  int64_t k_slots, v_slots;
  const int32_t *pos, *seq, *bt;
  int64_t bt_ld;
  int n_seqs, block_size, max_blocks;
  const float *ff, *v_src;     /* rope frequency factors or NULL; v's rows when n == 2, else NULL */
  int head_dim, n_rot, kt, vt; /* cache types: 0 f32, 1 f16, 2 fp8 e4m3 */
  float freq_base, freq_scale;
  bool on;
};

struct mm_jobs {
  float *y[MM_MAX_JOBS];
  int64_t y_ld[MM_MAX_JOBS];
  const uint8_t *w[MM_MAX_JOBS];
  uint64_t w_nb1[MM_MAX_JOBS];
  const float *bias[MM_MAX_JOBS];
  int64_t N[MM_MAX_JOBS];
  int32_t blk0[MM_MAX_JOBS]; /* first blockIdx.x of each job */
  int32_t n;
  mm_conv cv; /* job 0's conv (matmul_n_conv), or none */
  mm_rkv rk;  /* q / k rope and the cache stores (matmul_n_rope_kv), or none */
  bool acc;   /* matmul_acc (ABI 1.17): y = y + the row's sum (mm_store_parts' MM_ACC_*) */
};

struct mm_job {
  float *y;
  int64_t y_ld;
  const uint8_t *w;
  uint64_t w_nb1;
  const float *bias;
  int64_t N;
  int64_t b; /* the block's index within its job */
};

/* The job of weight block bx (of all the jobs' blocks), by unrolled selects (no local-memory
 * indexing of the params). */
__device__ __forceinline__ mm_job mm_pick_at(const mm_jobs &J, int64_t bx) {
  mm_job j = {J.y[0], J.y_ld[0], J.w[0], J.w_nb1[0], J.bias[0], J.N[0], bx};
#pragma unroll
  for (int i = 1; i < MM_MAX_JOBS; ++i)
    if (i < J.n && bx >= J.blk0[i])
      j = {J.y[i], J.y_ld[i], J.w[i], J.w_nb1[i], J.bias[i], J.N[i], bx - J.blk0[i]};
  return j;
}

/* The job of this block (blockIdx.x is its weight block). */
__device__ __forceinline__ mm_job mm_pick(const mm_jobs &J) {
  return mm_pick_at(J, (int64_t)blockIdx.x);
}

/* The block's R weight rows from row n0 (rows past the job's N read row N - 1: computed,
 * never stored); their fetch into L2 starts before the PDL wait, since weights are constant
 * (launch.cuh); then the wait. NT threads per block. */
template <int R, int NT>
__device__ __forceinline__ void mm_rows_enter(const uint8_t *(&wr)[R], const mm_job &jb,
                                              int64_t n0) {
#pragma unroll
  for (int r = 0; r < R; ++r)
    wr[r] = jb.w + (uint64_t)(n0 + r < jb.N ? n0 + r : jb.N - 1) * jb.w_nb1;
#pragma unroll
  for (int r = 0; r < R; ++r)
    memra_prefetch_l2(wr[r], jb.w_nb1, threadIdx.x, NT, 64);
  memra_pdl_enter();
}

/* An SM's shared memory (228 KiB where the properties do not say). */
static inline int64_t mm_sm_bytes(const memra_backend *be) {
  return be->prop.sharedMemPerMultiprocessor ? (int64_t)be->prop.sharedMemPerMultiprocessor
                                             : 228 * 1024;
}
/* Resident block slots of the device for blocks of `bytes` of shared memory each: blocks per
 * SM from its shared memory (mm_sm_bytes), between 1 and cap, times the SMs. */
static inline int64_t mm_block_slots(const memra_backend *be, int64_t bytes, int cap) {
  int64_t bps = mm_sm_bytes(be) / bytes;
  bps = bps > cap ? cap : bps < 1 ? 1 : bps;
  return (int64_t)(be->n_sms > 0 ? be->n_sms : 1) * bps;
}

/* Fills blk0 for R rows per block and returns the grid's x size (0 when too large). */
static inline int64_t mm_jobs_layout(mm_jobs *J, int R) {
  int64_t b = 0;
  for (int i = 0; i < J->n; ++i) {
    J->blk0[i] = (int32_t)b;
    b += (J->N[i] + R - 1) / R;
    if (b > 0x7fffffff) return 0;
  }
  return b;
}

/* A storing thread's conv inputs for channel n of row `row` (ssm_conv_v1_kernel<3>'s: the weights,
 * the 3 state columns, zero at position 0), loaded when the thread's tile starts so that the
 * dependent loads (sequence, then state) hide behind the tile's weights: the state was last
 * written by this op in an earlier step, many grids back (complete, as gated_delta_rule's).
 * A row whose sequence is out of range gets NaN and leaves the state alone, as ssm_conv does. */
struct mm_conv_in {
  float w[4], s[3];
  float *st;
};

__device__ __forceinline__ mm_conv_in mm_conv_load(const mm_conv &cv, bool on, int64_t row,
                                                   int64_t n) {
  mm_conv_in c = {};
  if (!on) return c;
  const int sq = cv.seq[row];
  if (sq < 0 || sq >= cv.n_seqs) return c;
  c.st = cv.state + (int64_t)sq * cv.s_ld + n * 3;
  const bool fresh = cv.pos[row] == 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    c.w[i] = cv.w[n * cv.w_ld + i];
#pragma unroll
  for (int i = 0; i < 3; ++i)
    c.s[i] = fresh ? 0.f : c.st[i];
  return c;
}

/* The conv's output for the row's new value xv, the state shifted. */
__device__ __forceinline__ float mm_conv_finish(const mm_conv_in &c, float xv) {
  if (!c.st) return __int_as_float(0x7fc00000);
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 3; ++i)
    acc += c.w[i] * c.s[i];
  acc += c.w[3] * xv;
  c.st[0] = c.s[1];
  c.st[1] = c.s[2];
  c.st[2] = xv;
  return acc / (1.0f + expf(-acc));
}

/* Row r of x row m: the warps' partials added in warp order (every GEMV's sum, and the fused
 * FFN's gate and up values, so their bits agree). */
template <int WARPS, int M, int R>
__device__ __forceinline__ float mm_sum_parts(const float (&part)[WARPS][M][R], int m, int r) {
  float v = part[0][m][r];
#pragma unroll
  for (int k = 1; k < WARPS; ++k)
    v = __fadd_rn(v, part[k][m][r]);
  return v;
}

/* matmul_acc (ABI 1.17) at mm_store_parts: none, y's old value preloaded by the storing thread
 * (xo, mm_acc_load: one row), or read at the store (rows of a batch). */
enum { MM_ACC_NONE = 0, MM_ACC_XO = 1, MM_ACC_READ = 2 };

/* matmul_acc (ABI 1.17), one row: y's old value at output n0 + threadIdx.x (the thread that
 * stores it, mm_store_parts), read at the tile's start, after the PDL wait, so its round trip
 * is off the tile's end. */
template <int R>
__device__ __forceinline__ float mm_acc_load(bool acc, const float *y, int64_t n0, int64_t N) {
  return acc && threadIdx.x < R && n0 + threadIdx.x < N ? y[n0 + threadIdx.x] : 0.f;
}

/* The GEMV kernels' last step, after every warp wrote its partials part[warp][m][r] and the
 * block synchronized: the warps' partials added in warp order, bias last (then, with conv, the
 * conv: one row, thread r storing output r, which mm_conv_load prepared; with acc, y's old value
 * plus the sum after the bias, rmsnorm's residual sum x + y); rows m >= mrows and
 * columns n >= N are not written. */
template <int WARPS, int M, int R>
__device__ __forceinline__ void
mm_store_parts(const float (&part)[WARPS][M][R], int64_t n0, int64_t N, int64_t m0, int64_t mrows,
               float *__restrict__ y, int64_t y_ld, const float *__restrict__ bias,
               const mm_conv_in ci = mm_conv_in{}, bool conv = false, int acc = MM_ACC_NONE,
               float xo = 0.f) {
  for (int i = threadIdx.x; i < M * R; i += WARPS * 32) {
    const int m = i / R, r = i % R;
    const int64_t n = n0 + r;
    if (m >= mrows || n >= N) continue;
    float v = mm_sum_parts<WARPS, M, R>(part, m, r);
    v = bias ? __fadd_rn(v, bias[n]) : v;
    if (acc != MM_ACC_NONE) v = __fadd_rn(acc == MM_ACC_XO ? xo : y[(m0 + m) * y_ld + n], v);
    y[(m0 + m) * y_ld + n] = conv ? mm_conv_finish(ci, v) : v;
  }
}

/* Ring kernels' consumer warps (CW of them, named barrier 1; the producer warp never joins). */
template <int CW> __device__ __forceinline__ void mm_consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
}

/* A ring GEMV's group of np tiles (of R rows, one row of x, no conv) stored after one barrier
 * pair instead of two a tile: the tiles' partials in G buffers, warp k storing the group's tile k
 * (my_tile), lane r < R its row r; my_xo is y's old value there (matmul_acc), read by those lanes
 * at the tile's start. mm_store_parts' sums in its order, so the same bits. Written out rather
 * than through mm_store_parts, which picks its storing threads by threadIdx.x (passing it a lane
 * instead changed every v11 kernel's code, 72 more instructions, for the same stores). Every
 * consumer thread calls it. */
template <int CW, int R, int G>
__device__ __forceinline__ void mm_group_store(const float (&partg)[G][CW][1][R], const mm_jobs &J,
                                               int np, int64_t my_tile, float my_xo, int warp,
                                               int lane) {
  mm_consumers_sync<CW>();
  if (warp < np && lane < R) {
    const mm_job jb = mm_pick_at(J, my_tile);
    const int64_t n = jb.b * R + lane;
    if (n < jb.N) {
      float v = mm_sum_parts<CW, 1, R>(partg[warp], 0, lane);
      v = jb.bias ? __fadd_rn(v, jb.bias[n]) : v;
      if (J.acc) v = __fadd_rn(my_xo, v);
      jb.y[n] = v;
    }
  }
  mm_consumers_sync<CW>();
}

/* The row kernels' ending: each warp's acc[m][r] summed over its lanes (butterfly), then
 * mm_store_parts. Every thread of the block calls it (it synchronizes). */
template <int WARPS, int M, int R>
__device__ __forceinline__ void mm_reduce_store(const float (&acc)[M][R],
                                                float (&part)[WARPS][M][R], int64_t n0, int64_t N,
                                                int64_t m0, int64_t mrows, float *__restrict__ y,
                                                int64_t y_ld, const float *__restrict__ bias) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = memra_warp_sum(acc[m][r]);
      if (lane == 0) part[warp][m][r] = v;
    }
  __syncthreads();
  mm_store_parts<WARPS, M, R>(part, n0, N, m0, mrows, y, y_ld, bias);
}

#endif /* MEMRA_CUDA_MATMUL_JOBS_CUH */
