/* rmsnorm.cu — optional fused residual (x += res, written back), then
 * y = x / sqrt(mean(x^2) + eps) * w per row. Oracle: plugins/cpu rmsnorm.
 * ver 1: one block of 256 threads per row, scalar loads, fixed-order block sum.
 *   H200 (ncu, Llama-8B decode step): 12.7 us per 4096-wide row, 65 per token = 0.83 ms,
 *   a fifth of the step: 16 dependent load rounds per thread, each through one SM.
 * ver 2: a row's float4s spread over up to 1024 threads (4096 wide: one float4 each),
 *   held in registers between the sum of squares and the scaling (x is read once), the
 *   same fixed-order block sum. Scalar fallback when a row is not 16-byte aligned.
 *   ABI 1.6: y may be the 16-bit operand of the next prompt-row gemm (memra_op16).
 *
 * ver 2b: a thread's first float4 of w loaded before the PDL wait (w is constant).
 *                                                                            <- in the vtable */
#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/families.h"
#include "plugins/cuda/launch.cuh"

enum { RMS_VPT = 4 }; /* float4s per thread kept in registers (wider rows re-read x) */

/* y element i of a row: f32, or (OUT16 1 = f16, 2 = bf16) a 16-bit gemm operand. */
template <int OUT16> __device__ __forceinline__ void rms_put(void *yr, int64_t i, float v) {
  if (OUT16 == 0)
    ((float *)yr)[i] = v;
  else
    ((uint16_t *)yr)[i] = memra_op16<OUT16 == 2>(v);
}

/* GATE (ABI 1.7 rmsnorm_gate): y = act(z) * (the f32 result), glu's expression and bits. */
template <int GATE> __device__ __forceinline__ float rms_gate(float o, const float *zr, int64_t i) {
  if (GATE == 0) return o;
  const float g = zr[i];
  return (GATE == 1 ? memra_act_silu(g) : memra_act_gelu_tanh(g)) * o;
}

/* The thread's first float4 of the weight w (VEC), loaded before the PDL wait: w is constant,
 * and by the next token a 16 KB norm weight has left L2 (8 GB of GEMV weights streamed between),
 * so loaded after the block sum it put a DRAM round trip on every norm's chain. */
template <bool VEC> __device__ __forceinline__ float4 rms_w0(const float *w, int64_t ne0) {
  return VEC && threadIdx.x < ne0 / 4 ? __ldg((const float4 *)w + threadIdx.x)
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
}

/* One row by the whole block: x (+= res, written back), y = x / sqrt(mean(x^2) + eps) w
 * (then the gate); the bits depend on the row, ne0 and blockDim alone. w0: rms_w0's. */
