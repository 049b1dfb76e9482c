/* gemm.cu — the gemm op (ABI 1.3): y [M, N] = x [M, K] . w [N, K]^T (+ bias) on tensor
 * cores, for batches holding prompt rows. Oracle: plugins/cpu matmul (f32); here the
 * operands are rounded to f16 (bf16 for BF16 weights) and accumulated in f32.
 *
 * Steps, all on the backend's stream:
 *  1. x (F32) -> A, f16 or bf16, rows padded to a multiple of 8 elements in the workspace
 *     (values beyond +-65504 saturate to +-65504 in f16 instead of becoming infinite).
 *  2. w -> B: F16/BF16 rows are used in place when 16-byte aligned with a 16-byte multiple
 *     stride; otherwise (and for every quantized type) rows are decoded to f16 (copied for
 *     F16/BF16) into the workspace, at most GEMM_CHUNK_BYTES of them at a time, each chunk
 *     followed by its GEMM over those output columns.
 *  3. The architecture's kernel (gemm.h): wgmma on sm_90a.
 * F32 weights go to matmul (f32 throughout: rounding them would only lose accuracy).
 * Every step is a function of one row (x) or of w alone, and the kernel reduces k in one
 * order, so a row's result does not depend on M or on the other rows.
 *
 * gemm_n (ABI 1.5): the same for up to 4 weights sharing x (q, k, v or gate, up of prompt
 * rows): step 1 once, step 2 per weight, step 3 one grouped launch over all of them on
 * sm_90a (gemm_wgmma.cu jobs), one kernel per weight elsewhere. Each output keeps gemm's
 * bits; a group with a weight beyond one chunk, or whose decoded weights exceed
 * GEMM_GROUP_BYTES, runs as separate gemm calls.
 *
 * Extension for benchmarks: x may also be F16 (F16 or quantized weights) or BF16 (BF16
 * weights), rows 16-byte aligned; it is then used as A directly (no step 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/dequant.cuh"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/gemm.h"

#if MEMRA_CU_HAS_GEMM

enum { GEMM_THREADS = 256 };
/* Upper bound on the decoded weight rows held at once (f16): a 14336 x 4096 projection
 * fits in one chunk; an output matrix of 128256 x 4096 takes 8. */
#define GEMM_CHUNK_BYTES (128ull << 20)
/* Upper bound on the decoded weights of one gemm_n group (f16), each also within one chunk:
 * gate + up of Llama-3.1-8B (2 x 14336 x 4096 x 2 B = 224 MiB) run as one grouped launch.
 * The workspace grows only to what a call asks for (memra_cu_workspace): a small model's
 * groups never reach this. */
#define GEMM_GROUP_BYTES (256ull << 20)

static inline int64_t gemm_round8(int64_t v) { return (v + 7) / 8 * 8; }

/* A [m, lda] = x [m, ldx] converted; 4 columns per thread, rows over blockIdx.y. */
template <int BF>
__global__ void gemm_x_v1_kernel(uint16_t *__restrict__ a, int64_t lda, const float *__restrict__ x,
                                 int64_t ldx, int64_t m, int64_t k, int vec) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x * 4;
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    const float *xr = x + r * ldx;
    uint16_t *ar = a + r * lda;
    for (int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; c < k; c += step) {
      if (c + 4 <= k) {
        float4 v;
        if (vec)
          v = __ldg((const float4 *)(xr + c));
        else
          v = make_float4(xr[c], xr[c + 1], xr[c + 2], xr[c + 3]);
        uint2 o;
        o.x = memra_op16<BF>(v.x) | ((uint32_t)memra_op16<BF>(v.y) << 16);
        o.y = memra_op16<BF>(v.z) | ((uint32_t)memra_op16<BF>(v.w) << 16);
        *(uint2 *)(ar + c) = o; /* lda % 8 == 0, c % 4 == 0: 8-byte aligned */
      } else {
        for (int64_t i = c; i < k; ++i)
          ar[i] = memra_op16<BF>(xr[i]);
      }
    }
    /* the row's pad to lda (< 8 elements) is zero: the mma.sync kernel reads whole 8-element
     * chunks and multiplies the pad by B's zero pad (wgmma's copy engine zero-fills instead) */
    if (blockIdx.x == 0 && threadIdx.x < lda - k) ar[k + threadIdx.x] = 0;
  }
}

/* B [rows, ldb] (f16) = quantized rows decoded: thread (row, unit u, part) writes elements
 * [32 u + 8 part, + 8) with one 16-byte store, so a warp writes 512 contiguous bytes and
 * reads its units' bytes together (memra_deq8, the matmul's coalesced slice). Rows over
 * blockIdx.y: no 64-bit division per thread. */
