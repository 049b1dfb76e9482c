/* matmul.cu — y [M, N] = x [M, K] . w [N, K]^T (+ bias), w in its GGUF block layout.
 * Oracle: plugins/cpu matmul (dequantize, accumulate in F32).
 *
 * ver  idea                                            H200, 4096x4096 M=1 (docs/PERF.md)
 *  1   one warp per output column n; each lane dequantizes 32-element units of w's row
 *      n (lane, lane + 32, ...) once and applies them to up to 8 rows of x held in the
 *      same pass; fp32 accumulation; butterfly warp sum.   F16 23 us 34%, Q4_K 20 us 11%
 *      Bound by L1 wavefronts: lanes 64-128 B apart, every load instruction touched 32
 *      lines.
 *  2   v1 with coalesced lanes: 4 lanes per 32-element unit (8 elements each), 8
 *      consecutive units per warp step, so each warp load reads contiguous bytes; 4 steps
 *      of weights loaded before use.        F16 11.9 us 66% (103% at 128256 rows), Q4_K 17.6 us 13%
 *      Quantized formats bound by instruction issue and L1 wavefronts, not bytes.
 *  3   v2 + K-quants in 64-element units: a lane's 8 q bytes feed 16 weights (both
 *      nibbles), scales decoded once per 16, nibble-to-float by PRMT + FADD (no I2F);
 *      64 registers for M = 1 (one wave at 4096 rows).     Q4_K 4096^2 12.3 us 18% <- vtable
 *  4   (tried, reverted) v3 + software pipeline: the next steps' raw bytes loaded before
 *      this step's decode. F16 72 -> 65% at 4096^2, 91 -> 74% on ffn_down; Q4_K within
 *      noise: latency was not the limit.
 *  5   K-quants (Q4_K, Q5_K, Q6_K) in matmul_kq.cuh: 8 weight rows per block share each
 *      lane's x registers, scale/min factored out of the inner loop, nibble -> float by one
 *      PRMT (1/2 + q/2^(B+1)); ~4.3 instructions per weight (v3: 12).
 *      Q4_K 4096^2 6.1 us 36%, 128256x4096 117 us 59%; Q6_K 200 us 50% <- vtable
 *      (5b, tried, reverted: batch path decoding each row once for all x rows; M = 8
 *      249 -> 285 us.)
 *  6   F16 and BF16 in matmul_v6.cuh: v5's layout for the simple formats (8 weight rows
 *      per block share each lane's x registers, 2 steps of weights in flight).
 *      8B F16 decode 177 -> 204 tok/s with matmul_n. (Q8_0 on v6 was 3% slower: v3.)
 *  7   Q4_K on the tensor cores (matmul_tc.cuh): nibbles masked in place are exact f16
 *      subnormals fed to mma.sync m16n8k16; x split once per matmul into f16 hi + lo by a
 *      prep kernel. 8 rows of x: q/o 74 -> 19 us, output 2218 -> 507 us (v5 -> v7); alone
 *      it is slower than v5 (q/o 5.8 -> 8.4 us), so it is opt-in (MEMRA_GEMV=tc).
 *  8   Q8_0 in matmul_q8.cuh: v5's layout (8 rows per block share x), the 2-byte-aligned
 *      34-byte blocks staged per warp into shared memory by 16-byte cp.async, read back as
 *      aligned words + funnel shifts; d applied per block in F32.
 *      4096^2 8.3 us 51%, 128256x4096 182 us 72%; M = 8 14336x4096 535 us (x from L1 per row)
 *  8b  v8 in matmul_q8b.cuh, same arithmetic: M > 1 stages x of up to 4 rows in shared memory
 *      with the weights (each weight block unpacked once for them); M = 1 (K > 3072, beyond
 *      one wave of v8 or K > 4096) runs persistent blocks whose warps stream their steps of
 *      all their weight blocks through a 2-stage cp.async ring. MEMRA_GEMV_Q8=v8a selects
 *      v8 (bitwise A/B).                                                     (unmeasured)
 *  9   K-quants in matmul_kq9.cuh: v5's arithmetic, bit for bit, fed from a per-warp ring of
 *      2-3 cp.async stages in shared memory (the next steps' weights in flight while a step
 *      is computed; a block owns 1-4 groups of 8 rows so a warp has several steps even at
 *      K = 4096). Q4_K/Q5_K/Q6_K with 16-byte-aligned rows where an SM holds 4 blocks
 *      (Hopper; otherwise v5, same bits). Opt-in, MEMRA_GEMV=v9: faster per kernel from 14336 x
 *      4096 up, slower end to end (mm_v9_size).                              <- vtable (opt-in)
 * 11   Q4_K in matmul_tc11.cuh: v7's arithmetic (same bits) for one row of x, from persistent
 *      blocks whose producer warp keeps 2 stages of 16 rows x 16 (K > 4096: 8) super-blocks
 *      in flight by bulk copies (issued before the PDL wait), x split once per block in
 *      shared memory; batches run v7 itself. Default for Q4_K (MEMRA_GEMV=v5 / tc: v5 / v7
 *      everywhere). The two MMA chains of a super-block interleaved (same bits): 4096^2 5.7
 *      us, 14336x4096 12.8, 4096x14336 15.7, 128256x4096 79.6; v7 at 8 rows 69.4 -> 53.9.
 *      Q6_K on both (matmul_tc6.cuh, the 6-bit q as an f16 subnormal) for its output
 *      matrices (N >= 32768, K <= 4096: 128256x4096 168.9 -> 159.4 us, 151936x2048 106.2 ->
 *      90.3); its smaller matrices stay on v5, faster there for one row (mm_q6tc_for). The
 *      Q6_K stage words by LDS (they were generic loads), the 4-byte-aligned super-blocks
 *      without funnel shifts and the others at fixed offsets: output 158.1 -> 125.5 us, and
 *      the down projections (K 14336, x split by windows) on v11 too: Llama-8B Q4_K_M tg128
 *      @ d512 402 -> 424.
 *                                                     <- vtable (Q4_K, Q6_K out and down)
 * 12   F16 / BF16 in matmul_h12.cuh: v6's arithmetic (same bits) for one row of x, fed by a
 *      ring of bulk copies as v11 (8-row tiles, stages of 2048 elements); batches run v6.
 *      gate/up 34.5 -> 28.0 us (98% of copy), q/o 11.3 -> 9.8, output 266.9 -> 234.3; the
 *      down projection alone 29.7 -> 31.9, yet Llama-8B F16 tg128 @ d512 205 -> 227 with
 *      every matrix on it (MEMRA_GEMV_F16=v6 / k4096 for A/B).        <- vtable (F16, BF16)
 * 13   Q8_0 in matmul_q13.cuh: v8's arithmetic (same bits) for one row of x, fed by a ring of
 *      bulk copies as v12 (8-row tiles, stages of 4 steps = 4352 bytes a row, 2 stages, x of a
 *      step per consumer warp, once at K 4096); batches run v8b. K % 256 == 0 and K >= 4096
 *      (MEMRA_GEMV_Q8=v8b / v8a for A/B). q/o 8.2 -> 7.6 us, gate/up 22.6 -> 17.7, down 20.8 ->
 *      19.6, output 161.7 -> 128.8 (v8a -> v13); Llama-8B Q8_0 tg128 @ d512 291 -> 337.
 *      (Q8_0 on the tensor cores in v7 / v11's scheme was slower: docs/PERF.md.) Since the
 *      ninth session v8 / v8b / v13 take a block's sums by IDP2A on x split into two int16
 *      parts (matmul_q8.cuh): q/o 7.7 -> 6.7 us, down 19.6 -> 17.7, tg128 +3.4%. <- vtable (Q8_0)
 *  6   also takes F32 weights (32-byte groups, one step in flight, 2 rows a block at M = 1): the
 *      MoE routers, whose v3 launch could not join matmul_n; hybrid tg128 +3%.  <- vtable (F32)
 * All M = 1 kernels are launched with PDL (launch.cuh) and prefetch their weight rows
 * into L2 before waiting for x; under 4096 rows the v5/v6 kernels take 2 rows per block.
 * Larger M runs the same kernel over row groups of 8 (blockIdx.y): weights are re-read
 * once per 8 rows (from L2 when they fit), but every row is reduced in exactly the order a
 * lone row is, so a row's result never depends on the batch around it (batch invariance).
 * A tensor-core path for prefill is later work. Timings: docs/PERF.md. */
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/dequant.cuh"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/families.h"
#include "plugins/cuda/launch.cuh"
#include "plugins/cuda/matmul_kq.cuh"
#include "plugins/cuda/matmul_kq9.cuh"
#include "plugins/cuda/matmul_q8.cuh"
#include "plugins/cuda/matmul_q8b.cuh"
#include "plugins/cuda/matmul_q13.cuh"
#include "plugins/cuda/matmul_ffn13.cuh"
#include "plugins/cuda/matmul_tc.cuh"
#include "plugins/cuda/matmul_tc11.cuh"
#include "plugins/cuda/matmul_tc11mx.cuh"
#include "plugins/cuda/matmul_v6.cuh"
#include "plugins/cuda/matmul_h12.cuh"

enum { MM_WARPS = 4, MM_MAX_M = 8, MM_U = 4, MM_UK = 2 };
/* Decode (M = 1) kernels are held to 64 registers: 8 blocks (32 warps) per SM, so a
 * 4096-row projection runs in one wave instead of one and a bit. */
#define MM_MIN_BLOCKS(M) ((M) == 1 ? 8 : 2)

