/* elementwise.cu — glu (act(gate) * up), add, scale and add_i32: row-strided F32 (I32)
 * maps. Oracle: plugins/cpu glu/add/scale/add_i32.
 * SILU is x / (1 + e^-x); GELU_TANH is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * both with the accurate expf/tanhf, never the fast intrinsics.
 * add, scale, add_i32: ver 1, one thread per element.                 <- in the vtable
 * glu: ver 2, 4 columns per thread, rows over the grid; writes f32 or (ABI 1.6) the
 *   16-bit operand of the next prompt-row gemm.                        <- in the vtable */
#include <stdio.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/device_util.cuh"
#include "plugins/cuda/launch.cuh"

enum { EW_OP_ADD = 0, EW_OP_SCALE = 1, EW_OP_SILU = 2, EW_OP_GELU_TANH = 3 };
enum { EW_OUT_F32 = 0, EW_OUT_F16 = 1, EW_OUT_BF16 = 2 };

template <int OP>
__global__ void elementwise_v1_kernel(float *y, int64_t y_ld, const float *a, int64_t a_ld,
                                      const float *b, int64_t b_ld, float s, int64_t ne0,
                                      int64_t n) {
  memra_pdl_enter_early();
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / ne0, c = t % ne0;
    const float x = a[r * a_ld + c];
    float v;
    if (OP == EW_OP_ADD)
      v = x + b[r * b_ld + c];
    else
      v = s * x;
    y[r * y_ld + c] = v;
  }
}

/* The activation of one gate element (device_util.cuh: shared with the gemm epilogue). */
template <int OP> __device__ __forceinline__ float ew_act(float x) {
  return OP == EW_OP_SILU ? memra_act_silu(x) : memra_act_gelu_tanh(x);
}

/* Stores 4 results at y + c (f32, or a 16-bit gemm operand by the memra_op16 rule). */
template <int OUT> __device__ __forceinline__ void ew_store4(void *y, int64_t c, float4 v) {
  if (OUT == EW_OUT_F32) {
    *(float4 *)((float *)y + c) = v;
  } else {
    const int bf = OUT == EW_OUT_BF16;
    uint2 o;
    o.x = (bf ? memra_op16<1>(v.x) : memra_op16<0>(v.x)) |
          ((uint32_t)(bf ? memra_op16<1>(v.y) : memra_op16<0>(v.y)) << 16);
    o.y = (bf ? memra_op16<1>(v.z) : memra_op16<0>(v.z)) |
          ((uint32_t)(bf ? memra_op16<1>(v.w) : memra_op16<0>(v.w)) << 16);
    *(uint2 *)((uint16_t *)y + c) = o;
  }
}
template <int OUT> __device__ __forceinline__ void ew_store1(void *y, int64_t c, float v) {
  if (OUT == EW_OUT_F32)
    ((float *)y)[c] = v;
  else
    ((uint16_t *)y)[c] = OUT == EW_OUT_BF16 ? memra_op16<1>(v) : memra_op16<0>(v);
}

/* glu v2: rows over blockIdx.y, 4 columns per thread (float4 loads when every row is
 * 16-byte aligned), no per-element 64-bit division (v1's t / ne0 was as costly as the
 * memory traffic of a prompt-row glu); y is F32 or a 16-bit gemm operand (ABI 1.6). The
 * arithmetic per element is v1's. */
template <int OP, int OUT, bool VEC>
__global__ void glu_v2_kernel(void *y, int64_t y_ld, const float *g, int64_t g_ld, const float *u,
                              int64_t u_ld, int64_t ne0, int64_t rows) {
  memra_pdl_enter_early();
  const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (c >= ne0) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float *gr = g + r * g_ld, *ur = u + r * u_ld;
    void *yr =
        OUT == EW_OUT_F32 ? (void *)((float *)y + r * y_ld) : (void *)((uint16_t *)y + r * y_ld);
    if (VEC) {
      const float4 a = *(const float4 *)(gr + c), b = *(const float4 *)(ur + c);
      ew_store4<OUT>(yr, c,
                     make_float4(ew_act<OP>(a.x) * b.x, ew_act<OP>(a.y) * b.y,
                                 ew_act<OP>(a.z) * b.z, ew_act<OP>(a.w) * b.w));
    } else {
      for (int64_t i = c; i < c + 4 && i < ne0; ++i)
        ew_store1<OUT>(yr, i, ew_act<OP>(gr[i]) * ur[i]);
    }
  }
}