template <int T, bool VEC>
__global__ void gemm_deq_v2_kernel(__half *__restrict__ b, int64_t ldb,
                                   const uint8_t *__restrict__ w, uint64_t nb1, int64_t rows,
                                   int64_t units) {
  const int64_t slot = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (slot >= units * 4) return;
  const int64_t u = slot >> 2;
  const int part = (int)(slot & 3);
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    float v[8];
    memra_deq8<T, VEC>(w + (uint64_t)row * nb1, u, part, v);
    uint32_t h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      h[e] = __half_as_ushort(__float2half_rn(v[2 * e])) |
             ((uint32_t)__half_as_ushort(__float2half_rn(v[2 * e + 1])) << 16);
    *(uint4 *)(b + row * ldb + 8 * slot) = make_uint4(h[0], h[1], h[2], h[3]);
  }
}

/* One 16-byte global store of h[0..4) at p (16-byte aligned). In PTX: written as a plain
 * uint4 store in v3's loop, nvcc split it into four 4-byte stores. */
__device__ __forceinline__ void gemm_st16(__half *p, const uint32_t h[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(h[0]), "r"(h[1]), "r"(h[2]),
               "r"(h[3])
               : "memory");
}

/* The formats decode v3 stages: block elements and bytes (plugins/quant/blocks.h). */
template <int T> struct gemm_v3_fmt;
template <> struct gemm_v3_fmt<MEMRA_TYPE_Q8_0> {
  enum { blk = 32, bytes = 34 };
};
template <> struct gemm_v3_fmt<MEMRA_TYPE_Q6_K> {
  enum { blk = 256, bytes = 210 };
};
enum { GEMM_V3_UNITS = 128 }; /* 4096 elements of a row per block and row (8 KiB of f16) */

/* Elements [8 part, + 8) of Q6_K unit u for v3: memra_deq8's arithmetic (s = d * scale,
 * w = s * q with q exact) but the 6-bit values assembled four per word (memra_kraw_decode's
 * masks) rather than one per element: v2's Q6_K decode issues ~20 instructions per weight,
 * about as long as the pass's memory time. */
__device__ __forceinline__ void gemm_q6k_deq8(const uint8_t *row, int u, int part, float w[8]) {
  const int j = u & 7, n = j >> 2, k = j & 3;
  const uint8_t *b = row + 210 * (u >> 3);
  const uint16_t *lp = (const uint16_t *)(b + 64 * n + 32 * (k & 1) + 8 * part);
  const uint16_t *hp = (const uint16_t *)(b + 128 + 32 * n + 8 * part);
  const uint32_t l0 = lp[0] | ((uint32_t)lp[1] << 16), l1 = lp[2] | ((uint32_t)lp[3] << 16);
  const uint32_t h0 = hp[0] | ((uint32_t)hp[1] << 16), h1 = hp[2] | ((uint32_t)hp[3] << 16);
  const float s = memra_h2f(b + 208) * (float)(int8_t)b[192 + 8 * n + 2 * k + (part >> 1)];
  const int lsh = 4 * (k >> 1), hsh = 2 * k;
  const uint32_t q0 = ((l0 >> lsh) & 0x0F0F0F0Fu) | (((h0 >> hsh) & 0x03030303u) << 4);
  const uint32_t q1 = ((l1 >> lsh) & 0x0F0F0F0Fu) | (((h1 >> hsh) & 0x03030303u) << 4);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = s * memra_byte_f(q0, i, 32.f); /* byte - 32: the exact q */
    w[4 + i] = s * memra_byte_f(q1, i, 32.f);
  }
}

/* B [rows, ldb] (f16) = quantized rows decoded, v3: Q8_0 (34 B) and Q6_K (210 B) blocks are
 * only 2-byte aligned, so v2's threads read them with 2-byte loads scattered over each warp's
 * bytes. Here a block first copies its tile (GEMM_V3_UNITS units of one row: contiguous
 * bytes) into shared memory with 16-byte loads, 2-byte loads only in the partial first and
 * last 16 bytes (no byte outside the tile is read), keeping the address's alignment mod 16;
 * then thread t decodes groups t, t + 256, ... of 8 elements from shared memory with v2's
 * memra_deq8 (Q6_K: gemm_q6k_deq8; same bytes, same arithmetic: the same f16 bits) and
 * stores each with one 16-byte store (a warp writes 512 contiguous bytes). Rows over blockIdx.y,
 * tiles over blockIdx.x: no 64-bit division per thread. */