/* acc[m] += w[0..8) . x[m][e0 .. e0 + 8) for the rows of this group, in element order. */
template <int M, bool VEC>
__device__ __forceinline__ void mm_fma8(float acc[M], const float *const xr[M], int64_t mrows,
                                        int64_t e0, const float w[8]) {
#pragma unroll
  for (int m = 0; m < M; ++m) {
    if (m >= mrows) break;
    acc[m] = memra_fma8<VEC>(acc[m], xr[m] + e0, w);
  }
}

template <int T, int M, bool VEC>
__global__ void __launch_bounds__(MM_WARPS * 32, MM_MIN_BLOCKS(M))
    matmul_v3_kernel(float *__restrict__ y, int64_t y_ld, const float *__restrict__ x, int64_t x_ld,
                     const uint8_t *__restrict__ w, uint64_t w_nb1, const float *__restrict__ bias,
                     int64_t N, int64_t K, int64_t rows) {
  const int lane = threadIdx.x & 31;
  const int64_t n = (int64_t)blockIdx.x * MM_WARPS + (threadIdx.x >> 5);
  /* Weights are constant: start their fetch before waiting for x (launch.cuh). */
  if (n < N) memra_prefetch_l2(w + (uint64_t)n * w_nb1, w_nb1, lane, 32, 64);
  memra_pdl_enter();
  if (n >= N) return;
  const int64_t m0 = (int64_t)blockIdx.y * M;
  const int64_t mrows = rows - m0 < M ? rows - m0 : M;
  const uint8_t *wr = w + (uint64_t)n * w_nb1;
  const float *xr[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    xr[m] = x + (m0 + (m < mrows ? m : 0)) * x_ld;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    acc[m] = 0.f;

  /* Lane = (unit ul of 8 consecutive units, part of 4): a warp step reads 8 whole units,
   * contiguous. MM_U steps' weights are loaded before any is used (bytes in flight).
   * K-quants use 64-element units (memra_deq16k), the other formats 32. */
  const int part = lane & 3;
  const bool kq = T == MEMRA_TYPE_Q4_K || T == MEMRA_TYPE_Q5_K || T == MEMRA_TYPE_Q6_K;
  const int64_t ul = lane >> 2, units = kq ? K / 64 : K / 32;
  int64_t u0 = 0;
  if (kq) {
    for (; u0 + 8 * MM_UK <= units; u0 += 8 * MM_UK) {
      float wv[MM_UK][16];
      int64_t e0[MM_UK], e1[MM_UK];
#pragma unroll
      for (int j = 0; j < MM_UK; ++j)
        memra_deq16k<T, VEC>(wr, u0 + 8 * j + ul, part, wv[j], &e0[j], &e1[j]);
#pragma unroll
      for (int j = 0; j < MM_UK; ++j) {
        mm_fma8<M, VEC>(acc, xr, mrows, e0[j], wv[j]);
        mm_fma8<M, VEC>(acc, xr, mrows, e1[j], wv[j] + 8);
      }
    }
    for (; u0 < units; u0 += 8) {
      const int64_t u = u0 + ul;
      if (u < units) {
        float wv[16];
        int64_t e0, e1;
        memra_deq16k<T, VEC>(wr, u, part, wv, &e0, &e1);
        mm_fma8<M, VEC>(acc, xr, mrows, e0, wv);
        mm_fma8<M, VEC>(acc, xr, mrows, e1, wv + 8);
      }
    }
  } else {
    for (; u0 + 8 * MM_U <= units; u0 += 8 * MM_U) {
      float wv[MM_U][8];
#pragma unroll
      for (int j = 0; j < MM_U; ++j)
        memra_deq8<T, VEC>(wr, u0 + 8 * j + ul, part, wv[j]);
#pragma unroll
      for (int j = 0; j < MM_U; ++j)
        mm_fma8<M, VEC>(acc, xr, mrows, 32 * (u0 + 8 * j + ul) + 8 * part, wv[j]);
    }
    for (; u0 < units; u0 += 8) {
      const int64_t u = u0 + ul;
      if (u < units) {
        float wv[8];
        memra_deq8<T, VEC>(wr, u, part, wv);
        mm_fma8<M, VEC>(acc, xr, mrows, 32 * u + 8 * part, wv);
      }
    }
  }
  /* Float formats only: the K % 32 tail, one element per lane. */
  if (T == MEMRA_TYPE_F32 || T == MEMRA_TYPE_F16 || T == MEMRA_TYPE_BF16) {
    for (int64_t k = units * 32 + lane; k < K; k += 32) {
      float wk = T == MEMRA_TYPE_F32   ? ((const float *)wr)[k]
                 : T == MEMRA_TYPE_F16 ? __half2float(__ushort_as_half(((const uint16_t *)wr)[k]))
                                       : memra_bf2f(((const uint16_t *)wr)[k]);
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (m < mrows) acc[m] = fmaf(wk, __ldg(xr[m] + k), acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = memra_warp_sum(acc[m]);
    if (lane == 0 && m < mrows) y[(m0 + m) * y_ld + n] = bias ? s + bias[n] : s;
  }
}

template <int T, int M, bool VEC>
static void launch_m(dim3 grid, const memra_backend *be, float *y, int64_t y_ld, const float *x,
                     int64_t x_ld, const uint8_t *w, uint64_t w_nb1, const float *bias, int64_t N,
                     int64_t K, int64_t rows) {
  (void)memra_cu_launch(be, matmul_v3_kernel<T, M, VEC>, grid, dim3(MM_WARPS * 32), 0, y, y_ld, x,
                        x_ld, w, w_nb1, bias, N, K, rows);
}

template <int T, bool VEC>
static void launch_t(int mt, dim3 grid, const memra_backend *be, float *y, int64_t y_ld,
                     const float *x, int64_t x_ld, const uint8_t *w, uint64_t w_nb1,
                     const float *bias, int64_t N, int64_t K, int64_t rows) {
  switch (mt) {
  case 1: launch_m<T, 1, VEC>(grid, be, y, y_ld, x, x_ld, w, w_nb1, bias, N, K, rows); break;
  case 2: launch_m<T, 2, VEC>(grid, be, y, y_ld, x, x_ld, w, w_nb1, bias, N, K, rows); break;
  case 4: launch_m<T, 4, VEC>(grid, be, y, y_ld, x, x_ld, w, w_nb1, bias, N, K, rows); break;
  default: launch_m<T, 8, VEC>(grid, be, y, y_ld, x, x_ld, w, w_nb1, bias, N, K, rows); break;
  }
}

/* MEMRA_GEMV, read once. Default: Q4_K on the tensor cores, v11 for one row of x and v7 for
 * batches (the same bits). "tc" runs v7 for one row too (bitwise A/B of v11); "v5" keeps every
 * K-quant on v5 (the float arithmetic of earlier sessions); "v9" puts every eligible K-quant
 * matrix on v9 (opt-in: mm_v9_size). Fixed for the process: a row's arithmetic never depends
 * on the batch. */
enum mm_gemv { MM_GEMV_DEFAULT = 0, MM_GEMV_TC = 1, MM_GEMV_V5 = 2, MM_GEMV_V9 = 3 };
static mm_gemv mm_gemv_mode(void) {
  static int mode = -1;
  if (mode < 0) {
    const char *e = getenv("MEMRA_GEMV");
    mode = !e                 ? MM_GEMV_DEFAULT
           : !strcmp(e, "tc") ? MM_GEMV_TC
           : !strcmp(e, "v5") ? MM_GEMV_V5
           : !strcmp(e, "v9") ? MM_GEMV_V9
                              : MM_GEMV_DEFAULT;
  }
  return (mm_gemv)mode;
}

/* MEMRA_GEMV_Q6, read once (mm_q6tc_for, mm_v9_size): v5, default, tc, tcall, v9 (the
 * Q6_K of K > 4096, the down projections, on v9: v5's bits, A/B timing), v5k (the former
 * default: the Q6_K of K > 4096 on v5, A/B timing); anything else (the former tcw too) the
 * default. Fixed for the process. */
enum mm_q6 { MM_Q6_V5, MM_Q6_DEFAULT, MM_Q6_TC, MM_Q6_TCALL, MM_Q6_V9, MM_Q6_V5K };
static mm_q6 mm_q6_mode(void) {
  static int mode = -1;
  if (mode < 0) {
    const char *e = getenv("MEMRA_GEMV_Q6");
    mode = !e                    ? MM_Q6_DEFAULT
           : !strcmp(e, "v5")    ? MM_Q6_V5
           : !strcmp(e, "tc")    ? MM_Q6_TC
           : !strcmp(e, "tcall") ? MM_Q6_TCALL
           : !strcmp(e, "v9")    ? MM_Q6_V9
           : !strcmp(e, "v5k")   ? MM_Q6_V5K
                                 : MM_Q6_DEFAULT;
  }
  return (mm_q6)mode;
}

/* v9 is opt-in (MEMRA_GEMV=v9). On the H200 (docs/PERF.md, 2026-12-01) it beat v5 per kernel
 * from 14336 x 4096 up (output 128256 x 4096: Q4_K 143 -> 122 us, Q6_K 184 -> 167) but lost at
 * 4096 x 4096 (Q4_K 5.3 -> 6.4 us), and end to end it lost both ways: Q4_K_M tg128 @ d512
 * 303 -> 285 tok/s with every matrix on it, 302 -> 290 with only the matrices of 48 Mi weights
 * and up (its 55 KB of shared memory per block is the suspect: PDL can no longer start the
 * next kernel's blocks beside it). The two give the same bits (gemv_ab). */
static bool mm_v9_size(int32_t t, int64_t N, int64_t K) {
  (void)N;
  return mm_gemv_mode() == MM_GEMV_V9 ||
         (t == MEMRA_TYPE_Q6_K && K > 4096 && mm_q6_mode() == MM_Q6_V9);
}

/* MEMRA_GEMV_Q8: the Q8_0 GEMV. Default: v13 (matmul_q13.cuh) for one row of x where it fits,
 * v8b (matmul_q8b.cuh) otherwise and for batches; =v8b: v8b everywhere; =v8a: v8 as first
 * written (matmul_q8.cuh) everywhere. The same arithmetic in all three, so they are compared
 * bitwise (A/B). (Q8_0 on the tensor cores, v7 / v11's scheme, ran slower: docs/PERF.md.) Read
 * once: fixed for the process. */
enum mm_q8 { MM_Q8_V13 = 0, MM_Q8_V8B = 1, MM_Q8_V8A = 2 };
static mm_q8 mm_q8_mode(void) {
  static int mode = -1;
  if (mode < 0) {
    const char *e = getenv("MEMRA_GEMV_Q8");
    mode = e && !strcmp(e, "v8a") ? MM_Q8_V8A : e && !strcmp(e, "v8b") ? MM_Q8_V8B : MM_Q8_V13;
  }
  return (mm_q8)mode;
}

/* Q6_K on the tensor cores (v11 for one row, v7 for batches, the same bits; matmul_tc6.cuh):
 * by default for matrices of at least MM_Q6TC_MIN_N rows and K <= 4096 (the output matrix) and
 * for K > 4096 in whole x windows (ffn_down: v11 with x by windows, two blocks an SM), where it
 * beats v5 (H200: docs/PERF.md); the small ones (attn_v, 4096 x 4096) lose to v5 on v11's fixed
 * cost. The choice depends on the matrix alone, never on the batch (batch invariance).
 * MEMRA_GEMV_Q6 (mm_q6_mode): =tc every Q6_K of K <= 4096 too; =tcall every Q6_K (ffn_down with the
 * whole row of x split: one v11 block an SM, slower); =v5k the default but K > 4096 on v5; =v5
 * none. */
enum { MM_Q6TC_MIN_N = 32768 };
/* Whether the Q6_K of K > 4096 go by x windows (matmul_tc11.cuh XW): the default and =tc. */
static bool mm_q6_windows(void) {
  const mm_q6 m = mm_q6_mode();
  return m == MM_Q6_DEFAULT || m == MM_Q6_TC;
}
static bool mm_q6tc_for(int64_t N, int64_t K) {
  const mm_q6 m = mm_q6_mode(); /* v9 and v5k keep the default for K <= 4096 */
  if (K > 4096) return m == MM_Q6_TCALL || (mm_q6_windows() && m11_xw_ok<MEMRA_TYPE_Q6_K>(K));
  return m == MM_Q6_TC || m == MM_Q6_TCALL ||
         ((m == MM_Q6_DEFAULT || m == MM_Q6_V9 || m == MM_Q6_V5K) && N >= MM_Q6TC_MIN_N);
}

/* F16 / BF16 (path v6) for one row of x on v12 (matmul_h12.cuh: v6's arithmetic through a
 * bulk-copy ring, the same bits; batches stay on v6). MEMRA_GEMV_F16=v6 keeps v6 for one row too,
 * =k4096 only the matrices of K <= 4096 (A/B timing: on the H200 the down projection, K 14336,
 * took 31.9 us on v12 against v6's 29.7 alone, yet Llama-8B F16 tg128 @ d512 ran 227.2 with it on
 * v12 against 223.2 without, docs/PERF.md). Read once: fixed for the process. */
static bool mm_h12_for(int64_t K) {
  static int mode = -1; /* 0 none, 1 K <= 4096, 2 all */
  if (mode < 0) {
    const char *e = getenv("MEMRA_GEMV_F16");
    mode = e && !strcmp(e, "v6") ? 0 : e && !strcmp(e, "k4096") ? 1 : 2;
  }
  return mode == 2 || (mode == 1 && K <= 4096);
}

/* F32 weights (the MoE routers and gate logits of quantized files) with 16-byte-aligned rows
 * on v6 (matmul_v6.cuh: 8 rows a block share x, a jobs kernel, so matmul_n fuses the router with
 * the shared expert's logit); MEMRA_GEMV_F32=v3 keeps them on v3 (other bits: A/B timing). Read
 * once: fixed for the process. */
static bool mm_f32_v6(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("MEMRA_GEMV_F32");
    on = !(e && !strcmp(e, "v3"));
  }
  return on == 1;
}

/* One checked matmul: device pointers, strides, shape and the kernel family it takes. */
enum mm_path { MM_V3 = 0, MM_V5 = 5, MM_V6 = 6, MM_V7 = 7, MM_V8 = 8, MM_V9 = 9, MM_V11 = 11 };
struct mm_args {
  float *y;
  const float *x;
  const uint8_t *w;
  const float *bias;
  int64_t y_ld, x_ld, M, N, K;
  int32_t type;
  bool vec, xv16;
  mm_path path;
};

static memra_status mm_check(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                             const memra_tensor *w, const memra_tensor *bias, mm_args *a) {
  memra_status st;
  if ((st = memra_cu_check_tensor(be, y, "matmul: y", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, x, "matmul: x", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, w, "matmul: w", -1)) != MEMRA_OK)
    return st;
  if (!memra_cu_type_supported(w->type))
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul: no CUDA kernel for %s weights",
                         memra_type_info(w->type).name);
  const int64_t M = x->ne1, K = x->ne0, N = w->ne1;
  if (w->ne0 != K || y->ne1 != M || y->ne0 != N)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "matmul: y [%lld, %lld] = x [%lld, %lld] . w [%lld, %lld]^T: shapes "
                         "disagree",
                         (long long)y->ne1, (long long)y->ne0, (long long)M, (long long)K,
                         (long long)N, (long long)w->ne0);
  a->bias = NULL;
  if (memra_cu_present(bias)) {
    if ((st = memra_cu_check_tensor(be, bias, "matmul: bias", MEMRA_TYPE_F32)) != MEMRA_OK)
      return st;
    if (bias->ne0 != N)
      return memra_cu_errf(be, MEMRA_E_INVALID, "matmul: bias has %lld elements, expected %lld",
                           (long long)bias->ne0, (long long)N);
    a->bias = (const float *)memra_cu_ptr(bias);
  }
  if (x->nb1 % 4 || y->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "matmul: x or y row stride is not whole floats");
  /* Other warps still read x and w while y is written: no overlap (in place is not
   * supported, as on the CPU). */
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, w))
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "matmul: y overlaps an input (x or w); it cannot be computed in place");
  a->y = (float *)memra_cu_ptr(y);
  a->x = (const float *)memra_cu_ptr(x);
  a->w = (const uint8_t *)memra_cu_ptr(w);
  a->M = M;
  a->N = N;
  a->K = K;
  a->type = w->type;
  const uint64_t walign = memra_cu_align_of(a->w, w->nb1 * (N > 1));
  if (walign < memra_cu_type_align(w->type))
    return memra_cu_errf(be, MEMRA_E_INVALID, "matmul: %s weights must be %llu-byte aligned",
                         memra_type_info(w->type).name,
                         (unsigned long long)memra_cu_type_align(w->type));
  if ((uintptr_t)a->x % 4 || (uintptr_t)a->y % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "matmul: x and y must be 4-byte aligned");
  a->x_ld = (int64_t)(x->nb1 / 4);
  a->y_ld = (int64_t)(y->nb1 / 4);
  a->xv16 = memra_cu_align_of(a->x, x->nb1 * (M > 1)) >= 16;
  /* v3's vector loads when K is whole units and x (and w's rows) are 16-byte aligned. */
  a->vec = K % 32 == 0 && a->xv16 && walign >= 16;
  /* The kernel family is a property of the tensors, never of the batch size, so a row takes
   * the same arithmetic alone and in any batch (batch invariance). v11 / v7 (matmul_tc11.cuh,
   * matmul_tc.cuh): Q4_K with 16-byte-aligned rows (v11's bulk copies are 16-byte pieces) in
   * the default mode, one row of x on v11, batches on v7, the same bits. v9 (matmul_kq9.cuh): Q4_K
   * / Q5_K / Q6_K with 16-byte-aligned rows (its cp.async copies are 16 bytes) where an SM holds 4
   * of its blocks (MEMRA_GEMV=v5: v5 instead, the same bits). v5 (matmul_kq.cuh): the other K-quant
   * rows that are 16-byte aligned, and Q6_K (the output matrix: v11 / v7 as Q4_K, mm_q6tc_for). v6
   * (matmul_v6.cuh): F16 / BF16 / F32 with 16-byte-aligned rows and K whole groups of 8, x in any
   * layout (its loads by vectors or scalars, the same bits). v8 (matmul_q8.cuh): Q8_0 with
   * 16-byte-aligned rows and x rows (its cp.async copies are 16 bytes).
   */
  const int32_t t = w->type;
  const bool kq = t == MEMRA_TYPE_Q4_K || t == MEMRA_TYPE_Q5_K || t == MEMRA_TYPE_Q6_K;
  const bool tcq =
      (t == MEMRA_TYPE_Q4_K || (t == MEMRA_TYPE_Q6_K && mm_q6tc_for(N, K))) && walign >= 16;
  if (tcq && mm_gemv_mode() == MM_GEMV_TC)
    a->path = MM_V7;
  else if (tcq && mm_gemv_mode() == MM_GEMV_DEFAULT)
    a->path = MM_V11;
  else if (kq && walign >= 16 && mm_gemv_mode() != MM_GEMV_V5 && mm_v9_size(t, N, K) &&
           mk9_fits(be, t))
    a->path = MM_V9;
  else if (((t == MEMRA_TYPE_Q4_K || t == MEMRA_TYPE_Q5_K) && walign >= 16) || t == MEMRA_TYPE_Q6_K)
    a->path = MM_V5;
  else if (K % 8 == 0 &&
           (t == MEMRA_TYPE_F16 || t == MEMRA_TYPE_BF16 || (t == MEMRA_TYPE_F32 && mm_f32_v6())) &&
           walign >= 16) /* any x layout: v6's bits whether x's rows are aligned or strided */
    a->path = MM_V6;
  else if (a->xv16 && t == MEMRA_TYPE_Q8_0 && walign >= 16)
    a->path = MM_V8;
  else
    a->path = MM_V3;
  return MEMRA_OK;
}

