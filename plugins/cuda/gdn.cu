/* gdn.cu — the ops of Gated DeltaNet (hybrid) layers: sigmoid_gate, the depthwise causal
 * conv with SiLU and its per-sequence conv state (ssm_conv), and the gated delta rule.
 * Oracle: plugins/cpu/ssm_conv.c and delta_rule.c. Recurrent state rows belong to
 * sequences (batch seq); a row at position 0 starts from a zero state; the rows of one
 * sequence are applied in batch order. Seq and pos live on the device: a row whose seq is
 * outside [0, n_seqs) gets NaN outputs (the host cannot see it without a sync).
 *
 * ver  idea
 *  1   sigmoid_gate: one thread per element (strided views: the attention gate is every
 *      other head of a wider row).
 *      ssm_conv: one thread per (channel, sequence) walks the batch rows in order, its
 *      K - 1 state columns in registers for K <= 8 (read once, written once per call),
 *      in global memory otherwise.
 *      gated_delta_rule: row j of a head's d x d state (S[j][i], i the key dim) evolves
 *      alone given the token's q, k, v[j]: a warp owns up to 8 rows, lane l the key dims
 *      l, l + 32, ...; a block of 4 warps owns 32 rows of one (value head, sequence), so a
 *      d = 128 head spreads over 4 blocks (decode of one sequence still fills the GPU).
 *      The block walks its sequence's rows in order with the state in registers (d <=
 *      128): it is read from memory once before the first token and written once after
 *      the last. q/k are L2-normalised per block from shared memory. d > 128: the same
 *      with each state row read and written once per token (no register room).
 *  2   all three launched with PDL (launch.cuh; plain launches before): sigmoid_gate and
 *      ssm_conv trigger their dependents first (memra_pdl_enter_early), the delta rule
 *      after its wait. Same arithmetic.
 *  3   gated_delta_rule (d <= 128): the state read into registers before the PDL wait, and
 *      per token a warp's 8 rows taken together (their v loads and butterflies overlap; v1
 *      ran 16 dependent butterflies a token); a row's arithmetic unchanged, same bits.
 *      10.9 -> 8.1 us a call (ncu), hybrid Q4_K_M tg128 2,633 -> 2,710 on the H200.
 *  4   ABI 1.11 gated_delta_rule_norm (NORM): a d 128 head in one block of 16 warps (each warp's
 *      rows and arithmetic as ver 3), its row in shared memory at each token and rmsnorm_gate's
 *      arithmetic by one warp: the composition's bits in one launch (hybrid F16 tg128 2,283-2,306
 *      -> 2,347-2,356 on the H200). ssm_conv in place is matmul_n_conv's two-launch form.
 *  5   gated_delta_rule_v2 (d <= 128; MEMRA_GDN_PIPE=0 takes v1): the next row's inputs loaded
 *      under this row's arithmetic, q / k double-buffered: prompts without a global round trip
 *      a row; ssm_conv_v2 the same for the conv (8 rows' inputs loaded at once). H200, hybrid
 *      Q4_K_M: pp512 20,034 -> 22,012 (+10%), tg128 3,463 -> 3,523 (+1.7%). */
#include <math.h>

#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/families.h"
#include "plugins/cuda/launch.cuh"

#define GDN_NAN __int_as_float(0x7fc00000)

/* --- sigmoid_gate -------------------------------------------------------------------- */

__global__ void sigmoid_gate_v1_kernel(float *y, int64_t y_ld, const float *x, int64_t x_ld,
                                       const float *g, int64_t g_ld, int bcast, int64_t ne0,
                                       int64_t total) {
  memra_pdl_enter_early();
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / ne0, i = t % ne0;
    const float gv = g[r * g_ld + (bcast ? 0 : i)];
    y[r * y_ld + i] = x[r * x_ld + i] / (1.0f + expf(-gv));
  }
}

memra_status memra_cu_sigmoid_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *g) {
  memra_status st;
  if ((st = memra_cu_check_f(be, "sigmoid_gate", "x", x, MEMRA_TYPE_F32, -1, -1)) ||
      (st = memra_cu_check_f(be, "sigmoid_gate", "y", y, MEMRA_TYPE_F32, x->ne0, x->ne1)) ||
      (st = memra_cu_check_f(be, "sigmoid_gate", "g", g, MEMRA_TYPE_F32, -1, -1)))
    return st;
  if (g->ne1 != x->ne1 || (g->ne0 != x->ne0 && g->ne0 != 1))
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "sigmoid_gate: g [%lld, %lld] for x [%lld, %lld] (need the same shape or "
                         "one column)",
                         (long long)g->ne1, (long long)g->ne0, (long long)x->ne1,
                         (long long)x->ne0);
  /* in place (y == x) is fine element by element; y over g would race */
  if (memra_cu_overlap(y, g) && !(y->offset == g->offset && y->nb1 == g->nb1))
    return memra_cu_errf(be, MEMRA_E_INVALID, "sigmoid_gate: y overlaps g");
  const int64_t total = x->ne1 * x->ne0;
  if (total == 0) return MEMRA_OK;
  int64_t gr = (total + 255) / 256;
  if (gr > 65536) gr = 65536;
  (void)memra_cu_launch(be, sigmoid_gate_v1_kernel, dim3((unsigned)gr), dim3(256), 0,
                        (float *)memra_cu_ptr(y), (int64_t)(y->nb1 / 4),
                        (const float *)memra_cu_ptr(x), (int64_t)(x->nb1 / 4),
                        (const float *)memra_cu_ptr(g), (int64_t)(g->nb1 / 4),
                        g->ne0 == 1 && x->ne0 != 1, x->ne0, total);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* --- ssm_conv ------------------------------------------------------------------------ */

