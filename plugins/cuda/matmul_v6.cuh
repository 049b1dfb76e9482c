/* matmul_v6.cuh — matmul v6 for F16, BF16 and F32 weights (included by matmul.cu only).
 *
 * Why (docs/PERF.md, ncu of a Llama-8B decode step): v3 gives each warp one weight row, so
 * every lane re-reads its x slice from L1 for every row: 32 B of x per 16 B of F16 weight,
 * three 16-byte loads per 8 weights. F16 ran at 56% (4096^2) to 72% (14336x4096) of the
 * copy bandwidth (ncu). Q8_0 (34-byte blocks, 2-byte loads) was tried here and measured 3%
 * slower end to end than v3, so it stays on v3.
 *
 * v6 layout (v5's for the K-quants, applied to the 16-bit floats): a block of 4 warps owns
 * R consecutive weight rows. A row is cut into groups of 8 elements (16 bytes); 32
 * consecutive groups make a step; warp w takes steps w, w + 4, ... and lane l group
 * 32 s + l, so each warp load of a row is contiguous. The lane loads its 8 x values once per
 * step and applies them to all R rows (x leaves L1 once per R weight rows), and at M = 1
 * two steps' weights are loaded before either is used.
 *
 * Arithmetic per (x row, weight row): the lane's chain acc = fma(w_i, x_i, acc) over its
 * groups in order, elements in order, a butterfly over the warp, then the 4 warps'
 * partials added in warp order (+ bias). None of it depends on M, on R or on the other
 * rows: batch invariant. */
#ifndef MEMRA_CUDA_MATMUL_V6_CUH
#define MEMRA_CUDA_MATMUL_V6_CUH

#include "plugins/cuda/dequant.cuh"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/l2_policy.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_jobs.cuh"
#include "plugins/cuda/moe_route.cuh"

enum { MV6_WARPS = 4, MV6_R = 8 };

/* The weights are loaded evict-first in L2 when the launch reads them once (one block row,
 * gridDim.y 1: a decode step's F32 routers), as the rings' bulk copies are (mbarrier.cuh);
 * batches read them once a block row and keep the plain load. A build define (0: plain loads
 * only). H100 tg128 @ d512: the hybrid +1.4% (its 512-expert routers, 4 MB a layer), MoE even. */
#ifndef MEMRA_V6_EVICT_FIRST
#define MEMRA_V6_EVICT_FIRST 1
#endif
__device__ __forceinline__ uint4 mv6_ldg(const uint4 *p, bool once) {
#if MEMRA_V6_EVICT_FIRST
  if (once) return memra_ldg_policy(p, memra_l2_evict_first());
#endif
  (void)once;
  return __ldg(p);
}

/* The raw bytes of a group of 8 elements: 16 (F16, BF16) or 32 (F32). */
template <int T> struct mv6_raw { uint4 v; };
template <> struct mv6_raw<MEMRA_TYPE_F32> { uint4 a, b; };

/* Group g of a row (rows 16-byte aligned: the caller checks). */
template <int T>
__device__ __forceinline__ mv6_raw<T> mv6_load(const uint8_t *__restrict__ row, int64_t g,
                                               bool once) {
  if constexpr (T == MEMRA_TYPE_F32) {
    const uint4 *p = (const uint4 *)(row + 32 * g);
    return {mv6_ldg(p, once), mv6_ldg(p + 1, once)};
  } else {
    return {mv6_ldg((const uint4 *)(row + 16 * g), once)};
  }
}

