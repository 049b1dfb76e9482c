/* cpu_backend.h — private to the CPU reference plugin: the backend and buffer structs,
 * the thread pool, tensor validation helpers and one declaration per op (one op family
 * per .c file). Everything here is float32 and unfused: this plugin is the oracle. */
#ifndef MEMRA_CPU_BACKEND_H
#define MEMRA_CPU_BACKEND_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/include/memra_plugin.h"
#include "plugins/quant/quant.h"

#define CPU_BUF_MAGIC 0x6d656d72u /* "memr": catches a buffer from another backend */
#define CPU_ALIGN 64
#define CPU_MAX_THREADS 256

/* --- thread pool (threadpool.c) ---------------------------------------------------- */

/* Work item: handles items [begin, end) on worker tid (0 = the calling thread). */
typedef void (*cpu_task_fn)(void *ctx, int64_t begin, int64_t end, int tid);

typedef struct cpu_pool cpu_pool;

/* n_threads >= 1 (the caller counts as one). NULL on failure. */
cpu_pool *cpu_pool_create(int n_threads);
void cpu_pool_destroy(cpu_pool *p);
int cpu_pool_size(const cpu_pool *p);
/* Splits [0, n) into a few contiguous chunks per thread, which the threads (the caller
 * included) claim until none are left; returns when all are done. Which thread runs
 * which chunk never changes a result: every op computes each output element entirely
 * inside one task, in an order fixed by the element alone. A backend is one stream:
 * calls on one backend must not overlap. */
void cpu_pool_run(cpu_pool *p, int64_t n, cpu_task_fn fn, void *ctx);

/* Below this many scalar operations a parallel region costs more than it saves. */
#define CPU_PAR_MIN_WORK 32768

/* --- backend ------------------------------------------------------------------------ */

struct memra_buf {
  uint32_t magic;
  uint64_t size;
  uint8_t *data;
};

struct memra_backend {
  int n_threads;
  cpu_pool *pool;
  /* Per-thread scratch (dequantized weight rows, attention scores), grown on demand
   * by the calling thread before a parallel region; never shrunk. */
  float *scratch[CPU_MAX_THREADS];
  size_t scratch_len; /* floats in each scratch[i] */
  /* ABI 1.18 download_start's slots: every op has finished when it returns, so a start copies
   * at once and its wait only hands the bytes over */
  uint8_t stage[MEMRA_STAGE_SLOTS][MEMRA_STAGE_BYTES];
  uint64_t stage_len[MEMRA_STAGE_SLOTS]; /* 0: the slot holds no copy */
  char err[512];
};