struct conv_args {
  float *y;
  int64_t y_ld;
  const float *x;
  int64_t x_ld;
  const float *w;
  int64_t w_ld;
  float *state;
  int64_t s_ld;
  const int32_t *pos, *seq;
  int64_t C, n;
  int n_seqs, K;
};

/* KM = K - 1 state columns in registers; KM < 0: any K, the state in global memory. */
template <int KM> __global__ void ssm_conv_v1_kernel(conv_args a) {
  memra_pdl_enter_early();
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  if (c >= a.C) return;
  const int K = KM >= 0 ? KM + 1 : a.K, km = K - 1;
  const float *w = a.w + c * a.w_ld;
  float *st = a.state + s * a.s_ld + c * km;
  float reg[KM > 0 ? KM : 1], wv[KM >= 0 ? KM + 1 : 1];
  if (KM >= 0) {
#pragma unroll
    for (int i = 0; i <= (KM >= 0 ? KM : 0); ++i)
      wv[i] = w[i];
  }
  bool live = false;
  for (int64_t r = 0; r < a.n; ++r) {
    const int sr = a.seq[r];
    if (sr != s) {
      if (s == 0 && (sr < 0 || sr >= a.n_seqs)) a.y[r * a.y_ld + c] = GDN_NAN;
      continue;
    }
    const bool fresh = a.pos[r] == 0;
    const float xv = a.x[r * a.x_ld + c];
    float acc = 0.f;
    if (KM >= 0) {
      if (!live || fresh) {
#pragma unroll
        for (int i = 0; i < (KM > 0 ? KM : 0); ++i)
          reg[i] = fresh ? 0.f : st[i];
      }
#pragma unroll
      for (int i = 0; i < (KM > 0 ? KM : 0); ++i)
        acc += wv[i] * reg[i];
      acc += wv[KM >= 0 ? KM : 0] * xv;
#pragma unroll
      for (int i = 0; i + 1 < (KM > 0 ? KM : 0); ++i)
        reg[i] = reg[i + 1];
      if (KM > 0) reg[KM > 0 ? KM - 1 : 0] = xv;
    } else {
      if (fresh)
        for (int i = 0; i < km; ++i)
          st[i] = 0.f;
      for (int i = 0; i < km; ++i)
        acc += w[i] * st[i];
      acc += w[km] * xv;
      for (int i = 0; i + 1 < km; ++i)
        st[i] = st[i + 1];
      if (km > 0) st[km - 1] = xv;
    }
    live = true;
    a.y[r * a.y_ld + c] = acc / (1.0f + expf(-acc));
  }
  if (KM > 0 && live) {
#pragma unroll
    for (int i = 0; i < (KM > 0 ? KM : 0); ++i)
      st[i] = reg[i];
  }
}

/* ver 5 (the default, MEMRA_GDN_PIPE=0 v1; K <= 8, the state in registers): v1's thread walks its
 * rows with a global round trip each (seq, pos and x after the last row's store); here it loads
 * CONV_AHEAD rows' seq, pos and x at once, then takes them in order with v1's arithmetic (the same
 * bits). In place stays safe: a row's x is read before that row's y is written. */
enum { CONV_AHEAD = 8 };
template <int KM> __global__ void ssm_conv_v2_kernel(conv_args a) {
  static_assert(KM >= 0, "the state in registers");
  memra_pdl_enter_early();
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  if (c >= a.C) return;
  const float *w = a.w + c * a.w_ld;
  float *st = a.state + s * a.s_ld + c * KM;
  float reg[KM > 0 ? KM : 1], wv[KM + 1];
#pragma unroll
  for (int i = 0; i <= KM; ++i)
    wv[i] = w[i];
  bool live = false;
  for (int64_t r0 = 0; r0 < a.n; r0 += CONV_AHEAD) {
    int sq[CONV_AHEAD], ps[CONV_AHEAD];
    float xs[CONV_AHEAD];
#pragma unroll
    for (int u = 0; u < CONV_AHEAD; ++u) {
      const int64_t r = r0 + u < a.n ? r0 + u : a.n - 1;
      sq[u] = a.seq[r];
      ps[u] = a.pos[r];
      xs[u] = a.x[r * a.x_ld + c];
    }
#pragma unroll
    for (int u = 0; u < CONV_AHEAD; ++u) {
      const int64_t r = r0 + u;
      if (r >= a.n) break;
      const int sr = sq[u];
      if (sr != s) {
        if (s == 0 && (sr < 0 || sr >= a.n_seqs)) a.y[r * a.y_ld + c] = GDN_NAN;
        continue;
      }
      const bool fresh = ps[u] == 0;
      const float xv = xs[u];
      float acc = 0.f;
      if (!live || fresh) {
#pragma unroll
        for (int i = 0; i < KM; ++i)
          reg[i] = fresh ? 0.f : st[i];
      }
#pragma unroll
      for (int i = 0; i < KM; ++i)
        acc += wv[i] * reg[i];
      acc += wv[KM] * xv;
#pragma unroll
      for (int i = 0; i + 1 < KM; ++i)
        reg[i] = reg[i + 1];
      if (KM > 0) reg[KM > 0 ? KM - 1 : 0] = xv;
      live = true;
      a.y[r * a.y_ld + c] = acc / (1.0f + expf(-acc));
    }
  }
  if (KM > 0 && live) {
#pragma unroll
    for (int i = 0; i < KM; ++i)
      st[i] = reg[i];
  }
}