/* v13 takes a Q8_0 matmul (or matmul_n group) of one row when every job's rows fit it. */
static bool mm_jobs_q13(const memra_backend *be, const mm_jobs &J, int64_t K) {
  for (int i = 0; i < J.n; ++i)
    if (!m13_fits(be, K, J.w_nb1[i])) return false;
  return true;
}

static int mm_mtile(int64_t M) { return M >= 8 ? 8 : M > 2 ? 4 : (int)M; }

/* matmul_acc (ABI 1.17) of one job: the ring kernels of one row (v11, v12, v13) and the
 * tensor-core v7 add into y at their store (J.acc; done set); any other kernel writes t instead
 * (J's y replaced), for the caller's add. */
struct mm_acc_req {
  float *t;
  int64_t t_ld;
  bool done;
};

static void mm_acc_ring(mm_jobs *J, mm_acc_req *acc) {
  if (acc) J->acc = acc->done = true;
}

static void mm_acc_other(mm_jobs *J, mm_acc_req *acc) {
  if (acc) J->y[0] = acc->t, J->y_ld[0] = acc->t_ld;
}

/* The tensor-core GEMV of type T for jobs sharing a's x: v11 for one row where its block fits,
 * else the prep kernel and v7 (mt rows of x a block); the same bits. */