template <int T>
__global__ void __launch_bounds__(GEMM_THREADS)
    gemm_deq_v3_kernel(__half *__restrict__ b, int64_t ldb, const uint8_t *__restrict__ w,
                       uint64_t nb1, int64_t rows, int64_t units) {
  constexpr int UPB = gemm_v3_fmt<T>::blk / 32, BYTES = gemm_v3_fmt<T>::bytes;
  constexpr int TILE = GEMM_V3_UNITS / UPB * BYTES;
  /* 16-byte chunks of a tile (it starts at most 14 bytes into its first), and per thread */
  constexpr int CHUNKS = (TILE + 14 + 15) / 16, CPT = (CHUNKS + GEMM_THREADS - 1) / GEMM_THREADS;
  __shared__ __align__(16) uint8_t sm[16 * CHUNKS];
  const int64_t u0 = (int64_t)blockIdx.x * GEMM_V3_UNITS;
  const int nu = units - u0 < GEMM_V3_UNITS ? (int)(units - u0) : GEMM_V3_UNITS;
  const int len = nu / UPB * BYTES; /* whole blocks: units is a multiple of UPB */
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const uintptr_t src = (uintptr_t)(w + row * nb1 + (uint64_t)(u0 / UPB) * BYTES);
    const int head = (int)(src & 15), end = head + len;
    const uintptr_t base = src - (uintptr_t)head;    /* 16-byte aligned; bytes < head unread */
    if (row != (int64_t)blockIdx.y) __syncthreads(); /* the previous row's reads are done */
    /* chunk c = threadIdx.x + 256 i: every 16-byte load of a thread is issued before the
     * first is stored, so the tile costs one memory latency */
    uint4 r[CPT];
#pragma unroll
    for (int i = 0; i < CPT; ++i) {
      const int lo = 16 * ((int)threadIdx.x + i * GEMM_THREADS);
      if (lo >= head && lo + 16 <= end)
        r[i] = __ldcs((const uint4 *)(base + lo)); /* read once: streaming */
    }
#pragma unroll
    for (int i = 0; i < CPT; ++i) {
      const int lo = 16 * ((int)threadIdx.x + i * GEMM_THREADS);
      if (lo >= head && lo + 16 <= end) {
        *(uint4 *)(sm + lo) = r[i];
      } else if (lo < end) { /* the partial first or last 16 bytes */
        const int hi = lo + 16 < end ? lo + 16 : end;
        for (int h = lo > head ? lo : head; h < hi; h += 2)
          *(uint16_t *)(sm + h) = *(const uint16_t *)(base + h);
      }
    }
    __syncthreads();
    __half *br = b + row * ldb + 32 * u0;
    /* group g + 256 is unit u + 64 (whole blocks further): the same unit and part offsets
     * from a tile pointer moved by STEP bytes, so their arithmetic leaves the loop */
    constexpr int STEP = GEMM_THREADS / 4 / UPB * BYTES;
    const int u = (int)threadIdx.x >> 2, part = (int)threadIdx.x & 3;
    const uint8_t *tile = sm + head;
    for (int g = threadIdx.x; g < 4 * nu; g += GEMM_THREADS, tile += STEP) {
      float v[8];
      if (T == MEMRA_TYPE_Q6_K)
        gemm_q6k_deq8(tile, u, part, v);
      else
        memra_deq8<T, false>(tile, u, part, v);
      uint32_t h[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        h[e] = __half_as_ushort(__float2half_rn(v[2 * e])) |
               ((uint32_t)__half_as_ushort(__float2half_rn(v[2 * e + 1])) << 16);
      gemm_st16(br + 8 * g, h);
    }
  }
}

/* B [rows, ldb] = 16-bit rows of w (F16/BF16 rows that are not aligned for the copy
 * engine, or whose K is not a multiple of 8); one element per thread, rows over blockIdx.y. */
__global__ void gemm_copy16_v1_kernel(uint16_t *__restrict__ b, int64_t ldb,
                                      const uint8_t *__restrict__ w, uint64_t nb1, int64_t rows,
                                      int64_t k) {
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= ldb) return;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) /* the pad to ldb is zero */
    b[row * ldb + e] = e < k ? ((const uint16_t *)(w + (uint64_t)row * nb1))[e] : 0;
}

/* Grid of a per-row kernel: `per_row` threads over x, rows over y (looped past 65535). */
static dim3 gemm_row_grid(int64_t per_row, int64_t rows) {
  const int64_t gx = (per_row + GEMM_THREADS - 1) / GEMM_THREADS;
  return dim3((unsigned)gx, (unsigned)(rows < 65535 ? rows : 65535));
}

/* Decode v2 (MEMRA_GEMM_DEQ=2) or v3 for Q8_0 and Q6_K: read once per process, so every
 * call of the process decodes alike (A/B timing of the staging pass in one binary). */
static bool gemm_deq_v3_on(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("MEMRA_GEMM_DEQ");
    on = !(e && strcmp(e, "2") == 0);
  }
  return on != 0;
}

template <int T>
static void gemm_deq_launch(memra_backend *be, __half *b, int64_t ldb, const uint8_t *w,
                            uint64_t nb1, int64_t rows, int64_t k, bool vec) {
  const int64_t units = k / 32;
  if constexpr (T == MEMRA_TYPE_Q8_0 || T == MEMRA_TYPE_Q6_K) {
    if (gemm_deq_v3_on()) {
      const dim3 g((unsigned)((units + GEMM_V3_UNITS - 1) / GEMM_V3_UNITS),
                   (unsigned)(rows < 65535 ? rows : 65535));
      gemm_deq_v3_kernel<T><<<g, GEMM_THREADS, 0, be->stream>>>(b, ldb, w, nb1, rows, units);
      return;
    }
  }
  const dim3 g = gemm_row_grid(units * 4, rows);
  if (vec)
    gemm_deq_v2_kernel<T, true><<<g, GEMM_THREADS, 0, be->stream>>>(b, ldb, w, nb1, rows, units);
  else
    gemm_deq_v2_kernel<T, false><<<g, GEMM_THREADS, 0, be->stream>>>(b, ldb, w, nb1, rows, units);
}