__global__ void add_i32_v1_kernel(int32_t *v, int64_t ld, int64_t ne0, int64_t n, int32_t delta) {
  memra_pdl_enter_early();
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n;
       t += (int64_t)gridDim.x * blockDim.x)
    v[(t / ne0) * ld + t % ne0] += delta;
}

static unsigned ew_grid(int64_t n) {
  int64_t g = (n + 255) / 256;
  return (unsigned)(g > 65536 ? 65536 : g < 1 ? 1 : g);
}

static memra_status ew_check(memra_backend *be, const char *op, const memra_tensor *y,
                             const memra_tensor *a, const memra_tensor *b) {
  memra_status st;
  char n1[64], n2[64], n3[64];
  snprintf(n1, sizeof n1, "%s: y", op);
  snprintf(n2, sizeof n2, "%s: %s", op, b ? "a" : "x");
  snprintf(n3, sizeof n3, "%s: b", op);
  if ((st = memra_cu_check_tensor(be, y, n1, MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, a, n2, MEMRA_TYPE_F32)) != MEMRA_OK ||
      (st = memra_cu_check_same_shape(be, y, a, n2)) != MEMRA_OK)
    return st;
  if (b && ((st = memra_cu_check_tensor(be, b, n3, MEMRA_TYPE_F32)) != MEMRA_OK ||
            (st = memra_cu_check_same_shape(be, y, b, n3)) != MEMRA_OK))
    return st;
  if (y->nb1 % 4 || a->nb1 % 4 || (b && b->nb1 % 4))
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: row strides are not whole floats", op);
  return MEMRA_OK;
}