/* ssm_conv's checks and launch; in_place: y is x (matmul_n_conv's fallback: a channel's thread
 * reads each row's value before it writes that row's result, so the conv may run in place). */
static memra_status ssm_conv_run(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                 const memra_tensor *w, const memra_tensor *state,
                                 const memra_batch *batch, bool in_place) {
  memra_status st;
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  int64_t bt_ld = 0;
  if ((st = memra_cu_check_f(be, "ssm_conv", "x", x, MEMRA_TYPE_F32, -1, -1)) ||
      (st = memra_cu_check_f(be, "ssm_conv", "y", y, MEMRA_TYPE_F32, x->ne0, x->ne1)) ||
      (st = memra_cu_check_f(be, "ssm_conv", "w", w, MEMRA_TYPE_F32, -1, x->ne0)) ||
      (st = memra_cu_check_batch(be, batch, "ssm_conv", &pos, &seq, &bt, &bt_ld)))
    return st;
  if (batch->n_rows != x->ne1)
    return memra_cu_errf(be, MEMRA_E_INVALID, "ssm_conv: batch of %d rows for x of %lld",
                         batch->n_rows, (long long)x->ne1);
  const int64_t K = w->ne0;
  if ((st = memra_cu_check_f(be, "ssm_conv", "state", state, MEMRA_TYPE_F32, (K - 1) * x->ne0,
                             batch->n_seqs)))
    return st;
  if ((!in_place && memra_cu_overlap(y, x)) || memra_cu_overlap(y, state) || memra_cu_overlap(y, w))
    return memra_cu_errf(be, MEMRA_E_INVALID, "ssm_conv: y overlaps x, state or w");
  if (K > 0x7fffffff || batch->n_seqs > 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "ssm_conv: width %lld, %d sequences",
                         (long long)K, batch->n_seqs);
  if (x->ne1 == 0) return MEMRA_OK;
  conv_args a;
  a.y = (float *)memra_cu_ptr(y);
  a.y_ld = (int64_t)(y->nb1 / 4);
  a.x = (const float *)memra_cu_ptr(x);
  a.x_ld = (int64_t)(x->nb1 / 4);
  a.w = (const float *)memra_cu_ptr(w);
  a.w_ld = (int64_t)(w->nb1 / 4);
  a.state = (float *)memra_cu_ptr(state);
  a.s_ld = (int64_t)(state->nb1 / 4);
  a.pos = pos;
  a.seq = seq;
  a.C = x->ne0;
  a.n = x->ne1;
  a.n_seqs = batch->n_seqs;
  a.K = (int)K;
  const dim3 grid((unsigned)((a.C + 127) / 128), (unsigned)batch->n_seqs);
  if (!memra_cu_env_is("MEMRA_GDN_PIPE", "0") && K >= 1 && K <= 8 && a.n > 1) {
    void (*k2)(conv_args) = K == 1   ? ssm_conv_v2_kernel<0>
                            : K == 2 ? ssm_conv_v2_kernel<1>
                            : K == 3 ? ssm_conv_v2_kernel<2>
                            : K == 4 ? ssm_conv_v2_kernel<3>
                            : K == 5 ? ssm_conv_v2_kernel<4>
                            : K == 6 ? ssm_conv_v2_kernel<5>
                            : K == 7 ? ssm_conv_v2_kernel<6>
                                     : ssm_conv_v2_kernel<7>;
    (void)memra_cu_launch(be, k2, grid, dim3(128), 0, a);
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
  switch (K) {
  case 1: (void)memra_cu_launch(be, ssm_conv_v1_kernel<0>, grid, dim3(128), 0, a); break;
  case 2: (void)memra_cu_launch(be, ssm_conv_v1_kernel<1>, grid, dim3(128), 0, a); break;
  case 3: (void)memra_cu_launch(be, ssm_conv_v1_kernel<2>, grid, dim3(128), 0, a); break;
  case 4: (void)memra_cu_launch(be, ssm_conv_v1_kernel<3>, grid, dim3(128), 0, a); break;
  case 5: (void)memra_cu_launch(be, ssm_conv_v1_kernel<4>, grid, dim3(128), 0, a); break;
  case 6: (void)memra_cu_launch(be, ssm_conv_v1_kernel<5>, grid, dim3(128), 0, a); break;
  case 7: (void)memra_cu_launch(be, ssm_conv_v1_kernel<6>, grid, dim3(128), 0, a); break;
  case 8: (void)memra_cu_launch(be, ssm_conv_v1_kernel<7>, grid, dim3(128), 0, a); break;
  default: (void)memra_cu_launch(be, ssm_conv_v1_kernel<-1>, grid, dim3(128), 0, a); break;
  }
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

memra_status memra_cu_ssm_conv(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *state,
                               const memra_batch *batch) {
  return ssm_conv_run(be, y, x, w, state, batch, false);
}

memra_status memra_cu_ssm_conv_in_place(memra_backend *be, const memra_tensor *y,
                                        const memra_tensor *w, const memra_tensor *state,
                                        const memra_batch *batch) {
  return ssm_conv_run(be, y, y, w, state, batch, true);
}

/* --- gated_delta_rule ---------------------------------------------------------------- */

enum { GDN_WARPS = 4, GDN_RPW = 8, GDN_ROWS = GDN_WARPS * GDN_RPW, GDN_MAX_D = 512 };

struct gdn_args {
  float *out;
  int64_t o_ld;
  const float *q, *k, *v, *a, *b;
  int64_t q_ld, k_ld, v_ld, a_ld, b_ld;
  const float *a_log, *dt;
  float *state;
  int64_t s_ld;
  const int32_t *pos, *seq;
  int64_t n;
  int n_seqs, hk, r, tiled, d;
  float eps;
  /* NORM (ABI 1.11 gated_delta_rule_norm): rmsnorm_gate of each head's output row */
  const float *z = NULL, *norm_w = NULL;
  int64_t z_ld = 0;
  float norm_eps = 0.f;
};

__device__ __forceinline__ float gdn_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* rmsnorm_gate of one 128-wide head row o (shared memory) into orow by one warp, with
 * rmsnorm_gate's bits: its launch gives a 128-wide row 32 threads, one float4 each, an fmaf chain
 * over the float4, memra_block_sum's two warp sums (the second over one warp's value), then
 * silu(z) * (v * inv * w) (rmsnorm.cu rms_row, VEC, GATE 1). PRE: the lane's four z from pre (v2's,
 * loaded a row ahead) instead of z's row r. */
