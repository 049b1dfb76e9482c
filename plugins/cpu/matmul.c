/* matmul.c — y [M, N] = x [M, K] . w [N, K]^T (+ bias [N]); w keeps its GGUF type.
 *
 * M = 1 (decode): each output is memra_vec_dot of a weight row with x, which
 * dequantizes block by block inside the dot. M > 1 (prefill, batches): a tile of
 * weight rows is dequantized once into per-thread scratch and dotted with every input
 * row by cpu_dot_f32, which sums in memra_vec_dot's order (16 lanes indexed by element,
 * fixed tree), so a row's outputs are bit-identical whatever M is and whoever else is
 * in the batch (tests/cpu/matmul_test: BatchInvariantBits).
 * Threads split the N output columns (the M rows when N is smaller than the pool);
 * every output element is computed whole by one thread. */
#include <inttypes.h>

#include "plugins/cpu/cpu_backend.h"
#include "plugins/quant/quant.h"

enum { MM_TILE_N = 8 }; /* weight rows dequantized together: x rows stay hot in L1 */

typedef struct mm_ctx {
  memra_backend *be;
  const memra_tensor *y, *x, *w;
  const float *bias; /* NULL: none */
  bool split_m;      /* tasks index rows of x instead of rows of w */
} mm_ctx;

/* Outputs y[m0..m1) x [n0..n1). */
static void mm_block(const mm_ctx *c, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int tid) {
  int64_t k = c->x->ne0;
  int32_t type = c->w->type;
  if (m1 - m0 == 1) {
    const float *x = cpu_row_f32(c->x, m0);
    float *y = cpu_row_f32(c->y, m0);
    for (int64_t n = n0; n < n1; ++n) {
      float v = memra_vec_dot(type, cpu_row(c->w, n), x, k);
      y[n] = c->bias ? v + c->bias[n] : v;
    }
    return;
  }
  float *deq = c->be->scratch[tid];
  for (int64_t nt = n0; nt < n1; nt += MM_TILE_N) {
    int64_t tn = n1 - nt < MM_TILE_N ? n1 - nt : MM_TILE_N;
    for (int64_t j = 0; j < tn; ++j)
      memra_dequant_row(type, cpu_row(c->w, nt + j), deq + j * k, k);
    for (int64_t m = m0; m < m1; ++m) {
      const float *x = cpu_row_f32(c->x, m);
      float *y = cpu_row_f32(c->y, m);
      for (int64_t j = 0; j < tn; ++j) {
        float v = cpu_dot_f32(deq + j * k, x, k); /* = memra_vec_dot order */
        y[nt + j] = c->bias ? v + c->bias[nt + j] : v;
      }
    }
  }
}

static void mm_task(void *p, int64_t begin, int64_t end, int tid) {
  const mm_ctx *c = p;
  if (c->split_m)
    mm_block(c, begin, end, 0, c->w->ne1, tid);
  else
    mm_block(c, 0, c->x->ne1, begin, end, tid);
}

memra_status cpu_matmul(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                        const memra_tensor *w, const memra_tensor *bias) {
  memra_status st;
  if ((st = cpu_check(be, "matmul", "w", w, 0))) return st;
  if (!memra_quant_supported(w->type))
    return cpu_fail(be, MEMRA_E_UNSUPPORTED, "matmul: weight type %s has no CPU dot product",
                    memra_type_info(w->type).name);
  if ((st = cpu_check_shape(be, "matmul", "x", x, CPU_F32, w->ne0, -1)) ||
      (st = cpu_check_shape(be, "matmul", "y", y, CPU_F32, w->ne1, x->ne1)))
    return st;
  if (cpu_present(bias) && (st = cpu_check_shape(be, "matmul", "bias", bias, CPU_F32, w->ne1, 1)))
    return st;
  if (cpu_overlap(y, x) || cpu_overlap(y, w))
    return cpu_fail(be, MEMRA_E_INVALID,
                    "matmul: y overlaps an input (x or w); it cannot be "
                    "computed in place");
  int64_t m = x->ne1, n = w->ne1, k = w->ne0;
  if (m == 0) return MEMRA_OK;
  mm_ctx c = {be, y, x, w, cpu_present(bias) ? cpu_row_f32(bias, 0) : NULL, false};
  if (m > 1) {
    if ((uint64_t)k > SIZE_MAX / MM_TILE_N / sizeof(float))
      return cpu_fail(be, MEMRA_E_OOM, "matmul: K %" PRId64 " is too large", k);
    if ((st = cpu_scratch_reserve(be, "matmul", (size_t)MM_TILE_N * (size_t)k))) return st;
    c.split_m = n < be->n_threads && m > n;
  }
  cpu_run(be, c.split_m ? m : n, cpu_mul_sat((c.split_m ? n : m) * 2, k), mm_task, &c);
  return MEMRA_OK;
}

