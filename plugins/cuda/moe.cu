/* moe.cu — mixture-of-experts ops: moe_route (softmax, top-k, renormalised weights),
 * matmul_id (each token row times only its chosen experts' matrices, kept in their GGUF
 * layout) and moe_combine (the weighted sum of a token's k expert rows).
 * Oracle: plugins/cpu/moe.c.
 *
 * ver  idea
 *  1   moe_route: one block per token; max and sum of exp by block reductions, then k
 *      rounds of a fixed-order (logit desc, index asc) block argmax over the experts not
 *      yet taken: the CPU's repeated selection, the same ids and tie order.
 *      matmul_id: a GEMV per (token row, chosen expert), the expert read from ids on the
 *      device (graph-safe). K-quants with aligned rows use the decode GEMV's v5 arithmetic
 *      (matmul_kq.cuh: 8 weight rows per block share the lane's x registers); the other
 *      types the v3 layout (one warp per output, coalesced 8-element slices from
 *      dequant.cuh). Weights are read once per (row, expert): right for decode, where a
 *      step has few rows; prefill re-reads an expert's matrix per row that chose it (a
 *      gathered GEMM per expert is later work).
 *      moe_combine: one thread per output element, the k products added in j order with
 *      separate multiply and add roundings, as the CPU does: bit-exact.
 *  2   moe_route: one warp per token (v2 below); K-quant matmul_id: the warp owns rows and
 *      walks all of K (matmul_id_kq_v2_kernel); every kernel here launched with PDL.
 *  3   moe_route: v2's selection on the warp reduction instructions (hybrid tg128 +5%, MoE
 *      +2.5% on the H200). matmul_id_glu (ABI 1.7): the fused gate/up stack with glu in the
 *      epilogue (a row set's rows are two outputs' gate and up rows).
 *  4   matmul_id v3 (moe_tc.cuh): Q4_K / Q6_K experts on the tensor cores (v7's arithmetic),
 *      whole 16-row tiles of the chosen expert bulk-copied into a ring by a producer warp.
 *      H200: MoE 8-layer tg128 1,764 -> 1,831, pp512 9,943 -> 11,467; hybrid unchanged.
 *  5   matmul_id v4 (moe_group.cuh): prompt rows sorted by expert on the device, each tile of
 *      an expert copied once for a group of up to 8 of its rows (v7's batch arithmetic: v3's
 *      bits); v3 keeps the decode steps (fewer than two rows an expert). H200 pp512:
 *      MoE 8-layer 12,525 -> 24,184, hybrid 20,070 -> 24,969 (MEMRA_MMID_GROUP=0: v3).
 *  6   v3's down projection after its gate / up reads its ids and copies its tiles before the
 *      PDL wait (moe_tc.cuh midtc_ids_early; hybrid tg128 +1.4%). ABI 1.21 moe_route_glu: the
 *      route inside the gate / up launch (moe_tc.cuh ROUTE, opt-in: docs/PERF.md).
 * An id outside [0, n_expert) cannot be seen on the host without a sync: its output row is
 * NaN (as get_rows does), so the fault shows downstream. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/dequant.cuh"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/families.h"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_kq.cuh"
#include "plugins/cuda/moe_id.cuh"
#include "plugins/cuda/moe_route.cuh"
#include "plugins/cuda/moe_group.cuh"
#include "plugins/cuda/moe_tc.cuh"

/* --- moe_route ----------------------------------------------------------------------- */

enum { ROUTE_THREADS = 256, ROUTE_MAX_EXPERTS = 8192 };

/* (v, i) better than (bv, bi): larger logit, then lower index; bi < 0 is "none yet". */
__device__ __forceinline__ void route_take(float &bv, int &bi, float v, int i) {
  if (i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi))) {
    bv = v;
    bi = i;
  }
}

__global__ void __launch_bounds__(ROUTE_THREADS)
    moe_route_v1_kernel(int32_t *ids, int64_t ids_ld, float *wout, int64_t w_ld,
                        const float *logits, int64_t l_ld, int ne, int k, int normalize) {
  extern __shared__ unsigned char route_sh[];
  float *l = (float *)route_sh;
  unsigned char *taken = route_sh + 4 * (size_t)ne;
  __shared__ float red[32];
  __shared__ float bvs[32];
  __shared__ int bis[32];
  const int64_t r = blockIdx.x;
  const float *lr = logits + r * l_ld;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  float mx = -INFINITY;
  for (int e = threadIdx.x; e < ne; e += blockDim.x) {
    l[e] = lr[e];
    taken[e] = 0;
    mx = fmaxf(mx, l[e]);
  }
  mx = memra_warp_max(mx);
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = lane < nw ? red[lane] : -INFINITY;
  mx = memra_warp_max(mx);
  float s = 0.f;
  for (int e = threadIdx.x; e < ne; e += blockDim.x)
    s += expf(l[e] - mx);
  const float sum = memra_block_sum(s, red);
  int32_t *idr = ids + r * ids_ld;
  float *wr = wout + r * w_ld;
  float ksum = 0.f; /* thread 0 only */
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int bi = -1;
    for (int e = threadIdx.x; e < ne; e += blockDim.x)
      if (!taken[e]) route_take(bv, bi, l[e], e);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      route_take(bv, bi, ov, oi);
    }
    __syncthreads(); /* bvs/bis of the previous round are read */
    if (lane == 0) {
      bvs[warp] = bv;
      bis[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < nw; ++w)
        route_take(bv, bi, bvs[w], bis[w]);
      taken[bi] = 1;
      idr[j] = bi;
      const float p = expf(l[bi] - mx) / sum;
      wr[j] = p;
      ksum += p;
    }
    __syncthreads(); /* taken[] is visible to the next round */
  }
  if (threadIdx.x == 0 && normalize) {
    const float d = ksum > 6.1e-5f ? ksum : 6.1e-5f;
    for (int j = 0; j < k; ++j)
      wr[j] /= d;
  }
}

/* v2 (replaced by v3): one warp per token for at most ROUTE2_MAX experts and k <= 32 (NPL
 * logits per lane in registers, expert lane + 32 i); max, sum and each of the k selections
 * warp butterflies: no shared memory and no block barriers (v1 costs ~10-14 us a call on the
 * H200: three __syncthreads per selection round). */
enum { ROUTE2_WARPS = 4 };

/* v3: v2's warp per token with the selection on the hardware warp reductions (moe_route.cuh
 * route_warp, which the experts' launches of moe_route_glu run too): the same ids; max, sum and
 * the weights are v2's arithmetic. */
