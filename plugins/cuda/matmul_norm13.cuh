/* matmul_norm13.cuh — ABI 1.14: rmsnorm's row inside a v13 launch (rmsnorm_matmul_n,
 * rmsnorm_ffn_glu for one row of Q8_0 weights) or a v11 launch (Q4_K); included by
 * matmul_q13.cuh and matmul_tc11.cuh.
 *
 * Why (docs/PERF.md): a decode layer's two norms are launches of their own on the step's chain
 * (~1.6 us each in a Llama-8B step after the weight load moved before the wait); the GEMV after a
 * norm is resident and has its weights in flight while the norm runs, and then waits again. Here
 * the GEMV's consumers read x (+ res) themselves after the wait, so the norm's launch, its write
 * of xn and the GEMV's read of it leave the chain.
 * Bits: rmsnorm_v2 at K = 4096 runs 1024 threads, a float4 each: thread t's partial is the fmaf
 * chain over its float4, then each warp's butterfly, then a butterfly over the 32 warp sums, then
 * x * inv * w. A v13 block's consumer warp w holds float4s 256 w + 32 j + lane (j < 8): the same
 * float4s as rmsnorm's warps 8 w + j, lane for lane, so the same partials, butterflies and sum;
 * and those are exactly the 1024 elements of warp w's one step (x_once), stored where
 * mq8_issue_x would have copied them. Every block computes the row; block 0 writes xn.
 * x += res, written back: every block reads x, so the write must come after every block's read:
 * each block takes a ticket once its x is in registers, and the block holding the last ticket
 * rewrites x (re-read: no block writes it before) at its end and resets the count (the next
 * launch takes tickets only after its PDL wait, when this one is complete; one stream a device).
 * Measured (docs/PERF.md, 2026-12-03): bit-identical, but a live Llama-8B step is slower (Q8_0
 * tg128 325.5 vs 351, Q4_K_M 378 vs 403), hence opt-in (MEMRA_NORM_MM=1). */
#ifndef MEMRA_CUDA_MATMUL_NORM13_CUH
#define MEMRA_CUDA_MATMUL_NORM13_CUH

#include <type_traits>

#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_q8b.cuh"
#include "plugins/cuda/matmul_tc.cuh"

__device__ unsigned int norm13_ctr;

enum { N13_J = 8 }; /* float4s a consumer lane holds: 4096 / (4 warps x 32 lanes x 4) */

/* The lane's float4s of the norm weight, loaded before the PDL wait (constant). */
__device__ __forceinline__ void n13_load_w(const mm_norm &nm, float4 (&g)[N13_J], int warp,
                                           int lane) {
#pragma unroll
  for (int j = 0; j < N13_J; ++j)
    g[j] = __ldg((const float4 *)nm.w + 256 * warp + 32 * j + lane);
}

/* 1 / rms of the row whose float4s 256 w + 32 j + lane the consumer warps hold (rmsnorm_v2's
 * threads, lane for lane): each thread's fmaf partial, each warp's butterfly into shn, a barrier of
 * the NCW consumer warps (bar 1), the butterfly over the 32 warp sums: rmsnorm_v2's order. */
template <int NCW>
__device__ __forceinline__ float n13_rms_inv(const float4 (&v)[N13_J], float *shn, float eps,
                                             int warp, int lane) {
#pragma unroll
  for (int j = 0; j < N13_J; ++j) { /* rmsnorm's thread 256 w + 32 j + lane */
    const float ss = memra_warp_sum(memra_sumsq4(v[j]));
    if (lane == 0) shn[N13_J * warp + j] = ss;
  }
  asm volatile("bar.sync 1, %0;" ::"n"(NCW * 32) : "memory");
  const float ss = memra_warp_sum(shn[lane]); /* 32 warp sums */
  return rsqrtf(ss / 4096.f + eps);
}

/* After the wait, by the 4 consumer warps (bar 1): the row's rms in rmsnorm_v2's order, warp w's
 * step of xn into its x buffer xsw (v8's swizzle), block 0 writing xn; *ticket (thread 0): the
 * block's place among the blocks done reading x. shn: 32 floats of shared memory. */