template <int T>
static memra_status mm_launch_tc(memra_backend *be, const mm_args *a, mm_jobs J, int mt,
                                 const mm_conv *cv, bool *conv_done, const mm_rkv *rk = NULL,
                                 bool *rk_done = NULL, mm_acc_req *acc = NULL) {
  bool ok;
  const bool xw = !cv && m11_xw_ok<T>(a->K) && (T == MEMRA_TYPE_Q4_K || mm_q6_windows());
  if (a->path == MM_V11 && a->M == 1 && m11_fits<T>(be, a->K, xw)) {
    cudaError_t e;
    mm_acc_ring(&J, acc);
    if (cv) J.cv = *cv, *conv_done = true;
    /* rope at v11's stores: Q4_K, heads of whole 16-row tiles */
    if (rk && T == MEMRA_TYPE_Q4_K && !cv && !xw && rk->head_dim % TC_ROWS == 0)
      J.rk = *rk, *rk_done = true;
    ok = a->xv16 ? m11_launch<T, true>(be, J, a->x, a->K, &e, NULL, xw)
                 : m11_launch<T, false>(be, J, a->x, a->K, &e, NULL, xw);
    if (e != cudaSuccess)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "matmul: %s kernel's shared memory: %s",
                           memra_type_info(a->type).name, cudaGetErrorString(e));
  } else {
    mm_acc_ring(&J, acc); /* v7 adds at its store too (rows of a batch) */
    void *ws = NULL;
    memra_status st =
        memra_cu_workspace(be, (uint64_t)a->M * tc_prep_bytes<typename tcq<T>::xs_t>(a->K), &ws);
    if (st != MEMRA_OK) return st;
    uint8_t *w = (uint8_t *)ws;
    ok = a->xv16 ? mtc_launch<T, true>(mt, be, J, a->x, a->x_ld, a->K, a->M, w)
                 : mtc_launch<T, false>(mt, be, J, a->x, a->x_ld, a->K, a->M, w);
  }
  if (!ok) return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul: output too large");
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* The v5 / v6 / v7 / v8 / v9 kernel for jobs sharing a's x, type and path (the jobs' R: 2 rows per
 * block under 4096 rows in all at M = 1, else 8). cv (matmul_n_conv; may be NULL): the ring
 * kernels of one row (v11, v12, v13) take job 0's conv into their last step and set *conv_done;
 * the others leave it to the caller. */
static memra_status mm_launch_jobs(memra_backend *be, const mm_args *a, mm_jobs J,
                                   int64_t n_rows_all, const mm_conv *cv = NULL,
                                   bool *conv_done = NULL, const mm_rkv *rk = NULL,
                                   bool *rk_done = NULL, mm_acc_req *acc = NULL,
                                   const mv6_route *rt = NULL, bool *rt_done = NULL) {
  /* v7 takes up to 16 rows of x per weight pass (a row's arithmetic is the same in any
   * group: batch invariant) */
  const bool tc = a->path == MM_V7 || a->path == MM_V11;
  const int mt = tc && a->M > 8 ? 16 : mm_mtile(a->M);
  const int R = mt == 1 && n_rows_all < 4096 ? 2 : 8;
  if ((a->M + mt - 1) / mt > 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul: %lld rows of x", (long long)a->M);
  bool ok = true;
  if (tc) {
    if (a->type == MEMRA_TYPE_Q6_K) /* the form by K (tc_q6_key) */
      return tc_q6_key(a->K) == TC_Q6I
                 ? mm_launch_tc<TC_Q6I>(be, a, J, mt, cv, conv_done, NULL, NULL, acc)
                 : mm_launch_tc<MEMRA_TYPE_Q6_K>(be, a, J, mt, cv, conv_done, NULL, NULL, acc);
    return mm_launch_tc<MEMRA_TYPE_Q4_K>(be, a, J, mt, cv, conv_done, rk, rk_done, acc);
  }
  const bool v13 =
      a->path == MM_V8 && mm_q8_mode() == MM_Q8_V13 && a->M == 1 && mm_jobs_q13(be, J, a->K);
  const bool v12 = a->path == MM_V6 && a->type != MEMRA_TYPE_F32 && a->M == 1 && a->xv16 &&
                   mm_h12_for(a->K) && m12_fits(be);
  if (v13 || v12)
    mm_acc_ring(&J, acc);
  else
    mm_acc_other(&J, acc);
  if (a->path == MM_V5) {
#define MKQ_CASE(TY)                                                                               \
  case TY:                                                                                         \
    ok = a->xv16 ? mkq_launch<TY, true>(mt, R, be, J, a->x, a->x_ld, a->K, a->M)                   \
                 : mkq_launch<TY, false>(mt, R, be, J, a->x, a->x_ld, a->K, a->M);                 \
    break;
    switch (a->type) {
      MKQ_CASE(MEMRA_TYPE_Q4_K)
      MKQ_CASE(MEMRA_TYPE_Q5_K)
      MKQ_CASE(MEMRA_TYPE_Q6_K)
    default: break;
    }
#undef MKQ_CASE
  } else if (a->path == MM_V9) {
    cudaError_t e = cudaSuccess;
#define MK9_CASE(TY)                                                                               \
  case TY:                                                                                         \
    ok = a->xv16 ? mk9_launch<TY, true>(mt, R, be, J, a->x, a->x_ld, a->K, a->M, &e)               \
                 : mk9_launch<TY, false>(mt, R, be, J, a->x, a->x_ld, a->K, a->M, &e);             \
    break;
    switch (a->type) {
      MK9_CASE(MEMRA_TYPE_Q4_K)
      MK9_CASE(MEMRA_TYPE_Q5_K)
      MK9_CASE(MEMRA_TYPE_Q6_K)
    default: break;
    }
#undef MK9_CASE
    if (e != cudaSuccess)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "matmul: K-quant kernel's shared memory: %s",
                           cudaGetErrorString(e));
  } else if (a->path == MM_V8) {
    cudaError_t e;
    const mm_q8 q8 = mm_q8_mode();
    if (v13 && cv) J.cv = *cv, *conv_done = true;
    if (v13 && rk) J.rk = *rk, *rk_done = true;
    ok = q8 == MM_Q8_V8A ? mq8_launch(mt, R, be, J, a->x, a->x_ld, a->K, a->M, &e)
         : v13           ? m13_launch(be, J, a->x, a->K, &e)
                         : mq8b_launch(a->M, R, be, J, a->x, a->x_ld, a->K, a->M, &e);
    if (e != cudaSuccess)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "matmul: Q8_0 kernel's shared memory: %s",
                           cudaGetErrorString(e));
  } else if (v12) {
    cudaError_t e;
    if (cv) J.cv = *cv, *conv_done = true;
    ok = a->type == MEMRA_TYPE_F16 ? m12_launch<MEMRA_TYPE_F16>(be, J, a->x, a->K, &e)
                                   : m12_launch<MEMRA_TYPE_BF16>(be, J, a->x, a->K, &e);
    if (e != cudaSuccess)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "matmul: %s kernel's launch setup: %s",
                           memra_type_info(a->type).name, cudaGetErrorString(e));
  } else if (a->type == MEMRA_TYPE_F16) {
    ok = mv6_launch<MEMRA_TYPE_F16>(mt, R, be, J, a->x, a->x_ld, a->K, a->M, a->xv16);
  } else if (a->type == MEMRA_TYPE_F32) {
    ok = mv6_launch<MEMRA_TYPE_F32>(mt, R, be, J, a->x, a->x_ld, a->K, a->M, a->xv16, rt, rt_done);
  } else {
    ok = mv6_launch<MEMRA_TYPE_BF16>(mt, R, be, J, a->x, a->x_ld, a->K, a->M, a->xv16);
  }
  if (!ok) return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul: output too large");
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

