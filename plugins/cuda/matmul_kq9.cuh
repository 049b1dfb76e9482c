/* matmul_kq9.cuh — matmul v9 for Q4_K, Q5_K and Q6_K weights (included by matmul.cu only):
 * v5's arithmetic (matmul_kq.cuh) fed from a cp.async ring in shared memory.
 *
 * Why (docs/PERF.md, GEMV v5 / v7): v5 runs at 39-49% of the copy bandwidth at M = 1 and a
 * tensor-core variant with half its instructions ran no faster, so it is bound by latency,
 * not issue. Each v5 warp loads one step of its 8 rows into registers (96 of its 122-128),
 * waits, computes, and only then loads again; at K = 4096 a warp has exactly one step per
 * block (16 super-blocks over 4 warps), so a block's life is "load, wait ~DRAM latency,
 * compute, reduce, exit". Bytes in flight per SM (16 warps, 4 blocks): Q4_K 16 x 8 rows x
 * 576 B = 72 KiB, and only while every warp of the SM is in its load phase; during the
 * compute phase (~1100 instructions per warp) nothing is in flight.
 *
 * v9: a block owns G groups of R rows (G = 1..4, from the grid size: at least 1.5 waves);
 * warp w walks the items (group, step) with its steps w, w + 4, ... of each group, in v5's
 * step order. Each item's bytes (R rows x one step: Q4_K 576 B, Q5_K 704 B, Q6_K 848 B, the
 * step's 840 B in 53 whole 16-byte chunks) are copied by 16-byte cp.async (LDGSTS, coalesced,
 * no registers held) into a per-warp ring of NS stages (Q4_K 3, Q5_K / Q6_K 2); item i + NS - 1
 * is issued before item i is computed (cp.async.wait_group NS - 1). The first NS - 1 items
 * are issued before the PDL wait (weights are constant, launch.cuh), then every row of the
 * block is prefetched to L2. Bytes in flight per SM (4 blocks of 4 warps, the smem limit):
 * Q4_K 16 warps x 2 items x 4608 B = 144 KiB, Q5_K / Q6_K 16 x 1 x 5632 / 6784 B = 88 /
 * 106 KiB, all the time, not only between compute phases (plus the L2 prefetches). Shared
 * memory per block: Q4_K 55,296 B, Q5_K 45,056 B, Q6_K 54,272 B (R = 8); registers: the raw
 * bytes no longer wait in registers.
 *
 * Exactness: bit-identical to v5. A lane reads from shared memory the same 16-byte words v5
 * read from global memory (same lane -> (super-block, group, half) mapping), feeds them to
 * v5's own mkq_row_step / mkq_row_step6 with the same x values (mkq_load_x16), accumulates
 * its steps in v5's order, and each group ends with v5's butterfly and the warps' partials
 * added in warp order, bias last (mm_store_parts). A warp without steps contributes +0, as
 * v5's butterfly of zeros does. G, R and NS change only which rows share a block, never a
 * row's arithmetic; M > 1 runs the same per-(row, x row) sequence (x from global memory, as
 * v5's batch path): batch invariant. */
#ifndef MEMRA_CUDA_MATMUL_KQ9_CUH
#define MEMRA_CUDA_MATMUL_KQ9_CUH

#include "plugins/cuda/matmul_kq.cuh"
#include "plugins/cuda/mma_sync.cuh"

enum { MK9_WARPS = 4, MK9_GMAX = 4 };

/* Super-block bytes; a row's bytes per step in a stage; stages in a warp's ring. */
__host__ __device__ constexpr int mk9_bytes(int T) {
  return T == MEMRA_TYPE_Q4_K ? 144 : T == MEMRA_TYPE_Q5_K ? 176 : 210;
}
__host__ __device__ constexpr int mk9_span(int T) {
  return T == MEMRA_TYPE_Q6_K ? 53 * 16 : 4 * mk9_bytes(T);
}
__host__ __device__ constexpr int mk9_stages(int T) { return T == MEMRA_TYPE_Q4_K ? 3 : 2; }
/* Dynamic shared memory of a block: every warp's ring. */
__host__ __device__ constexpr int mk9_smem(int T, int R) {
  return MK9_WARPS * mk9_stages(T) * R * mk9_span(T);
}

/* 16 bytes at a 2-byte-aligned shared address: five aligned words, funnel-shifted (the words
 * stay inside the staged step: see mk9_raw). */
