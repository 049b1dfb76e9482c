/* sample.cu — one token per logits row from temperature, top-k, top-p and min-p, with the
 * per-row splitmix64 state in device memory advanced by the kernel (so a captured graph
 * draws fresh numbers on every replay). Oracle: plugins/cpu/sample.c; the definition
 * is in memra_plugin.h (the `sample` slot). Not used by the product unless asked for
 * (memra --device-sampling) until a device run has checked it against the oracle.
 *
 * ver 1: one block of 1024 threads per row, no sort and no workspace. Every filter keeps
 *   a prefix of the order (p desc, id asc), and a prefix is a cut (t, j): token i is in
 *   it iff p_i > t, or p_i == t and i <= j. A cut holding a given count or mass is found
 *   by bisection on the bits of t (p is in [0, 1], so its bits order like its values)
 *   and, when several tokens tie at t, by bisection on j; each probe is one fixed-order
 *   block reduction over the row, recomputing p_i = expf(x_i / T - max) on the fly.
 *   About 30-50 passes per filter: O(100 n) work per row, far from the roofline but
 *   exact in its definition; a radix-select kernel is later work. The block reductions
 *   have a fixed order, so a row's token is bit-reproducible eagerly and in a graph.
 *   CPU agreement: the CPU sums masses in the sorted order, this kernel in its reduction
 *   order; the two differ only in the last bits, so a token differs only when u * S (or
 *   a top-p target) falls within that rounding of a CDF boundary. */
#include <math.h>
#include <stdint.h>

/* MEMRA_SMP_HOST_EMULATION: tests/sampling compiles the kernel as single-threaded host
 * C++ (one thread, one warp) to check the algorithm against the CPU oracle. */
#ifndef MEMRA_SMP_HOST_EMULATION
#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/launch.cuh"
#define MEMRA_SMP_THREADS 1024
#endif

enum { SMP_THREADS = MEMRA_SMP_THREADS, SMP_WARPS = (SMP_THREADS + 31) / 32 };
static const uint32_t SMP_ONE_BITS = 0x3f800000u; /* 1.0f: the largest p */

__device__ __forceinline__ uint64_t smp_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A prefix of the order: i is in it iff p > t, or p == t and i <= j. */
struct smp_cut {
  float t;
  int64_t j;
  __device__ bool has(float p, int64_t i) const { return p > t || (p == t && i <= j); }
};

/* The kept set: the intersection of the top-k and top-p cuts and the min-p floor (the
 * first token of the order, first1, always stays). */
struct smp_sel {
  smp_cut k, p;
  float min_p;
  int64_t first1;
  __device__ bool has(float pv, int64_t i) const {
    return k.has(pv, i) && p.has(pv, i) && (pv >= min_p || i == first1);
  }
};

struct smp_row {
  const float *x;
  int64_t n;
  float temp, m;
  /* p_i, exactly as the CPU: z = x / T (NaN -> -inf), 1 at the maximum, else expf(z - m). */
  __device__ float p(int64_t i) const {
    float z = x[i] / temp;
    if (z != z) z = -INFINITY;
    return z == m ? 1.0f : expf(z - m);
  }
};

/* Fixed-order block sum of (a, b); every thread gets the result. */
__device__ void smp_sum2(double &a, double &b, double (*sh)[2]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); /* sh is reused by consecutive calls */
  if (lane == 0) {
    sh[warp][0] = a;
    sh[warp][1] = b;
  }
  __syncthreads();
  a = 0;
  b = 0;
  for (int w = 0; w < SMP_WARPS; ++w) { /* every thread, same order: same bits */
    a += sh[w][0];
    b += sh[w][1];
  }
}

enum smp_kind { SMP_GE = 0, SMP_GT = 1, SMP_TIE = 2 };

/* (mass, count) of the tokens of sel with p >= v (GE), p > v (GT), or p == v and
 * i <= j (TIE). */
__device__ void smp_measure(const smp_row &row, const smp_sel &sel, int kind, float v, int64_t j,
                            double &mass, double &count, double (*sh)[2]) {
  mass = 0;
  count = 0;
  for (int64_t i = threadIdx.x; i < row.n; i += SMP_THREADS) {
    const float p = row.p(i);
    if (!sel.has(p, i)) continue;
    const bool in = kind == SMP_GE ? p >= v : kind == SMP_GT ? p > v : (p == v && i <= j);
    if (in) {
      mass += p;
      count += 1;
    }
  }
  smp_sum2(mass, count, sh);
}