/* acc + the group's 8 weights . x, in element order. */
template <int T> __device__ __forceinline__ float mv6_dot(uint4 raw, const float x[8], float acc) {
  float w[8];
  const uint32_t h[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (T == MEMRA_TYPE_F16) {
      const float2 f = __half22float2(*(const __half2 *)&h[i]);
      w[2 * i] = f.x;
      w[2 * i + 1] = f.y;
    } else {
      w[2 * i] = __uint_as_float(h[i] << 16);
      w[2 * i + 1] = __uint_as_float(h[i] & 0xFFFF0000u);
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    acc = fmaf(w[i], x[i], acc);
  return acc;
}
template <int T>
__device__ __forceinline__ float mv6_dot(const mv6_raw<T> &raw, const float x[8], float acc) {
  if constexpr (T == MEMRA_TYPE_F32) {
    const float w[8] = {__uint_as_float(raw.a.x), __uint_as_float(raw.a.y),
                        __uint_as_float(raw.a.z), __uint_as_float(raw.a.w),
                        __uint_as_float(raw.b.x), __uint_as_float(raw.b.y),
                        __uint_as_float(raw.b.z), __uint_as_float(raw.b.w)};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      acc = fmaf(w[i], x[i], acc);
    return acc;
  } else {
    return mv6_dot<T>(raw.v, x, acc);
  }
}

/* ABI 1.22 matmul_n_route: job 0's rows are a MoE router's logits, routed by the launch's last
 * block into ids and weights (moe_route's layout), so a decode step has no route launch. */
struct mv6_route {
  int32_t *ids;
  float *w;
  const float *logits;
  int64_t ids_ld, w_ld, l_ld;
  int ne, k, normalize;
};

/* The route launches' tickets: zero at module load, and every launch leaves it zero (the block
 * taking the last ticket resets it). A launch takes its tickets only after its PDL wait, when the
 * route launch before it on the stream (one stream a device) has completed. */
__device__ unsigned int mv6_route_ctr;

/* After the block's stores: each block takes a ticket, and the last routes every row of the logits
 * with moe_route v3's warp function (route_warp: the same ids and weights), reading them through
 * L2 (the other blocks' stores, published by their fences before their tickets). */
template <int NPL>
__device__ __forceinline__ void mv6_route_tail(const mv6_route &rt, int64_t rows) {
  __shared__ bool last;
  __threadfence(); /* this thread's stores before the block's ticket */
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int t = atomicAdd(&mv6_route_ctr, 1u);
    last = t == gridDim.x * gridDim.y - 1;
    if (last) mv6_route_ctr = 0u; /* every block has its ticket */
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int lane = threadIdx.x & 31;
  for (int64_t r = threadIdx.x >> 5; r < rows; r += MV6_WARPS) {
    int id;
    float w;
    route_warp<NPL, true>(rt.logits + r * rt.l_ld, rt.ne, rt.k, rt.normalize, lane, &id, &w);
    if (lane < rt.k) {
      rt.ids[r * rt.ids_ld + lane] = id;
      rt.w[r * rt.w_ld + lane] = w;
    }
  }
}

/* ABI 1.14 rmsnorm_matmul_n on v6 (F32 weights, one row of K % 512 == 0 up to 4096: a MoE
 * layer's router, whose call takes the ffn norm in decode steps): rmsnorm's row is made in every
 * block's head after the PDL wait, the launch that was the norm's own gone from the chain. The
 * bits are rmsnorm_v2's (rms_row over K / 4 threads, one float4 each): thread (w, l) here holds
 * its warp 4 j + w lane l, so the same fmaf chains, warp butterflies and block sum, and
 * (v inv) g for the row, kept in shared memory for the dot products; block 0 writes xn. With a
 * residual (x += res first, the hybrid's) every block adds it to what it read, and the block
 * taking the last ticket, all the others' reads of x done, writes x + res back. */
enum { MV6N_J = 8 }; /* float4s of the row a thread holds at K 4096 */

/* The residual tickets: zero at module load, left zero by every launch (mv6_route_ctr's rule). */
__device__ unsigned int mv6_norm_ctr;

/* g: the thread's norm weights, loaded before the PDL wait (mv6_norm_w). */
__device__ __forceinline__ void mv6_norm_w(const mm_norm &nm, int64_t K, float4 (&g)[MV6N_J]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nj = (int)(K / 512);
#pragma unroll
  for (int j = 0; j < MV6N_J; ++j)
    g[j] = j < nj ? __ldg((const float4 *)nm.w + 32 * (4 * j + warp) + lane)
                  : make_float4(0.f, 0.f, 0.f, 0.f);
}

/* The normed row into xs (K / 4 float4s of shared memory), after the PDL wait. */
__device__ __forceinline__ void mv6_norm_head(const mm_norm &nm, int64_t K,
                                              const float4 (&g)[MV6N_J], float4 *xs) {
  __shared__ float sh[32];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nj = (int)(K / 512);
  float4 v[MV6N_J];
#pragma unroll
  for (int j = 0; j < MV6N_J; ++j) {
    if (j >= nj) break;
    const int64_t i = 32 * (4 * j + warp) + lane;
    v[j] = ((const float4 *)nm.x)[i];
    if (nm.res) {
      const float4 a = ((const float4 *)nm.res)[i];
      v[j].x += a.x;
      v[j].y += a.y;
      v[j].z += a.z;
      v[j].w += a.w;
    }
    const float ss = memra_warp_sum(memra_sumsq4(v[j]));
    if (lane == 0) sh[4 * j + warp] = ss;
  }
  __syncthreads();
  float ss = lane < (int)(K / 128) ? sh[lane] : 0.f;
  ss = memra_warp_sum(ss);
  const float inv = rsqrtf(ss / (float)K + nm.eps);
  const bool b0 = blockIdx.x == 0 && blockIdx.y == 0;
#pragma unroll
  for (int j = 0; j < MV6N_J; ++j) {
    if (j >= nj) break;
    const int64_t i = 32 * (4 * j + warp) + lane;
    const float4 o = make_float4(v[j].x * inv * g[j].x, v[j].y * inv * g[j].y,
                                 v[j].z * inv * g[j].z, v[j].w * inv * g[j].w);
    xs[i] = o;
    if (b0) ((float4 *)nm.xn)[i] = o;
  }
  if (nm.res) { /* every block has read x once its thread 0 takes a ticket after the barrier */
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned int t = atomicAdd(&mv6_norm_ctr, 1u);
      last = t == gridDim.x * gridDim.y - 1;
      if (last) mv6_norm_ctr = 0u;
    }
    __syncthreads();
    if (last)
#pragma unroll
      for (int j = 0; j < MV6N_J; ++j) {
        if (j >= nj) break;
        ((float4 *)nm.x)[32 * (4 * j + warp) + lane] = v[j];
      }
  }
  __syncthreads();
}

/* NPL > 0: the route of job 0's rows after the stores (mv6_route_tail, NPL logits a lane). */
/* NORM: rmsnorm's row in the head (mv6_norm_head; F32, M 1), x then unused. */
template <int T, int M, int R, bool XV, int NPL = 0, bool NORM = false>
__global__ void __launch_bounds__(MV6_WARPS * 32, M == 1 ? 4 : 1)
    matmul_v6_kernel(const mm_jobs J, const float *__restrict__ x, int64_t x_ld, int64_t K,
                     int64_t rows, const mv6_route rt, const mm_norm nm) {
  static_assert(!NORM || (T == MEMRA_TYPE_F32 && M == 1 && NPL == 0), "the norm: F32, one row");
  __shared__ float part[MV6_WARPS][M][R];
  __shared__ float4 xsn[NORM ? 1024 : 1]; /* NORM: the normed row */
  float4 gn[MV6N_J];                      /* NORM: the thread's norm weights */
  if (NORM) mv6_norm_w(nm, K, gn);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const mm_job jb = mm_pick(J);
  float *__restrict__ y = jb.y;
  const float *__restrict__ bias = jb.bias;
  const int64_t y_ld = jb.y_ld, N = jb.N;
  const int64_t n0 = jb.b * R;
  const int64_t m0 = (int64_t)blockIdx.y * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const int64_t G = K / 8, steps = (G + 31) / 32;
  const bool once = gridDim.y == 1; /* the weights' only reader (mv6_ldg) */
  const uint8_t *wr[R];
  mm_rows_enter<R, MV6_WARPS * 32>(wr, jb, n0);
  if (NORM) mv6_norm_head(nm, K, gn, xsn);
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[m][r] = 0.f;

  int64_t s = warp;
  /* two steps' weights in flight, then x once per step (F32's 32-byte groups: one step, so 8
   * rows stay within 128 registers) */
  if (M == 1 && T != MEMRA_TYPE_F32) {
    for (; s + MV6_WARPS < steps; s += 2 * MV6_WARPS) {
      const int64_t g0 = s * 32 + lane, g1 = g0 + 32 * MV6_WARPS; /* g0 < g1 < G */
      mv6_raw<T> raw0[R], raw1[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        raw0[r] = mv6_load<T>(wr[r], g0, once);
        raw1[r] = g1 < G ? mv6_load<T>(wr[r], g1, once) : mv6_raw<T>{};
      }
      const float *xp = x + m0 * x_ld;
      float xv[8];
      memra_ldg8<XV>(xp + 8 * g0, xv);
#pragma unroll
      for (int r = 0; r < R; ++r)
        acc[0][r] = mv6_dot<T>(raw0[r], xv, acc[0][r]);
      if (g1 < G) {
        memra_ldg8<XV>(xp + 8 * g1, xv);
#pragma unroll
        for (int r = 0; r < R; ++r)
          acc[0][r] = mv6_dot<T>(raw1[r], xv, acc[0][r]);
      }
    }
  }
  for (; s < steps; s += MV6_WARPS) {
    const int64_t g = s * 32 + lane;
    if (g >= G) continue; /* the row's last step: lanes past its end */
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const mv6_raw<T> raw = mv6_load<T>(wr[r], g, once);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (m >= mrows) break;
        float xv[8];
        if (NORM) {
          const float4 a = xsn[2 * g], b = xsn[2 * g + 1];
          xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w;
          xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
        } else {
          memra_ldg8<XV>(x + (m0 + m) * x_ld + 8 * g, xv);
        }
        acc[m][r] = mv6_dot<T>(raw, xv, acc[m][r]);
      }
    }
  }
  mm_reduce_store<MV6_WARPS>(acc, part, n0, N, m0, mrows, y, y_ld, bias);
  if constexpr (NPL > 0) mv6_route_tail<NPL>(rt, rows);
}