/* Formats the one-line message of the last failure and returns st. */
memra_status cpu_fail(memra_backend *be, memra_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Makes every scratch[i] hold at least n floats. */
memra_status cpu_scratch_reserve(memra_backend *be, const char *op, size_t n);

/* --- tensor validation (tensor.c) ----------------------------------------------------- */

/* Checks that t is present, of one of the types in mask (bit = 1ull << type; 0 = any
 * type memra_quant_supported knows), ne0 >= 1, ne1 >= 0, rows fit nb1, the view lies
 * inside its buffer and is aligned for its element. name is "y", "x", ... for messages. */
memra_status cpu_check(memra_backend *be, const char *op, const char *name, const memra_tensor *t,
                       uint64_t type_mask);
/* cpu_check plus exact shape (ne0, ne1); a negative value means "any". */
memra_status cpu_check_shape(memra_backend *be, const char *op, const char *name,
                             const memra_tensor *t, uint64_t type_mask, int64_t ne0, int64_t ne1);
static inline bool cpu_present(const memra_tensor *t) { return t != NULL && t->buf != NULL; }

#define CPU_T(type) (1ull << (type))
#define CPU_F32 CPU_T(MEMRA_TYPE_F32)
#define CPU_I32 CPU_T(MEMRA_TYPE_I32)
#define CPU_KV (CPU_T(MEMRA_TYPE_F32) | CPU_T(MEMRA_TYPE_F16) | CPU_T(MEMRA_TYPE_F8_E4M3))
#define CPU_I64 CPU_T(MEMRA_TYPE_I64)

/* A 16-bit gemm operand (ABI 1.6, the memra_op16 rule of memra_plugin.h): v rounded to
 * nearest even as BF16, or as F16 with values beyond +-65504 (infinities too) saturated. */
static inline uint16_t cpu_op16(float v, bool bf16) {
  if (bf16) return memra_f32_to_bf16(v);
  if (v > 65504.0f) v = 65504.0f; /* NaN compares false both ways and stays NaN */
  if (v < -65504.0f) v = -65504.0f;
  return memra_f32_to_fp16(v);
}
#define CPU_OP16 (CPU_T(MEMRA_TYPE_F16) | CPU_T(MEMRA_TYPE_BF16))

/* glu's activations (elementwise.c, moe.c): SiLU in float32, g / (1 + e^-g); GELU with
 * ggml's tanh approximation. */
static inline float cpu_silu(float g) { return g / (1.0f + expf(-g)); }
static inline float cpu_gelu_tanh(float g) {
  const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * g * (1.0f + tanhf(k * g * (1.0f + 0.044715f * g * g)));
}
/* The activations glu takes: MEMRA_E_UNSUPPORTED naming op otherwise. */
memra_status cpu_check_act(memra_backend *be, const char *op, int32_t act);
/* True when views a and b share bytes of one buffer. */
bool cpu_overlap(const memra_tensor *a, const memra_tensor *b);

/* Address of row r of a validated view. */
static inline uint8_t *cpu_row(const memra_tensor *t, int64_t r) {
  return t->buf->data + t->offset + (uint64_t)r * t->nb1;
}
static inline float *cpu_row_f32(const memra_tensor *t, int64_t r) {
  return (float *)(void *)cpu_row(t, r);
}

/* Checks a batch: its counts, its I32 tensors, and each row's sequence and position
 * (0 <= pos < kv_bucket, pos / block_size < max_blocks). Page ids are checked by the
 * op that knows the cache size. */
memra_status cpu_batch_check(memra_backend *be, const char *op, const memra_batch *b);
/* KV slot of (seq, pos) in a checked batch: page * block_size + pos % block_size. */
int64_t cpu_batch_slot(const memra_batch *b, int32_t seq, int32_t pos);
static inline int32_t cpu_i32_at(const memra_tensor *t, int64_t i) {
  int32_t v;
  __builtin_memcpy(&v, cpu_row(t, 0) + 4 * i, 4);
  return v;
}

/* Float32 dot product with a fixed summation order (16 lanes, then a fixed tree):
 * the same inputs give the same bits whichever thread or batch computes them. */
float cpu_dot_f32(const float *a, const float *b, int64_t n);

/* dst[i] = the float value of half src[i] (exact; F16C where the CPU has it). */
void cpu_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);

/* a * b for non-negative a, b, saturating at INT64_MAX: work estimates never overflow. */
static inline int64_t cpu_mul_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Runs fn over [0, n) on the pool, or inline when n * work_per_item is small. */
static inline void cpu_run(memra_backend *be, int64_t n, int64_t work_per_item, cpu_task_fn fn,
                           void *ctx) {
  if (n <= 0) return;
  if (cpu_mul_sat(n, work_per_item) < CPU_PAR_MIN_WORK || be->n_threads == 1)
    fn(ctx, 0, n, 0);
  else
    cpu_pool_run(be->pool, n, fn, ctx);
}

/* --- ops, one file each ------------------------------------------------------------- */

memra_status cpu_buf_alloc(memra_backend *be, uint64_t nbytes, memra_buf **out);
void cpu_buf_free(memra_backend *be, memra_buf *buf);
memra_status cpu_buf_upload(memra_backend *be, memra_buf *dst, uint64_t off, const void *src,
                            uint64_t nbytes);
memra_status cpu_buf_download(memra_backend *be, const memra_buf *src, uint64_t off, void *dst,
                              uint64_t nbytes);
memra_status cpu_buf_copy(memra_backend *be, memra_buf *dst, uint64_t dst_off, const memra_buf *src,
                          uint64_t src_off, uint64_t nbytes);
/* ABI 1.18: buf_download in two halves (buffers.c). */
memra_status cpu_download_start(memra_backend *be, const memra_buf *src, uint64_t off,
                                uint64_t nbytes, int32_t slot);
memra_status cpu_download_wait(memra_backend *be, int32_t slot, void *dst, uint64_t nbytes);

memra_status cpu_get_rows(memra_backend *be, const memra_tensor *y, const memra_tensor *table,
                          const memra_tensor *ids);
memra_status cpu_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                         const memra_tensor *res, const memra_tensor *w, float eps);
memra_status cpu_rmsnorm_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *w, const memra_tensor *z, float eps, int32_t act);
memra_status cpu_rmsnorm_qk(memra_backend *be, const memra_tensor *q, const memra_tensor *wq,
                            const memra_tensor *k, const memra_tensor *wk, float eps);