static void mm_job_add(mm_jobs *J, const mm_args *a, uint64_t w_nb1) {
  const int i = J->n++;
  J->y[i] = a->y;
  J->y_ld[i] = a->y_ld;
  J->w[i] = a->w;
  J->w_nb1[i] = w_nb1;
  J->bias[i] = a->bias;
  J->N[i] = a->N;
  J->blk0[i] = 0;
}

#define MM_TYPE_CASE(TY)                                                                           \
  case TY:                                                                                         \
    if (a.vec)                                                                                     \
      launch_t<TY, true>(mt, grid, be, a.y, a.y_ld, a.x, a.x_ld, a.w, w->nb1, a.bias, a.N, a.K,    \
                         a.M);                                                                     \
    else                                                                                           \
      launch_t<TY, false>(mt, grid, be, a.y, a.y_ld, a.x, a.x_ld, a.w, w->nb1, a.bias, a.N, a.K,   \
                          a.M);                                                                    \
    break;

memra_status memra_cu_matmul(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                             const memra_tensor *w, const memra_tensor *bias) {
  mm_args a;
  memra_status st = mm_check(be, y, x, w, bias, &a);
  if (st != MEMRA_OK) return st;
  if (a.M == 0) return MEMRA_OK;
  if (a.path != MM_V3) {
    mm_jobs J = {};
    mm_job_add(&J, &a, w->nb1);
    return mm_launch_jobs(be, &a, J, a.N);
  }
  const int mt = mm_mtile(a.M);
  const int64_t gx = (a.N + MM_WARPS - 1) / MM_WARPS,
                gy = (a.M + mt - 1) / mt; /* row groups of the tile launched */
  if (gx > 0x7fffffff || gy > 65535)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "matmul: %lld x %lld output too large",
                         (long long)a.M, (long long)a.N);
  dim3 grid((unsigned)gx, (unsigned)gy);
  switch (a.type) {
    MM_TYPE_CASE(MEMRA_TYPE_F32)
    MM_TYPE_CASE(MEMRA_TYPE_F16)
    MM_TYPE_CASE(MEMRA_TYPE_BF16)
    MM_TYPE_CASE(MEMRA_TYPE_Q8_0)
    MM_TYPE_CASE(MEMRA_TYPE_Q4_0)
    MM_TYPE_CASE(MEMRA_TYPE_Q4_1)
    MM_TYPE_CASE(MEMRA_TYPE_Q5_0)
    MM_TYPE_CASE(MEMRA_TYPE_Q5_1)
    MM_TYPE_CASE(MEMRA_TYPE_Q4_K)
    MM_TYPE_CASE(MEMRA_TYPE_Q5_K)
    MM_TYPE_CASE(MEMRA_TYPE_Q6_K)
  default: break;
  }
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* ABI 1.17 matmul_acc: y += x w^T. A ring kernel of one row (v11, v12, v13) or v7 adds y's old
 * value at its store (mm_store_parts: rmsnorm's residual sum, the norm after it then takes no
 * residual and no launch of its own); any other writes the product into t, then add. */
memra_status memra_cu_matmul_acc(memra_backend *be, const memra_tensor *y, const memra_tensor *t,
                                 const memra_tensor *x, const memra_tensor *w) {
  const char *op = "matmul_acc";
  if (!y || !t || !x || !w)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: a tensor argument is NULL", op);
  if (memra_cu_overlap(y, t) || memra_cu_overlap(y, x) || memra_cu_overlap(t, x))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y, t and x overlap", op);
  if (t->type != MEMRA_TYPE_F32 || y->type != MEMRA_TYPE_F32 || t->ne0 != y->ne0 ||
      t->ne1 != y->ne1)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: t is not F32 of y's shape", op);
  mm_args a;
  memra_status st;
  if ((st = memra_cu_check_tensor(be, y, "matmul_acc: y", MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = mm_check(be, t, x, w, NULL, &a)) != MEMRA_OK)
    return st;
  if (a.M == 0) return MEMRA_OK;
  mm_acc_req acc = {(float *)memra_cu_ptr(t), (int64_t)(t->nb1 / sizeof(float)), false};
  if (a.path != MM_V3) {
    mm_jobs J = {};
    a.y = (float *)memra_cu_ptr(y); /* t's shape and checks; the ring kernels store into y */
    a.y_ld = (int64_t)(y->nb1 / sizeof(float));
    mm_job_add(&J, &a, w->nb1);
    if ((st = mm_launch_jobs(be, &a, J, a.N, NULL, NULL, NULL, NULL, &acc)) != MEMRA_OK) return st;
  } else if ((st = memra_cu_matmul(be, t, x, w, NULL)) != MEMRA_OK) {
    return st;
  }
  return acc.done ? MEMRA_OK : memra_cu_add(be, y, y, t);
}

/* matmul_n's checks and launches; cv (matmul_n_conv; may be NULL): job 0's conv, taken by the
 * kernel when it can (*conv_done), else left to the caller. */
static memra_status mm_n_run(memra_backend *be, int32_t n, const memra_tensor *y,
                             const memra_tensor *x, const memra_tensor *w, const memra_tensor *bias,
                             const char *op, const mm_conv *cv, bool *conv_done,
                             const mm_rkv *rk = NULL, bool *rk_done = NULL,
                             const mv6_route *rt = NULL, bool *rt_done = NULL) {
  if (n < 1 || n > MM_MAX_JOBS || !y || !w)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %d outputs (1..%d with y and w arrays)", op, n,
                         MM_MAX_JOBS);
  mm_args a[MM_MAX_JOBS];
  bool fuse = true;
  int64_t n_rows_all = 0;
  for (int32_t i = 0; i < n; ++i) {
    memra_status st = mm_check(be, &y[i], x, &w[i], bias ? &bias[i] : NULL, &a[i]);
    if (st != MEMRA_OK) return st;
    if (w[i].type != w[0].type || w[i].ne0 != w[0].ne0)
      return memra_cu_errf(be, MEMRA_E_INVALID,
                           "%s: w[%d] is %s with K %lld, w[0] %s with "
                           "K %lld",
                           op, i, memra_type_info(w[i].type).name, (long long)w[i].ne0,
                           memra_type_info(w[0].type).name, (long long)w[0].ne0);
    for (int32_t j = 0; j < i; ++j)
      if (memra_cu_overlap(&y[i], &y[j]))
        return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y[%d] overlaps y[%d]", op, i, j);
    fuse = fuse && a[i].path != MM_V3 && a[i].path == a[0].path;
    n_rows_all += a[i].N;
  }
  if (a[0].M == 0) return MEMRA_OK;
  if (!fuse) {
    for (int32_t i = 0; i < n; ++i) {
      memra_status st = memra_cu_matmul(be, &y[i], x, &w[i], bias ? &bias[i] : NULL);
      if (st != MEMRA_OK) return st;
    }
    return MEMRA_OK;
  }
  mm_jobs J = {};
  for (int32_t i = 0; i < n; ++i)
    mm_job_add(&J, &a[i], w[i].nb1);
  return mm_launch_jobs(be, &a[0], J, n_rows_all, cv, conv_done, rk, rk_done, NULL, rt, rt_done);
}

/* ABI 1.3 matmul_n: one v5/v6/v7/v8/v9 launch over all the outputs when every w takes the same
 * kernel family (each row keeps matmul's arithmetic: bit-identical to separate calls);
 * otherwise separate matmuls. */
memra_status memra_cu_matmul_n(memra_backend *be, int32_t n, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *bias) {
  return mm_n_run(be, n, y, x, w, bias, "matmul_n", NULL, NULL);
}

/* ABI 1.22 matmul_n_route: for one row of x on v6 with F32 weights (a decode step's router) the
 * route in the launch's last block (mv6_route_tail: moe_route v3's warp function, so the same ids
 * and weights) and no route launch; otherwise matmul_n, then moe_route. */
memra_status memra_cu_matmul_n_route(memra_backend *be, int32_t n, const memra_tensor *y,
                                     const memra_tensor *x, const memra_tensor *w,
                                     const memra_tensor *bias, const memra_tensor *ids,
                                     const memra_tensor *weights, int32_t normalize) {
  const char *op = "matmul_n_route";
  if (!y || !x || !w || !ids || !weights)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: a tensor argument is NULL", op);
  if (n < 1 || n > MM_MAX_JOBS)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %d outputs (1..%d)", op, n, MM_MAX_JOBS);
  const memra_tensor *out[2] = {ids, weights};
  for (int o = 0; o < 2; ++o) {
    if (memra_cu_overlap(out[o], x))
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %s overlaps x", op, o ? "weights" : "ids");
    for (int32_t i = 0; i < n; ++i)
      if (memra_cu_overlap(out[o], &y[i]) || memra_cu_overlap(out[o], &w[i]))
        return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %s overlaps y[%d] or w[%d]", op,
                             o ? "weights" : "ids", i, i);
  }
  memra_status st = memra_cu_moe_route_check(be, ids, weights, &y[0]);
  if (st != MEMRA_OK) return st;
  mv6_route rt = {};
  rt.ids = (int32_t *)memra_cu_ptr(ids);
  rt.w = (float *)memra_cu_ptr(weights);
  rt.logits = (const float *)memra_cu_ptr(&y[0]);
  rt.ids_ld = (int64_t)(ids->nb1 / 4);
  rt.w_ld = (int64_t)(weights->nb1 / 4);
  rt.l_ld = (int64_t)(y[0].nb1 / 4);
  rt.ne = (int)y[0].ne0;
  rt.k = (int)ids->ne0;
  rt.normalize = normalize;
  const bool take = route_npl(y[0].ne0) > 0 && ids->ne0 <= 32 && y[0].ne1 == 1;
  bool done = false;
  if ((st = mm_n_run(be, n, y, x, w, bias, op, NULL, NULL, NULL, NULL, take ? &rt : NULL, &done)))
    return st;
  return done ? MEMRA_OK : memra_cu_moe_route(be, ids, weights, &y[0], normalize);
}