/* The oracle of the grouped slots (matmul_n, gemm_n: op names the messages): matmul for each
 * output, after checking the group's shared facts (count, type and K of every weight, no two
 * outputs overlapping), so a fused plugin is compared with exactly what separate calls give.
 * This plugin has no gemm (the core gives prompt rows to matmul), so gemm_n's oracle is the
 * same. */
static memra_status matmul_group(memra_backend *be, const char *op, int32_t n,
                                 const memra_tensor *y, const memra_tensor *x,
                                 const memra_tensor *w, const memra_tensor *bias) {
  if (n < 1 || n > 4 || !y || !w || !x)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: %d outputs (1..4 with y and w arrays)", op, n);
  for (int32_t i = 1; i < n; ++i)
    if (w[i].type != w[0].type || w[i].ne0 != w[0].ne0)
      return cpu_fail(
          be, MEMRA_E_INVALID, "%s: w[%d] is %s with K %" PRId64 ", w[0] %s with K %" PRId64, op, i,
          memra_type_info(w[i].type).name, w[i].ne0, memra_type_info(w[0].type).name, w[0].ne0);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < i; ++j)
      if (cpu_overlap(&y[i], &y[j]))
        return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] overlaps y[%d]", op, i, j);
  for (int32_t i = 0; i < n; ++i) {
    memra_status st = cpu_matmul(be, &y[i], x, &w[i], bias ? &bias[i] : NULL);
    if (st) return st;
  }
  return MEMRA_OK;
}

memra_status cpu_matmul_n(memra_backend *be, int32_t n, const memra_tensor *y,
                          const memra_tensor *x, const memra_tensor *w, const memra_tensor *bias) {
  return matmul_group(be, "matmul_n", n, y, x, w, bias);
}

memra_status cpu_gemm_n(memra_backend *be, int32_t n, const memra_tensor *y, const memra_tensor *x,
                        const memra_tensor *w, const memra_tensor *bias) {
  return matmul_group(be, "gemm_n", n, y, x, w, bias);
}

/* ABI 1.16 matmul_n_rope_kv: the composition it stands for, matmul_n of the first n of q, k, v
 * (n == 2: v was written before the call), then rope_kv_store of the three (rope_kv.c). Refused
 * before anything is written: a bad count, an output overlapping what the projections read
 * (x, w) or what the store writes (the caches, another output), rows other than the batch's. */
memra_status cpu_matmul_n_rope_kv(memra_backend *be, int32_t n, const memra_tensor *y,
                                  const memra_tensor *x, const memra_tensor *w,
                                  const memra_tensor *bias, const memra_tensor *k_cache,
                                  const memra_tensor *v_cache, const memra_batch *batch,
                                  const memra_rope_params *p) {
  static const char op[] = "matmul_n_rope_kv";
  if (!y || !x || !w || !k_cache || !v_cache || !batch || !p)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: y, x, w, k_cache, v_cache, batch and params are required", op);
  if (n != 2 && n != 3)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %d outputs computed (2: q, k with v given; 3: q, k, v)", op, n);
  static const char *const names[3] = {"q", "k", "v"};
  for (int32_t i = 0; i < 3; ++i) {
    if (cpu_overlap(&y[i], x))
      return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] (%s) overlaps x", op, i, names[i]);
    for (int32_t j = 0; j < n; ++j)
      if (cpu_overlap(&y[i], &w[j]))
        return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] (%s) overlaps w[%d]", op, i, names[i], j);
    for (int32_t j = 0; j < i; ++j)
      if (cpu_overlap(&y[i], &y[j]))
        return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] (%s) overlaps y[%d]", op, i, names[i], j);
    if (cpu_overlap(&y[i], k_cache) || cpu_overlap(&y[i], v_cache))
      return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] (%s) overlaps a cache", op, i, names[i]);
    if (y[i].ne1 != batch->n_rows)
      return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] (%s) has %" PRId64 " rows, batch %d", op, i,
                      names[i], y[i].ne1, batch->n_rows);
  }
  const memra_status st = matmul_group(be, op, n, y, x, w, bias);
  return st ? st : cpu_rope_kv_store(be, &y[0], &y[1], &y[2], k_cache, v_cache, batch, p);
}