template <int NCW>
__device__ __forceinline__ void n13_norm_x(const mm_norm &nm, const float4 (&g)[N13_J],
                                           uint8_t *xsw, float *shn, unsigned *ticket, int warp,
                                           int lane) {
  float4 v[N13_J];
#pragma unroll
  for (int j = 0; j < N13_J; ++j)
    v[j] = ((const float4 *)nm.x)[256 * warp + 32 * j + lane];
  if (nm.res) {
#pragma unroll
    for (int j = 0; j < N13_J; ++j) {
      const float4 a = ((const float4 *)nm.res)[256 * warp + 32 * j + lane];
      v[j].x += a.x;
      v[j].y += a.y;
      v[j].z += a.z;
      v[j].w += a.w;
    }
  }
  const float inv = n13_rms_inv<NCW>(v, shn, nm.eps, warp, lane);
  if (threadIdx.x == 0 && nm.res) *ticket = atomicAdd(&norm13_ctr, 1u); /* x is read */
#pragma unroll
  for (int j = 0; j < N13_J; ++j) {
    const float4 o = make_float4(v[j].x * inv * g[j].x, v[j].y * inv * g[j].y,
                                 v[j].z * inv * g[j].z, v[j].w * inv * g[j].w);
    *(float4 *)(xsw + 16 * mq8_xswz(32 * j + lane)) = o;
    if (blockIdx.x == 0) ((float4 *)nm.xn)[256 * warp + 32 * j + lane] = o;
  }
  __syncwarp();
}

/* At the block's end, by the consumer warps: the holder of the last ticket writes x + res back
 * (rmsnorm's sums) and resets the count. flag: an int of shared memory. */
template <int NCW>
__device__ __forceinline__ void n13_finish(const mm_norm &nm, unsigned ticket, int *flag, int warp,
                                           int lane) {
  if (!nm.res) return; /* nothing to write back, no ticket taken (matmul_acc added it before) */
  if (threadIdx.x == 0) *flag = ticket == gridDim.x - 1;
  asm volatile("bar.sync 1, %0;" ::"n"(NCW * 32) : "memory");
  if (!*flag) return;
  if (nm.res) {
#pragma unroll
    for (int j = 0; j < N13_J; ++j) {
      const int64_t f = 256 * warp + 32 * j + lane;
      float4 v = ((const float4 *)nm.x)[f];
      const float4 a = ((const float4 *)nm.res)[f];
      v.x += a.x;
      v.y += a.y;
      v.z += a.z;
      v.w += a.w;
      ((float4 *)nm.x)[f] = v;
    }
  }
  if (threadIdx.x == 0) norm13_ctr = 0;
}

/* ABI 1.15 matmul_rmsnorm (TAIL): the GEMV's own output row is the norm's res. Its last block to
 * finish, which alone sees every block's stores, adds the row into x and writes rmsnorm's xn, so
 * the norm is no launch of its own on the step's chain. Each consumer thread fences its stores
 * (those of mm_store_parts: R threads) before its block's ticket; the block holding the last
 * ticket reads x, the row and the weight at once from L2
 * (__ldcg: no line of x or the row is in its L1) in n13_norm_x's layout and order, which is
 * rmsnorm_v2's: the same bits. Measured (docs/PERF.md, 2026-12-03, sixth session): the same bits,
 * and slower in a live step (the ticket and the tail cost more than the norm's launch), hence
 * opt-in (MEMRA_MM_NORM=1). The weight's lines were hinted to L2 by block 0 before its wait
 * (n13_tail_hint; 8 GB of weights stream through L2 between two uses). The count resets itself (no
 * block of the next launch takes a ticket before this one completes). */
__device__ unsigned int tail13_ctr;

__device__ __forceinline__ void n13_tail_hint(const mm_norm &nm, int warp, int lane) {
  if (blockIdx.x == 0 && warp == 0) memra_prefetch_l2(nm.w, 4096 * sizeof(float), lane, 32, 128);
}

template <int NCW, int R>
__device__ __forceinline__ void n13_tail(const mm_norm &nm, int *flag, float *shn, int warp,
                                         int lane) {
  if (threadIdx.x < R) __threadfence(); /* the row's stores (threads < R: mm_store_parts) */
  asm volatile("bar.sync 1, %0;" ::"n"(NCW * 32) : "memory");
  if (threadIdx.x == 0) *flag = atomicAdd(&tail13_ctr, 1u) == gridDim.x - 1;
  asm volatile("bar.sync 1, %0;" ::"n"(NCW * 32) : "memory");
  if (!*flag) return;
  __threadfence();
  float4 v[N13_J], g[N13_J];
#pragma unroll
  for (int j = 0; j < N13_J; ++j) { /* x, the row and the weight: one round trip */
    const int f = 256 * warp + 32 * j + lane;
    v[j] = __ldcg((const float4 *)nm.x + f);
    const float4 a = __ldcg((const float4 *)nm.res + f);
    g[j] = __ldg((const float4 *)nm.w + f);
    v[j].x += a.x;
    v[j].y += a.y;
    v[j].z += a.z;
    v[j].w += a.w;
  }
  const float inv = n13_rms_inv<NCW>(v, shn, nm.eps, warp, lane);
#pragma unroll
  for (int j = 0; j < N13_J; ++j) {
    const int f = 256 * warp + 32 * j + lane;
    ((float4 *)nm.x)[f] = v[j];
    ((float4 *)nm.xn)[f] = make_float4(v[j].x * inv * g[j].x, v[j].y * inv * g[j].y,
                                       v[j].z * inv * g[j].z, v[j].w * inv * g[j].w);
  }
  if (threadIdx.x == 0) tail13_ctr = 0;
}