template <int OP>
static memra_status ew_run(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                           const memra_tensor *b, float s) {
  const int64_t n = y->ne0 * y->ne1;
  if (n == 0) return MEMRA_OK;
  (void)memra_cu_launch(
      be, elementwise_v1_kernel<OP>, dim3(ew_grid(n)), dim3(256), 0, (float *)memra_cu_ptr(y),
      (int64_t)(y->nb1 / 4), (const float *)memra_cu_ptr(a), (int64_t)(a->nb1 / 4),
      b ? (const float *)memra_cu_ptr(b) : NULL, b ? (int64_t)(b->nb1 / 4) : 0, s, y->ne0, n);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

template <int OP, int OUT>
static void glu_launch(memra_backend *be, const memra_tensor *y, const memra_tensor *g,
                       const memra_tensor *u, bool vec) {
  const int64_t ne0 = y->ne0, rows = y->ne1, esz = OUT == EW_OUT_F32 ? 4 : 2;
  const int64_t gx = (ne0 + 4 * 256 - 1) / (4 * 256);
  const dim3 grid((unsigned)gx, (unsigned)(rows < 65535 ? rows : 65535));
  void *yp = memra_cu_ptr(y);
  const float *gp = (const float *)memra_cu_ptr(g), *up = (const float *)memra_cu_ptr(u);
  const int64_t yl = (int64_t)(y->nb1 / esz), gl = (int64_t)(g->nb1 / 4),
                ul = (int64_t)(u->nb1 / 4);
  if (vec)
    (void)memra_cu_launch(be, glu_v2_kernel<OP, OUT, true>, grid, dim3(256), 0, yp, yl, gp, gl, up,
                          ul, ne0, rows);
  else
    (void)memra_cu_launch(be, glu_v2_kernel<OP, OUT, false>, grid, dim3(256), 0, yp, yl, gp, gl, up,
                          ul, ne0, rows);
}

template <int OP>
static memra_status glu_run(memra_backend *be, const memra_tensor *y, const memra_tensor *g,
                            const memra_tensor *u) {
  if (y->ne0 * y->ne1 == 0) return MEMRA_OK;
  /* float4 loads and 16- (f32) or 8-byte (16-bit) stores when every row allows them; the
   * choice depends on the tensors alone, so a row takes the same path in any batch. */
  const uint64_t yal = y->type == MEMRA_TYPE_F32 ? 16 : 8;
  const bool vec = y->ne0 % 4 == 0 &&
                   memra_cu_align_of(memra_cu_ptr(y), y->nb1 * (y->ne1 > 1)) >= yal &&
                   memra_cu_align_of(memra_cu_ptr(g), g->nb1 * (g->ne1 > 1)) >= 16 &&
                   memra_cu_align_of(memra_cu_ptr(u), u->nb1 * (u->ne1 > 1)) >= 16;
  if (y->type == MEMRA_TYPE_F16)
    glu_launch<OP, EW_OUT_F16>(be, y, g, u, vec);
  else if (y->type == MEMRA_TYPE_BF16)
    glu_launch<OP, EW_OUT_BF16>(be, y, g, u, vec);
  else
    glu_launch<OP, EW_OUT_F32>(be, y, g, u, vec);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

memra_status memra_cu_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *gate,
                          const memra_tensor *up, int32_t act) {
  memra_status st;
  if (y && (y->type == MEMRA_TYPE_F16 || y->type == MEMRA_TYPE_BF16)) { /* ABI 1.6 operand */
    if ((st = memra_cu_check_tensor(be, y, "glu: y", y->type)) != MEMRA_OK ||
        (st = memra_cu_check_tensor(be, gate, "glu: a", MEMRA_TYPE_F32)) != MEMRA_OK ||
        (st = memra_cu_check_tensor(be, up, "glu: b", MEMRA_TYPE_F32)) != MEMRA_OK ||
        (st = memra_cu_check_same_shape(be, y, gate, "glu: a")) != MEMRA_OK ||
        (st = memra_cu_check_same_shape(be, y, up, "glu: b")) != MEMRA_OK)
      return st;
    if (y->nb1 % 2 || gate->nb1 % 4 || up->nb1 % 4)
      return memra_cu_errf(be, MEMRA_E_INVALID, "glu: row strides are not whole elements");
    if (memra_cu_overlap(y, gate) || memra_cu_overlap(y, up))
      return memra_cu_errf(be, MEMRA_E_INVALID, "glu: a %s y must not overlap gate or up",
                           memra_type_info(y->type).name);
  } else if ((st = ew_check(be, "glu", y, gate, up)) != MEMRA_OK) {
    return st;
  }
  if (act == MEMRA_ACT_SILU) return glu_run<EW_OP_SILU>(be, y, gate, up);
  if (act == MEMRA_ACT_GELU_TANH) return glu_run<EW_OP_GELU_TANH>(be, y, gate, up);
  return memra_cu_errf(be, MEMRA_E_INVALID,
                       "glu: activation %d is neither SILU (0) nor GELU_TANH (1)", act);
}

memra_status memra_cu_add(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                          const memra_tensor *b) {
  memra_status st = ew_check(be, "add", y, a, b);
  return st != MEMRA_OK ? st : ew_run<EW_OP_ADD>(be, y, a, b, 0.f);
}

memra_status memra_cu_scale(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                            float s) {
  memra_status st = ew_check(be, "scale", y, x, NULL);
  return st != MEMRA_OK ? st : ew_run<EW_OP_SCALE>(be, y, x, NULL, s);
}

memra_status memra_cu_add_i32(memra_backend *be, const memra_tensor *v, int32_t delta) {
  memra_status st = memra_cu_check_tensor(be, v, "add_i32: v", MEMRA_TYPE_I32);
  if (st != MEMRA_OK) return st;
  if (v->nb1 % 4) return memra_cu_errf(be, MEMRA_E_INVALID, "add_i32: stride not whole ints");
  const int64_t n = v->ne0 * v->ne1;
  if (n == 0) return MEMRA_OK;
  (void)memra_cu_launch(be, add_i32_v1_kernel, dim3(ew_grid(n)), dim3(256), 0,
                        (int32_t *)memra_cu_ptr(v), (int64_t)(v->nb1 / 4), v->ne0, n, delta);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