template <bool VEC, int OUT16, int GATE>
__device__ __forceinline__ void rms_row(void *yr, float *xr, const float *rr, const float *zr,
                                        const float *w, int64_t ne0, float eps, float *sh,
                                        float4 w0) {
  static_assert(GATE == 0 || OUT16 == 0, "a gated norm writes f32");
  const int tid = threadIdx.x, nt = blockDim.x;
  float ss = 0.f;
  if constexpr (VEC) {
    const int64_t n4 = ne0 / 4;
    float4 keep[RMS_VPT];
#pragma unroll
    for (int j = 0; j < RMS_VPT; ++j)
      keep[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    int j = 0;
    for (int64_t i = tid; i < n4; i += nt, ++j) {
      float4 v = ((const float4 *)xr)[i];
      if (rr) {
        const float4 a = ((const float4 *)rr)[i];
        v.x += a.x;
        v.y += a.y;
        v.z += a.z;
        v.w += a.w;
        ((float4 *)xr)[i] = v;
      }
      ss = fmaf(v.x, v.x, ss);
      ss = fmaf(v.y, v.y, ss);
      ss = fmaf(v.z, v.z, ss);
      ss = fmaf(v.w, v.w, ss);
#pragma unroll
      for (int k = 0; k < RMS_VPT; ++k)
        if (k == j) keep[k] = v;
    }
    ss = memra_block_sum(ss, sh);
    const float inv = rsqrtf(ss / (float)ne0 + eps);
    j = 0;
    for (int64_t i = tid; i < n4; i += nt, ++j) {
      float4 v = keep[0];
      if (j < RMS_VPT) {
#pragma unroll
        for (int k = 1; k < RMS_VPT; ++k)
          if (k == j) v = keep[k];
      } else {
        v = ((const float4 *)xr)[i];
      }
      const float4 g = j == 0 ? w0 : __ldg((const float4 *)w + i);
      const float4 o = make_float4(rms_gate<GATE>(v.x * inv * g.x, zr, 4 * i),
                                   rms_gate<GATE>(v.y * inv * g.y, zr, 4 * i + 1),
                                   rms_gate<GATE>(v.z * inv * g.z, zr, 4 * i + 2),
                                   rms_gate<GATE>(v.w * inv * g.w, zr, 4 * i + 3));
      if (OUT16 == 0) {
        ((float4 *)yr)[i] = o;
      } else {
        uint2 h;
        h.x = memra_op16<OUT16 == 2>(o.x) | ((uint32_t)memra_op16<OUT16 == 2>(o.y) << 16);
        h.y = memra_op16<OUT16 == 2>(o.z) | ((uint32_t)memra_op16<OUT16 == 2>(o.w) << 16);
        ((uint2 *)yr)[i] = h;
      }
    }
  } else {
    for (int64_t i = tid; i < ne0; i += nt) {
      float v = xr[i];
      if (rr) {
        v += rr[i];
        xr[i] = v;
      }
      ss = fmaf(v, v, ss);
    }
    ss = memra_block_sum(ss, sh);
    const float inv = rsqrtf(ss / (float)ne0 + eps);
    for (int64_t i = tid; i < ne0; i += nt)
      rms_put<OUT16>(yr, i, rms_gate<GATE>(xr[i] * inv * w[i], zr, i));
  }
}

template <bool VEC, int OUT16, int GATE = 0>
__global__ void __launch_bounds__(1024)
    rmsnorm_v2_kernel(void *y, int64_t y_ld, float *x, int64_t x_ld, const float *res, int64_t r_ld,
                      const float *w, int64_t ne0, float eps, const float *z = NULL,
                      int64_t z_ld = 0) {
  __shared__ float sh[32];
  const float4 w0 = rms_w0<VEC>(w, ne0);
  memra_pdl_enter_early();
  const int64_t r = blockIdx.x;
  rms_row<VEC, OUT16, GATE>(
      OUT16 ? (void *)((uint16_t *)y + r * y_ld) : (void *)((float *)y + r * y_ld), x + r * x_ld,
      res ? res + r * r_ld : NULL, GATE ? z + r * z_ld : NULL, w, ne0, eps, sh, w0);
}

/* ABI 1.8 rmsnorm_qk: blocks [0, nq) norm q's rows in place, the rest k's, each row as
 * rmsnorm_v2 does it (the same rms_row, ne0 and blockDim): the bits of the two calls. */
template <bool VEC>
__global__ void __launch_bounds__(1024)
    rmsnorm_qk_kernel(float *q, int64_t q_ld, const float *wq, int64_t nq, float *k, int64_t k_ld,
                      const float *wk, int64_t ne0, float eps) {
  __shared__ float sh[32];
  const int64_t r = blockIdx.x;
  const float *w = r < nq ? wq : wk;
  const float4 w0 = rms_w0<VEC>(w, ne0);
  memra_pdl_enter_early();
  float *xr = r < nq ? q + r * q_ld : k + (r - nq) * k_ld;
  rms_row<VEC, 0, 0>(xr, xr, NULL, NULL, w, ne0, eps, sh, w0);
}

/* ABI 1.20 moe_combine_rmsnorm: row r's combine into y (moe.cu moe_combine_v1_kernel's sum in j
 * order; GATED: + the stacked shared row r xk + k times sigmoid(g), moe_combine_shexp's), each
 * thread the elements its rms_row pass then reads back as the residual (its own writes: no
 * barrier), then rms_row: the two calls' bits, one launch. */
template <bool VEC, bool GATED>
__global__ void __launch_bounds__(1024)
    moe_combine_rms_kernel(float *xn, int64_t xn_ld, float *x, int64_t x_ld, float *y, int64_t y_ld,
                           const float *d, int64_t d_ld, const float *wt, int64_t wt_ld, int k,
                           int xk, const float *g, int64_t g_ld, const float *w, int64_t ne0,
                           float eps) {
  __shared__ float sh[32];
  const float4 w0 = rms_w0<VEC>(w, ne0);
  memra_pdl_enter_early();
  const int64_t r = blockIdx.x, per = VEC ? 4 : 1, units = ne0 / per;
  const float *wr = wt + r * wt_ld;
  float *yr = y + r * y_ld;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x)
    for (int64_t e = per * u; e < per * u + per; ++e) {
      float s = 0.f;
      for (int j = 0; j < k; ++j)
        s = __fadd_rn(s, __fmul_rn(wr[j], d[(r * xk + j) * d_ld + e]));
      if (GATED) {
        const float v = d[(r * xk + k) * d_ld + e] / (1.0f + expf(-g[r * g_ld]));
        s = __fadd_rn(s, v);
      }
      yr[e] = s;
    }
  rms_row<VEC, 0, 0>(xn + r * xn_ld, x + r * x_ld, yr, NULL, w, ne0, eps, sh, w0);
}