/* Without a residual (res NULL: ABI 1.17 matmul_acc added it into x before) no block takes a
 * ticket or writes x back; v11's form of it is on by default (docs/PERF.md, twelfth session).
 * v11 (Q4_K, matmul_tc11.cuh): consumer thread t splits elements 8 t + 1024 i (i < 4), i.e.
 * float4s 2 t + h + 256 i (h < 2): rmsnorm's threads of its warp 2 w + lane / 16 + 8 i, lanes
 * 2 (lane % 16) + h. Their butterfly (xor 16, 8, 4, 2, 1 over those lanes) is, in this layout,
 * xor 8, 4, 2, 1 over the real lanes for each h, then the two h added: the same sums. */
__device__ __forceinline__ void n11_load_w(const mm_norm &nm, float4 (&g)[N13_J]) {
#pragma unroll
  for (int k = 0; k < N13_J; ++k)
    g[k] = __ldg((const float4 *)nm.w + 2 * threadIdx.x + (k & 1) + 256 * (k >> 1));
}

/* After the wait, by the 4 consumer warps (bar 1): the row's rms in rmsnorm_v2's order, then the
 * normed row split into v11's prep layout (tc_split8, tc_store_split: tc_split_row's values);
 * block 0 writes xn; *ticket as n13_norm_x's. XS2 (not void: matmul_tc11mx.cuh's jobs of two
 * types) splits the same values into a second form at (xb2, xs2) too. */
template <int NCW, typename XS, typename XS2 = void>
__device__ __forceinline__ void n11_norm_split(const mm_norm &nm, const float4 (&g)[N13_J],
                                               uint4 *xb, XS *xs, float *shn, unsigned *ticket,
                                               uint4 *xb2 = nullptr, XS2 *xs2 = nullptr) {
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  float4 v[N13_J]; /* v[2 i + h]: float4 2 t + h + 256 i */
#pragma unroll
  for (int k = 0; k < N13_J; ++k)
    v[k] = ((const float4 *)nm.x)[2 * t + (k & 1) + 256 * (k >> 1)];
  if (nm.res) {
#pragma unroll
    for (int k = 0; k < N13_J; ++k) {
      const float4 a = ((const float4 *)nm.res)[2 * t + (k & 1) + 256 * (k >> 1)];
      v[k].x += a.x;
      v[k].y += a.y;
      v[k].z += a.z;
      v[k].w += a.w;
    }
  }
#pragma unroll
  for (int i = 0; i < N13_J / 2; ++i) {
    float p[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      p[h] = memra_sumsq4(v[2 * i + h]);
    }
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) {
      p[0] += __shfl_xor_sync(0xffffffffu, p[0], o);
      p[1] += __shfl_xor_sync(0xffffffffu, p[1], o);
    }
    if ((lane & 15) == 0) shn[2 * warp + (lane >> 4) + 8 * i] = p[0] + p[1];
  }
  asm volatile("bar.sync 1, %0;" ::"n"(NCW * 32) : "memory");
  if (t == 0 && nm.res) *ticket = atomicAdd(&norm13_ctr, 1u); /* every warp's x is read */
  const float ss = memra_warp_sum(shn[lane]);
  const float inv = rsqrtf(ss / 4096.f + nm.eps);
#pragma unroll
  for (int i = 0; i < N13_J / 2; ++i) {
    float e8[8];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 a = v[2 * i + h], w = g[2 * i + h];
      const float4 o =
          make_float4(a.x * inv * w.x, a.y * inv * w.y, a.z * inv * w.z, a.w * inv * w.w);
      e8[4 * h] = o.x, e8[4 * h + 1] = o.y, e8[4 * h + 2] = o.z, e8[4 * h + 3] = o.w;
      if (blockIdx.x == 0) ((float4 *)nm.xn)[2 * t + h + 256 * i] = o;
    }
    tc_split_put(e8, xb, xs, 8 * (int64_t)t + 1024 * i);
    if constexpr (!std::is_void<XS2>::value) tc_split_put(e8, xb2, xs2, 8 * (int64_t)t + 1024 * i);
  }
}

#endif /* MEMRA_CUDA_MATMUL_NORM13_CUH */