template <bool PRE = false>
__device__ __forceinline__ void gdn_norm_row(const gdn_args &a, float *orow, const float *o,
                                             int64_t r, int h, int lane, const float *pre = NULL) {
  const float4 v = ((const float4 *)o)[lane];
  float ss = 0.f;
  ss = fmaf(v.x, v.x, ss);
  ss = fmaf(v.y, v.y, ss);
  ss = fmaf(v.z, v.z, ss);
  ss = fmaf(v.w, v.w, ss);
  ss = memra_warp_sum(ss);
  ss = memra_warp_sum(lane == 0 ? ss : 0.f);
  const float inv = rsqrtf(ss / 128.f + a.norm_eps);
  const float4 g = __ldg((const float4 *)a.norm_w + lane);
  const float *zr = PRE ? pre : a.z + r * a.z_ld + (int64_t)h * 128 + 4 * lane;
  ((float4 *)orow)[lane] = make_float4(
      memra_act_silu(zr[0]) * (v.x * inv * g.x), memra_act_silu(zr[1]) * (v.y * inv * g.y),
      memra_act_silu(zr[2]) * (v.z * inv * g.z), memra_act_silu(zr[3]) * (v.w * inv * g.w));
}

/* NI key dims per lane (d <= 32 NI). GL: state rows in global memory, read and written
 * once per token; else in registers for the whole call, loaded before the PDL wait (only this
 * op writes the state, and its last call for this layer is dozens of kernels back: complete
 * before the kernel before this one could start) and, per token, the warp's GDN_RPW rows taken
 * together: their butterflies and v loads independent, so they overlap instead of running as
 * 2 GDN_RPW dependent chains (ver 3; a row's arithmetic is ver 1's: the same bits). */
template <int NI, bool GL, int W = GDN_WARPS, bool NORM = false>
__global__ void __launch_bounds__(W * 32) gated_delta_rule_v1_kernel(gdn_args a) {
  static_assert(!NORM || (!GL && NI == 4 && W * GDN_RPW == 128), "NORM: a d 128 head a block");
  constexpr int ROWS = W * GDN_RPW; /* state rows a block */
  __shared__ float qs[GDN_MAX_D], ks[GDN_MAX_D];
  const int h = blockIdx.x, s = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, d = a.d;
  const int j0 = blockIdx.z * ROWS + warp * GDN_RPW; /* this warp's first state row */
  float *Sg = a.state + (int64_t)s * a.s_ld + (int64_t)h * d * d;
  float S[GL ? 1 : GDN_RPW][NI];
  if (!GL) {
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t)
#pragma unroll
      for (int u = 0; u < NI; ++u) {
        const int j = j0 + t, i = lane + 32 * u;
        S[GL ? 0 : t][u] = j >= d || i >= d ? 0.f : Sg[(int64_t)j * d + i];
      }
  }
  memra_pdl_enter();
  const int kh = a.tiled ? h % a.hk : h / a.r;
  const float a_log = a.a_log[h], dt = a.dt[h];
  bool live = false;
  for (int64_t r = 0; r < a.n; ++r) {
    const int sr = a.seq[r];
    if (sr != s) {
      if (s == 0 && (sr < 0 || sr >= a.n_seqs))
        for (int jj = threadIdx.x; jj < ROWS; jj += blockDim.x)
          if (blockIdx.z * ROWS + jj < d)
            a.out[r * a.o_ld + (int64_t)h * d + blockIdx.z * ROWS + jj] = GDN_NAN;
      continue;
    }
    const bool fresh = a.pos[r] == 0;
    if (!GL && fresh) {
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t)
#pragma unroll
        for (int u = 0; u < NI; ++u)
          S[GL ? 0 : t][u] = 0.f;
    }
    live = true;
    __syncthreads(); /* the previous token's q/k are no longer read */
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      qs[i] = a.q[r * a.q_ld + (int64_t)kh * d + i];
      ks[i] = a.k[r * a.k_ld + (int64_t)kh * d + i];
    }
    __syncthreads();
    float qv[NI], kv[NI], sq = 0.f, sk = 0.f;
#pragma unroll
    for (int u = 0; u < NI; ++u) {
      const int i = lane + 32 * u;
      qv[u] = i < d ? qs[i] : 0.f;
      kv[u] = i < d ? ks[i] : 0.f;
      sq += qv[u] * qv[u];
      sk += kv[u] * kv[u];
    }
    sq = memra_warp_sum(sq);
    sk = memra_warp_sum(sk);
    const float fq = (1.0f / sqrtf((float)d)) / sqrtf(sq + a.eps), fk = 1.0f / sqrtf(sk + a.eps);