/* One launch of the kernel for y's type (OUT16), the load path (VEC) and the gate. */
template <bool VEC, int OUT16, int GATE = 0>
static void rms_launch(memra_backend *be, dim3 grid, int threads, void *yp, int64_t y_ld, float *xp,
                       int64_t x_ld, const float *rp, int64_t r_ld, const float *wp, int64_t ne0,
                       float eps, const float *zp = NULL, int64_t z_ld = 0) {
  (void)memra_cu_launch(be, rmsnorm_v2_kernel<VEC, OUT16, GATE>, grid, dim3(threads), 0, yp, y_ld,
                        xp, x_ld, rp, r_ld, wp, ne0, eps, zp, z_ld);
}

/* Threads a row takes: a float4 (VEC) or a float each, 32 to 1024 (the bits of a row depend on
 * this count: rmsnorm_qk's rows must take rmsnorm's). */
static int rms_threads(bool vec, int64_t ne0) {
  const int64_t per = vec ? ne0 / 4 : ne0;
  return per >= 1024 ? 1024 : per <= 32 ? 32 : (int)((per + 31) / 32 * 32);
}

/* rmsnorm, and (gate 1 silu, 2 gelu_tanh; z present) rmsnorm_gate. */
static memra_status rms_run(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                            const memra_tensor *res, const memra_tensor *w, float eps,
                            const memra_tensor *z, int gate) {
  memra_status st;
  /* ABI 1.6: y may be a 16-bit gemm operand (F16 or BF16), written by the memra_op16 rule */
  const int out16 = !y ? 0 : y->type == MEMRA_TYPE_F16 ? 1 : y->type == MEMRA_TYPE_BF16 ? 2 : 0;
  const int64_t esz = out16 ? 2 : 4;
  if ((st = memra_cu_check_tensor(be, y, "rmsnorm: y", out16 ? y->type : MEMRA_TYPE_F32)) !=
          MEMRA_OK ||
      (st = memra_cu_check_tensor(be, x, "rmsnorm: x", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, w, "rmsnorm: w", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_same_shape(be, y, x, "rmsnorm: y and x")) != MEMRA_OK)
    return st;
  if (w->ne0 != x->ne0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: w has %lld elements, rows have %lld",
                         (long long)w->ne0, (long long)x->ne0);
  const float *rp = NULL;
  int64_t r_ld = 0;
  if (memra_cu_present(res)) {
    if ((st = memra_cu_check_tensor(be, res, "rmsnorm: res", MEMRA_TYPE_F32)) != MEMRA_OK ||
        (st = memra_cu_check_same_shape(be, res, x, "rmsnorm: res and x")) != MEMRA_OK)
      return st;
    if (res->nb1 % 4)
      return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: res stride not whole floats");
    rp = (const float *)memra_cu_ptr(res);
    r_ld = (int64_t)(res->nb1 / 4);
  }
  if (x->nb1 % 4 || y->nb1 % esz)
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: x or y stride not whole elements");
  if (out16 && (memra_cu_overlap(y, x) || (rp && memra_cu_overlap(y, res))))
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: a %s y must not overlap x or res",
                         memra_type_info(y->type).name);
  if (!(eps >= 0.f)) return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm: eps %g is negative", eps);
  if (x->ne1 == 0) return MEMRA_OK;
  if (x->ne1 > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "rmsnorm: %lld rows", (long long)x->ne1);
  void *yp = memra_cu_ptr(y);
  float *xp = (float *)memra_cu_ptr(x);
  const float *wp = (const float *)memra_cu_ptr(w);
  /* float4 path when every row of every operand starts 16-byte aligned (8 for a 16-bit y);
   * the choice depends on the tensors alone, so a row takes the same path in any batch. */
  const bool vec = x->ne0 % 4 == 0 && memra_cu_align_of(yp, y->nb1) >= (uint64_t)(4 * esz) &&
                   memra_cu_align_of(xp, x->nb1) >= 16 && memra_cu_align_of(wp, 0) >= 16 &&
                   (!rp || memra_cu_align_of(rp, res->nb1) >= 16);
  const int threads = rms_threads(vec, x->ne0);
  const dim3 grid((unsigned)x->ne1);
  const int64_t y_ld = (int64_t)(y->nb1 / esz), x_ld = (int64_t)(x->nb1 / 4);
  if (gate) {
    const float *zp = (const float *)memra_cu_ptr(z);
    const int64_t z_ld = (int64_t)(z->nb1 / 4);
    if (vec)
      gate == 1 ? rms_launch<true, 0, 1>(be, grid, threads, yp, y_ld, xp, x_ld, NULL, 0, wp, x->ne0,
                                         eps, zp, z_ld)
                : rms_launch<true, 0, 2>(be, grid, threads, yp, y_ld, xp, x_ld, NULL, 0, wp, x->ne0,
                                         eps, zp, z_ld);
    else
      gate == 1 ? rms_launch<false, 0, 1>(be, grid, threads, yp, y_ld, xp, x_ld, NULL, 0, wp,
                                          x->ne0, eps, zp, z_ld)
                : rms_launch<false, 0, 2>(be, grid, threads, yp, y_ld, xp, x_ld, NULL, 0, wp,
                                          x->ne0, eps, zp, z_ld);
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
#define RMS_GO(V, O)                                                                               \
  rms_launch<V, O>(be, grid, threads, yp, y_ld, xp, x_ld, rp, r_ld, wp, x->ne0, eps)
  if (vec) {
    if (out16 == 1)
      RMS_GO(true, 1);
    else if (out16 == 2)
      RMS_GO(true, 2);
    else
      RMS_GO(true, 0);
  } else {
    if (out16 == 1)
      RMS_GO(false, 1);
    else if (out16 == 2)
      RMS_GO(false, 2);
    else
      RMS_GO(false, 0);
  }
#undef RMS_GO
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

memra_status memra_cu_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *res, const memra_tensor *w, float eps) {
  return rms_run(be, y, x, res, w, eps, NULL, 0);
}

/* ABI 1.7: rmsnorm then glu(y, z, y) in one pass, their bits. */
memra_status memra_cu_rmsnorm_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *w, const memra_tensor *z, float eps,
                                   int32_t act) {
  memra_status st;
  if (act != MEMRA_ACT_SILU && act != MEMRA_ACT_GELU_TANH)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "rmsnorm_gate: unknown activation %d", (int)act);
  if ((st = memra_cu_check_tensor(be, y, "rmsnorm_gate: y", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, z, "rmsnorm_gate: z", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_same_shape(be, z, y, "rmsnorm_gate: z and y")) != MEMRA_OK)
    return st;
  if (z->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm_gate: z stride not whole floats");
  if (memra_cu_overlap(y, z))
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm_gate: y overlaps z");
  return rms_run(be, y, x, NULL, w, eps, z, act == MEMRA_ACT_SILU ? 1 : 2);
}

/* ABI 1.8: the q and k norms of an attention layer, in place, in one launch when their rows
 * share ne0 and the load path (rms_run's rule for an in-place F32 norm), else as the two
 * rmsnorm calls; either way their bits. Every argument is checked before a launch.
 * H200 (docs/PERF.md): bitwise the two calls; MoE 8-layer tg128 +2.2%, Qwen3-8B +1.4%. */
memra_status memra_cu_rmsnorm_qk(memra_backend *be, const memra_tensor *q, const memra_tensor *wq,
                                 const memra_tensor *k, const memra_tensor *wk, float eps) {
  memra_status st;
  if ((st = memra_cu_check_tensor(be, q, "rmsnorm_qk: q", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, k, "rmsnorm_qk: k", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, wq, "rmsnorm_qk: wq", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, wk, "rmsnorm_qk: wk", MEMRA_TYPE_F32)) != MEMRA_OK)
    return st;
  if (wq->ne0 != q->ne0 || wk->ne0 != k->ne0)
    return memra_cu_errf(
        be, MEMRA_E_INVALID, "rmsnorm_qk: wq, wk have %lld, %lld elements, q, k rows %lld, %lld",
        (long long)wq->ne0, (long long)wk->ne0, (long long)q->ne0, (long long)k->ne0);
  if (q->nb1 % 4 || k->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm_qk: q or k stride not whole floats");
  if (memra_cu_overlap(q, k)) return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm_qk: q overlaps k");
  if (!(eps >= 0.f))
    return memra_cu_errf(be, MEMRA_E_INVALID, "rmsnorm_qk: eps %g is negative", eps);
  if (q->ne1 + k->ne1 > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "rmsnorm_qk: %lld rows",
                         (long long)(q->ne1 + k->ne1));
  float *qp = (float *)memra_cu_ptr(q), *kp = (float *)memra_cu_ptr(k);
  const float *wqp = (const float *)memra_cu_ptr(wq), *wkp = (const float *)memra_cu_ptr(wk);
  const bool vq =
      q->ne0 % 4 == 0 && memra_cu_align_of(qp, q->nb1) >= 16 && memra_cu_align_of(wqp, 0) >= 16;
  const bool vk =
      k->ne0 % 4 == 0 && memra_cu_align_of(kp, k->nb1) >= 16 && memra_cu_align_of(wkp, 0) >= 16;
  if (q->ne0 != k->ne0 || vq != vk) {
    if ((st = rms_run(be, q, q, NULL, wq, eps, NULL, 0)) != MEMRA_OK) return st;
    return rms_run(be, k, k, NULL, wk, eps, NULL, 0);
  }
  if (q->ne1 + k->ne1 == 0) return MEMRA_OK;
  const dim3 grid((unsigned)(q->ne1 + k->ne1));
  const int threads = rms_threads(vq, q->ne0);
  (void)memra_cu_launch(be, vq ? rmsnorm_qk_kernel<true> : rmsnorm_qk_kernel<false>, grid,
                        dim3(threads), 0, qp, (int64_t)(q->nb1 / 4), wqp, q->ne1, kp,
                        (int64_t)(k->nb1 / 4), wkp, q->ne0, eps);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* ABI 1.20: a MoE layer's combine (routed, or with the stacked shared expert when logit is
 * present) and the norm that adds it, in one launch; the two calls' checks and bits. Opt-in
 * (MEMRA_COMBINE_NORM=1, backend.cu): no faster on the H200 (2026-12-05: MoE tg128 even, hybrid
 * -3%: the two small launches it merges were a window the next GEMV used). */
memra_status memra_cu_moe_combine_rmsnorm(memra_backend *be, const memra_tensor *xn,
                                          const memra_tensor *x, const memra_tensor *w_norm,
                                          float eps, const memra_tensor *y,
                                          const memra_tensor *down, const memra_tensor *weights,
                                          const memra_tensor *logit) {
  const char *op = "moe_combine_rmsnorm";
  if (!xn || !x || !w_norm || !y || !down || !weights)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: a tensor argument is NULL", op);
  const bool gated = memra_cu_present(logit);
  memra_status st;
  if ((st = memra_cu_check_f(be, op, "weights", weights, MEMRA_TYPE_F32, -1, -1))) return st;
  const int64_t n = weights->ne1, k = weights->ne0, xk = gated ? k + 1 : k;
  if ((st = memra_cu_check_f(be, op, "down", down, MEMRA_TYPE_F32, -1, n * xk)) ||
      (st = memra_cu_check_f(be, op, "y", y, MEMRA_TYPE_F32, down->ne0, n)) ||
      (st = memra_cu_check_f(be, op, "x", x, MEMRA_TYPE_F32, down->ne0, n)) ||
      (st = memra_cu_check_f(be, op, "xn", xn, MEMRA_TYPE_F32, down->ne0, n)) ||
      (st = memra_cu_check_f(be, op, "w_norm", w_norm, MEMRA_TYPE_F32, down->ne0, 1)) ||
      (gated && (st = memra_cu_check_f(be, op, "logit", logit, MEMRA_TYPE_F32, 1, n))))
    return st;
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, xn) || memra_cu_overlap(y, down) ||
      memra_cu_overlap(y, weights) || (gated && memra_cu_overlap(y, logit)))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y overlaps x, xn or an input", op);
  if (memra_cu_overlap(xn, x) || memra_cu_overlap(xn, down) || memra_cu_overlap(x, down))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: xn, x and down must not overlap", op);
  if (!(eps >= 0.f)) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: eps %g is negative", op, eps);
  if (k > 0x7fffffff || n > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: %lld rows of %lld experts", op, (long long)n,
                         (long long)k);
  if (n == 0) return MEMRA_OK;
  const int64_t E = down->ne0;
  float *xnp = (float *)memra_cu_ptr(xn), *xp = (float *)memra_cu_ptr(x),
        *yp = (float *)memra_cu_ptr(y);
  const float *wp = (const float *)memra_cu_ptr(w_norm);
  /* rms_run's rule for the load path, y the residual */
  const bool vec = E % 4 == 0 && memra_cu_align_of(xnp, xn->nb1) >= 16 &&
                   memra_cu_align_of(xp, x->nb1) >= 16 && memra_cu_align_of(wp, 0) >= 16 &&
                   memra_cu_align_of(yp, y->nb1) >= 16;
  const int threads = rms_threads(vec, E);
  const float *gp = gated ? (const float *)memra_cu_ptr(logit) : NULL;
  const int64_t g_ld = gated ? (int64_t)(logit->nb1 / 4) : 0;
  void (*kernel)(float *, int64_t, float *, int64_t, float *, int64_t, const float *, int64_t,
                 const float *, int64_t, int, int, const float *, int64_t, const float *, int64_t,
                 float) =
      vec ? (gated ? moe_combine_rms_kernel<true, true> : moe_combine_rms_kernel<true, false>)
          : (gated ? moe_combine_rms_kernel<false, true> : moe_combine_rms_kernel<false, false>);
  (void)memra_cu_launch(be, kernel, dim3((unsigned)n), dim3(threads), 0, xnp,
                        (int64_t)(xn->nb1 / 4), xp, (int64_t)(x->nb1 / 4), yp,
                        (int64_t)(y->nb1 / 4), (const float *)memra_cu_ptr(down),
                        (int64_t)(down->nb1 / 4), (const float *)memra_cu_ptr(weights),
                        (int64_t)(weights->nb1 / 4), (int)k, (int)xk, gp, g_ld, wp, E, eps);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