template <int NPL, bool TF = false>
__global__ void __launch_bounds__(ROUTE2_WARPS * 32)
    moe_route_v3_kernel(int32_t *ids, int64_t ids_ld, float *wout, int64_t w_ld,
                        const float *logits, int64_t l_ld, int ne, int k, int normalize,
                        int64_t n) {
  if (TF) /* MEMRA_ROUTE_TRIGGER=1: the experts' launch scheduled while we wait for the router */
    memra_pdl_enter_early();
  else
    memra_pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t r = (int64_t)blockIdx.x * ROUTE2_WARPS + (threadIdx.x >> 5);
  if (r >= n) return;
  int id;
  float w;
  route_warp<NPL>(logits + r * l_ld, ne, k, normalize, lane, &id, &w);
  if (lane < k) {
    ids[r * ids_ld + lane] = id;
    wout[r * w_ld + lane] = w;
  }
}

/* moe_route's checks and every message (moe_route_glu's and matmul_n_route's too). */
memra_status memra_cu_moe_route_check(memra_backend *be, const memra_tensor *ids,
                                      const memra_tensor *weights, const memra_tensor *logits) {
  memra_status st;
  if ((st = memra_cu_check_f(be, "moe_route", "logits", logits, MEMRA_TYPE_F32, -1, -1)) ||
      (st = memra_cu_check_f(be, "moe_route", "ids", ids, MEMRA_TYPE_I32, -1, -1)))
    return st;
  if (ids->ne1 != logits->ne1 || ids->ne0 > logits->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "moe_route: ids [%lld, %lld] for logits [%lld, %lld] (need one row per "
                         "token and k <= n_expert)",
                         (long long)ids->ne1, (long long)ids->ne0, (long long)logits->ne1,
                         (long long)logits->ne0);
  if ((st = memra_cu_check_f(be, "moe_route", "weights", weights, MEMRA_TYPE_F32, ids->ne0,
                             ids->ne1)))
    return st;
  if (logits->ne0 > ROUTE_MAX_EXPERTS)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "moe_route: %lld experts, at most %d",
                         (long long)logits->ne0, ROUTE_MAX_EXPERTS);
  if (memra_cu_overlap(ids, logits) || memra_cu_overlap(weights, logits) ||
      memra_cu_overlap(ids, weights))
    return memra_cu_errf(be, MEMRA_E_INVALID, "moe_route: ids, weights and logits overlap");
  if (logits->ne1 > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "moe_route: %lld rows", (long long)logits->ne1);
  return MEMRA_OK;
}