/* R rows per block as in mkq_launch (F32 one row: 2); xv16: x's rows 16-byte aligned (vector
 * loads; else scalar ones, the same bits). rt (may be NULL): the route of job 0's rows, taken
 * (*routed) by an F32 launch of one row with aligned x (a decode step's router), else left to the
 * caller. */
template <int T>
static bool mv6_launch(int mt, int R, const memra_backend *be, mm_jobs J, const float *x,
                       int64_t x_ld, int64_t K, int64_t rows, bool xv16, const mv6_route *rt = NULL,
                       bool *routed = NULL) {
  if (T == MEMRA_TYPE_F32 && mt == 1) R = 2; /* the grid below is laid out for these R rows */
  const int64_t gx = mm_jobs_layout(&J, R);
  if (gx == 0) return false;
  const dim3 grid((unsigned)gx, (unsigned)((rows + mt - 1) / mt));
  if constexpr (T == MEMRA_TYPE_F32) {
    if (rt && mt == 1 && xv16) {
#define MV6_ROUTE(NPL)                                                                             \
  (void)memra_cu_launch(be, matmul_v6_kernel<T, 1, 2, true, NPL>, grid, dim3(MV6_WARPS * 32), 0,   \
                        J, x, x_ld, K, rows, *rt, mm_norm{})
      switch (route_npl(rt->ne)) {
      case 4: MV6_ROUTE(4); break;
      case 8: MV6_ROUTE(8); break;
      case 16: MV6_ROUTE(16); break;
      default: MV6_ROUTE(32); break;
      }
#undef MV6_ROUTE
      *routed = true;
      return true;
    }
  }
  const mv6_route none = {};
#define MV6_GO(MM, RR)                                                                             \
  (void)memra_cu_launch(                                                                           \
      be, xv16 ? matmul_v6_kernel<T, MM, RR, true> : matmul_v6_kernel<T, MM, RR, false>, grid,     \
      dim3(MV6_WARPS * 32), 0, J, x, x_ld, K, rows, none, mm_norm{})
  switch (mt) {
  case 1: /* F32 one row: 2 rows a block (8 would need more than 128 registers) */
    if constexpr (T == MEMRA_TYPE_F32)
      MV6_GO(1, 2);
    else if (R == 2)
      MV6_GO(1, 2);
    else
      MV6_GO(1, MV6_R);
    break;
  case 2: MV6_GO(2, MV6_R); break;
  case 4: MV6_GO(4, MV6_R); break;
  default: MV6_GO(8, MV6_R); break;
  }
#undef MV6_GO
  return true;
}

/* rmsnorm_matmul_n's v6 form over J (F32 weights, one row, x 16-byte aligned: the caller
 * checked); false when the grid is too large. */
static bool mv6_norm_launch(const memra_backend *be, mm_jobs J, int64_t K, const mm_norm &nm) {
  const int64_t gx = mm_jobs_layout(&J, 2);
  if (gx == 0) return false;
  (void)memra_cu_launch(be, matmul_v6_kernel<MEMRA_TYPE_F32, 1, 2, true, 0, true>,
                        dim3((unsigned)gx), dim3(MV6_WARPS * 32), 0, J, (const float *)NULL,
                        (int64_t)0, K, (int64_t)1, mv6_route{}, nm);
  return true;
}

#endif /* MEMRA_CUDA_MATMUL_V6_CUH */