#pragma unroll
    for (int u = 0; u < NI; ++u) {
      qv[u] *= fq;
      kv[u] *= fk;
    }
    const float beta = 1.0f / (1.0f + expf(-a.b[r * a.b_ld + h]));
    const float decay = expf(a_log * gdn_softplus(a.a[r * a.a_ld + h] + dt));
    const float *vr = a.v + r * a.v_ld + (int64_t)h * d;
    float *orow = a.out + r * a.o_ld + (int64_t)h * d;
    if (!GL) { /* the warp's rows together (rows past d: computed on zeros, never stored) */
      float vj[GDN_RPW], p[GDN_RPW], o[GDN_RPW];
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t)
        vj[t] = j0 + t < d ? vr[j0 + t] : 0.f;
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t) {
        p[t] = 0.f;
#pragma unroll
        for (int u = 0; u < NI; ++u) {
          S[GL ? 0 : t][u] *= decay;
          p[t] += S[GL ? 0 : t][u] * kv[u];
        }
      }
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t)
        p[t] = memra_warp_sum(p[t]);
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t) {
        const float delta = beta * (vj[t] - p[t]);
        o[t] = 0.f;
#pragma unroll
        for (int u = 0; u < NI; ++u) {
          S[GL ? 0 : t][u] += kv[u] * delta;
          o[t] += S[GL ? 0 : t][u] * qv[u];
        }
      }
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t)
        o[t] = memra_warp_sum(o[t]);
      if (!NORM && lane == 0)
#pragma unroll
        for (int t = 0; t < GDN_RPW; ++t)
          if (j0 + t < d) orow[j0 + t] = o[t];
      if (NORM) { /* the head's row in ks (read into kv already), then rmsnorm_gate by warp 0 */
        if (lane == 0)
#pragma unroll
          for (int t = 0; t < GDN_RPW; ++t)
            ks[j0 + t] = o[t];
        __syncthreads();
        if (warp == 0) gdn_norm_row(a, orow, ks, r, h, lane);
      }
    } else {
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t) {
        const int j = j0 + t;
        if (j >= d) break; /* uniform over the warp */
        float g[NI];
#pragma unroll
        for (int u = 0; u < NI; ++u) {
          const int i = lane + 32 * u;
          g[u] = fresh || i >= d ? 0.f : Sg[(int64_t)j * d + i];
        }
        float p = 0.f;
#pragma unroll
        for (int u = 0; u < NI; ++u) {
          g[u] *= decay;
          p += g[u] * kv[u];
        }
        const float delta = beta * (vr[j] - memra_warp_sum(p));
        float o = 0.f;
#pragma unroll
        for (int u = 0; u < NI; ++u) {
          g[u] += kv[u] * delta;
          o += g[u] * qv[u];
        }
        o = memra_warp_sum(o);
        if (lane == 0) orow[j] = o;
#pragma unroll
        for (int u = 0; u < NI; ++u) {
          const int i = lane + 32 * u;
          if (i < d) Sg[(int64_t)j * d + i] = g[u];
        }
      }
    }
  }
  if (!GL && live) {
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t)
#pragma unroll
      for (int u = 0; u < NI; ++u) {
        const int j = j0 + t, i = lane + 32 * u;
        if (j < d && i < d) Sg[(int64_t)j * d + i] = S[GL ? 0 : t][u];
      }
  }
}

/* A row's inputs as gated_delta_rule_v2 holds them one row ahead: this thread's q and k element
 * (threads < d), the warp's v rows, the gates, and (NORM) warp 0's four z of the head. */
struct gdn_next {
  int seq, pos;
  float a, b, q, k;
  float v[GDN_RPW];
  float z[4];
};

template <bool NORM>
__device__ __forceinline__ void gdn_fetch(gdn_next &f, const gdn_args &a, int64_t r, int h, int kh,
                                          int j0, int lane, int warp) {
  if (r >= a.n) return;
  const int d = a.d, i = threadIdx.x;
  f.seq = a.seq[r];
  f.pos = a.pos[r];
  f.a = a.a[r * a.a_ld + h];
  f.b = a.b[r * a.b_ld + h];
  f.q = i < d ? a.q[r * a.q_ld + (int64_t)kh * d + i] : 0.f;
  f.k = i < d ? a.k[r * a.k_ld + (int64_t)kh * d + i] : 0.f;
  const float *vr = a.v + r * a.v_ld + (int64_t)h * d;
#pragma unroll
  for (int t = 0; t < GDN_RPW; ++t)
    f.v[t] = j0 + t < d ? vr[j0 + t] : 0.f;
  if (NORM && warp == 0) {
    const float *zp = a.z + r * a.z_ld + (int64_t)h * 128 + 4 * lane;
#pragma unroll
    for (int c = 0; c < 4; ++c)
      f.z[c] = zp[c];
  }
}

/* ver 5 (the default, MEMRA_GDN_PIPE=0 v1; d <= 128, the state in registers): v1 walks its rows
 * with three to four global round trips on each row's chain (seq, then pos, then q / k through
 * shared memory between two barriers, then the gates and v) while the state waits; a prompt of 512
 * tokens is 512 such links in a row. Here row r + 1's inputs are loaded while row r computes, its q
 * / k stored into the other of two shared buffers at the next row's start: one barrier a row (two
 * with NORM) and no global load on the chain. Each row's arithmetic is v1's, statement for
 * statement (ver 3, and ver 4's norm): the same bits. It is written out again rather than shared
 * with v1 through helpers: sharing it changed v1's machine code (tools/device/sass_diff.sh), and v1
 * is the default path until v2 is measured; once v2 is the default, v1's copy goes. */