/* Rows [0, rows) of w (already offset to the chunk) into B. */
static memra_status gemm_stage_w(memra_backend *be, void *b, int64_t ldb, int32_t type,
                                 const uint8_t *w, uint64_t nb1, int64_t rows, int64_t k,
                                 bool vec) {
  switch (type) {
  case MEMRA_TYPE_F16:
  case MEMRA_TYPE_BF16:
    gemm_copy16_v1_kernel<<<gemm_row_grid(ldb, rows), GEMM_THREADS, 0, be->stream>>>(
        (uint16_t *)b, ldb, w, nb1, rows, k);
    break;
#define GEMM_DEQ_CASE(TY)                                                                          \
  case TY: gemm_deq_launch<TY>(be, (__half *)b, ldb, w, nb1, rows, k, vec); break;
    GEMM_DEQ_CASE(MEMRA_TYPE_Q4_0)
    GEMM_DEQ_CASE(MEMRA_TYPE_Q4_1)
    GEMM_DEQ_CASE(MEMRA_TYPE_Q5_0)
    GEMM_DEQ_CASE(MEMRA_TYPE_Q5_1)
    GEMM_DEQ_CASE(MEMRA_TYPE_Q8_0)
    GEMM_DEQ_CASE(MEMRA_TYPE_Q4_K)
    GEMM_DEQ_CASE(MEMRA_TYPE_Q5_K)
    GEMM_DEQ_CASE(MEMRA_TYPE_Q6_K)
#undef GEMM_DEQ_CASE
  default:
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "gemm: no decoder for %s weights",
                         memra_type_info(type).name);
  }
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

/* One product's checked operands and layout (gemm_plan), shared by gemm and gemm_n. */
struct gemm_plan {
  int64_t M, N, K, lda, ldb, chunk;
  const float *bp;
  float *yp;    /* F32 y */
  uint8_t *y16; /* a 16-bit y (gemm_glu's output), else NULL */
  const uint8_t *xp, *wp;
  uint64_t walign, ynb1, xnb1, wnb1;
  int32_t wtype;
  int bf;
  bool a_direct, b_direct, to_matmul; /* to_matmul: F32 weights (matmul's f32 path) */
  bool a_copy16; /* 16-bit x copied into the workspace with a zero pad (mma.sync, K % 8) */
};

/* The argument checks of y = x . w^T (+ bias), messages prefixed by `what` ("gemm", or
 * "gemm_n[i]"), and the operand layout: A direct (x already f16/bf16) or converted into the
 * workspace; B direct (aligned F16/BF16 rows) or decoded in chunks of `chunk` rows. */