__device__ __forceinline__ uint4 mk9_lds16_a2(const uint8_t *p) {
  const int mis = (int)((uintptr_t)p & 3); /* p - mis keeps the shared space (LDS, not LD) */
  const uint32_t *a = (const uint32_t *)(p - mis);
  const uint32_t sh = 8u * (uint32_t)mis;
  uint32_t v[5];
#pragma unroll
  for (int i = 0; i < 5; ++i)
    v[i] = a[i];
  return make_uint4(__funnelshift_r(v[0], v[1], sh), __funnelshift_r(v[1], v[2], sh),
                    __funnelshift_r(v[2], v[3], sh), __funnelshift_r(v[3], v[4], sh));
}

/* mkq_load_raw's words, from super-block b of a staged row (b in shared memory). */
template <int T>
__device__ __forceinline__ void mk9_raw(const uint8_t *b, int g, int p, uint4 *hd, uint4 *q,
                                        uint4 *qh) {
  if (T == MEMRA_TYPE_Q6_K) { /* b 2-byte aligned; the fifth word of each 16 B is <= 194 */
    const int n = g >> 1, c = g & 1;
    *q = mk9_lds16_a2(b + 64 * n + 32 * c + 16 * p);
    *qh = mk9_lds16_a2(b + 128 + 32 * n + 16 * p);
    const int si = 192 + 8 * n + 2 * c + p;
    *hd = make_uint4(*(const uint16_t *)(b + 208), b[si], b[si + 4], 0);
    return;
  }
  constexpr int QOFF = T == MEMRA_TYPE_Q4_K ? 16 : 48;
  *hd = *(const uint4 *)b;
  *q = *(const uint4 *)(b + QOFF + 32 * g + 16 * p);
  *qh = T == MEMRA_TYPE_Q5_K ? *(const uint4 *)(b + 16 + 16 * p) : make_uint4(0, 0, 0, 0);
}

/* Copies step s of R rows into the stage at shared address dst (R spans, row r at SPAN r):
 * row r is w + min(r, rmax) nb1 (rows past the job's N read its last row). The step's bytes
 * start at 4 BYTES s (Q6_K: 0 or 8 past a 16-byte boundary; the copy starts at the boundary);
 * a Q6_K chunk past the row's bytes is partial (zero-filled), so nothing after the row is
 * read. Lane l copies chunks l and l + 32 of each row (n16 <= 53). */
template <int T, int R>
__device__ __forceinline__ void mk9_issue(uint32_t dst, const uint8_t *w, uint64_t nb1, int rmax,
                                          int64_t s, int64_t nsb, int lane) {
  constexpr int BYTES = mk9_bytes(T), SPAN = mk9_span(T);
  const uint64_t off = (uint64_t)(4 * BYTES) * (uint64_t)s, a0 = off & ~(uint64_t)15;
  const int nb = nsb - 4 * s < 4 ? (int)(nsb - 4 * s) : 4;
  const int n16 = ((int)(off - a0) + nb * BYTES + 15) >> 4;
  int sz0 = 16, sz1 = 16;
  if (T == MEMRA_TYPE_Q6_K) { /* bytes of the row left from chunk lane, lane + 32 */
    const int64_t left = (int64_t)((uint64_t)nsb * BYTES - a0) - 16 * lane;
    sz0 = left < 16 ? (int)left : 16;
    sz1 = left - 512 < 16 ? (int)(left - 512) : 16;
  }
  const bool c0 = lane < n16, c1 = lane + 32 < n16;
  const uint8_t *src = w + a0 + 16 * lane;
  dst += 16 * lane;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (c0) memra_cp_async16(dst + SPAN * r, src, sz0);
    if (c1) memra_cp_async16(dst + SPAN * r + 512, src + 512, sz1);
    if (r < rmax) src += nb1;
  }
}