/* ABI 1.11 matmul_n_conv: for one row of x on v11 / v12 / v13 and a conv of width 4, the conv in
 * the GEMV's last step (mm_conv_apply: ssm_conv's arithmetic, so the same bits) and no ssm_conv
 * launch; otherwise matmul_n, then the conv in place. */
memra_status memra_cu_matmul_n_conv(memra_backend *be, int32_t n, const memra_tensor *y,
                                    const memra_tensor *x, const memra_tensor *w,
                                    const memra_tensor *conv_w, const memra_tensor *state,
                                    const memra_batch *batch) {
  const char *op = "matmul_n_conv";
  if (n < 1 || n > MM_MAX_JOBS || !y || !w)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %d outputs (1..%d with y and w arrays)", op, n,
                         MM_MAX_JOBS);
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  int64_t bt_ld = 0;
  memra_status st;
  if ((st = memra_cu_check_f(be, op, "y[0]", &y[0], MEMRA_TYPE_F32, -1, -1)) ||
      (st = memra_cu_check_f(be, op, "conv_w", conv_w, MEMRA_TYPE_F32, -1, y[0].ne0)) ||
      (st = memra_cu_check_f(be, op, "state", state, MEMRA_TYPE_F32, (conv_w->ne0 - 1) * y[0].ne0,
                             -1)) ||
      (st = memra_cu_check_batch(be, batch, op, &pos, &seq, &bt, &bt_ld)))
    return st;
  if (batch->n_rows != y[0].ne1 || state->ne1 < batch->n_seqs)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: batch of %d rows and %d sequences for y[0] of "
                         "%lld rows and a state of %lld",
                         op, batch->n_rows, batch->n_seqs, (long long)y[0].ne1,
                         (long long)state->ne1);
  if (memra_cu_overlap(&y[0], state) || memra_cu_overlap(&y[0], conv_w))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y[0] overlaps the conv state or weights", op);
  mm_conv cv = {};
  cv.w = (const float *)memra_cu_ptr(conv_w);
  cv.state = (float *)memra_cu_ptr(state);
  cv.pos = pos;
  cv.seq = seq;
  cv.w_ld = (int64_t)(conv_w->nb1 / 4);
  cv.s_ld = (int64_t)(state->nb1 / 4);
  cv.n_seqs = batch->n_seqs;
  bool done = false;
  const bool take = conv_w->ne0 == 4;
  if ((st = mm_n_run(be, n, y, x, w, NULL, op, take ? &cv : NULL, &done))) return st;
  return done ? MEMRA_OK : memra_cu_ssm_conv_in_place(be, &y[0], conv_w, state, batch);
}

/* ABI 1.16 matmul_n_rope_kv: for one row of x on v13 with NORM rope whose pairs stay in a tile,
 * rope and the cache stores at the GEMV's stores (matmul_rkv.cuh: rope_kv_store's arithmetic, so
 * the same bits) and no rope_kv_store launch; otherwise matmul_n, then rope_kv_store. */
memra_status memra_cu_matmul_n_rope_kv(memra_backend *be, int32_t n, const memra_tensor *y,
                                       const memra_tensor *x, const memra_tensor *w,
                                       const memra_tensor *bias, const memra_tensor *k_cache,
                                       const memra_tensor *v_cache, const memra_batch *batch,
                                       const memra_rope_params *p) {
  const char *op = "matmul_n_rope_kv";
  if ((n != 2 && n != 3) || !y || !w)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: n is %d (2 or 3, with y and w arrays)", op, n);
  const int32_t *pos = NULL, *seq = NULL, *bt = NULL;
  const float *ff = NULL;
  int64_t bt_ld = 0;
  memra_status st = memra_cu_rope_kv_check(be, op, &y[0], &y[1], &y[2], k_cache, v_cache, batch, p,
                                           &pos, &seq, &bt, &bt_ld, &ff);
  if (st) return st;
  if (n == 2 && (memra_cu_overlap(&y[2], x) || memra_cu_overlap(&y[2], &w[0]) ||
                 memra_cu_overlap(&y[2], &w[1])))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: v overlaps x or a weight", op);
  mm_rkv rk = {};
  memra_cu_fill_paged(&rk, k_cache, v_cache, batch, pos, seq, bt, bt_ld);
  rk.ff = ff;
  rk.v_src = n == 2 ? (const float *)memra_cu_ptr(&y[2]) : NULL;
  rk.head_dim = p->head_dim;
  rk.n_rot = p->n_rot;
  rk.kt = k_cache->type == MEMRA_TYPE_F8_E4M3 ? 2 : k_cache->type == MEMRA_TYPE_F16 ? 1 : 0;
  rk.vt = v_cache->type == MEMRA_TYPE_F8_E4M3 ? 2 : v_cache->type == MEMRA_TYPE_F16 ? 1 : 0;
  rk.freq_base = p->freq_base;
  rk.freq_scale = p->freq_scale;
  rk.on = true;
  /* the store's pairs in one 8-row tile (v13's): NORM, heads of whole tiles, one row */
  const bool take = p->mode != MEMRA_ROPE_NEOX && p->head_dim % 8 == 0 && batch->n_rows == 1 &&
                    y[1].ne0 == y[2].ne0;
  bool done = false;
  if ((st = mm_n_run(be, n, y, x, w, bias, op, NULL, NULL, take ? &rk : NULL, &done))) return st;
  return done ? MEMRA_OK
              : memra_cu_rope_kv_store(be, &y[0], &y[1], &y[2], k_cache, v_cache, batch, p);
}

/* The fused FFN launch's arguments from the three checked matmuls (gate, up, down) and the norm
 * it makes first (NULL: none). */
static ffn13_args ffn13_args_of(const mm_args &ag, const mm_args &au, const mm_args &ad,
                                const memra_tensor *w_gate, const memra_tensor *w_up,
                                const memra_tensor *w_down, const mm_norm *nm) {
  ffn13_args a = {};
  a.wg = ag.w;
  a.wu = au.w;
  a.wd = ad.w;
  a.wg_nb1 = w_gate->nb1;
  a.wu_nb1 = w_up->nb1;
  a.wd_nb1 = w_down->nb1;
  a.x = ag.x;
  a.h = ag.y;
  a.y = ad.y;
  a.Ki = ag.K;
  a.F = ag.N;
  a.No = ad.N;
  if (nm) a.nm = *nm;
  return a;
}

/* ABI 1.12 ffn_glu: for one row of x and Q8_0 weights that v13 takes, gate/up, glu and down in
 * one persistent launch (matmul_ffn13.cuh: v13's and glu's arithmetic, so the same bits);
 * otherwise matmul_n (h, u), glu into h, matmul. */
memra_status memra_cu_ffn_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *h,
                              const memra_tensor *u, const memra_tensor *x,
                              const memra_tensor *w_gate, const memra_tensor *w_up,
                              const memra_tensor *w_down, int32_t act) {
  if (!y || !h || !u || !x || !w_gate || !w_up || !w_down)
    return memra_cu_errf(be, MEMRA_E_INVALID, "ffn_glu: a tensor argument is NULL");
  if (act != MEMRA_ACT_SILU && act != MEMRA_ACT_GELU_TANH)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "ffn_glu: unknown activation %d", act);
  mm_args ag, au, ad;
  memra_status st;
  if ((st = mm_check(be, h, x, w_gate, NULL, &ag)) || (st = mm_check(be, u, x, w_up, NULL, &au)) ||
      (st = mm_check(be, y, h, w_down, NULL, &ad)))
    return st;
  if (memra_cu_overlap(h, u) || memra_cu_overlap(y, u))
    return memra_cu_errf(be, MEMRA_E_INVALID, "ffn_glu: u overlaps h or y");
  if (w_up->type != w_gate->type)
    return memra_cu_errf(be, MEMRA_E_INVALID, "ffn_glu: w_up is %s, w_gate %s",
                         memra_type_info(w_up->type).name, memra_type_info(w_gate->type).name);
  if (ag.M == 1 && mm_q8_mode() == MM_Q8_V13 && ag.path == MM_V8 && au.path == MM_V8 &&
      ad.path == MM_V8 && ffn13_fits(be, ag.K, ag.N, w_gate->nb1, w_up->nb1, w_down->nb1)) {
    const ffn13_args a = ffn13_args_of(ag, au, ad, w_gate, w_up, w_down, NULL);
    /* MEMRA_FFN_GLU=2: gate, up and glu in one launch, then down as matmul; else down in the
     * same launch */
    static const bool one = !memra_cu_env_is("MEMRA_FFN_GLU", "2");
    cudaError_t e;
    const bool silu = act == MEMRA_ACT_SILU;
    const bool ok = one ? (silu ? ffn13_launch<MEMRA_ACT_SILU, true>(be, a, &e)
                                : ffn13_launch<MEMRA_ACT_GELU_TANH, true>(be, a, &e))
                        : (silu ? ffn13_launch<MEMRA_ACT_SILU, false>(be, a, &e)
                                : ffn13_launch<MEMRA_ACT_GELU_TANH, false>(be, a, &e));
    if (!ok)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "ffn_glu: the fused kernel's launch setup: %s",
                           cudaGetErrorString(e));
    MEMRA_CU_LAUNCHED();
    return one ? MEMRA_OK : memra_cu_matmul(be, y, h, w_down, NULL);
  }
  const memra_tensor ys[2] = {*h, *u}, ws[2] = {*w_gate, *w_up};
  if ((st = memra_cu_matmul_n(be, 2, ys, x, ws, NULL)) || (st = memra_cu_glu(be, h, h, u, act)))
    return st;
  return memra_cu_matmul(be, y, h, w_down, NULL);
}