memra_status memra_cu_moe_route(memra_backend *be, const memra_tensor *ids,
                                const memra_tensor *weights, const memra_tensor *logits,
                                int32_t normalize) {
  const memra_status st = memra_cu_moe_route_check(be, ids, weights, logits);
  if (st != MEMRA_OK) return st;
  const int64_t n = logits->ne1;
  if (n == 0) return MEMRA_OK;
  const int ne = (int)logits->ne0, k = (int)ids->ne0;
  if (ne <= ROUTE2_MAX && k <= 32) {
    const dim3 grid((unsigned)((n + ROUTE2_WARPS - 1) / ROUTE2_WARPS));
    int32_t *ip = (int32_t *)memra_cu_ptr(ids);
    float *wp = (float *)memra_cu_ptr(weights);
    const float *lp = (const float *)memra_cu_ptr(logits);
    const int64_t ild = (int64_t)(ids->nb1 / 4), wld = (int64_t)(weights->nb1 / 4),
                  lld = (int64_t)(logits->nb1 / 4);
    /* MEMRA_ROUTE_TRIGGER=1 (opt-in: even on an H100, docs/PERF.md): the route triggers its
     * dependents before its wait, so the experts' launch, which has nothing to copy before the ids
     * exist, has its blocks resident (rings and barriers set up) when they do */
    static const bool tf = memra_cu_env_is("MEMRA_ROUTE_TRIGGER", "1");
#define ROUTE2_GO(NPL)                                                                             \
  (void)memra_cu_launch(be, tf ? moe_route_v3_kernel<NPL, true> : moe_route_v3_kernel<NPL>, grid,  \
                        dim3(ROUTE2_WARPS * 32), 0, ip, ild, wp, wld, lp, lld, ne, k, normalize,   \
                        n)
    switch (route_npl(ne)) {
    case 4: ROUTE2_GO(4); break;
    case 8: ROUTE2_GO(8); break;
    case 16: ROUTE2_GO(16); break;
    default: ROUTE2_GO(32); break;
    }
#undef ROUTE2_GO
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
  const size_t shm = 5 * (size_t)logits->ne0;
  moe_route_v1_kernel<<<(unsigned)n, ROUTE_THREADS, shm, be->stream>>>(
      (int32_t *)memra_cu_ptr(ids), (int64_t)(ids->nb1 / 4), (float *)memra_cu_ptr(weights),
      (int64_t)(weights->nb1 / 4), (const float *)memra_cu_ptr(logits), (int64_t)(logits->nb1 / 4),
      (int)logits->ne0, (int)ids->ne0, normalize);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* --- matmul_id ----------------------------------------------------------------------- */

enum { MMID_WARPS = 4 };

/* The weight row (within the expert) of slot r of a row set whose first output is o: plain,
 * row o + r; GLU (4 slots: gate rows o, o + 1, then up rows F + o, F + o + 1), so one warp
 * holds both sums of an output. Rows past the end read the last one (never stored). */
template <bool GLU>
__device__ __forceinline__ int64_t mmid_wrow(const mmid_args &a, int64_t o, int r) {
  if (!GLU) return o + r < a.N ? o + r : a.N - 1;
  const int64_t j = o + (r & 1) < a.F ? o + (r & 1) : a.F - 1;
  return r < 2 ? j : a.F + j;
}

/* Any supported type: one warp per output n of row rj (blockIdx.y strides over rows); GLU:
 * the warp sums gate row n, then up row F + n, each as a lone row, and stores act(g) * u. */
template <int T, bool VEC, bool GLU>
__global__ void __launch_bounds__(MMID_WARPS * 32) matmul_id_v1_kernel(mmid_args a) {
  memra_pdl_enter();
  const int lane = threadIdx.x & 31, part = lane & 3;
  const int64_t n = (int64_t)blockIdx.x * MMID_WARPS + (threadIdx.x >> 5), ul = lane >> 2;
  if (n >= a.F) return;
  const bool kq = T == MEMRA_TYPE_Q4_K || T == MEMRA_TYPE_Q5_K || T == MEMRA_TYPE_Q6_K;
  const int64_t units = kq ? a.K / 64 : a.K / 32;
  for (int64_t rj = blockIdx.y; rj < a.rows; rj += gridDim.y) {
    const int e = mmid_expert(a, rj);
    if (e < 0) {
      if (lane == 0) a.y[rj * a.y_ld + n] = MOE_NAN;
      continue;
    }
    const float *xr = a.x + (a.shared_x ? rj / a.k : rj) * a.x_ld;
    float sums[2];
#pragma unroll
    for (int h = 0; h < (GLU ? 2 : 1); ++h) {
      const uint8_t *wr = a.w + ((uint64_t)e * (uint64_t)a.N + (uint64_t)(n + h * a.F)) * a.w_nb1;
      float acc = 0.f;
      for (int64_t u0 = 0; u0 < units; u0 += 8) {
        const int64_t u = u0 + ul;
        if (u >= units) break;
        if (kq) {
          float wv[16];
          int64_t e0, e1;
          memra_deq16k<T, VEC>(wr, u, part, wv, &e0, &e1);
          acc = memra_fma8<VEC>(acc, xr + e0, wv);
          acc = memra_fma8<VEC>(acc, xr + e1, wv + 8);
        } else {
          float wv[8];
          memra_deq8<T, VEC>(wr, u, part, wv);
          acc = memra_fma8<VEC>(acc, xr + 32 * u + 8 * part, wv);
        }
      }
      if (T == MEMRA_TYPE_F32 || T == MEMRA_TYPE_F16 || T == MEMRA_TYPE_BF16) {
        for (int64_t i = units * 32 + lane; i < a.K; i += 32) { /* the K % 32 tail */
          const float wk = T == MEMRA_TYPE_F32 ? ((const float *)wr)[i]
                           : T == MEMRA_TYPE_F16
                               ? __half2float(__ushort_as_half(((const uint16_t *)wr)[i]))
                               : memra_bf2f(((const uint16_t *)wr)[i]);
          acc = fmaf(wk, __ldg(xr + i), acc);
        }
      }
      sums[h] = memra_warp_sum(acc);
    }
    if (lane == 0) a.y[rj * a.y_ld + n] = GLU ? memra_act_silu(sums[0]) * sums[1] : sums[0];
  }
}

/* Q4_K / Q5_K (16-byte aligned rows) and Q6_K, v2: v5's lane layout and arithmetic
 * (matmul_kq.cuh: lane = super-block sbl, group g, half p; 32 weights per lane per row) with
 * the WARP as the unit of work: a warp owns 4 / S row sets of MMID_R rows of one (token,
 * expert) row rj and walks all of K, S super-blocks per step; lanes of row set rs take
 * super-blocks sbl - S rs of each step. Expert matrices are small (Qwen3-30B-A3B: K 2048 and
 * 768, Qwen3-Next: 512): v1 split K across the block's warps in 1024-element steps, so 2 of
 * 4 warps (K 2048) or 13 of 16 lanes' quarters (K 768) idled, 19-47 us a launch at 5-9% of
 * the DRAM bandwidth. S is 4 from 3 super-blocks up, else nsb (1 or 2), so every K keeps at
 * least 3/4 of the lanes busy. A row's sum: the lane's chain over the steps, then a fixed
 * butterfly over its row set's lanes: the same for every rj, token count and grid. */
enum { MMID_R = 4 };

/* GLU (matmul_id_glu): a row set's 4 rows are 2 outputs' gate and up rows (mmid_wrow), and
 * the epilogue stores act(gate) * up: each sum computed as for a lone row, then glu's
 * expression, so the bits of matmul_id followed by glu. */
template <int T, bool VEC, int S, bool GLU>
__global__ void __launch_bounds__(MMID_WARPS * 32) matmul_id_kq_v2_kernel(mmid_args a) {
  constexpr int B = T == MEMRA_TYPE_Q4_K ? 4 : T == MEMRA_TYPE_Q5_K ? 5 : 6;
  constexpr int NRS = 4 / S, OPR = GLU ? MMID_R / 2 : MMID_R; /* row sets; outputs a row set */
  memra_pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sbl = lane >> 3, g = (lane >> 1) & 3, p = lane & 1;
  const int sbo = sbl % S, rs = sbl / S;
  const int64_t ow0 = ((int64_t)blockIdx.x * MMID_WARPS + warp) * NRS * OPR; /* first output */
  if (ow0 >= a.F) return;                                                    /* warp-uniform */
  const int64_t n0 = ow0 + rs * OPR;
  const int64_t nsb = a.K / 256, steps = (nsb + S - 1) / S;
  for (int64_t rj = blockIdx.y; rj < a.rows; rj += gridDim.y) {
    const int e = mmid_expert(a, rj);
    if (e < 0) {
      if ((lane & (8 * S - 1)) == 0)
        for (int r = 0; r < OPR; ++r)
          if (n0 + r < a.F) a.y[rj * a.y_ld + n0 + r] = MOE_NAN;
      continue;
    }
    const uint8_t *wr[MMID_R];
#pragma unroll
    for (int r = 0; r < MMID_R; ++r)
      wr[r] = a.w + ((uint64_t)e * (uint64_t)a.N + (uint64_t)mmid_wrow<GLU>(a, n0, r)) * a.w_nb1;
    const float *xr = a.x + (a.shared_x ? rj / a.k : rj) * a.x_ld;
    float acc[MMID_R];
#pragma unroll
    for (int r = 0; r < MMID_R; ++r)
      acc[r] = 0.f;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t sb = S * s + sbo;
      if (sb >= nsb) continue; /* tail step (or K of 3 super-blocks): idle lanes */
      const int64_t e0 = 256 * sb + (B == 6 ? 128 * (g >> 1) + 32 * (g & 1) : 64 * g) + 16 * p;
      constexpr int eh = B == 6 ? 64 : 32;
      uint4 hd[MMID_R], q[MMID_R], qh[MMID_R];
#pragma unroll
      for (int r = 0; r < MMID_R; ++r)
        mkq_load_raw<T>(wr[r], sb, g, p, &hd[r], &q[r], &qh[r]);
      float xl[16], xh[16];
      const float Xl = mkq_load_x16<VEC>(xr + e0, xl), Xh = mkq_load_x16<VEC>(xr + e0 + eh, xh);
#pragma unroll
      for (int r = 0; r < MMID_R; ++r)
        acc[r] = B == 6 ? mkq_row_step6(acc[r], hd[r], q[r], qh[r], g, xl, xh, Xl, Xh)
                        : mkq_row_step<B>(acc[r], hd[r], q[r], qh[r], g, xl, xh, Xl, Xh);
    }
    float v[MMID_R];
#pragma unroll
    for (int r = 0; r < MMID_R; ++r) {
      v[r] = acc[r];
#pragma unroll
      for (int o = 1; o < 8 * S; o <<= 1) /* p, g, then the row set's super-blocks */
        v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
    }
    if ((lane & (8 * S - 1)) == 0)
#pragma unroll
      for (int r = 0; r < OPR; ++r)
        if (n0 + r < a.F)
          a.y[rj * a.y_ld + n0 + r] = GLU ? memra_act_silu(v[r]) * v[r + OPR] : v[r];
  }
}

/* The 8 x elements at p (16-byte aligned). */
__device__ __forceinline__ void mmid_x8(const float *p, float xv[8]) {
  const float4 xa = __ldg((const float4 *)p), xb = __ldg((const float4 *)p + 1);
  xv[0] = xa.x, xv[1] = xa.y, xv[2] = xa.z, xv[3] = xa.w;
  xv[4] = xb.x, xv[5] = xb.y, xv[6] = xb.z, xv[7] = xb.w;
}

/* A lane's chain over 8 F16 / BF16 weights (16 bytes) and their x, elements in order: every
 * F16 / BF16 matmul_id kernel's per-row arithmetic (so their rows share bits). */
template <int T>
__device__ __forceinline__ float mmid_h_fma8(uint4 wv, const float xv[8], float acc) {
  const uint32_t u[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint16_t h = (uint16_t)(u[i >> 1] >> (16 * (i & 1)));
    const float wf = T == MEMRA_TYPE_F16 ? __half2float(__ushort_as_half(h)) : memra_bf2f(h);
    acc = fmaf(wf, xv[i], acc);
  }
  return acc;
}

/* F16 / BF16 (K % 8 == 0, 16-byte aligned rows and x), v2: a warp owns MMID_R rows of one
 * (token, expert) row rj; lane l takes elements [8 l + 256 i, + 8) of every row, x loaded once
 * for the warp's rows, four iterations' loads in flight (v1: a warp per output, one 512-byte
 * slice at a time: 12.9 us a launch at 47% of the DRAM bandwidth on the hybrid's experts).
 * A row's sum: the lane's chain in i order, then a butterfly: the same for every rj. */
template <int T, bool GLU>
__global__ void __launch_bounds__(MMID_WARPS * 32) matmul_id_h_v2_kernel(mmid_args a) {
  constexpr int OPR = GLU ? MMID_R / 2 : MMID_R; /* outputs a warp (GLU: as the K-quant v2) */
  memra_pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n0 = ((int64_t)blockIdx.x * MMID_WARPS + warp) * OPR;
  if (n0 >= a.F) return; /* warp-uniform */
  for (int64_t rj = blockIdx.y; rj < a.rows; rj += gridDim.y) {
    const int e = mmid_expert(a, rj);
    if (e < 0) {
      if (lane < OPR && n0 + lane < a.F) a.y[rj * a.y_ld + n0 + lane] = MOE_NAN;
      continue;
    }
    const uint16_t *wr[MMID_R];
#pragma unroll
    for (int r = 0; r < MMID_R; ++r)
      wr[r] = (const uint16_t *)(a.w + ((uint64_t)e * (uint64_t)a.N +
                                        (uint64_t)mmid_wrow<GLU>(a, n0, r)) *
                                           a.w_nb1);
    const float *xr = a.x + (a.shared_x ? rj / a.k : rj) * a.x_ld;
    float acc[MMID_R];
#pragma unroll
    for (int r = 0; r < MMID_R; ++r)
      acc[r] = 0.f;
#pragma unroll 4
    for (int64_t k0 = 8 * lane; k0 < a.K; k0 += 256) {
      uint4 wv[MMID_R];
#pragma unroll
      for (int r = 0; r < MMID_R; ++r)
        wv[r] = __ldg((const uint4 *)(wr[r] + k0));
      float xv[8];
      mmid_x8(xr + k0, xv);
#pragma unroll
      for (int r = 0; r < MMID_R; ++r)
        acc[r] = mmid_h_fma8<T>(wv[r], xv, acc[r]);
    }
    float v[MMID_R];
#pragma unroll
    for (int r = 0; r < MMID_R; ++r)
      v[r] = memra_warp_sum(acc[r]);
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < OPR; ++r)
        if (n0 + r < a.F)
          a.y[rj * a.y_ld + n0 + r] = GLU ? memra_act_silu(v[r]) * v[r + OPR] : v[r];
  }
}