memra_status cpu_matmul(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                        const memra_tensor *w, const memra_tensor *bias);
/* ABI 1.3 matmul_n: matmul for each of n outputs sharing x (matmul.c). */
memra_status cpu_matmul_n(memra_backend *be, int32_t n, const memra_tensor *y,
                          const memra_tensor *x, const memra_tensor *w, const memra_tensor *bias);
/* ABI 1.12 ffn_glu: matmul_n (gate, up), glu, matmul (down) (matmul.c). */
memra_status cpu_ffn_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *h,
                         const memra_tensor *u, const memra_tensor *x, const memra_tensor *w_gate,
                         const memra_tensor *w_up, const memra_tensor *w_down, int32_t act);
/* ABI 1.14: rmsnorm, then matmul_n or ffn_glu (matmul.c). */
memra_status cpu_matmul_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                                const memra_tensor *w, const memra_tensor *xn,
                                const memra_tensor *x, const memra_tensor *w_norm, float eps);
memra_status cpu_rmsnorm_matmul_n(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                  const memra_tensor *res, const memra_tensor *w_norm, float eps,
                                  int32_t n, const memra_tensor *y, const memra_tensor *w,
                                  const memra_tensor *bias);
/* ABI 1.23 (matmul.c): rmsnorm_matmul_n with weights of several types */
memra_status cpu_rmsnorm_matmul_mixed(memra_backend *be, const memra_tensor *xn,
                                      const memra_tensor *x, const memra_tensor *res,
                                      const memra_tensor *w_norm, float eps, int32_t n,
                                      const memra_tensor *y, const memra_tensor *w,
                                      const memra_tensor *bias);
memra_status cpu_rmsnorm_ffn_glu(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                 const memra_tensor *res, const memra_tensor *w_norm, float eps,
                                 const memra_tensor *y, const memra_tensor *h,
                                 const memra_tensor *u, const memra_tensor *w_gate,
                                 const memra_tensor *w_up, const memra_tensor *w_down, int32_t act);
/* ABI 1.17 matmul_acc: matmul into t, then y = y + t (matmul.c). */
memra_status cpu_matmul_acc(memra_backend *be, const memra_tensor *y, const memra_tensor *t,
                            const memra_tensor *x, const memra_tensor *w);
/* ABI 1.5 gemm_n: the same composition, gemm_n's messages (matmul.c). */
memra_status cpu_gemm_n(memra_backend *be, int32_t n, const memra_tensor *y, const memra_tensor *x,
                        const memra_tensor *w, const memra_tensor *bias);
/* ABI 1.16 matmul_n_rope_kv: matmul_n of q, k (and v), then rope_kv_store (matmul.c). */
memra_status cpu_matmul_n_rope_kv(memra_backend *be, int32_t n, const memra_tensor *y,
                                  const memra_tensor *x, const memra_tensor *w,
                                  const memra_tensor *bias, const memra_tensor *k_cache,
                                  const memra_tensor *v_cache, const memra_batch *batch,
                                  const memra_rope_params *p);
memra_status cpu_rope(memra_backend *be, const memra_tensor *x, const memra_tensor *pos,
                      const memra_rope_params *p);
memra_status cpu_kv_store(memra_backend *be, const memra_tensor *k_cache,
                          const memra_tensor *v_cache, const memra_tensor *k, const memra_tensor *v,
                          const memra_batch *batch);
/* ABI 1.4 rope_kv_store: rope(q), rope(k), kv_store in one call (rope_kv.c). */
memra_status cpu_rope_kv_store(memra_backend *be, const memra_tensor *q, const memra_tensor *k,
                               const memra_tensor *v, const memra_tensor *k_cache,
                               const memra_tensor *v_cache, const memra_batch *batch,
                               const memra_rope_params *p);
/* ABI 1.19 rmsnorm_qk_rope_kv: rmsnorm_qk over q's and k's heads, then rope_kv_store (rope_kv.c).
 */
memra_status cpu_rmsnorm_qk_rope_kv(memra_backend *be, const memra_tensor *q,
                                    const memra_tensor *q_in, const memra_tensor *wq,
                                    const memra_tensor *k, const memra_tensor *wk, float eps,
                                    const memra_tensor *v, const memra_tensor *k_cache,
                                    const memra_tensor *v_cache, const memra_batch *batch,
                                    const memra_rope_params *p);
