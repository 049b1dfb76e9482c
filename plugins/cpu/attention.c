/* attention.c — out = softmax(scale * q k^T) v for each row and head, over the row's
 * window of its own sequence, reading K and V from the paged caches.
 *
 * Per (row, head), entirely in float32 and in position order: scores, their max, exp
 * and sum, then the weighted sum of V rows. Nothing depends on which other rows share
 * the batch or on the thread count (batch invariance, determinism).
 * Grouped-query attention: head h reads KV head h / (n_head / n_kv_head). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"
#include "plugins/quant/fp8.h"

typedef struct attn_ctx {
  memra_backend *be;
  const memra_tensor *out, *q, *kc, *vc;
  const memra_batch *b;
  const memra_attn_params *p;
} attn_ctx;

static int32_t window_lo(int32_t pos, int32_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/* The head_dim values of KV head g at slot, as float32 (into tmp for an F16 or FP8
 * cache; both widen exactly). */
static const float *kv_head(const memra_tensor *c, int64_t slot, int g, int hd, float *tmp) {
  const uint8_t *row = cpu_row(c, slot);
  if (c->type == MEMRA_TYPE_F32) return (const float *)(const void *)row + (int64_t)g * hd;
  if (c->type == MEMRA_TYPE_F8_E4M3) {
    for (int i = 0; i < hd; ++i)
      tmp[i] = memra_fp8_e4m3_to_f32(row[(int64_t)g * hd + i]);
    return tmp;
  }
  cpu_f16_to_f32_row((const uint16_t *)(const void *)row + (int64_t)g * hd, tmp, hd);
  return tmp;
}

/* Task t = (row t / n_kv_head, KV head t % n_kv_head) serves the `group` query heads that
 * share the KV head, so each cached K and V row is read (and widened) once per task.
 * Per query head the arithmetic and its order are those of a head alone. */
static void attn_tasks(void *arg, int64_t begin, int64_t end, int tid) {
  const attn_ctx *c = arg;
  const memra_attn_params *p = c->p;
  const int hd = p->head_dim, group = p->n_head / p->n_kv_head;
  for (int64_t t = begin; t < end; ++t) {
    int64_t r = t / p->n_kv_head;
    int g = (int)(t % p->n_kv_head);
    int32_t pos = cpu_i32_at(&c->b->pos, r), seq = cpu_i32_at(&c->b->seq, r);
    int32_t lo = window_lo(pos, p->window), n = pos - lo + 1;
    /* scratch: tmp [hd] | acc [group * hd] | scores [group * n] */
    float *tmp = c->be->scratch[tid], *acc = tmp + hd, *s = acc + (int64_t)group * hd;
    const float *q0 = cpu_row_f32(c->q, r) + (int64_t)g * group * hd;

    for (int32_t j = 0; j < n; ++j) {
      const float *k = kv_head(c->kc, cpu_batch_slot(c->b, seq, lo + j), g, hd, tmp);
      for (int h = 0; h < group; ++h) {
        float x = p->scale * cpu_dot_f32(q0 + (int64_t)h * hd, k, hd);
        if (p->softcap > 0.0f) x = p->softcap * tanhf(x / p->softcap);
        s[(int64_t)h * n + j] = x;
      }
    }
    for (int h = 0; h < group; ++h) { /* softmax numerators, in position order */
      float *sh = s + (int64_t)h * n, mx = -INFINITY;
      for (int32_t j = 0; j < n; ++j)
        if (sh[j] > mx) mx = sh[j];
      for (int32_t j = 0; j < n; ++j)
        sh[j] = expf(sh[j] - mx);
    }
    memset(acc, 0, (size_t)group * (size_t)hd * sizeof(float));
    for (int32_t j = 0; j < n; ++j) {
      const float *v = kv_head(c->vc, cpu_batch_slot(c->b, seq, lo + j), g, hd, tmp);
      for (int h = 0; h < group; ++h) {
        float w = s[(int64_t)h * n + j], *a = acc + (int64_t)h * hd;
        for (int i = 0; i < hd; ++i)
          a[i] += w * v[i];
      }
    }
    /* q is fully read above: out may alias it. */
    float *o0 = cpu_row_f32(c->out, r) + (int64_t)g * group * hd;
    for (int h = 0; h < group; ++h) {
      const float *sh = s + (int64_t)h * n;
      float sum = 0.0f;
      for (int32_t j = 0; j < n; ++j)
        sum += sh[j];
      float inv = 1.0f / sum, *a = acc + (int64_t)h * hd, *o = o0 + (int64_t)h * hd;
      for (int i = 0; i < hd; ++i)
        o[i] = a[i] * inv;
    }
  }
}