static memra_status gemm_plan_make(memra_backend *be, const char *what, const memra_tensor *y,
                                   const memra_tensor *x, const memra_tensor *w,
                                   const memra_tensor *bias, bool y16_ok, gemm_plan *p) {
  memra_status st;
  char name[48];
  memset(p, 0, sizeof *p);
  snprintf(name, sizeof name, "%s: y", what);
  const bool y16 = y16_ok && y && (y->type == MEMRA_TYPE_F16 || y->type == MEMRA_TYPE_BF16);
  const uint64_t yesz = y16 ? 2 : 4;
  if ((st = memra_cu_check_tensor(be, y, name, y16 ? y->type : MEMRA_TYPE_F32)) != MEMRA_OK)
    return st;
  snprintf(name, sizeof name, "%s: x", what);
  if ((st = memra_cu_check_tensor(be, x, name, -1)) != MEMRA_OK) return st;
  snprintf(name, sizeof name, "%s: w", what);
  if ((st = memra_cu_check_tensor(be, w, name, -1)) != MEMRA_OK) return st;
  if (!memra_cu_type_supported(w->type))
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: no CUDA kernel for %s weights", what,
                         memra_type_info(w->type).name);
  const int bf = w->type == MEMRA_TYPE_BF16;
  const int32_t op_type = bf ? MEMRA_TYPE_BF16 : MEMRA_TYPE_F16;
  if (x->type != MEMRA_TYPE_F32 && (x->type != op_type || w->type == MEMRA_TYPE_F32))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: x is %s, expected F32%s%s", what,
                         memra_type_info(x->type).name, w->type == MEMRA_TYPE_F32 ? "" : " or ",
                         w->type == MEMRA_TYPE_F32 ? "" : memra_type_info(op_type).name);
  if (w->type == MEMRA_TYPE_F32) {
    p->to_matmul = true;
    return MEMRA_OK;
  }
  const int64_t M = x->ne1, K = x->ne0, N = w->ne1;
  if (w->ne0 != K || y->ne1 != M || y->ne0 != N)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: y [%lld, %lld] = x [%lld, %lld] . w [%lld, %lld]^T: shapes "
                         "disagree",
                         what, (long long)y->ne1, (long long)y->ne0, (long long)M, (long long)K,
                         (long long)N, (long long)w->ne0);
  const float *bp = NULL;
  if (memra_cu_present(bias)) {
    snprintf(name, sizeof name, "%s: bias", what);
    if ((st = memra_cu_check_tensor(be, bias, name, MEMRA_TYPE_F32)) != MEMRA_OK) return st;
    if (bias->ne0 != N)
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: bias has %lld elements, expected %lld", what,
                           (long long)bias->ne0, (long long)N);
    bp = (const float *)memra_cu_ptr(bias);
    if ((uintptr_t)bp % 4)
      return memra_cu_errf(be, MEMRA_E_INVALID, "%s: bias must be 4-byte aligned", what);
  }
  if (y->nb1 % yesz)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y row stride is not whole elements", what);
  if (memra_cu_overlap(y, x) || memra_cu_overlap(y, w))
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: y overlaps an input (x or w); it cannot be computed in place", what);
  p->M = M;
  if (M == 0) return MEMRA_OK;
  if (M > 0x7fffffff || N > 0x7fffffff || K > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "%s: [%lld, %lld] x [%lld, %lld]^T too large",
                         what, (long long)M, (long long)K, (long long)N, (long long)K);
  float *yp = y16 ? NULL : (float *)memra_cu_ptr(y);
  p->y16 = y16 ? (uint8_t *)memra_cu_ptr(y) : NULL;
  const uint8_t *xp = (const uint8_t *)memra_cu_ptr(x);
  const uint8_t *wp = (const uint8_t *)memra_cu_ptr(w);
  if ((uintptr_t)memra_cu_ptr(y) % yesz)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: y must be %llu-byte aligned", what,
                         (unsigned long long)yesz);
  const uint64_t walign = memra_cu_align_of(wp, w->nb1 * (N > 1));
  if (walign < memra_cu_type_align(w->type))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %s weights must be %llu-byte aligned", what,
                         memra_type_info(w->type).name,
                         (unsigned long long)memra_cu_type_align(w->type));
  const bool a_direct = x->type != MEMRA_TYPE_F32;
  if (a_direct && (memra_cu_align_of(xp, x->nb1 * (M > 1)) < 16))
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "%s: %s x needs 16-byte aligned rows (address and stride)", what,
                         memra_type_info(x->type).name);
  if (!a_direct && (uintptr_t)xp % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: x must be 4-byte aligned", what);
  if (!a_direct && x->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: x row stride is not whole floats", what);
#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120)
  const bool pad_k = false; /* the copy engine zero-fills a K tail */
#else
  /* mma.sync reads k in 8-element chunks: with a K tail every operand is staged in the
   * workspace with a zero pad (16-bit x and w copied, not used in place) */
  const bool pad_k = K % 8 != 0;
#endif
  p->N = N;
  p->K = K;
  p->lda = a_direct && !pad_k ? (M > 1 ? (int64_t)(x->nb1 / 2) : gemm_round8(K)) : gemm_round8(K);
  p->b_direct = (w->type == MEMRA_TYPE_F16 || w->type == MEMRA_TYPE_BF16) && walign >= 16 && !pad_k;
  p->ldb = p->b_direct ? (N > 1 ? (int64_t)(w->nb1 / 2) : gemm_round8(K)) : gemm_round8(K);
  p->chunk = N;
  if (!p->b_direct) {
    const int64_t fit = (int64_t)(GEMM_CHUNK_BYTES / ((uint64_t)p->ldb * 2)) / 256 * 256;
    p->chunk = fit < 256 ? 256 : fit;
    if (p->chunk > N) p->chunk = N;
  }
  p->bp = bp;
  p->yp = yp;
  p->xp = xp;
  p->wp = wp;
  p->walign = walign;
  p->ynb1 = y->nb1;
  p->xnb1 = x->nb1;
  p->wnb1 = w->nb1;
  p->wtype = w->type;
  p->bf = bf;
  p->a_direct = a_direct && !pad_k;
  p->a_copy16 = a_direct && pad_k;
  return MEMRA_OK;
}

/* Step 1: x (F32) -> A (f16 or bf16) at ws, rows lda apart. */
static void gemm_convert_x(memra_backend *be, const gemm_plan *p, void *ws) {
  if (p->a_copy16) { /* already 16-bit: rows copied, the pad zeroed */
    gemm_copy16_v1_kernel<<<gemm_row_grid(p->lda, p->M), GEMM_THREADS, 0, be->stream>>>(
        (uint16_t *)ws, p->lda, p->xp, p->xnb1, p->M, p->K);
    return;
  }
  const int64_t ldx = (int64_t)(p->xnb1 / 4), M = p->M, K = p->K;
  const int vec = memra_cu_align_of(p->xp, p->xnb1 * (M > 1)) >= 16;
  const int64_t cols = (K + 4 * GEMM_THREADS - 1) / (4 * GEMM_THREADS);
  dim3 grid((unsigned)(cols < 65535 ? cols : 65535), (unsigned)(M < 65535 ? M : 65535));
  if (p->bf)
    gemm_x_v1_kernel<1><<<grid, GEMM_THREADS, 0, be->stream>>>(
        (uint16_t *)ws, p->lda, (const float *)p->xp, ldx, M, K, vec);
  else
    gemm_x_v1_kernel<0><<<grid, GEMM_THREADS, 0, be->stream>>>(
        (uint16_t *)ws, p->lda, (const float *)p->xp, ldx, M, K, vec);
}

static uint64_t gemm_a_bytes(const gemm_plan *p) {
  return p->a_direct ? 0 : ((uint64_t)p->M * p->lda * 2 + 255) / 256 * 256;
}

/* Columns [n0, n0 + nc) of the product as one kernel job, B at b. */
static memra_cu_gemm_job gemm_job(const gemm_plan *p, const void *b, int64_t n0, int64_t nc) {
  memra_cu_gemm_job j;
  j.b = b;
  j.ldb = p->ldb;
  j.c = p->yp ? p->yp + n0 : NULL;
  j.ldc = (int64_t)(p->ynb1 / 4);
  j.bias = p->bp ? p->bp + n0 : NULL;
  j.n = (int)nc;
  return j;
}

/* The architecture's kernel over the jobs of g (gemm.h): on sm_90a one launch for all. */
static cudaError_t gemm_kernel_n(const memra_cu_gemm_group *g, cudaStream_t st, int n_sms) {
#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120) /* sm120a family: mma.sync */
  return memra_cu_gemm_wgmma_n(g, st, n_sms);
#else
  for (int i = 0; i < g->n_jobs; ++i) {
    memra_cu_gemm_args a;
    a.a = g->a;
    a.lda = g->lda;
    a.b = g->job[i].b;
    a.ldb = g->job[i].ldb;
    a.c = g->job[i].c;
    a.ldc = g->job[i].ldc;
    a.bias = g->job[i].bias;
    a.m = g->m;
    a.n = g->job[i].n;
    a.k = (g->k + 7) / 8 * 8; /* a K tail: every operand staged with a zero pad (gemm_plan_make) */
    a.bf16 = g->bf16;
    cudaError_t e = memra_cu_gemm_mma(&a, st, n_sms);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
#endif
}

/* ABI 1.6: the operand type step 1 rounds x to for w_type (F32 weights go to matmul). The
 * environment MEMRA_GEMM_X=f32 (read once) answers F32 for every type, so the core keeps
 * converting x here: an A/B switch for timing and for the bit-identity check. */
int32_t memra_cu_gemm_x_type(memra_backend *be, int32_t w_type) {
  (void)be;
  static int f32_only = -1;
  if (f32_only < 0) {
    const char *e = getenv("MEMRA_GEMM_X");
    f32_only = e && strcmp(e, "f32") == 0;
  }
  if (f32_only || w_type == MEMRA_TYPE_F32 || !memra_cu_type_supported(w_type))
    return MEMRA_TYPE_F32;
  return w_type == MEMRA_TYPE_BF16 ? MEMRA_TYPE_BF16 : MEMRA_TYPE_F16;
}

memra_status memra_cu_gemm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *bias) {
  gemm_plan p;
  memra_status st = gemm_plan_make(be, "gemm", y, x, w, bias, false, &p);
  if (st != MEMRA_OK) return st;
  if (p.to_matmul) return memra_cu_matmul(be, y, x, w, bias);
  if (p.M == 0) return MEMRA_OK;

  /* Workspace: A (unless x is already an operand), then one chunk of B (unless w is). */
  const uint64_t a_bytes = gemm_a_bytes(&p);
  const uint64_t b_bytes = p.b_direct ? 0 : (uint64_t)p.chunk * p.ldb * 2;
  void *ws = NULL;
  if (a_bytes + b_bytes > 0 && (st = memra_cu_workspace(be, a_bytes + b_bytes, &ws)) != MEMRA_OK)
    return st;
  const void *ap = p.a_direct ? (const void *)p.xp : ws;
  if (!p.a_direct) {
    gemm_convert_x(be, &p, ws);
    MEMRA_CU_LAUNCHED();
  }
  void *bws = (uint8_t *)ws + a_bytes;
  for (int64_t n0 = 0; n0 < p.N; n0 += p.chunk) {
    const int64_t nc = p.N - n0 < p.chunk ? p.N - n0 : p.chunk;
    const uint8_t *wc = p.wp + (uint64_t)n0 * p.wnb1;
    if (!p.b_direct && (st = gemm_stage_w(be, bws, p.ldb, p.wtype, wc, p.wnb1, nc, p.K,
                                          p.walign >= 16)) != MEMRA_OK)
      return st;
    memra_cu_gemm_group g = {};
    g.a = ap;
    g.lda = p.lda;
    g.m = (int)p.M;
    g.k = (int)p.K;
    g.bf16 = p.bf;
    g.n_jobs = 1;
    g.job[0] = gemm_job(&p, p.b_direct ? (const void *)wc : bws, n0, nc);
    cudaError_t e = gemm_kernel_n(&g, be->stream, be->n_sms);
    if (e != cudaSuccess) return memra_cu_fail(be, e, "gemm kernel", __FILE__, __LINE__);
  }
  return MEMRA_OK;
}

/* gemm_n (ABI 1.5): y[i] = x . w[i]^T (+ bias[i]) for i < n, each with gemm's bits. x is
 * converted once and, when every decoded weight fits in one chunk and all of them in
 * GEMM_GROUP_BYTES, all products run as one grouped launch (gemm_kernel_n); otherwise one
 * gemm per output. */
memra_status memra_cu_gemm_n(memra_backend *be, int32_t n, const memra_tensor *y,
                             const memra_tensor *x, const memra_tensor *w,
                             const memra_tensor *bias) {
  if (n < 1 || n > MEMRA_CU_GEMM_MAX_JOBS || !y || !w || !x)
    return memra_cu_errf(be, MEMRA_E_INVALID, "gemm_n: %d outputs (1..%d with y and w arrays)",
                         (int)n, (int)MEMRA_CU_GEMM_MAX_JOBS);
  for (int32_t i = 1; i < n; ++i)
    if (w[i].type != w[0].type || w[i].ne0 != w[0].ne0)
      return memra_cu_errf(be, MEMRA_E_INVALID,
                           "gemm_n: w[%d] is %s with K %lld, w[0] %s with K %lld", (int)i,
                           memra_type_info(w[i].type).name, (long long)w[i].ne0,
                           memra_type_info(w[0].type).name, (long long)w[0].ne0);
  gemm_plan p[MEMRA_CU_GEMM_MAX_JOBS];
  const memra_tensor none = {};
  uint64_t b_total = 0;
  bool grouped = true;
  for (int32_t i = 0; i < n; ++i) {
    char what[16];
    snprintf(what, sizeof what, "gemm_n[%d]", (int)i);
    memra_status st =
        gemm_plan_make(be, what, &y[i], x, &w[i], bias ? &bias[i] : &none, false, &p[i]);
    if (st != MEMRA_OK) return st;
    for (int32_t j = 0; j < i; ++j)
      if (memra_cu_overlap(&y[i], &y[j]))
        return memra_cu_errf(be, MEMRA_E_INVALID, "gemm_n: y[%d] overlaps y[%d]", (int)i, (int)j);
    if (p[i].to_matmul || p[i].chunk < p[i].N) grouped = false;
    if (!p[i].b_direct) b_total += ((uint64_t)p[i].N * p[i].ldb * 2 + 255) / 256 * 256;
  }
  if (b_total > GEMM_GROUP_BYTES) grouped = false;
  if (!grouped) { /* F32 weights (matmul), a weight beyond one chunk or a group beyond budget */
    for (int32_t i = 0; i < n; ++i) {
      memra_status st = memra_cu_gemm(be, &y[i], x, &w[i], bias ? &bias[i] : &none);
      if (st != MEMRA_OK) return st;
    }
    return MEMRA_OK;
  }
  if (p[0].M == 0) return MEMRA_OK;
  const uint64_t a_bytes = gemm_a_bytes(&p[0]);
  void *ws = NULL;
  memra_status st;
  if (a_bytes + b_total > 0 && (st = memra_cu_workspace(be, a_bytes + b_total, &ws)) != MEMRA_OK)
    return st;
  if (!p[0].a_direct) {
    gemm_convert_x(be, &p[0], ws);
    MEMRA_CU_LAUNCHED();
  }
  memra_cu_gemm_group g = {};
  g.a = p[0].a_direct ? (const void *)p[0].xp : ws;
  g.lda = p[0].lda;
  g.m = (int)p[0].M;
  g.k = (int)p[0].K;
  g.bf16 = p[0].bf;
  g.n_jobs = (int)n;
  uint8_t *bws = (uint8_t *)ws + a_bytes;
  for (int32_t i = 0; i < n; ++i) {
    const void *b = p[i].wp;
    if (!p[i].b_direct) {
      if ((st = gemm_stage_w(be, bws, p[i].ldb, p[i].wtype, p[i].wp, p[i].wnb1, p[i].N, p[i].K,
                             p[i].walign >= 16)) != MEMRA_OK)
        return st;
      b = bws;
      bws += ((uint64_t)p[i].N * p[i].ldb * 2 + 255) / 256 * 256;
    }
    g.job[i] = gemm_job(&p[i], b, 0, p[i].N);
  }
  cudaError_t e = gemm_kernel_n(&g, be->stream, be->n_sms);
  if (e != cudaSuccess) return memra_cu_fail(be, e, "gemm_n kernel", __FILE__, __LINE__);
  return MEMRA_OK;
}

#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120)
/* gemm_glu (ABI 1.6, sm_90a): y = act(x . w_gate^T) * (x . w_up^T) for prompt rows. x is
 * converted once (or taken as the 16-bit operand), gate and up decoded side by side when
 * quantized (both within GEMM_GROUP_BYTES per launch), and one wgmma launch per chunk of columns
 * computes both products into one accumulator tile (gate rows, then the same up rows) and applies
 * glu in its epilogue: the f32 products are those gemm_n would store (same k order) and the
 * activation is glu's code (device_util.cuh), so y has the bits of gemm_n + glu without the two [M,
 * N] f32 tensors ever reaching memory. */
memra_status memra_cu_gemm_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w_gate, const memra_tensor *w_up, int32_t act) {
  if (act != MEMRA_ACT_SILU && act != MEMRA_ACT_GELU_TANH)
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "gemm_glu: activation %d is neither SILU (0) nor GELU_TANH (1)", act);
  if (!w_gate || !w_up)
    return memra_cu_errf(be, MEMRA_E_INVALID, "gemm_glu: w_gate and w_up are required");
  if (w_up->type != w_gate->type || w_up->ne0 != w_gate->ne0 || w_up->ne1 != w_gate->ne1)
    return memra_cu_errf(
        be, MEMRA_E_INVALID, "gemm_glu: w_up is %s [%lld, %lld], w_gate %s [%lld, %lld]",
        memra_type_info(w_up->type).name, (long long)w_up->ne1, (long long)w_up->ne0,
        memra_type_info(w_gate->type).name, (long long)w_gate->ne1, (long long)w_gate->ne0);
  if (w_gate->type == MEMRA_TYPE_F32)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED,
                         "gemm_glu: F32 weights have no 16-bit operands (use gemm_n and glu)");
  const memra_tensor none = {};
  gemm_plan pg, pu;
  memra_status st;
  if ((st = gemm_plan_make(be, "gemm_glu gate", y, x, w_gate, &none, true, &pg)) != MEMRA_OK ||
      (st = gemm_plan_make(be, "gemm_glu up", y, x, w_up, &none, true, &pu)) != MEMRA_OK)
    return st;
  if (pg.M == 0) return MEMRA_OK;
  /* columns per launch: both weights' decoded rows of a chunk fit one workspace chunk */
  int64_t chunk = pg.N;
  if (!pg.b_direct) {
    const int64_t fit = (int64_t)(GEMM_GROUP_BYTES / (2ull * (uint64_t)pg.ldb * 2)) / 256 * 256;
    chunk = fit < 256 ? 256 : fit;
    if (chunk > pg.N) chunk = pg.N;
  }
  const uint64_t a_bytes = gemm_a_bytes(&pg);
  const uint64_t half = pg.b_direct ? 0 : ((uint64_t)chunk * pg.ldb * 2 + 255) / 256 * 256;
  void *ws = NULL;
  if (a_bytes + 2 * half > 0 && (st = memra_cu_workspace(be, a_bytes + 2 * half, &ws)) != MEMRA_OK)
    return st;
  if (!pg.a_direct) {
    gemm_convert_x(be, &pg, ws);
    MEMRA_CU_LAUNCHED();
  }
  uint8_t *bg = (uint8_t *)ws + a_bytes, *bu = bg + half;
  const int out16 = !pg.y16 ? 0 : y->type == MEMRA_TYPE_BF16 ? 2 : 1;
  const uint64_t yesz = out16 ? 2 : 4;
  for (int64_t n0 = 0; n0 < pg.N; n0 += chunk) {
    const int64_t nc = pg.N - n0 < chunk ? pg.N - n0 : chunk;
    const uint8_t *wg = pg.wp + (uint64_t)n0 * pg.wnb1, *wu = pu.wp + (uint64_t)n0 * pu.wnb1;
    if (!pg.b_direct &&
        ((st = gemm_stage_w(be, bg, pg.ldb, pg.wtype, wg, pg.wnb1, nc, pg.K, pg.walign >= 16)) !=
             MEMRA_OK ||
         (st = gemm_stage_w(be, bu, pu.ldb, pu.wtype, wu, pu.wnb1, nc, pu.K, pu.walign >= 16)) !=
             MEMRA_OK))
      return st;
    memra_cu_gemm_group g = {};
    g.a = pg.a_direct ? (const void *)pg.xp : ws;
    g.lda = pg.lda;
    g.m = (int)pg.M;
    g.k = (int)pg.K;
    g.bf16 = pg.bf;
    g.n_jobs = 2;
    g.job[0] = gemm_job(&pg, pg.b_direct ? (const void *)wg : bg, n0, nc);
    g.job[1] = gemm_job(&pu, pu.b_direct ? (const void *)wu : bu, n0, nc);
    g.glu = 1;
    g.act = act;
    g.out16 = out16;
    g.y16 = out16 ? pg.y16 + (uint64_t)n0 * yesz : NULL;
    g.ldy = out16 ? (int64_t)(y->nb1 / yesz) : 0;
    cudaError_t e = memra_cu_gemm_wgmma_n(&g, be->stream, be->n_sms);
    if (e != cudaSuccess) return memra_cu_fail(be, e, "gemm_glu kernel", __FILE__, __LINE__);
  }
  return MEMRA_OK;
}
#endif

#endif /* MEMRA_CU_HAS_GEMM */