/* ABI 1.10 rope_kv_attend: rope_kv_store, then attention (rope_kv.c). */
memra_status cpu_rope_kv_attend(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k, const memra_tensor *v,
                                const memra_tensor *k_cache, const memra_tensor *v_cache,
                                const memra_batch *batch, const memra_rope_params *rope,
                                const memra_attn_params *attn);
memra_status cpu_attention(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                           const memra_tensor *k_cache, const memra_tensor *v_cache,
                           const memra_batch *batch, const memra_attn_params *p);
memra_status cpu_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *gate,
                     const memra_tensor *up, int32_t act);
memra_status cpu_add(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                     const memra_tensor *b);
memra_status cpu_scale(memra_backend *be, const memra_tensor *y, const memra_tensor *x, float s);
memra_status cpu_argmax(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits);
memra_status cpu_add_i32(memra_backend *be, const memra_tensor *v, int32_t delta);
/* ABI minor 1 (moe.c) */
memra_status cpu_moe_route(memra_backend *be, const memra_tensor *ids, const memra_tensor *weights,
                           const memra_tensor *logits, int32_t normalize);
memra_status cpu_matmul_id(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *ids, int32_t n_expert);
memra_status cpu_moe_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                             const memra_tensor *weights);
/* ABI minor 1 (ssm_conv.c, delta_rule.c) */
memra_status cpu_matmul_id_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                               int32_t act);
memra_status cpu_moe_combine_gated(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *weights, const memra_tensor *sh,
                                   const memra_tensor *g);
/* ABI minor 9 (moe.c) */
memra_status cpu_moe_combine_shexp(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *weights, const memra_tensor *g);
/* ABI 1.20 (moe.c): the combine, then the norm that adds it */
memra_status cpu_moe_combine_rmsnorm(memra_backend *be, const memra_tensor *xn,
                                     const memra_tensor *x, const memra_tensor *w_norm, float eps,
                                     const memra_tensor *y, const memra_tensor *down,
                                     const memra_tensor *weights, const memra_tensor *logit);
memra_status cpu_matmul_id_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                                   const memra_tensor *weights, const memra_tensor *g);
/* ABI 1.21 (moe.c): the route, then the experts' gate, up and glu */
memra_status cpu_moe_route_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                               int32_t act, const memra_tensor *weights, const memra_tensor *logits,
                               int32_t normalize);
/* ABI 1.22 (moe.c): matmul_n, then the route of y[0] */
memra_status cpu_matmul_n_route(memra_backend *be, int32_t n, const memra_tensor *y,
                                const memra_tensor *x, const memra_tensor *w,
                                const memra_tensor *bias, const memra_tensor *ids,
                                const memra_tensor *weights, int32_t normalize);
memra_status cpu_sigmoid_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *g);
memra_status cpu_ssm_conv(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                          const memra_tensor *w, const memra_tensor *state,
                          const memra_batch *batch);
/* ABI minor 11: the delta rule, then its gated output norm (delta_rule.c). */
memra_status cpu_gated_delta_rule_norm(memra_backend *be, const memra_tensor *out,
                                       const memra_tensor *q, const memra_tensor *k,
                                       const memra_tensor *v, const memra_tensor *a,
                                       const memra_tensor *b, const memra_tensor *a_log,
                                       const memra_tensor *dt_bias, const memra_tensor *state,
                                       const memra_batch *batch, const memra_gdn_params *p,
                                       const memra_tensor *norm_w, const memra_tensor *z, float eps,
                                       int32_t act);
/* ABI minor 11: attention, then the output gate (rope_kv.c). */
memra_status cpu_attention_gate(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k_cache, const memra_tensor *v_cache,
                                const memra_batch *batch, const memra_attn_params *p,
                                const memra_tensor *gate);
/* ABI minor 11: matmul_n, then ssm_conv of y[0] in place (ssm_conv.c). */
memra_status cpu_matmul_n_conv(memra_backend *be, int32_t n, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *conv_w, const memra_tensor *state,
                               const memra_batch *batch);
memra_status cpu_gated_delta_rule(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                  const memra_tensor *k, const memra_tensor *v,
                                  const memra_tensor *a, const memra_tensor *b,
                                  const memra_tensor *a_log, const memra_tensor *dt_bias,
                                  const memra_tensor *state, const memra_batch *batch,
                                  const memra_gdn_params *p);
/* ABI minor 2 (sample.c) */
memra_status cpu_sample(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits,
                        const memra_tensor *rng, const memra_sample_params *p);

#endif /* MEMRA_CPU_BACKEND_H */