enum smp_goal { SMP_COUNT_GE = 0, SMP_MASS_GE = 1, SMP_MASS_GT = 2 };

__device__ __forceinline__ bool smp_ok(int goal, double mass, double count, double target) {
  return goal == SMP_COUNT_GE  ? count >= target
         : goal == SMP_MASS_GE ? mass >= target
                               : mass > target;
}

/* The shortest non-empty prefix of sel's order whose count or mass reaches target. */
__device__ smp_cut smp_find(const smp_row &row, const smp_sel &sel, int goal, double target,
                            double (*sh)[2]) {
  double mass, count;
  /* Largest t (as bits) whose {p >= t} reaches the goal: lo reaches it, hi does not. */
  uint32_t lo = 0, hi = SMP_ONE_BITS + 1;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    smp_measure(row, sel, SMP_GE, __uint_as_float(mid), 0, mass, count, sh);
    if (smp_ok(goal, mass, count, target))
      lo = mid;
    else
      hi = mid;
  }
  const float t = __uint_as_float(lo);
  double gm, gc, tm, tc;
  smp_measure(row, sel, SMP_GT, t, 0, gm, gc, sh);
  smp_measure(row, sel, SMP_TIE, t, row.n - 1, tm, tc, sh);
  smp_cut cut = {t, row.n - 1};
  if (tc <= 1) return cut; /* one token at t: nothing to split */
  /* Smallest j whose prefix (p > t, then ties up to j, at least one) reaches the goal. */
  int64_t jlo = -1, jhi = row.n - 1;
  while (jhi - jlo > 1) {
    const int64_t mid = jlo + (jhi - jlo) / 2;
    smp_measure(row, sel, SMP_TIE, t, mid, tm, tc, sh);
    if (tc >= 1 && smp_ok(goal, gm + (double)t * tc, gc + tc, target))
      jhi = mid;
    else
      jlo = mid;
  }
  cut.j = jhi;
  return cut;
}

__global__ void __launch_bounds__(SMP_THREADS)
    sample_v1_kernel(int32_t *ids, uint64_t *rng, const float *logits, int64_t ld, int64_t n,
                     memra_sample_params sp) {
  __shared__ double sh[SMP_WARPS][2];
  __shared__ float shf[SMP_WARPS];
  __shared__ int64_t shi[SMP_WARPS];
#ifndef MEMRA_SMP_HOST_EMULATION
  memra_pdl_enter();
#endif
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float *x = logits + r * ld;

  /* Block argmax of a value per token (lowest index on ties, NaN never wins). */
  auto argmax = [&](bool of_z, float temp) -> int64_t {
    float bv = -INFINITY;
    int64_t bi = INT64_MAX;
    for (int64_t i = threadIdx.x; i < n; i += SMP_THREADS) {
      float v = of_z ? x[i] / temp : x[i];
      if (v != v) v = of_z ? -INFINITY : v;
      if (v > bv || (v == bv && i < bi)) {
        bv = v;
        bi = i;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) {
        bv = ov;
        bi = oi;
      }
    }
    __syncthreads();
    if (lane == 0) {
      shf[warp] = bv;
      shi[warp] = bi;
    }
    __syncthreads();
    bv = -INFINITY;
    bi = INT64_MAX;
    for (int w = 0; w < SMP_WARPS; ++w)
      if (shf[w] > bv || (shf[w] == bv && shi[w] < bi)) {
        bv = shf[w];
        bi = shi[w];
      }
    return bi;
  };

  if (!(sp.temperature > 0.0f)) {
    const int64_t b = argmax(false, 1.0f);
    if (threadIdx.x == 0) ids[r] = b == INT64_MAX ? 0 : (int32_t)b;
    return;
  }
  const uint64_t state = rng[r] + 0x9E3779B97F4A7C15ull;
  const double u = (double)(smp_mix(state) >> 11) * 0x1p-53;

  /* The first token of the order: the lowest index at the maximum z (NaN as -inf, so
   * a row with no finite z has max -inf and its first token is 0). */
  const int64_t b = argmax(true, sp.temperature);
  const int64_t first1 = b == INT64_MAX ? 0 : b;
  smp_row row = {x, n, sp.temperature, 0.0f};
  {
    float z = x[first1] / sp.temperature;
    row.m = z != z ? -INFINITY : z;
  }
  const smp_cut all = {-1.0f, n};
  smp_sel sel = {all, all, -INFINITY, first1};
  if (sp.top_k > 0 && sp.top_k < n) sel.k = smp_find(row, sel, SMP_COUNT_GE, sp.top_k, sh);
  if (sp.top_p < 1.0f) {
    double mass, count;
    smp_measure(row, sel, SMP_GE, 0.0f, 0, mass, count, sh);
    sel.p = smp_find(row, sel, SMP_MASS_GE, (double)sp.top_p * mass, sh);
  }
  if (sp.min_p > 0.0f) sel.min_p = sp.min_p; /* p_max is 1 */
  double mass, count;
  smp_measure(row, sel, SMP_GE, 0.0f, 0, mass, count, sh);
  const smp_cut d = smp_find(row, sel, SMP_MASS_GT, u * mass, sh);
  /* The token is the last of the prefix d: the largest index tied at d.t within d. */
  int64_t last = -1;
  for (int64_t i = threadIdx.x; i < n; i += SMP_THREADS) {
    const float p = row.p(i);
    if (sel.has(p, i) && p == d.t && i <= d.j && i > last) last = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const int64_t oi = __shfl_xor_sync(0xffffffffu, last, o);
    if (oi > last) last = oi;
  }
  __syncthreads();
  if (lane == 0) shi[warp] = last;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 0; w < SMP_WARPS; ++w)
      if (shi[w] > last) last = shi[w];
    ids[r] = (int32_t)(last >= 0 ? last : first1);
    rng[r] = state;
  }
}