/* matmul_id_combine for F16 / BF16 experts (ABI 1.9), v2: a block owns one output row of
 * one token; its warp w takes the token's experts w, w + 4, ... (MIC_JW of them a round,
 * their loads in flight together), so a token's 11 rows are one round trip as in
 * matmul_id_h_v2; the dots meet in shared memory and one thread combines them. A dot is
 * matmul_id_h_v2's (the lane's chain in k order, then the butterfly), the sum moe_combine_v1's
 * (j order, __fmul_rn then __fadd_rn; SH: the last expert's row / (1 + e^-g) added after):
 * the bits of matmul_id then the combine, without the [n k, N] rows in memory or the
 * combine's launch. v1 (a warp walking all 11 experts for 2 rows, 1,024 warps a token) lost
 * to the two launches: hybrid F16 tg128 2,130 vs 2,235. kr: routed experts a token. */
enum { MIC_JW = 3, MIC_KMAX = 64 };
template <int T, bool SH>
__global__ void __launch_bounds__(MMID_WARPS * 32)
    matmul_id_combine_h_kernel(mmid_args a, float *y, int64_t y_ld, const float *wt, int64_t wt_ld,
                               int kr, const float *g, int64_t g_ld) {
  __shared__ float dots[MIC_KMAX];
  memra_pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n = blockIdx.x;
  const int64_t tokens = a.rows / a.k;
  for (int64_t r = blockIdx.y; r < tokens; r += gridDim.y) {
    for (int j0 = warp; j0 < a.k; j0 += MIC_JW * MMID_WARPS) {
      const uint16_t *wr[MIC_JW];
      const float *xr[MIC_JW];
      bool ok[MIC_JW];
      float acc[MIC_JW];
#pragma unroll
      for (int jj = 0; jj < MIC_JW; ++jj) {
        const int j = j0 + jj * MMID_WARPS;
        const int e = j < a.k ? mmid_expert(a, r * a.k + j) : -1;
        ok[jj] = e >= 0;
        xr[jj] = a.x + (r * a.k + j) * a.x_ld;
        wr[jj] =
            (const uint16_t *)(a.w + ((uint64_t)(ok[jj] ? e : 0) * (uint64_t)a.N + (uint64_t)n) *
                                         a.w_nb1);
        acc[jj] = 0.f;
      }
#pragma unroll 2
      for (int64_t k0 = 8 * lane; k0 < a.K; k0 += 256) {
        uint4 wv[MIC_JW];
#pragma unroll
        for (int jj = 0; jj < MIC_JW; ++jj)
          if (ok[jj]) wv[jj] = __ldg((const uint4 *)(wr[jj] + k0));
#pragma unroll
        for (int jj = 0; jj < MIC_JW; ++jj) {
          if (!ok[jj]) continue;
          float xv[8];
          mmid_x8(xr[jj] + k0, xv);
          acc[jj] = mmid_h_fma8<T>(wv[jj], xv, acc[jj]);
        }
      }
#pragma unroll
      for (int jj = 0; jj < MIC_JW; ++jj) {
        const int j = j0 + jj * MMID_WARPS;
        if (j >= a.k) break;
        const float v = ok[jj] ? memra_warp_sum(acc[jj]) : MOE_NAN;
        if (lane == 0) dots[j] = v;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float s = 0.f;
      for (int j = 0; j < kr; ++j)
        s = __fadd_rn(s, __fmul_rn(wt[r * wt_ld + j], dots[j]));
      if (SH) s = __fadd_rn(s, dots[kr] / (1.0f + expf(-g[r * g_ld])));
      y[r * y_ld + n] = s;
    }
    __syncthreads(); /* dots is rewritten for the next token */
  }
}

/* Which expert types run v3 (moe_tc.cuh): Q4_K and Q6_K by default; MEMRA_MMID=v2 none,
 * MEMRA_MMID=q4 Q4_K only (A/B timing; v3's bits are the tensor cores', v2's the float GEMV's).
 * Read once: fixed for the process, so a row's arithmetic never depends on the batch. */
static bool midtc_mode(int32_t type) {
  static int mode = -1; /* 0 none, 1 Q4_K, 2 Q4_K and Q6_K */
  if (mode < 0) {
    const char *e = getenv("MEMRA_MMID");
    mode = e && !strcmp(e, "v2") ? 0 : e && !strcmp(e, "q4") ? 1 : 2;
  }
  return type == MEMRA_TYPE_Q4_K ? mode >= 1 : type == MEMRA_TYPE_Q6_K && mode == 2;
}

/* matmul_id's (glu: matmul_id_glu's) checks, every message, and its kernel arguments; *xv:
 * x rows 16-byte aligned, *walign: the weight rows' alignment. */
static memra_status mmid_prep(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                              bool glu, mmid_args *ap, bool *xvp, uint64_t *walignp) {
  memra_status st;
  if ((st = memra_cu_check_tensor(be, w, "matmul_id: w", -1)) ||
      (st = memra_cu_check_f(be, "matmul_id", "ids", ids, MEMRA_TYPE_I32, -1, -1)))
    return st;
  if (!memra_cu_type_supported(w->type))
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul_id: no CUDA kernel for %s weights",
                         memra_type_info(w->type).name);
  if (n_expert < 1 || w->ne1 % n_expert != 0)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "matmul_id: %lld weight rows do not split into %d experts",
                         (long long)w->ne1, n_expert);
  const int64_t n = ids->ne1, k = ids->ne0, N = w->ne1 / n_expert, K = w->ne0;
  if ((st = memra_cu_check_f(be, "matmul_id", "x", x, MEMRA_TYPE_F32, -1, -1))) return st;
  if (x->ne0 != K || (x->ne1 != n && x->ne1 != n * k))
    return memra_cu_errf(
        be, MEMRA_E_INVALID, "matmul_id: x [%lld, %lld], expected [%lld or %lld, %lld]",
        (long long)x->ne1, (long long)x->ne0, (long long)n, (long long)(n * k), (long long)K);
  if (glu && N % 2)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "matmul_id_glu: %lld rows an expert do not split into gate and up",
                         (long long)N);
  const int64_t F = glu ? N / 2 : N;
  if ((st = memra_cu_check_f(be, glu ? "matmul_id_glu" : "matmul_id", "y", y, MEMRA_TYPE_F32, F,
                             n * k)))
    return st;
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, w) || memra_cu_overlap(y, ids))
    return memra_cu_errf(be, MEMRA_E_INVALID, "matmul_id: y overlaps an input");
  const uint8_t *wp = (const uint8_t *)memra_cu_ptr(w);
  const uint64_t walign = memra_cu_align_of(wp, w->nb1 * (w->ne1 > 1));
  if (walign < memra_cu_type_align(w->type))
    return memra_cu_errf(be, MEMRA_E_INVALID, "matmul_id: %s weights must be %llu-byte aligned",
                         memra_type_info(w->type).name,
                         (unsigned long long)memra_cu_type_align(w->type));
  const int64_t rows = n * k;
  const float *xp = (const float *)memra_cu_ptr(x);
  mmid_args &a = *ap;
  a.y = (float *)memra_cu_ptr(y);
  a.y_ld = (int64_t)(y->nb1 / 4);
  a.x = xp;
  a.x_ld = (int64_t)(x->nb1 / 4);
  a.shared_x = k == 1 || x->ne1 == n; /* k == 1: either reading is the same row */
  a.w = wp;
  a.w_nb1 = w->nb1;
  a.ids = (const int32_t *)memra_cu_ptr(ids);
  a.ids_ld = (int64_t)(ids->nb1 / 4);
  a.k = (int)k;
  a.n_expert = n_expert;
  a.N = N;
  a.K = K;
  a.rows = rows;
  a.F = F;
  if (k > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul_id: k = %lld", (long long)k);
  *xvp = memra_cu_align_of(xp, x->nb1 * (x->ne1 > 1)) >= 16;
  *walignp = walign;
  return MEMRA_OK;
}