template <int T, int M, bool VEC, int R>
__global__ void __launch_bounds__(MK9_WARPS * 32, M == 1 ? 4 : 1)
    matmul_kq_v9_kernel(const mm_jobs J, const float *__restrict__ x, int64_t x_ld, int64_t K,
                        int64_t rows, int G) {
  constexpr int B = T == MEMRA_TYPE_Q4_K ? 4 : T == MEMRA_TYPE_Q5_K ? 5 : 6;
  constexpr int BYTES = mk9_bytes(T), SPAN = mk9_span(T), NS = mk9_stages(T);
  constexpr int GM = M == 1 ? MK9_GMAX : 1, eh = B == 6 ? 64 : 32;
  extern __shared__ __align__(16) uint8_t mk9_smem_[];
  __shared__ float part[GM][MK9_WARPS][M][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sbl = lane >> 3, g = (lane >> 1) & 3, p = lane & 1;
  const mm_job jb = mm_pick(J);
  float *__restrict__ y = jb.y;
  const float *__restrict__ bias = jb.bias;
  const int64_t y_ld = jb.y_ld, N = jb.N;
  const int64_t n0 = jb.b * (int64_t)(G * R);
  const int64_t m0 = (int64_t)blockIdx.y * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t nsb = K / 256, steps = (nsb + 3) / 4;
  const int64_t gleft = (N - n0 + R - 1) / R; /* groups of the block with a row < N */
  const int ng = gleft < G ? (int)gleft : G;
  const int my = steps > warp ? (int)((steps - 1 - warp) / MK9_WARPS) + 1 : 0;
  const int items = ng * my;
  uint8_t *ring = mk9_smem_ + warp * (NS * R * SPAN);
  const uint32_t ring_s = memra_smem_u32(ring);

  /* issue cursor: item (ig, is) -> group ig, step warp + 4 is, stage slot */
  int ig = 0, is = 0, islot = 0, issued = 0;
#define MK9_ISSUE()                                                                                \
  do {                                                                                             \
    if (issued < items) {                                                                          \
      const int64_t n_ = n0 + (int64_t)ig * R; /* < N: the block's groups have a row < N */        \
      mk9_issue<T, R>(ring_s + islot * (R * SPAN), jb.w + (uint64_t)n_ * jb.w_nb1, jb.w_nb1,       \
                      N - 1 - n_ < R - 1 ? (int)(N - 1 - n_) : R - 1,                              \
                      warp + (int64_t)MK9_WARPS * is, nsb, lane);                                  \
      ++issued;                                                                                    \
      islot = islot + 1 == NS ? 0 : islot + 1;                                                     \
      if (++is == my) is = 0, ++ig;                                                                \
    }                                                                                              \
    memra_cp_async_commit();                                                                       \
  } while (0)
#pragma unroll
  for (int k = 0; k < NS - 1; ++k)
    MK9_ISSUE(); /* weights only: before the PDL wait */
  for (int rr = warp; rr < ng * R;
       rr += MK9_WARPS) { /* then every row of the block: a warp a row */
    const int64_t n = n0 + rr < N ? n0 + rr : N - 1;
    memra_prefetch_l2(jb.w + (uint64_t)n * jb.w_nb1, jb.w_nb1, lane, 32, 64);
  }
  memra_pdl_enter();

  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;
  float xl[16], xh[16], Xl = 0.f, Xh = 0.f;
  int64_t xs = -1; /* the step whose x the lane holds (M = 1) */
  int cg = 0, cs = 0, cslot = 0;
  for (int i = 0; i < items; ++i) {
    MK9_ISSUE();
    memra_cp_async_wait<NS - 1>();
    __syncwarp();
    const int64_t s = warp + (int64_t)MK9_WARPS * cs, sb = 4 * s + sbl;
    if (sb < nsb) { /* else: tail step, this lane's super-block is past the row */
      const uint8_t *st = ring + cslot * (R * SPAN) + BYTES * sbl +
                          (T == MEMRA_TYPE_Q6_K ? (int)((4u * BYTES * (uint64_t)s) & 15) : 0);
      const int64_t e = 256 * sb + (B == 6 ? 128 * (g >> 1) + 32 * (g & 1) : 64 * g) + 16 * p;
      if (M == 1) { /* x once per step (once per block when the warp has one step) */
        if (s != xs) {
          const float *xp = x + m0 * x_ld + e;
          Xl = mkq_load_x16<VEC>(xp, xl);
          Xh = mkq_load_x16<VEC>(xp + eh, xh);
          xs = s;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          uint4 hd, q, qh;
          mk9_raw<T>(st + SPAN * r, g, p, &hd, &q, &qh);
          acc[0][r] = B == 6 ? mkq_row_step6(acc[0][r], hd, q, qh, g, xl, xh, Xl, Xh)
                             : mkq_row_step<B>(acc[0][r], hd, q, qh, g, xl, xh, Xl, Xh);
        }
      } else { /* batch: each weight row's words once, x rows from global (v5's batch path) */
#pragma unroll
        for (int r = 0; r < R; ++r) {
          uint4 hd, q, qh;
          mk9_raw<T>(st + SPAN * r, g, p, &hd, &q, &qh);
#pragma unroll
          for (int m = 0; m < M; ++m) {
            if (m >= mrows) break;
            const float *xp = x + (m0 + m) * x_ld + e;
            float bl[16], bh[16];
            const float Bl = mkq_load_x16<VEC>(xp, bl), Bh = mkq_load_x16<VEC>(xp + eh, bh);
            acc[m][r] = B == 6 ? mkq_row_step6(acc[m][r], hd, q, qh, g, bl, bh, Bl, Bh)
                               : mkq_row_step<B>(acc[m][r], hd, q, qh, g, bl, bh, Bl, Bh);
          }
        }
      }
    }
    __syncwarp(); /* every lane is done with the stage before it is refilled */
    cslot = cslot + 1 == NS ? 0 : cslot + 1;
    if (++cs == my) { /* the group's last step: v5's butterfly, partials by warp */
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float v = memra_warp_sum(acc[m][r]);
          if (lane == 0) part[cg][warp][m][r] = v;
          acc[m][r] = 0.f;
        }
      cs = 0;
      ++cg;
    }
  }
#undef MK9_ISSUE
  if (my == 0 && lane == 0) /* no steps: v5's butterfly of zeros */
    for (int gg = 0; gg < ng; ++gg)
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int r = 0; r < R; ++r)
          part[gg][warp][m][r] = 0.f;
  memra_cp_async_wait<0>(); /* only empty groups remain; nothing left in flight at exit */
  __syncthreads();
  for (int gg = 0; gg < ng; ++gg)
    mm_store_parts<MK9_WARPS, M, R>(part[gg], n0 + (int64_t)gg * R, N, m0, mrows, y, y_ld, bias);
}