#ifndef MEMRA_SMP_HOST_EMULATION
memra_status memra_cu_sample(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits,
                             const memra_tensor *rng, const memra_sample_params *p) {
  if (!p) return memra_cu_errf(be, MEMRA_E_INVALID, "sample: params are absent");
  if (!isfinite(p->temperature) || !isfinite(p->top_p) || !isfinite(p->min_p))
    return memra_cu_errf(be, MEMRA_E_INVALID,
                         "sample: temperature %g, top_p %g and min_p %g must be finite",
                         p->temperature, p->top_p, p->min_p);
  memra_status st = memra_cu_check_tensor(be, logits, "sample: logits", MEMRA_TYPE_F32);
  const int32_t *idp = NULL;
  if (st != MEMRA_OK ||
      (st = memra_cu_check_i32_vec(be, ids, logits->ne1, "sample: ids", &idp)) != MEMRA_OK ||
      (st = memra_cu_check_tensor(be, rng, "sample: rng", MEMRA_TYPE_I64)) != MEMRA_OK)
    return st;
  if (rng->ne0 != logits->ne1 || rng->ne1 != 1)
    return memra_cu_errf(be, MEMRA_E_INVALID, "sample: rng is [%lld, %lld], expected [1, %lld]",
                         (long long)rng->ne1, (long long)rng->ne0, (long long)logits->ne1);
  if (memra_cu_align_of(memra_cu_ptr(rng), 8) < 8)
    return memra_cu_errf(be, MEMRA_E_INVALID, "sample: rng is not 8-byte aligned");
  if (logits->nb1 % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "sample: logits stride not whole floats");
  if (logits->ne0 > INT32_MAX)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "sample: rows of %lld exceed I32 ids",
                         (long long)logits->ne0);
  if (logits->ne1 == 0) return MEMRA_OK;
  if (logits->ne1 > 0x7fffffff)
    return memra_cu_errf(be, MEMRA_E_UNSUPPORTED, "sample: %lld rows", (long long)logits->ne1);
  (void)memra_cu_launch(be, sample_v1_kernel, dim3((unsigned)logits->ne1), dim3(SMP_THREADS), 0,
                        (int32_t *)idp, (uint64_t *)memra_cu_ptr(rng),
                        (const float *)memra_cu_ptr(logits), (int64_t)(logits->nb1 / 4),
                        logits->ne0, *p);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}
#endif /* MEMRA_SMP_HOST_EMULATION */