/* matmul_id's kernels for prepared arguments (mmid_prep). gws: v4's sort area (midg_ws_bytes)
 * when the caller's output lives in the workspace too (matmul_id_combine), else NULL: the
 * workspace. */
static memra_status mmid_launch(memra_backend *be, const mmid_args &a, const memra_tensor *w,
                                bool glu, bool xv, uint64_t walign, void *gws = NULL) {
  const int64_t rows = a.rows, N = a.N, K = a.K, F = a.F;
  const uint8_t *wp = a.w;
  if (rows == 0) return MEMRA_OK;
  const unsigned gy = (unsigned)(rows < 65535 ? rows : 65535);
  if (midtc_mode(w->type) && midtc_fits(w->type, wp, w->nb1, N, K)) {
    cudaError_t err = cudaSuccess;
    bool done = false;
    if (midg_wanted(a)) { /* prompt rows: gathered per expert (v4, v3's bits) */
      void *ws = gws;
      if (!ws) {
        const memra_status st = memra_cu_workspace(be, midg_ws_bytes(a.rows, a.n_expert), &ws);
        if (st != MEMRA_OK) return st;
      }
#define TCG_GO(TY)                                                                                 \
  (xv ? (glu ? midg_launch<TY, true, true>(be, a, ws, &err)                                        \
             : midg_launch<TY, true, false>(be, a, ws, &err))                                      \
      : (glu ? midg_launch<TY, false, true>(be, a, ws, &err)                                       \
             : midg_launch<TY, false, false>(be, a, ws, &err)))
      done = w->type == MEMRA_TYPE_Q4_K ? TCG_GO(MEMRA_TYPE_Q4_K) : TCG_GO(TC_Q6I);
#undef TCG_GO
    }
#define TC_GO(TY)                                                                                  \
  (xv ? (glu ? midtc_launch<TY, true, true>(be, a, &err)                                           \
             : midtc_launch<TY, true, false>(be, a, &err))                                         \
      : (glu ? midtc_launch<TY, false, true>(be, a, &err)                                          \
             : midtc_launch<TY, false, false>(be, a, &err)))
    /* Q6_K: midtc_fits takes K <= 4096 only, the integer-MMA form (tc_q6_key) */
    if (!done && err == cudaSuccess)
      done = w->type == MEMRA_TYPE_Q4_K ? TC_GO(MEMRA_TYPE_Q4_K) : TC_GO(TC_Q6I);
#undef TC_GO
    if (err != cudaSuccess)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "matmul_id: %s kernel's launch setup: %s",
                           memra_type_info(w->type).name, cudaGetErrorString(err));
    if (done) {
      MEMRA_CU_LAUNCHED();
      return MEMRA_OK;
    }
  }
  const bool kq16 = (w->type == MEMRA_TYPE_Q4_K || w->type == MEMRA_TYPE_Q5_K) && walign >= 16;
  if (kq16 || w->type == MEMRA_TYPE_Q6_K) {
    const int64_t nsb = K / 256;
    const int S = nsb >= 3 ? 4 : nsb == 2 ? 2 : 1, ow = 4 / S * (glu ? MMID_R / 2 : MMID_R);
    const dim3 grid((unsigned)((F + ow * MMID_WARPS - 1) / (ow * MMID_WARPS)), gy);
#define KQ_GO(TY, V, SS)                                                                           \
  (void)memra_cu_launch(be,                                                                        \
                        glu ? matmul_id_kq_v2_kernel<TY, V, SS, true>                              \
                            : matmul_id_kq_v2_kernel<TY, V, SS, false>,                            \
                        grid, dim3(MMID_WARPS * 32), 0, a)
#define KQ_CASE(TY)                                                                                \
  case TY:                                                                                         \
    if (S == 4)                                                                                    \
      xv ? KQ_GO(TY, true, 4) : KQ_GO(TY, false, 4);                                               \
    else if (S == 2)                                                                               \
      xv ? KQ_GO(TY, true, 2) : KQ_GO(TY, false, 2);                                               \
    else                                                                                           \
      xv ? KQ_GO(TY, true, 1) : KQ_GO(TY, false, 1);                                               \
    break;
    switch (w->type) {
      KQ_CASE(MEMRA_TYPE_Q4_K)
      KQ_CASE(MEMRA_TYPE_Q5_K)
      KQ_CASE(MEMRA_TYPE_Q6_K)
    default: break;
    }
#undef KQ_CASE
#undef KQ_GO
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
  if ((w->type == MEMRA_TYPE_F16 || w->type == MEMRA_TYPE_BF16) && K % 8 == 0 && xv &&
      walign >= 16) {
    const int ow = glu ? MMID_R / 2 : MMID_R;
    const dim3 grid((unsigned)((F + ow * MMID_WARPS - 1) / (ow * MMID_WARPS)), gy);
    (void)memra_cu_launch(be,
                          w->type == MEMRA_TYPE_F16
                              ? (glu ? matmul_id_h_v2_kernel<MEMRA_TYPE_F16, true>
                                     : matmul_id_h_v2_kernel<MEMRA_TYPE_F16, false>)
                              : (glu ? matmul_id_h_v2_kernel<MEMRA_TYPE_BF16, true>
                                     : matmul_id_h_v2_kernel<MEMRA_TYPE_BF16, false>),
                          grid, dim3(MMID_WARPS * 32), 0, a);
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
  const bool vec = K % 32 == 0 && xv && walign >= 16;
  const dim3 grid((unsigned)((F + MMID_WARPS - 1) / MMID_WARPS), gy);
#define ID_CASE(TY)                                                                                \
  case TY:                                                                                         \
    (void)memra_cu_launch(                                                                         \
        be,                                                                                        \
        vec ? (glu ? matmul_id_v1_kernel<TY, true, true> : matmul_id_v1_kernel<TY, true, false>)   \
            : (glu ? matmul_id_v1_kernel<TY, false, true>                                          \
                   : matmul_id_v1_kernel<TY, false, false>),                                       \
        grid, dim3(MMID_WARPS * 32), 0, a);                                                        \
    break;
  switch (w->type) {
    ID_CASE(MEMRA_TYPE_F32)
    ID_CASE(MEMRA_TYPE_F16)
    ID_CASE(MEMRA_TYPE_BF16)
    ID_CASE(MEMRA_TYPE_Q8_0)
    ID_CASE(MEMRA_TYPE_Q4_0)
    ID_CASE(MEMRA_TYPE_Q4_1)
    ID_CASE(MEMRA_TYPE_Q5_0)
    ID_CASE(MEMRA_TYPE_Q5_1)
    ID_CASE(MEMRA_TYPE_Q4_K)
    ID_CASE(MEMRA_TYPE_Q5_K)
    ID_CASE(MEMRA_TYPE_Q6_K)
  default: break;
  }
#undef ID_CASE
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* matmul_id, and (glu) matmul_id_glu: y [n k, N / 2] = silu(gate rows) * up rows. */
static memra_status mmid_run(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                             const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                             bool glu) {
  mmid_args a;
  bool xv;
  uint64_t walign;
  const memra_status st = mmid_prep(be, y, x, w, ids, n_expert, glu, &a, &xv, &walign);
  return st ? st : mmid_launch(be, a, w, glu, xv, walign);
}

memra_status memra_cu_matmul_id(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                const memra_tensor *w, const memra_tensor *ids, int32_t n_expert) {
  return mmid_run(be, y, x, w, ids, n_expert, false);
}

/* ABI 1.7: the fused gate/up stack's matmul_id with glu in its epilogue (SILU: the families'
 * act; MEMRA_MMID_GLU=0 leaves the slot out of the vtable, backend.cu, for A/B). */
memra_status memra_cu_matmul_id_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *w, const memra_tensor *ids,
                                    int32_t n_expert, int32_t act) {
  if (act != MEMRA_ACT_SILU)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul_id_glu: activation %d (SILU only)",
                         (int)act);
  return mmid_run(be, y, x, w, ids, n_expert, true);
}