memra_status cpu_attention(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                           const memra_tensor *k_cache, const memra_tensor *v_cache,
                           const memra_batch *batch, const memra_attn_params *p) {
  if (!p) return cpu_fail(be, MEMRA_E_INVALID, "attention: params are absent");
  if (p->n_head < 1 || p->n_kv_head < 1 || p->head_dim < 1 || p->n_head % p->n_kv_head != 0 ||
      p->window < 0)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "attention: n_head %d, n_kv_head %d, head_dim %d, window %d (need n_head a "
                    "multiple of n_kv_head, all >= 1, window >= 0)",
                    p->n_head, p->n_kv_head, p->head_dim, p->window);
  if (!isfinite(p->scale) || !isfinite(p->softcap) || p->softcap < 0.0f)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "attention: scale %g must be finite and softcap %g finite >= 0", p->scale,
                    p->softcap);
  int64_t qw = (int64_t)p->n_head * p->head_dim, kvw = (int64_t)p->n_kv_head * p->head_dim;
  memra_status st;
  if ((st = cpu_batch_check(be, "attention", batch)) ||
      (st = cpu_check_shape(be, "attention", "q", q, CPU_F32, qw, batch->n_rows)) ||
      (st = cpu_check_shape(be, "attention", "out", out, CPU_F32, qw, batch->n_rows)) ||
      (st = cpu_check_shape(be, "attention", "k_cache", k_cache, CPU_KV, kvw, -1)) ||
      (st = cpu_check_shape(be, "attention", "v_cache", v_cache, CPU_KV, kvw, -1)))
    return st;
  /* Every slot a row reads must lie in both caches. */
  int64_t slots = k_cache->ne1 < v_cache->ne1 ? k_cache->ne1 : v_cache->ne1;
  int32_t longest = 0;
  for (int32_t r = 0; r < batch->n_rows; ++r) {
    int32_t pos = cpu_i32_at(&batch->pos, r), seq = cpu_i32_at(&batch->seq, r);
    int32_t lo = window_lo(pos, p->window);
    if (pos - lo + 1 > longest) longest = pos - lo + 1;
    for (int32_t j = lo; j <= pos; ++j) {
      int64_t slot = cpu_batch_slot(batch, seq, j);
      if (slot < 0 || slot >= slots)
        return cpu_fail(be, MEMRA_E_INVALID,
                        "attention: row %d (sequence %d) position %d maps to slot %" PRId64
                        ", caches have %" PRId64,
                        r, seq, j, slot, slots);
    }
  }
  size_t group = (size_t)(p->n_head / p->n_kv_head);
  if ((st = cpu_scratch_reserve(be, "attention",
                                (1 + group) * (size_t)p->head_dim + group * (size_t)longest)))
    return st;
  attn_ctx c = {be, out, q, k_cache, v_cache, batch, p};
  cpu_run(be, (int64_t)batch->n_rows * p->n_kv_head,
          cpu_mul_sat(4 * (int64_t)longest * (int64_t)group, p->head_dim), attn_tasks, &c);
  return MEMRA_OK;
}