/* v9 only where an SM holds 4 of its blocks (R = 8): Hopper's 228 KiB, not sm_120's 100 KiB,
 * where 1 block (4 warps) per SM would starve it; v5 there (the same bits). A property of
 * the device, fixed for the process. */
static inline bool mk9_fits(const memra_backend *be, int32_t type) {
  const int smem = mk9_smem(type, MKQ_R);
  return (int64_t)be->prop.sharedMemPerMultiprocessor >= 4 * (int64_t)(smem + 2 * 1024) &&
         (int64_t)be->prop.sharedMemPerBlockOptin >= smem + 1024;
}

/* Groups per block: as many as keep the grid at >= 1.5 waves of resident blocks (more items
 * per warp, fewer pipeline fills), at most MK9_GMAX; 1 for batches. Blocks per SM from its
 * shared memory (4 on an H200: the launch bound; 1 on sm_120's 100 KiB). */
static inline int mk9_groups(int64_t groups, const memra_backend *be, int smem) {
  /* + the block's reserved 1 KiB and part[] */
  const int64_t slots = mm_block_slots(be, (int64_t)smem + 2 * 1024, 4);
  const int64_t G = groups / (slots + slots / 2);
  return G < 1 ? 1 : G > MK9_GMAX ? MK9_GMAX : (int)G;
}

/* R rows per group as in mkq_launch (2 under 4096 rows in all at M = 1, else 8). Returns false
 * when the grid is too large; *err: the attribute call's error (no launch then). */
template <int T, bool VEC>
static bool mk9_launch(int mt, int R, const memra_backend *be, mm_jobs J, const float *x,
                       int64_t x_ld, int64_t K, int64_t rows, cudaError_t *err) {
  *err = cudaSuccess;
  int64_t groups = 0;
  for (int i = 0; i < J.n; ++i)
    groups += (J.N[i] + R - 1) / R;
  const int G = mt == 1 ? mk9_groups(groups, be, mk9_smem(T, R)) : 1;
  const int64_t gx = mm_jobs_layout(&J, G * R);
  if (gx == 0) return false;
  const dim3 grid((unsigned)gx, (unsigned)((rows + mt - 1) / mt));
#define MK9_GO(MM, RR)                                                                             \
  do {                                                                                             \
    const int smem = mk9_smem(T, RR);                                                              \
    *err = cudaFuncSetAttribute(matmul_kq_v9_kernel<T, MM, VEC, RR>,                               \
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem);                \
    if (*err == cudaSuccess)                                                                       \
      (void)memra_cu_launch(be, matmul_kq_v9_kernel<T, MM, VEC, RR>, grid, dim3(MK9_WARPS * 32),   \
                            smem, J, x, x_ld, K, rows, G);                                         \
  } while (0)
  switch (mt) {
  case 1:
    if (R == 2)
      MK9_GO(1, 2);
    else
      MK9_GO(1, MKQ_R);
    break;
  case 2: MK9_GO(2, MKQ_R); break;
  case 4: MK9_GO(4, MKQ_R); break;
  default: MK9_GO(8, MKQ_R); break;
  }
#undef MK9_GO
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_KQ9_CUH */