/* ABI 1.21 moe_route_glu: the route inside the experts' gate / up launch (v3, moe_tc.cuh ROUTE)
 * for decode rows of a Q4_K / Q6_K stack, each warp routing its tokens itself with the route
 * launch's function (route_warp: the same ids and weights, which the launch stores) and the down
 * projection after it routing from the same logits before its wait; otherwise the route, then
 * matmul_id_glu. MEMRA_ROUTE_GLU=0 leaves the slot out of the vtable (backend.cu). */
memra_status memra_cu_moe_route_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *w, const memra_tensor *ids,
                                    int32_t n_expert, int32_t act, const memra_tensor *weights,
                                    const memra_tensor *logits, int32_t normalize) {
  if (!y || !x || !w || !ids || !weights || !logits)
    return memra_cu_errf(be, MEMRA_E_INVALID, "moe_route_glu: a tensor argument is NULL");
  if (weights->ne0 > ids->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "moe_route_glu: %lld routed columns, ids has %lld",
                         (long long)weights->ne0, (long long)ids->ne0);
  if (act != MEMRA_ACT_SILU)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul_id_glu: activation %d (SILU only)",
                         (int)act);
  memra_tensor routed = *ids;
  routed.ne0 = weights->ne0;
  memra_status st = memra_cu_moe_route_check(be, &routed, weights, logits);
  if (st != MEMRA_OK) return st;
  if (memra_cu_overlap(y, weights) || memra_cu_overlap(y, logits))
    return memra_cu_errf(be, MEMRA_E_INVALID, "moe_route_glu: y overlaps weights or logits");
  mmid_args a;
  bool xv;
  uint64_t walign;
  if ((st = mmid_prep(be, y, x, w, ids, n_expert, true, &a, &xv, &walign))) return st;
  const int64_t n = logits->ne1;
  if (xv && n > 0 && route_npl(logits->ne0) > 0 && ids->ne0 <= 32 && midtc_mode(w->type) &&
      midtc_fits(w->type, a.w, w->nb1, a.N, a.K) && !midg_wanted(a)) {
    const midtc_route q = {(const float *)memra_cu_ptr(logits),
                           (int64_t)(logits->nb1 / 4),
                           (int32_t *)memra_cu_ptr(ids),
                           (float *)memra_cu_ptr(weights),
                           (int64_t)(weights->nb1 / 4),
                           (int)logits->ne0,
                           (int)routed.ne0,
                           normalize,
                           1};
    cudaError_t err = cudaSuccess;
    const bool done = w->type == MEMRA_TYPE_Q4_K
                          ? midtc_launch<MEMRA_TYPE_Q4_K, true, true>(be, a, &err, &q)
                          : midtc_launch<TC_Q6I, true, true>(be, a, &err, &q);
    if (err != cudaSuccess)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "moe_route_glu: %s kernel's launch setup: %s",
                           memra_type_info(w->type).name, cudaGetErrorString(err));
    if (done) {
      MEMRA_CU_LAUNCHED();
      return MEMRA_OK;
    }
  }
  if ((st = memra_cu_moe_route(be, &routed, weights, logits, normalize))) return st;
  return mmid_launch(be, a, w, true, xv, walign);
}