template <int NI, int W = GDN_WARPS, bool NORM = false>
__global__ void __launch_bounds__(W * 32) gated_delta_rule_v2_kernel(gdn_args a) {
  static_assert(NI <= 4 && W * 32 >= 128, "d <= 128: a q and a k element a thread");
  static_assert(!NORM || (NI == 4 && W * GDN_RPW == 128), "NORM: a d 128 head a block");
  constexpr int ROWS = W * GDN_RPW; /* state rows a block */
  __shared__ float qs[2][128], ks[2][128], os[128];
  const int h = blockIdx.x, s = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, d = a.d;
  const int j0 = blockIdx.z * ROWS + warp * GDN_RPW; /* this warp's first state row */
  float *Sg = a.state + (int64_t)s * a.s_ld + (int64_t)h * d * d;
  float S[GDN_RPW][NI];
#pragma unroll
  for (int t = 0; t < GDN_RPW; ++t)
#pragma unroll
    for (int u = 0; u < NI; ++u) {
      const int j = j0 + t, i = lane + 32 * u;
      S[t][u] = j >= d || i >= d ? 0.f : Sg[(int64_t)j * d + i];
    }
  memra_pdl_enter();
  const int kh = a.tiled ? h % a.hk : h / a.r;
  const float a_log = a.a_log[h], dt = a.dt[h];
  bool live = false;
  gdn_next cur, nxt;
  gdn_fetch<NORM>(cur, a, 0, h, kh, j0, lane, warp);
  for (int64_t r = 0; r < a.n; ++r) {
    const int buf = (int)(r & 1);
    if ((int)threadIdx.x < d) {
      qs[buf][threadIdx.x] = cur.q;
      ks[buf][threadIdx.x] = cur.k;
    }
    gdn_fetch<NORM>(nxt, a, r + 1, h, kh, j0, lane, warp);
    __syncthreads(); /* buf written; its last readers (row r - 2) are past the previous barrier */
    const int sr = cur.seq;
    if (sr != s) {
      if (s == 0 && (sr < 0 || sr >= a.n_seqs))
        for (int jj = threadIdx.x; jj < ROWS; jj += blockDim.x)
          if (blockIdx.z * ROWS + jj < d)
            a.out[r * a.o_ld + (int64_t)h * d + blockIdx.z * ROWS + jj] = GDN_NAN;
      cur = nxt;
      continue;
    }
    if (cur.pos == 0) {
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t)
#pragma unroll
        for (int u = 0; u < NI; ++u)
          S[t][u] = 0.f;
    }
    live = true;
    float qv[NI], kv[NI], sq = 0.f, sk = 0.f;
#pragma unroll
    for (int u = 0; u < NI; ++u) {
      const int i = lane + 32 * u;
      qv[u] = i < d ? qs[buf][i] : 0.f;
      kv[u] = i < d ? ks[buf][i] : 0.f;
      sq += qv[u] * qv[u];
      sk += kv[u] * kv[u];
    }
    sq = memra_warp_sum(sq);
    sk = memra_warp_sum(sk);
    const float fq = (1.0f / sqrtf((float)d)) / sqrtf(sq + a.eps), fk = 1.0f / sqrtf(sk + a.eps);
#pragma unroll
    for (int u = 0; u < NI; ++u) {
      qv[u] *= fq;
      kv[u] *= fk;
    }
    const float beta = 1.0f / (1.0f + expf(-cur.b));
    const float decay = expf(a_log * gdn_softplus(cur.a + dt));
    float *orow = a.out + r * a.o_ld + (int64_t)h * d;
    float vj[GDN_RPW], p[GDN_RPW], o[GDN_RPW];
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t)
      vj[t] = cur.v[t];
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t) {
      p[t] = 0.f;
#pragma unroll
      for (int u = 0; u < NI; ++u) {
        S[t][u] *= decay;
        p[t] += S[t][u] * kv[u];
      }
    }
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t)
      p[t] = memra_warp_sum(p[t]);
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t) {
      const float delta = beta * (vj[t] - p[t]);
      o[t] = 0.f;
#pragma unroll
      for (int u = 0; u < NI; ++u) {
        S[t][u] += kv[u] * delta;
        o[t] += S[t][u] * qv[u];
      }
    }
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t)
      o[t] = memra_warp_sum(o[t]);
    if (!NORM && lane == 0)
#pragma unroll
      for (int t = 0; t < GDN_RPW; ++t)
        if (j0 + t < d) orow[j0 + t] = o[t];
    if (NORM) { /* the head's row in os, then rmsnorm_gate by warp 0 (os is rewritten only
                   after the next row's first barrier, which warp 0 reaches after its reads) */
      if (lane == 0)
#pragma unroll
        for (int t = 0; t < GDN_RPW; ++t)
          os[j0 + t] = o[t];
      __syncthreads();
      if (warp == 0) gdn_norm_row<true>(a, orow, os, r, h, lane, cur.z);
    }
    cur = nxt;
  }
  if (live) {
#pragma unroll
    for (int t = 0; t < GDN_RPW; ++t)
#pragma unroll
      for (int u = 0; u < NI; ++u) {
        const int j = j0 + t, i = lane + 32 * u;
        if (j < d && i < d) Sg[(int64_t)j * d + i] = S[t][u];
      }
  }
}

/* The gated norm a fused launch applies (gated_delta_rule_norm's, checked). */
struct gdn_norm {
  const float *z, *w;
  int64_t z_ld;
  float eps;
};