/* ABI 1.14: whether rmsnorm(xn, x, res, w, eps) can run inside a v13 / v11 launch
 * (matmul_norm13.cuh: one row of 4096) or, v6 true, in the head of a v6 launch (matmul_v6.cuh
 * mv6_norm_head: one row of K % 512 == 0 up to 4096, opt-in by MEMRA_V6_NORM=1: even on the H100,
 * docs/PERF.md): F32, 16-byte aligned, xn apart from x and res (blocks read x while block 0 writes
 * xn); *nm filled when so. Else the rmsnorm launch (its checks, errors). */
static bool n13_fits(const memra_tensor *xn, const memra_tensor *x, const memra_tensor *res,
                     const memra_tensor *w, float eps, mm_norm *nm, bool v6 = false) {
  static const bool v6_on = memra_cu_env_is("MEMRA_V6_NORM", "1");
  const bool has_res = memra_cu_present(res);
  const memra_tensor *f[4] = {xn, x, w, has_res ? res : x};
  if (!memra_cu_present(x) || (v6 && !v6_on)) return false;
  const int64_t K = x->ne0;
  if (v6 ? K % 512 || K > 4096 : K != 4096) return false;
  for (int i = 0; i < 4; ++i)
    if (!memra_cu_present(f[i]) || f[i]->type != MEMRA_TYPE_F32 || f[i]->ne0 != K ||
        f[i]->ne1 != 1 || memra_cu_align_of(memra_cu_ptr(f[i]), 0) < 16)
      return false;
  if (!(eps >= 0.f) || memra_cu_overlap(xn, x) || (has_res && memra_cu_overlap(xn, res)))
    return false;
  nm->x = (float *)memra_cu_ptr(x);
  nm->res = has_res ? (const float *)memra_cu_ptr(res) : NULL;
  nm->w = (const float *)memra_cu_ptr(w);
  nm->xn = (float *)memra_cu_ptr(xn);
  nm->eps = eps;
  return true;
}

/* The ABI 1.14 / 1.23 norm slots' argument checks: tensors present, 1..MM_MAX_JOBS outputs, no y
 * overlapping xn, x or res (op names the slot in the message). */
static memra_status norm_mm_check(memra_backend *be, const char *op, const memra_tensor *xn,
                                  const memra_tensor *x, const memra_tensor *res,
                                  const memra_tensor *w_norm, int32_t n, const memra_tensor *y,
                                  const memra_tensor *w) {
  if (!xn || !x || !res || !w_norm || !y || !w)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: a tensor argument is NULL", op);
  if (n < 1 || n > MM_MAX_JOBS)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %d outputs (1..%d)", op, n, MM_MAX_JOBS);
  for (int32_t i = 0; i < n; ++i)
    if (memra_cu_overlap(&y[i], xn) || memra_cu_overlap(&y[i], x) || memra_cu_overlap(&y[i], res))
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y[%d] overlaps xn, x or res", op, i);
  return MEMRA_OK;
}

/* ABI 1.14 rmsnorm_matmul_n: for one row of 4096 and Q8_0 weights that v13 takes (or Q4_K ones
 * v11 takes), the norm in that launch; for F32 weights on v6 (MEMRA_V6_NORM=1), the norm in v6's
 * head (the same bits as rmsnorm then matmul_n); otherwise the two calls. */
memra_status memra_cu_rmsnorm_matmul_n(memra_backend *be, const memra_tensor *xn,
                                       const memra_tensor *x, const memra_tensor *res,
                                       const memra_tensor *w_norm, float eps, int32_t n,
                                       const memra_tensor *y, const memra_tensor *w,
                                       const memra_tensor *bias) {
  const char *op = "rmsnorm_matmul_n";
  memra_status st = norm_mm_check(be, op, xn, x, res, w_norm, n, y, w);
  if (st != MEMRA_OK) return st;
  mm_norm nm;
  const bool v6_fits = n13_fits(xn, x, res, w_norm, eps, &nm, true);
  if (v6_fits || n13_fits(xn, x, res, w_norm, eps, &nm)) {
    mm_args a[MM_MAX_JOBS];
    bool q13 = mm_q8_mode() == MM_Q8_V13, q11 = m11_fits<MEMRA_TYPE_Q4_K>(be, 4096), v6 = v6_fits;
    for (int32_t i = 0; i < n; ++i) {
      st = mm_check(be, &y[i], xn, &w[i], bias ? &bias[i] : NULL, &a[i]);
      if (st != MEMRA_OK) return st;
      v6 = v6 && a[i].path == MM_V6 && w[i].type == MEMRA_TYPE_F32 && a[i].M == 1 && a[i].xv16;
      /* v13's head without a residual (matmul_acc's route) measured slower than the norm's
       * launch (q/k/v 7.8 -> 12.5 us, 2.9 saved; docs/PERF.md): that norm is a launch */
      q13 = q13 && nm.res && a[i].path == MM_V8 && w[i].type == MEMRA_TYPE_Q8_0 && a[i].K == 4096 &&
            m13_fits(be, a[i].K, w[i].nb1);
      q11 =
          q11 && a[i].path == MM_V11 && w[i].type == MEMRA_TYPE_Q4_K && a[i].K == 4096 && a[i].xv16;
      for (int32_t j = 0; j < i; ++j)
        if (memra_cu_overlap(&y[i], &y[j]))
          return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y[%d] overlaps y[%d]", op, i, j);
    }
    /* EXPERIMENT (MEMRA_T11MX_ALL=1, a build define): q, k, v of one type on the mixed kernel too
     * (matmul_tc11mx.cuh: half-tile stages, a block ~86 KB against v11's ~92) */
    const bool q11_mx = MEMRA_T11MX_ALL && q11 && n == 3 && m11mx_fits(be);
    if (v6 || q13 || q11) { /* v6 (F32), v13 (Q8_0) or v11 (Q4_K) with the norm */
      mm_jobs J = {};
      for (int32_t i = 0; i < n; ++i)
        mm_job_add(&J, &a[i], w[i].nb1);
      cudaError_t e = cudaSuccess;
      const bool ok = v6       ? mv6_norm_launch(be, J, a[0].K, nm)
                      : q13    ? m13_launch(be, J, a[0].x, a[0].K, &e, &nm)
                      : q11_mx ? m11mx_launch(be, J, 0, &e, nm)
                               : m11_launch<MEMRA_TYPE_Q4_K, true>(be, J, a[0].x, a[0].K, &e, &nm);
      if (e != cudaSuccess)
        return memra_cu_errf(be, MEMRA_E_DEVICE, "%s: %s kernel's launch setup: %s", op,
                             memra_type_info(w[0].type).name, cudaGetErrorString(e));
      if (!ok) return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: output too large", op);
      MEMRA_CU_LAUNCHED();
      return MEMRA_OK;
    }
  }
  st = memra_cu_rmsnorm(be, xn, x, res, w_norm, eps);
  return st != MEMRA_OK ? st : memra_cu_matmul_n(be, n, y, xn, w, bias);
}

/* ABI 1.23 rmsnorm_matmul_mixed: rmsnorm_matmul_n over weights of several types (each of x's K).
 * One type: rmsnorm_matmul_n. Q4_K with Q6_K rows of 4096 (half a Q4_K_M file's q, k, v), the
 * mixed form: one v11 launch over both with the norm in its head for one row (matmul_tc11mx.cuh),
 * the norm and v7 launches for batches, the Q6_K on the tensor-core form either way (TC_Q6I, as the
 * launch computes them), so a row's bits do not depend on its batch. Otherwise the norm, then
 * matmul_n per type: each row as matmul gives it. */