/* --- moe_combine ----------------------------------------------------------------------- */

/* GATED (moe_combine_gated, ABI 1.7): + sh sigmoid(g) after the sum, with sigmoid_gate's
 * (gdn.cu) and add's (elementwise.cu) arithmetic: the composition's bits in one pass.
 * xk: x rows a token, k, or k + 1 for moe_combine_shexp (ABI 1.9), whose sh is then x's row
 * r xk + k (sh = x + k x_ld, sh_ld = xk x_ld). */
template <bool GATED>
__global__ void moe_combine_v1_kernel(float *y, int64_t y_ld, const float *x, int64_t x_ld,
                                      const float *w, int64_t w_ld, int64_t k, int64_t xk,
                                      int64_t E, int64_t total, const float *sh, int64_t sh_ld,
                                      const float *g, int64_t g_ld) {
  memra_pdl_enter();
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / E, i = t % E;
    const float *wr = w + r * w_ld;
    float s = 0.f;
    for (int64_t j = 0; j < k; ++j)
      s = __fadd_rn(s, __fmul_rn(wr[j], x[(r * xk + j) * x_ld + i]));
    if (GATED) {
      const float v = sh[r * sh_ld + i] / (1.0f + expf(-g[r * g_ld]));
      s = __fadd_rn(s, v);
    }
    y[r * y_ld + i] = s;
  }
}

/* The combine's launch (a grid-stride loop, at most 65536 blocks). */
template <bool GATED>
static void moe_combine_go(memra_backend *be, float *y, int64_t y_ld, const float *x, int64_t x_ld,
                           const float *w, int64_t w_ld, int64_t k, int64_t xk, int64_t E,
                           int64_t total, const float *sh, int64_t sh_ld, const float *g,
                           int64_t g_ld) {
  int64_t grid = (total + 255) / 256;
  if (grid > 65536) grid = 65536;
  (void)memra_cu_launch(be, moe_combine_v1_kernel<GATED>, dim3((unsigned)grid), dim3(256), 0, y,
                        y_ld, x, x_ld, w, w_ld, k, xk, E, total, sh, sh_ld, g, g_ld);
}

memra_status memra_cu_moe_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                  const memra_tensor *weights) {
  memra_status st;
  if ((st = memra_cu_check_f(be, "moe_combine", "weights", weights, MEMRA_TYPE_F32, -1, -1)))
    return st;
  const int64_t n = weights->ne1, k = weights->ne0;
  if ((st = memra_cu_check_f(be, "moe_combine", "x", x, MEMRA_TYPE_F32, -1, n * k)) ||
      (st = memra_cu_check_f(be, "moe_combine", "y", y, MEMRA_TYPE_F32, x->ne0, n)))
    return st;
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, weights))
    return memra_cu_errf(be, MEMRA_E_INVALID, "moe_combine: y overlaps an input");
  const int64_t total = n * x->ne0;
  if (total == 0) return MEMRA_OK;
  moe_combine_go<false>(
      be, (float *)memra_cu_ptr(y), (int64_t)(y->nb1 / 4), (const float *)memra_cu_ptr(x),
      (int64_t)(x->nb1 / 4), (const float *)memra_cu_ptr(weights), (int64_t)(weights->nb1 / 4), k,
      k, x->ne0, total, (const float *)NULL, (int64_t)0, (const float *)NULL, (int64_t)0);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

memra_status memra_cu_moe_combine_gated(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *x, const memra_tensor *weights,
                                        const memra_tensor *sh, const memra_tensor *gt) {
  memra_status st;
  if ((st = memra_cu_check_f(be, "moe_combine_gated", "weights", weights, MEMRA_TYPE_F32, -1, -1)))
    return st;
  const int64_t n = weights->ne1, k = weights->ne0;
  if ((st = memra_cu_check_f(be, "moe_combine_gated", "x", x, MEMRA_TYPE_F32, -1, n * k)) ||
      (st = memra_cu_check_f(be, "moe_combine_gated", "y", y, MEMRA_TYPE_F32, x->ne0, n)) ||
      (st = memra_cu_check_f(be, "moe_combine_gated", "sh", sh, MEMRA_TYPE_F32, x->ne0, n)) ||
      (st = memra_cu_check_f(be, "moe_combine_gated", "g", gt, MEMRA_TYPE_F32, 1, n)))
    return st;
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, weights) || memra_cu_overlap(y, sh) ||
      memra_cu_overlap(y, gt))
    return memra_cu_errf(be, MEMRA_E_INVALID, "moe_combine_gated: y overlaps an input");
  const int64_t total = n * x->ne0;
  if (total == 0) return MEMRA_OK;
  moe_combine_go<true>(be, (float *)memra_cu_ptr(y), (int64_t)(y->nb1 / 4),
                       (const float *)memra_cu_ptr(x), (int64_t)(x->nb1 / 4),
                       (const float *)memra_cu_ptr(weights), (int64_t)(weights->nb1 / 4), k, k,
                       x->ne0, total, (const float *)memra_cu_ptr(sh), (int64_t)(sh->nb1 / 4),
                       (const float *)memra_cu_ptr(gt), (int64_t)(gt->nb1 / 4));
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

