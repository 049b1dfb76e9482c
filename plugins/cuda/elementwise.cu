/* elementwise.cu — glu (act(gate) * up), add, scale and add_i32: row-strided F32 (I32)
 * maps, one thread per element. Oracle: plugins/cpu glu/add/scale/add_i32.
 * SILU is x / (1 + e^-x); GELU_TANH is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * both with the accurate expf/tanhf, never the fast intrinsics. ver 1.  <- in the vtable */
#include <stdio.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/launch.cuh"

enum { EW_OP_ADD = 0, EW_OP_SCALE = 1, EW_OP_SILU = 2, EW_OP_GELU_TANH = 3 };

template <int OP>
__global__ void elementwise_v1_kernel(float *y, int64_t y_ld, const float *a, int64_t a_ld,
                                      const float *b, int64_t b_ld, float s, int64_t ne0,
                                      int64_t n) {
  memra_pdl_enter();
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / ne0, c = t % ne0;
    const float x = a[r * a_ld + c];
    float v;
    if (OP == EW_OP_ADD) {
      v = x + b[r * b_ld + c];
    } else if (OP == EW_OP_SCALE) {
      v = s * x;
    } else if (OP == EW_OP_SILU) {
      v = x / (1.f + expf(-x)) * b[r * b_ld + c];
    } else {
      const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
      v = 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x))) * b[r * b_ld + c];
    }
    y[r * y_ld + c] = v;
  }
}

__global__ void add_i32_v1_kernel(int32_t *v, int64_t ld, int64_t ne0, int64_t n, int32_t delta) {
  memra_pdl_enter();
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

memra_status memra_cu_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *gate,
                          const memra_tensor *up, int32_t act) {
  memra_status st = ew_check(be, "glu", y, gate, up);
  if (st != MEMRA_OK) return st;
  if (act == MEMRA_ACT_SILU) return ew_run<EW_OP_SILU>(be, y, gate, up, 0.f);
  if (act == MEMRA_ACT_GELU_TANH) return ew_run<EW_OP_GELU_TANH>(be, y, gate, up, 0.f);
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