/* ABI 1.12 ffn_glu: the composition it stands for, gate into h and up into u, glu in place in
 * h, then down; u may not share memory with h or y (the plugin would read what it wrote). */
memra_status cpu_ffn_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *h,
                         const memra_tensor *u, const memra_tensor *x, const memra_tensor *w_gate,
                         const memra_tensor *w_up, const memra_tensor *w_down, int32_t act) {
  if (!y || !h || !u || !x || !w_gate || !w_up || !w_down)
    return cpu_fail(be, MEMRA_E_INVALID, "ffn_glu: a tensor argument is NULL");
  if (cpu_overlap(u, h) || cpu_overlap(u, y))
    return cpu_fail(be, MEMRA_E_INVALID, "ffn_glu: u overlaps h or y");
  memra_status st;
  const memra_tensor ys[2] = {*h, *u}, ws[2] = {*w_gate, *w_up};
  if ((st = cpu_check_act(be, "ffn_glu", act)) ||
      (st = matmul_group(be, "ffn_glu", 2, ys, x, ws, NULL)) || (st = cpu_glu(be, h, h, u, act)))
    return st;
  return cpu_matmul(be, y, h, w_down, NULL);
}

/* ABI 1.14 rmsnorm_matmul_n / rmsnorm_ffn_glu: the compositions they stand for, the norm into xn
 * first (xn must not overlap what the projections write). */
memra_status cpu_rmsnorm_matmul_n(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                  const memra_tensor *res, const memra_tensor *w_norm, float eps,
                                  int32_t n, const memra_tensor *y, const memra_tensor *w,
                                  const memra_tensor *bias) {
  if (!xn || !x || !res || !w_norm || !y || !w)
    return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_matmul_n: a tensor argument is NULL");
  if (n < 1 || n > 4)
    return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_matmul_n: %d outputs (1..4)", n);
  for (int32_t i = 0; i < n; ++i)
    if (cpu_overlap(&y[i], xn) || cpu_overlap(&y[i], x) || cpu_overlap(&y[i], res))
      return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_matmul_n: y[%d] overlaps xn, x or res", i);
  const memra_status st = cpu_rmsnorm(be, xn, x, res, w_norm, eps);
  return st ? st : matmul_group(be, "rmsnorm_matmul_n", n, y, xn, w, bias);
}

/* ABI 1.23 rmsnorm_matmul_mixed: the same composition with weights of several types (each of x's
 * K): the norm, then matmul for each output (the oracle a mixed launch is compared with). */