memra_status memra_cu_rmsnorm_matmul_mixed(memra_backend *be, const memra_tensor *xn,
                                           const memra_tensor *x, const memra_tensor *res,
                                           const memra_tensor *w_norm, float eps, int32_t n,
                                           const memra_tensor *y, const memra_tensor *w,
                                           const memra_tensor *bias) {
  const char *op = "rmsnorm_matmul_mixed";
  memra_status st = norm_mm_check(be, op, xn, x, res, w_norm, n, y, w);
  if (st != MEMRA_OK) return st;
  bool one_type = true;
  for (int32_t i = 0; i < n; ++i) {
    if (w[i].ne0 != w[0].ne0)
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: w[%d] has K %lld, w[0] %lld", op, i,
                           (long long)w[i].ne0, (long long)w[0].ne0);
    for (int32_t j = 0; j < i; ++j)
      if (memra_cu_overlap(&y[i], &y[j]))
        return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y[%d] overlaps y[%d]", op, i, j);
    one_type = one_type && w[i].type == w[0].type;
  }
  if (one_type) return memra_cu_rmsnorm_matmul_n(be, xn, x, res, w_norm, eps, n, y, w, bias);
  /* The mixed form, by the matrices alone (never the batch): Q4_K and Q6_K rows of 4096, 16-byte
   * aligned, v11 / v7 the default path; then the Q6_K take the tensor-core form at any M. */
  mm_args a[MM_MAX_JOBS];
  int nq4 = 0, nq6 = 0;
  for (int32_t i = 0; i < n; ++i) {
    st = mm_check(be, &y[i], xn, &w[i], bias ? &bias[i] : NULL, &a[i]);
    if (st != MEMRA_OK) return st;
    const bool al = a[i].K == T11MX_K && memra_cu_align_of(a[i].w, w[i].nb1 * (a[i].N > 1)) >= 16;
    nq4 += al && a[i].type == MEMRA_TYPE_Q4_K;
    nq6 += al && a[i].type == MEMRA_TYPE_Q6_K;
  }
  const bool form = nq4 > 0 && nq6 > 0 && nq4 + nq6 == n && mm_gemv_mode() == MM_GEMV_DEFAULT;
  for (int32_t i = 0; form && i < n; ++i)
    a[i].path = MM_V11;
  mm_norm nm;
  if (form && a[0].M == 1 && a[0].xv16 && n13_fits(xn, x, res, w_norm, eps, &nm) &&
      m11mx_fits(be)) {
    mm_jobs J = {}; /* the Q6_K jobs' tiles first */
    for (int pass = 0; pass < 2; ++pass)
      for (int32_t i = 0; i < n; ++i)
        if ((a[i].type == MEMRA_TYPE_Q6_K) == (pass == 0)) mm_job_add(&J, &a[i], w[i].nb1);
    cudaError_t e = cudaSuccess;
    const bool ok = m11mx_launch(be, J, nq6, &e, nm);
    if (e != cudaSuccess)
      return memra_cu_errf(be, MEMRA_E_DEVICE, "%s: the mixed kernel's launch setup: %s", op,
                           cudaGetErrorString(e));
    if (!ok) return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: output too large", op);
    MEMRA_CU_LAUNCHED();
    return MEMRA_OK;
  }
  st = memra_cu_rmsnorm(be, xn, x, res, w_norm, eps);
  for (int32_t i = 0; i < n && st == MEMRA_OK; ++i) { /* a call per type, in w's order */
    bool first = true;
    for (int32_t j = 0; j < i; ++j)
      first = first && w[j].type != w[i].type;
    if (!first) continue;
    mm_jobs J = {};
    memra_tensor gy[MM_MAX_JOBS], gw[MM_MAX_JOBS], gb[MM_MAX_JOBS];
    int32_t gn = 0;
    int64_t rows = 0;
    for (int32_t j = i; j < n; ++j)
      if (w[j].type == w[i].type) {
        mm_job_add(&J, &a[j], w[j].nb1);
        rows += a[j].N;
        gy[gn] = y[j], gw[gn] = w[j], gb[gn++] = bias ? bias[j] : memra_tensor{};
      }
    /* the mixed form's paths (all v11 / v7) as chosen above; otherwise matmul_n's own */
    st = form ? mm_launch_jobs(be, &a[i], J, rows)
              : memra_cu_matmul_n(be, gn, gy, xn, gw, bias ? gb : NULL);
  }
  return st;
}

/* ABI 1.15 matmul_rmsnorm: for one row of 4096 outputs and Q8_0 weights that v13 takes (or Q4_K
 * ones v11 takes), the norm at the end of the launch by its last block (matmul_norm13.cuh
 * n13_tail: rmsnorm's bits); otherwise matmul, then rmsnorm. */
memra_status memra_cu_matmul_rmsnorm(memra_backend *be, const memra_tensor *y,
                                     const memra_tensor *a, const memra_tensor *w,
                                     const memra_tensor *xn, const memra_tensor *x,
                                     const memra_tensor *w_norm, float eps) {
  const char *op = "matmul_rmsnorm";
  if (!y || !a || !w || !xn || !x || !w_norm)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: a tensor argument is NULL", op);
  if (memra_cu_overlap(y, a) || memra_cu_overlap(y, x) || memra_cu_overlap(y, xn))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y overlaps a, x or xn", op);
  if (memra_cu_overlap(xn, a) || memra_cu_overlap(xn, x))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: xn overlaps a or x", op);
  mm_args ag;
  memra_status st = mm_check(be, y, a, w, NULL, &ag);
  if (st != MEMRA_OK) return st;
  mm_norm nm;
  if (ag.M == 1 && n13_fits(xn, x, y, w_norm, eps, &nm)) {
    const bool q13 = mm_q8_mode() == MM_Q8_V13 && ag.path == MM_V8 && w->type == MEMRA_TYPE_Q8_0 &&
                     m13_fits(be, ag.K, w->nb1);
    const bool q11 = ag.path == MM_V11 && w->type == MEMRA_TYPE_Q4_K && ag.xv16 &&
                     m11_fits<MEMRA_TYPE_Q4_K>(be, ag.K);
    if (q13 || q11) {
      mm_jobs J = {};
      mm_job_add(&J, &ag, w->nb1);
      cudaError_t e;
      const bool ok =
          q13 ? m13_launch(be, J, ag.x, ag.K, &e, &nm, true)
              : m11_launch<MEMRA_TYPE_Q4_K, true>(be, J, ag.x, ag.K, &e, &nm, false, true);
      if (e != cudaSuccess)
        return memra_cu_errf(be, MEMRA_E_DEVICE, "%s: %s kernel's launch setup: %s", op,
                             memra_type_info(w->type).name, cudaGetErrorString(e));
      if (!ok) return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: output too large", op);
      MEMRA_CU_LAUNCHED();
      return MEMRA_OK;
    }
  }
  st = memra_cu_matmul(be, y, a, w, NULL);
  return st != MEMRA_OK ? st : memra_cu_rmsnorm(be, xn, x, y, w_norm, eps);
}

/* ABI 1.14 rmsnorm_ffn_glu: for one row of 4096 and Q8_0 weights that ffn_glu's launches take,
 * the norm in the gate/up/glu launch (ffn_glu's MEMRA_FFN_GLU=2 form: down in the same launch
 * would overwrite res, which the last block re-reads), then down; otherwise rmsnorm, then
 * ffn_glu. */
memra_status memra_cu_rmsnorm_ffn_glu(memra_backend *be, const memra_tensor *xn,
                                      const memra_tensor *x, const memra_tensor *res,
                                      const memra_tensor *w_norm, float eps, const memra_tensor *y,
                                      const memra_tensor *h, const memra_tensor *u,
                                      const memra_tensor *w_gate, const memra_tensor *w_up,
                                      const memra_tensor *w_down, int32_t act) {
  const char *op = "rmsnorm_ffn_glu";
  if (!xn || !x || !res || !w_norm || !y || !h || !u || !w_gate || !w_up || !w_down)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: a tensor argument is NULL", op);
  if (memra_cu_overlap(y, xn) || memra_cu_overlap(y, x))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y overlaps xn or x", op);
  const memra_tensor *hu[2] = {h, u};
  for (int i = 0; i < 2; ++i)
    if (memra_cu_overlap(hu[i], xn) || memra_cu_overlap(hu[i], x) || memra_cu_overlap(hu[i], res))
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %s overlaps xn, x or res", op,
                           i == 0 ? "h" : "u");
  mm_norm nm;
  if ((act == MEMRA_ACT_SILU || act == MEMRA_ACT_GELU_TANH) &&
      n13_fits(xn, x, res, w_norm, eps, &nm) && mm_q8_mode() == MM_Q8_V13) {
    mm_args ag, au, ad;
    memra_status st;
    if ((st = mm_check(be, h, xn, w_gate, NULL, &ag)) ||
        (st = mm_check(be, u, xn, w_up, NULL, &au)) || (st = mm_check(be, y, h, w_down, NULL, &ad)))
      return st;
    if (memra_cu_overlap(h, u) || memra_cu_overlap(y, u))
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: u overlaps h or y", op);
    if (ag.path == MM_V8 && au.path == MM_V8 && ad.path == MM_V8 && ag.K == 4096 &&
        w_gate->type == MEMRA_TYPE_Q8_0 && w_up->type == MEMRA_TYPE_Q8_0 &&
        ffn13_fits(be, ag.K, ag.N, w_gate->nb1, w_up->nb1, w_down->nb1)) {
      const ffn13_args a = ffn13_args_of(ag, au, ad, w_gate, w_up, w_down, &nm);
      cudaError_t e;
      const bool ok = act == MEMRA_ACT_SILU
                          ? ffn13_launch<MEMRA_ACT_SILU, false, true>(be, a, &e)
                          : ffn13_launch<MEMRA_ACT_GELU_TANH, false, true>(be, a, &e);
      if (!ok)
        return memra_cu_errf(be, MEMRA_E_DEVICE, "%s: the fused kernel's launch setup: %s", op,
                             cudaGetErrorString(e));
      MEMRA_CU_LAUNCHED();
      return memra_cu_matmul(be, y, h, w_down, NULL);
    }
  }
  /* otherwise ffn_glu's composition with the norm in gate and up's launch where it can be (Q4_K:
   * v11), or rmsnorm, then ffn_glu (its Q8_0 launch where it takes the weights) */
  mm_args ag;
  memra_status st;
  if ((st = mm_check(be, h, xn, w_gate, NULL, &ag))) return st;
  if (act != MEMRA_ACT_SILU && act != MEMRA_ACT_GELU_TANH)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: unknown activation %d", op, act);
  if (ag.path == MM_V11 && w_gate->type == MEMRA_TYPE_Q4_K && w_up->type == MEMRA_TYPE_Q4_K &&
      n13_fits(xn, x, res, w_norm, eps, &nm)) {
    if (memra_cu_overlap(h, u) || memra_cu_overlap(y, u))
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: u overlaps h or y", op);
    const memra_tensor ys[2] = {*h, *u}, ws[2] = {*w_gate, *w_up};
    if ((st = memra_cu_rmsnorm_matmul_n(be, xn, x, res, w_norm, eps, 2, ys, ws, NULL)) ||
        (st = memra_cu_glu(be, h, h, u, act)))
      return st;
    return memra_cu_matmul(be, y, h, w_down, NULL);
  }
  st = memra_cu_rmsnorm(be, xn, x, res, w_norm, eps);
  return st != MEMRA_OK ? st : memra_cu_ffn_glu(be, y, h, u, xn, w_gate, w_up, w_down, act);
}