memra_status memra_cu_moe_combine_shexp(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *x, const memra_tensor *weights,
                                        const memra_tensor *gt) {
  memra_status st;
  if ((st = memra_cu_check_f(be, "moe_combine_shexp", "weights", weights, MEMRA_TYPE_F32, -1, -1)))
    return st;
  const int64_t n = weights->ne1, k = weights->ne0;
  if ((st = memra_cu_check_f(be, "moe_combine_shexp", "x", x, MEMRA_TYPE_F32, -1, n * (k + 1))) ||
      (st = memra_cu_check_f(be, "moe_combine_shexp", "y", y, MEMRA_TYPE_F32, x->ne0, n)) ||
      (st = memra_cu_check_f(be, "moe_combine_shexp", "g", gt, MEMRA_TYPE_F32, 1, n)))
    return st;
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, weights) || memra_cu_overlap(y, gt))
    return memra_cu_errf(be, MEMRA_E_INVALID, "moe_combine_shexp: y overlaps an input");
  const int64_t total = n * x->ne0, x_ld = (int64_t)(x->nb1 / 4);
  if (total == 0) return MEMRA_OK;
  const float *xp = (const float *)memra_cu_ptr(x);
  moe_combine_go<true>(be, (float *)memra_cu_ptr(y), (int64_t)(y->nb1 / 4), xp, x_ld,
                       (const float *)memra_cu_ptr(weights), (int64_t)(weights->nb1 / 4), k, k + 1,
                       x->ne0, total, xp + k * x_ld, (k + 1) * x_ld,
                       (const float *)memra_cu_ptr(gt), (int64_t)(gt->nb1 / 4));
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* ABI 1.9 matmul_id_combine: F16 / BF16 experts (16-byte rows, K % 8 == 0) in one launch;
 * other types run matmul_id into the workspace, then the combine (two launches, the same
 * bits by definition). Opt-in on the GPU plugins, MEMRA_MMID_COMBINE=1 (backend.cu). */
memra_status memra_cu_matmul_id_combine(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *x, const memra_tensor *w,
                                        const memra_tensor *ids, int32_t n_expert,
                                        const memra_tensor *weights, const memra_tensor *gt) {
  memra_status st;
  const char *op = "matmul_id_combine";
  if ((st = memra_cu_check_f(be, op, "weights", weights, MEMRA_TYPE_F32, -1, -1)) ||
      (st = memra_cu_check_f(be, op, "ids", ids, MEMRA_TYPE_I32, weights->ne0 + (gt != NULL),
                             weights->ne1)) ||
      (gt && (st = memra_cu_check_f(be, op, "g", gt, MEMRA_TYPE_F32, 1, weights->ne1))))
    return st;
  if (n_expert < 1 || w->ne1 % n_expert != 0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %lld weight rows do not split into %d experts",
                         op, (long long)w->ne1, n_expert);
  const int64_t n = weights->ne1, ke = ids->ne0, N = w->ne1 / n_expert;
  if ((st = memra_cu_check_f(be, op, "y", y, MEMRA_TYPE_F32, N, n))) return st;
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, w) || memra_cu_overlap(y, ids) ||
      memra_cu_overlap(y, weights) || (gt && memra_cu_overlap(y, gt)))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y overlaps an input", op);
  /* matmul_id's own checks, on the [n ke, N] rows the two-launch form writes into the
   * workspace (taken only then: the fused launch needs none, even inside a capture) */
  const uint64_t wsb = (uint64_t)(n * ke > 0 ? n * ke : 1) * (uint64_t)N * 4;
  memra_buf wbuf = {NULL, wsb};
  memra_tensor d = {&wbuf, 0, MEMRA_TYPE_F32, 0, N, n * ke, (uint64_t)N * 4};
  mmid_args a;
  bool xv;
  uint64_t walign;
  if ((st = mmid_prep(be, &d, x, w, ids, n_expert, false, &a, &xv, &walign))) return st;
  if (n == 0) return MEMRA_OK;
  const bool h16 = w->type == MEMRA_TYPE_F16 || w->type == MEMRA_TYPE_BF16;
  if (!(h16 && a.K % 8 == 0 && xv && walign >= 16 && !a.shared_x && ke <= MIC_KMAX &&
        N <= 0x7fffffff)) {
    /* the rows go after v4's sort area in one workspace: v4 (prompt rows) would otherwise
     * take the workspace's start for its sort while the rows are written there */
    const uint64_t gb = midg_wanted(a) ? (midg_ws_bytes(a.rows, a.n_expert) + 255) / 256 * 256 : 0;
    void *ws = NULL;
    if ((st = memra_cu_workspace(be, gb + wsb, &ws))) return st;
    wbuf.ptr = (uint8_t *)ws + gb;
    a.y = (float *)wbuf.ptr;
    if ((st = mmid_launch(be, a, w, false, xv, walign, gb ? ws : NULL))) return st;
    return gt ? memra_cu_moe_combine_shexp(be, y, &d, weights, gt)
              : memra_cu_moe_combine(be, y, &d, weights);
  }
  const dim3 grid((unsigned)N, (unsigned)(n < 65535 ? n : 65535));
  float *yp = (float *)memra_cu_ptr(y);
  const float *wp = (const float *)memra_cu_ptr(weights),
              *gp = gt ? (const float *)memra_cu_ptr(gt) : NULL;
  const int64_t y_ld = (int64_t)(y->nb1 / 4), w_ld = (int64_t)(weights->nb1 / 4),
                g_ld = gt ? (int64_t)(gt->nb1 / 4) : 0;
  const int kr = (int)weights->ne0;
  if (w->type == MEMRA_TYPE_F16)
    (void)memra_cu_launch(be,
                          gt ? matmul_id_combine_h_kernel<MEMRA_TYPE_F16, true>
                             : matmul_id_combine_h_kernel<MEMRA_TYPE_F16, false>,
                          grid, dim3(MMID_WARPS * 32), 0, a, yp, y_ld, wp, w_ld, kr, gp, g_ld);
  else
    (void)memra_cu_launch(be,
                          gt ? matmul_id_combine_h_kernel<MEMRA_TYPE_BF16, true>
                             : matmul_id_combine_h_kernel<MEMRA_TYPE_BF16, false>,
                          grid, dim3(MMID_WARPS * 32), 0, a, yp, y_ld, wp, w_ld, kr, gp, g_ld);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