memra_status cpu_rmsnorm_matmul_mixed(memra_backend *be, const memra_tensor *xn,
                                      const memra_tensor *x, const memra_tensor *res,
                                      const memra_tensor *w_norm, float eps, int32_t n,
                                      const memra_tensor *y, const memra_tensor *w,
                                      const memra_tensor *bias) {
  static const char op[] = "rmsnorm_matmul_mixed";
  if (!xn || !x || !res || !w_norm || !y || !w)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: a tensor argument is NULL", op);
  if (n < 1 || n > 4) return cpu_fail(be, MEMRA_E_INVALID, "%s: %d outputs (1..4)", op, n);
  for (int32_t i = 0; i < n; ++i) {
    if (w[i].ne0 != w[0].ne0)
      return cpu_fail(be, MEMRA_E_INVALID, "%s: w[%d] has K %" PRId64 ", w[0] %" PRId64, op, i,
                      w[i].ne0, w[0].ne0);
    if (cpu_overlap(&y[i], xn) || cpu_overlap(&y[i], x) || cpu_overlap(&y[i], res))
      return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] overlaps xn, x or res", op, i);
    for (int32_t j = 0; j < i; ++j)
      if (cpu_overlap(&y[i], &y[j]))
        return cpu_fail(be, MEMRA_E_INVALID, "%s: y[%d] overlaps y[%d]", op, i, j);
  }
  memra_status st = cpu_rmsnorm(be, xn, x, res, w_norm, eps);
  for (int32_t i = 0; i < n && st == MEMRA_OK; ++i)
    st = cpu_matmul(be, &y[i], xn, &w[i], bias ? &bias[i] : NULL);
  return st;
}

memra_status cpu_rmsnorm_ffn_glu(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                 const memra_tensor *res, const memra_tensor *w_norm, float eps,
                                 const memra_tensor *y, const memra_tensor *h,
                                 const memra_tensor *u, const memra_tensor *w_gate,
                                 const memra_tensor *w_up, const memra_tensor *w_down,
                                 int32_t act) {
  if (!xn || !x || !res || !w_norm || !y || !h || !u)
    return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_ffn_glu: a tensor argument is NULL");
  if (cpu_overlap(y, xn) || cpu_overlap(y, x))
    return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_ffn_glu: y overlaps xn or x");
  /* y may be res (the layer's residual branch: read by the norm, then the FFN's output) */
  const memra_tensor *hu[2] = {h, u};
  for (int i = 0; i < 2; ++i)
    if (cpu_overlap(hu[i], xn) || cpu_overlap(hu[i], x) || cpu_overlap(hu[i], res))
      return cpu_fail(be, MEMRA_E_INVALID, "rmsnorm_ffn_glu: %s overlaps xn, x or res",
                      i == 0 ? "h" : "u");
  const memra_status st = cpu_rmsnorm(be, xn, x, res, w_norm, eps);
  return st ? st : cpu_ffn_glu(be, y, h, u, xn, w_gate, w_up, w_down, act);
}

/* ABI 1.17 matmul_acc: the composition it stands for, the projection into the scratch t, then
 * the residual add y = y + t. */
memra_status cpu_matmul_acc(memra_backend *be, const memra_tensor *y, const memra_tensor *t,
                            const memra_tensor *x, const memra_tensor *w) {
  if (!y || !t || !x || !w)
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_acc: a tensor argument is NULL");
  if (cpu_overlap(y, t) || cpu_overlap(y, x) || cpu_overlap(t, x))
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_acc: y, t and x overlap");
  if (t->type != MEMRA_TYPE_F32 || y->type != MEMRA_TYPE_F32 || t->ne0 != y->ne0 ||
      t->ne1 != y->ne1)
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_acc: t is not F32 of y's shape");
  const memra_status st = cpu_matmul(be, t, x, w, NULL);
  return st ? st : cpu_add(be, y, y, t);
}

/* ABI 1.15 matmul_rmsnorm: the composition it stands for, the projection into y, then the norm
 * that adds y into x. */
memra_status cpu_matmul_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                                const memra_tensor *w, const memra_tensor *xn,
                                const memra_tensor *x, const memra_tensor *w_norm, float eps) {
  if (!y || !a || !w || !xn || !x || !w_norm)
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_rmsnorm: a tensor argument is NULL");
  if (cpu_overlap(y, a) || cpu_overlap(y, x) || cpu_overlap(y, xn))
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_rmsnorm: y overlaps a, x or xn");
  if (cpu_overlap(xn, a) || cpu_overlap(xn, x))
    return cpu_fail(be, MEMRA_E_INVALID, "matmul_rmsnorm: xn overlaps a or x");
  const memra_status st = cpu_matmul(be, y, a, w, NULL);
  return st ? st : cpu_rmsnorm(be, xn, x, y, w_norm, eps);
}