/* gated_delta_rule; with nm (may be NULL) a d 128 head in registers takes one block and applies
 * the gated norm at each token (*normed set); other shapes leave it to the caller. */
static memra_status gdn_run(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                            const memra_tensor *k, const memra_tensor *v, const memra_tensor *a,
                            const memra_tensor *b, const memra_tensor *a_log,
                            const memra_tensor *dt_bias, const memra_tensor *state,
                            const memra_batch *batch, const memra_gdn_params *p, const gdn_norm *nm,
                            bool *normed) {
  const char *op = "gated_delta_rule";
  if (!p) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: params are NULL", op);
  if (p->n_k_head < 1 || p->n_v_head < 1 || p->n_v_head % p->n_k_head || p->head_dim < 1 ||
      p->head_dim > GDN_MAX_D || (p->heads != MEMRA_GDN_GROUPED && p->heads != MEMRA_GDN_TILED) ||
      !(p->eps >= 0))
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: H_k %d, H_v %d, head_dim %d, heads %d (need H_v a multiple of H_k, "
                         "head_dim 1..512, heads grouped or tiled)",
                         op, p->n_k_head, p->n_v_head, p->head_dim, p->heads);
  const int64_t d = p->head_dim, hv = p->n_v_head;
  memra_status st;
  if ((st = memra_cu_check_f(be, op, "q", q, MEMRA_TYPE_F32, p->n_k_head * d, -1))) return st;
  const int64_t n = q->ne1;
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  int64_t bt_ld = 0;
  if ((st = memra_cu_check_f(be, op, "k", k, MEMRA_TYPE_F32, p->n_k_head * d, n)) ||
      (st = memra_cu_check_f(be, op, "v", v, MEMRA_TYPE_F32, hv * d, n)) ||
      (st = memra_cu_check_f(be, op, "out", out, MEMRA_TYPE_F32, hv * d, n)) ||
      (st = memra_cu_check_f(be, op, "a", a, MEMRA_TYPE_F32, hv, n)) ||
      (st = memra_cu_check_f(be, op, "b", b, MEMRA_TYPE_F32, hv, n)) ||
      (st = memra_cu_check_f(be, op, "a_log", a_log, MEMRA_TYPE_F32, hv, 1)) ||
      (st = memra_cu_check_f(be, op, "dt_bias", dt_bias, MEMRA_TYPE_F32, hv, 1)) ||
      (st = memra_cu_check_batch(be, batch, op, &pos, &seq, &bt, &bt_ld)) ||
      (st = memra_cu_check_f(be, op, "state", state, MEMRA_TYPE_F32, hv * d * d, batch->n_seqs)))
    return st;
  if (batch->n_rows != n)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: batch of %d rows for q of %lld", op,
                         batch->n_rows, (long long)n);
  const memra_tensor *ins[] = {q, k, v, a, b, a_log, dt_bias, state};
  for (const memra_tensor *t : ins)
    if (memra_cu_overlap(out, t))
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: out overlaps an input", op);
  if (hv > 0x7fffffff || batch->n_seqs > 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: %lld value heads, %d sequences", op,
                         (long long)hv, batch->n_seqs);
  if (n == 0) return MEMRA_OK;
  gdn_args g;
  g.out = (float *)memra_cu_ptr(out);
  g.o_ld = (int64_t)(out->nb1 / 4);
  g.q = (const float *)memra_cu_ptr(q);
  g.k = (const float *)memra_cu_ptr(k);
  g.v = (const float *)memra_cu_ptr(v);
  g.a = (const float *)memra_cu_ptr(a);
  g.b = (const float *)memra_cu_ptr(b);
  g.q_ld = (int64_t)(q->nb1 / 4);
  g.k_ld = (int64_t)(k->nb1 / 4);
  g.v_ld = (int64_t)(v->nb1 / 4);
  g.a_ld = (int64_t)(a->nb1 / 4);
  g.b_ld = (int64_t)(b->nb1 / 4);
  g.a_log = (const float *)memra_cu_ptr(a_log);
  g.dt = (const float *)memra_cu_ptr(dt_bias);
  g.state = (float *)memra_cu_ptr(state);
  g.s_ld = (int64_t)(state->nb1 / 4);
  g.pos = pos;
  g.seq = seq;
  g.n = n;
  g.n_seqs = batch->n_seqs;
  g.hk = p->n_k_head;
  g.r = p->n_v_head / p->n_k_head;
  g.tiled = p->heads == MEMRA_GDN_TILED;
  g.d = (int)d;
  g.eps = p->eps;
  /* ver 5 (v2, the next row's loads under this row's arithmetic), the default; MEMRA_GDN_PIPE=0
   * takes v1. Read at each call (the same bits either way), so opcheck_families can compare the
   * two kernels bitwise in one process */
  const bool pipe = !memra_cu_env_is("MEMRA_GDN_PIPE", "0");
  if (nm && d == 128) {
    g.z = nm->z;
    g.norm_w = nm->w;
    g.z_ld = nm->z_ld;
    g.norm_eps = nm->eps;
    *normed = true;
    (void)memra_cu_launch(be,
                          pipe ? gated_delta_rule_v2_kernel<4, 16, true>
                               : gated_delta_rule_v1_kernel<4, false, 16, true>,
                          dim3((unsigned)hv, (unsigned)batch->n_seqs, 1u), dim3(16 * 32), 0, g);
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
  const dim3 grid((unsigned)hv, (unsigned)batch->n_seqs, (unsigned)((d + GDN_ROWS - 1) / GDN_ROWS));
  const int ni = (int)((d + 31) / 32);
  if (pipe && ni <= 4) {
    void (*k2)(gdn_args) = ni == 1   ? gated_delta_rule_v2_kernel<1>
                           : ni == 2 ? gated_delta_rule_v2_kernel<2>
                           : ni == 3 ? gated_delta_rule_v2_kernel<3>
                                     : gated_delta_rule_v2_kernel<4>;
    (void)memra_cu_launch(be, k2, grid, dim3(GDN_WARPS * 32), 0, g);
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
  switch (ni) {
  case 1:
    (void)memra_cu_launch(be, gated_delta_rule_v1_kernel<1, false>, grid, dim3(GDN_WARPS * 32), 0,
                          g);
    break;
  case 2:
    (void)memra_cu_launch(be, gated_delta_rule_v1_kernel<2, false>, grid, dim3(GDN_WARPS * 32), 0,
                          g);
    break;
  case 3:
    (void)memra_cu_launch(be, gated_delta_rule_v1_kernel<3, false>, grid, dim3(GDN_WARPS * 32), 0,
                          g);
    break;
  case 4:
    (void)memra_cu_launch(be, gated_delta_rule_v1_kernel<4, false>, grid, dim3(GDN_WARPS * 32), 0,
                          g);
    break;
  default:
    (void)memra_cu_launch(be, gated_delta_rule_v1_kernel<16, true>, grid, dim3(GDN_WARPS * 32), 0,
                          g);
    break;
  }
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

memra_status memra_cu_gated_delta_rule(memra_backend *be, const memra_tensor *out,
                                       const memra_tensor *q, const memra_tensor *k,
                                       const memra_tensor *v, const memra_tensor *a,
                                       const memra_tensor *b, const memra_tensor *a_log,
                                       const memra_tensor *dt_bias, const memra_tensor *state,
                                       const memra_batch *batch, const memra_gdn_params *p) {
  bool normed = false;
  return gdn_run(be, out, q, k, v, a, b, a_log, dt_bias, state, batch, p, NULL, &normed);
}

/* ABI 1.11 gated_delta_rule_norm: for d 128 heads, packed 16-byte aligned rows and SiLU, one
 * launch (NORM: a block a head, rmsnorm_gate's bits at each token); otherwise the delta rule,
 * then rmsnorm_gate. */
memra_status memra_cu_gated_delta_rule_norm(memra_backend *be, const memra_tensor *out,
                                            const memra_tensor *q, const memra_tensor *k,
                                            const memra_tensor *v, const memra_tensor *a,
                                            const memra_tensor *b, const memra_tensor *a_log,
                                            const memra_tensor *dt_bias, const memra_tensor *state,
                                            const memra_batch *batch, const memra_gdn_params *p,
                                            const memra_tensor *norm_w, const memra_tensor *z,
                                            float eps, int32_t act) {
  const char *op = "gated_delta_rule_norm";
  if (!p || !out || !z)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: params, out or z are NULL", op);
  memra_status st;
  const int64_t d = p->head_dim;
  if ((st = memra_cu_check_f(be, op, "out", out, MEMRA_TYPE_F32, -1, -1)) ||
      (st = memra_cu_check_f(be, op, "z", z, MEMRA_TYPE_F32, out->ne0, out->ne1)) ||
      (st = memra_cu_check_f(be, op, "norm_w", norm_w, MEMRA_TYPE_F32, d, -1)))
    return st;
  if (d < 1 || out->ne0 % d || (out->ne1 > 1 && out->nb1 != 4u * (uint64_t)out->ne0) ||
      z->nb1 % (4u * (uint64_t)d))
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: out [%lld, %lld] (need its rows packed, whole heads of %lld)", op,
                         (long long)out->ne1, (long long)out->ne0, (long long)d);
  if (memra_cu_overlap(out, z)) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: out overlaps z", op);
  const bool fuse = act == MEMRA_ACT_SILU && d == 128 &&
                    memra_cu_align_of(memra_cu_ptr(out), 4u * (uint64_t)d) >= 16 &&
                    memra_cu_align_of(memra_cu_ptr(norm_w), 0) >= 16;
  const gdn_norm nm = {(const float *)memra_cu_ptr(z), (const float *)memra_cu_ptr(norm_w),
                       (int64_t)(z->nb1 / 4), eps};
  bool normed = false;
  if ((st = gdn_run(be, out, q, k, v, a, b, a_log, dt_bias, state, batch, p, fuse ? &nm : NULL,
                    &normed)))
    return st;
  if (normed) return MEMRA_OK;
  memra_tensor oh = *out, zh = *z;
  oh.ne0 = zh.ne0 = d;
  oh.ne1 = zh.ne1 = out->ne1 * (out->ne0 / d);
  oh.nb1 = zh.nb1 = 4u * (uint64_t)d;
  if (out->ne1 > 1 && z->nb1 != 4u * (uint64_t)z->ne0) {
    for (int64_t r = 0; r < out->ne1; ++r) { /* z rows apart: a call a row */
      memra_tensor o1 = oh, z1 = zh;
      o1.offset += (uint64_t)r * out->nb1;
      z1.offset += (uint64_t)r * z->nb1;
      o1.ne1 = z1.ne1 = out->ne0 / d;
      if ((st = memra_cu_rmsnorm_gate(be, &o1, &o1, norm_w, &z1, eps, act))) return st;
    }
    return MEMRA_OK;
  }
  return memra_cu_rmsnorm_gate(be, &oh, &oh, norm_w, &zh, eps, act);
}
