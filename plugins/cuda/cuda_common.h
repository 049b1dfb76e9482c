/* cuda_common.h — what every CUDA op file of the GPU plugins shares: the backend and
 * buffer structs, the MEMRA_CU check macro and the host-side tensor checks.
 *
 * Errors never exit: a failing CUDA call or launch returns MEMRA_E_DEVICE and leaves one
 * line in be->err, which the vtable's last_error returns. */
#ifndef MEMRA_CUDA_COMMON_H
#define MEMRA_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/include/memra_plugin.h"

struct memra_buf {
  void *ptr;
  uint64_t size;
};

struct memra_graph {
  cudaGraphExec_t exec;
};

/* Device scratch that captured graphs may point at: never freed while the backend lives
 * (a grown workspace retires the old one to this list instead). */
typedef struct memra_cu_retired {
  void *ptr;
  struct memra_cu_retired *next;
} memra_cu_retired;

struct memra_backend {
  int device;
  int n_sms;
  int capturing; /* between graph_begin and graph_end */
  int pdl;       /* launch.cuh: programmatic dependent launch (sm_90+, MEMRA_PDL != 0) */
  cudaStream_t stream;
  cudaDeviceProp prop;
  void *ws; /* attention split-KV partials */
  uint64_t ws_size;
  memra_cu_retired *retired;
  /* ABI 1.18 download_start's slots: pinned host bytes and the event after each slot's copy,
   * made at the first start (buffer.cu) */
  uint8_t *stage;
  cudaEvent_t stage_ev[MEMRA_STAGE_SLOTS];
  uint64_t stage_len[MEMRA_STAGE_SLOTS]; /* 0: the slot holds no copy */
  /* launch.cuh counts PDL launches; moe_tc.cuh notes the count after a matmul_id v3 launch
   * (whose blocks wait before they trigger) and the bytes it writes, so the next launch, when
   * it is the one after, may read expert ids before its wait (midtc_ids_early) */
  uint64_t n_launch, mmid_after;
  uintptr_t mmid_y0, mmid_y1;
  /* and after a launch that routed for itself (ABI 1.21 moe_route_glu) what it routed from, so a
   * matmul_id right after it over the same ids routes from the same logits before its wait
   * (midtc_route_early) */
  uint64_t mroute_after;
  /* the ring GEMVs' dynamic tiles (MEMRA_T11_DYN, matmul_dyn.cuh): launches so far, whose count
   * picks a launch's tile counter */
  uint64_t n_dyn;
  struct {
    const float *logits;
    const int32_t *ids;
    int64_t l_ld, ids_ld, rows;
    int32_t ne, kr, k, normalize;
  } mroute;
  char err[512];
};

/* Records "file:line: call: cuda message" in be->err and returns MEMRA_E_DEVICE. */
memra_status memra_cu_fail(memra_backend *be, cudaError_t e, const char *what, const char *file,
                           int line);
/* Records a one-line message in be->err and returns st. */
memra_status memra_cu_errf(memra_backend *be, memra_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define MEMRA_CU(call)                                                                             \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) return memra_cu_fail(be, e_, #call, __FILE__, __LINE__);                \
  } while (0)

/* After every launch: launch-configuration errors appear here, not at the <<<>>>. */
#define MEMRA_CU_LAUNCHED() MEMRA_CU(cudaGetLastError())

/* Checks that t names a buffer, has a type the caller accepts (type < 0: any known type)
 * and that its ne1 rows of ne0 elements, nb1 bytes apart, lie inside the buffer.
 * what names the argument in the message ("matmul: y"). */
memra_status memra_cu_check_tensor(memra_backend *be, const memra_tensor *t, const char *what,
                                   int32_t type);
/* Same rows and elements per row (types may differ). */
memra_status memra_cu_check_same_shape(memra_backend *be, const memra_tensor *a,
                                       const memra_tensor *b, const char *what);
/* Checks an I32 tensor holding at least n contiguous elements (a row [n] or a column
 * [n, 1] of 4-byte rows) and returns their device address in *out. */
memra_status memra_cu_check_i32_vec(memra_backend *be, const memra_tensor *t, int64_t n,
                                    const char *what, const int32_t **out);
/* Checks the batch descriptor's shape facts (kv_store.cu) and returns its device vectors;
 * bt_ld is the block table's row stride in elements. */
memra_status memra_cu_check_batch(memra_backend *be, const memra_batch *b, const char *what,
                                  const int32_t **pos, const int32_t **seq, const int32_t **bt,
                                  int64_t *bt_ld);
/* True when the environment variable name is set to value (the plugins' A/B switches). */
static inline bool memra_cu_env_is(const char *name, const char *value) {
  const char *e = getenv(name);
  return e && strcmp(e, value) == 0;
}
/* The integer environment variable name clamped to [lo, hi], def when unset (the A/B knobs). */
static inline int memra_cu_env_int(const char *name, int def, int lo, int hi) {
  const char *e = getenv(name);
  const int v = e ? atoi(e) : def;
  return v < lo ? lo : v > hi ? hi : v;
}

/* True when the optional tensor t is present (non-NULL with a buffer). */
static inline int memra_cu_present(const memra_tensor *t) { return t && t->buf; }

/* Device address of row 0 of t (checked tensors only). */
static inline char *memra_cu_ptr(const memra_tensor *t) { return (char *)t->buf->ptr + t->offset; }

/* Bytes of alignment the plain (non-vector) loads of a type's rows need. */
static inline uint64_t memra_cu_type_align(int32_t t) {
  switch (t) {
  case MEMRA_TYPE_F32:
  case MEMRA_TYPE_Q4_1:
  case MEMRA_TYPE_Q5_1: return 4;
  default: return 2;
  }
}

/* Largest power of two dividing both the address and the stride (capped at 256). */
static inline uint64_t memra_cu_align_of(const void *p, uint64_t stride) {
  uint64_t v = (uint64_t)(uintptr_t)p | stride | 256u;
  return v & (~v + 1);
}

/* Grows the backend's workspace to at least nbytes (kept 256-byte aligned). */
/* True when the bytes spanned by two checked tensors intersect (empty ones never do). */
static inline bool memra_cu_overlap(const memra_tensor *a, const memra_tensor *b) {
  if (a->buf != b->buf || a->ne1 == 0 || b->ne1 == 0) return false;
  const uint64_t ea =
      a->offset + (uint64_t)(a->ne1 - 1) * a->nb1 + memra_type_row_bytes(a->type, a->ne0);
  const uint64_t eb =
      b->offset + (uint64_t)(b->ne1 - 1) * b->nb1 + memra_type_row_bytes(b->type, b->ne0);
  return a->offset < eb && b->offset < ea;
}

/* The paged-cache fields of a cache-reading kernel's argument struct A (kc, vc, their row
 * strides and slot counts, the batch's row maps, block table and sizes), from checked
 * operands: one fill for attention, attention prefill and rope_kv_store. */
template <typename A>
static inline void memra_cu_fill_paged(A *a, const memra_tensor *k_cache,
                                       const memra_tensor *v_cache, const memra_batch *batch,
                                       const int32_t *pos, const int32_t *seq, const int32_t *bt,
                                       int64_t bt_ld) {
  a->kc = memra_cu_ptr(k_cache);
  a->vc = memra_cu_ptr(v_cache);
  a->k_nb1 = k_cache->nb1;
  a->v_nb1 = v_cache->nb1;
  a->k_slots = k_cache->ne1;
  a->v_slots = v_cache->ne1;
  a->pos = pos;
  a->seq = seq;
  a->bt = bt;
  a->bt_ld = bt_ld;
  a->n_seqs = batch->n_seqs;
  a->block_size = batch->block_size;
  a->max_blocks = batch->max_blocks;
}

memra_status memra_cu_workspace(memra_backend *be, uint64_t nbytes, void **out);

/* The vtable ops, one family per .cu file. */
memra_status memra_cu_get_rows(memra_backend *be, const memra_tensor *y, const memra_tensor *table,
                               const memra_tensor *ids);
memra_status memra_cu_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *res, const memra_tensor *w, float eps);
memra_status memra_cu_rmsnorm_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *w, const memra_tensor *z, float eps,
                                   int32_t act);
memra_status memra_cu_rmsnorm_qk(memra_backend *be, const memra_tensor *q, const memra_tensor *wq,
                                 const memra_tensor *k, const memra_tensor *wk, float eps);
memra_status memra_cu_matmul(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                             const memra_tensor *w, const memra_tensor *bias);
/* ABI 1.3: matmuls sharing x in one launch (matmul.cu). */
memra_status memra_cu_matmul_n(memra_backend *be, int32_t n, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w,
                               const memra_tensor *bias);
/* ABI 1.22: matmul_n with a MoE router's route (matmul.cu). */
memra_status memra_cu_matmul_n_route(memra_backend *be, int32_t n, const memra_tensor *y,
                                     const memra_tensor *x, const memra_tensor *w,
                                     const memra_tensor *bias, const memra_tensor *ids,
                                     const memra_tensor *weights, int32_t normalize);
memra_status memra_cu_matmul_n_conv(memra_backend *be, int32_t n, const memra_tensor *y,
                                    const memra_tensor *x, const memra_tensor *w,
                                    const memra_tensor *conv_w, const memra_tensor *state,
                                    const memra_batch *batch);
/* ABI 1.16: q, k, v projections with rope and the cache stores (matmul.cu). */
memra_status memra_cu_matmul_n_rope_kv(memra_backend *be, int32_t n, const memra_tensor *y,
                                       const memra_tensor *x, const memra_tensor *w,
                                       const memra_tensor *bias, const memra_tensor *k_cache,
                                       const memra_tensor *v_cache, const memra_batch *batch,
                                       const memra_rope_params *p);
/* ABI 1.12: a dense FFN's gate/up, glu and down (matmul.cu). */
memra_status memra_cu_ffn_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *h,
                              const memra_tensor *u, const memra_tensor *x,
                              const memra_tensor *w_gate, const memra_tensor *w_up,
                              const memra_tensor *w_down, int32_t act);
/* ABI 1.17 matmul_acc (matmul.cu). */
memra_status memra_cu_matmul_acc(memra_backend *be, const memra_tensor *y, const memra_tensor *t,
                                 const memra_tensor *x, const memra_tensor *w);
/* ABI 1.15 matmul_rmsnorm (matmul.cu). */
memra_status memra_cu_matmul_rmsnorm(memra_backend *be, const memra_tensor *y,
                                     const memra_tensor *a, const memra_tensor *w,
                                     const memra_tensor *xn, const memra_tensor *x,
                                     const memra_tensor *w_norm, float eps);
/* ABI 1.14: a decode norm with the projections that read it (matmul.cu). */
memra_status memra_cu_rmsnorm_matmul_n(memra_backend *be, const memra_tensor *xn,
                                       const memra_tensor *x, const memra_tensor *res,
                                       const memra_tensor *w_norm, float eps, int32_t n,
                                       const memra_tensor *y, const memra_tensor *w,
                                       const memra_tensor *bias);
memra_status memra_cu_rmsnorm_matmul_mixed(memra_backend *be, const memra_tensor *xn,
                                           const memra_tensor *x, const memra_tensor *res,
                                           const memra_tensor *w_norm, float eps, int32_t n,
                                           const memra_tensor *y, const memra_tensor *w,
                                           const memra_tensor *bias);
memra_status memra_cu_rmsnorm_ffn_glu(memra_backend *be, const memra_tensor *xn,
                                      const memra_tensor *x, const memra_tensor *res,
                                      const memra_tensor *w_norm, float eps, const memra_tensor *y,
                                      const memra_tensor *h, const memra_tensor *u,
                                      const memra_tensor *w_gate, const memra_tensor *w_up,
                                      const memra_tensor *w_down, int32_t act);
memra_status memra_cu_rope(memra_backend *be, const memra_tensor *x, const memra_tensor *pos,
                           const memra_rope_params *p);
memra_status memra_cu_kv_store(memra_backend *be, const memra_tensor *k_cache,
                               const memra_tensor *v_cache, const memra_tensor *k,
                               const memra_tensor *v, const memra_batch *batch);
/* ABI 1.4: rope(q), rope(k), kv_store in one launch (rope_kv.cu). */
memra_status memra_cu_rope_kv_store(memra_backend *be, const memra_tensor *q, const memra_tensor *k,
                                    const memra_tensor *v, const memra_tensor *k_cache,
                                    const memra_tensor *v_cache, const memra_batch *batch,
                                    const memra_rope_params *p);
/* ABI 1.19: the per-head q / k norms, rope(q), rope(k) and kv_store in one launch
 * (norm_rope_kv.cu). */
memra_status memra_cu_rmsnorm_qk_rope_kv(memra_backend *be, const memra_tensor *q,
                                         const memra_tensor *q_in, const memra_tensor *wq,
                                         const memra_tensor *k, const memra_tensor *wk, float eps,
                                         const memra_tensor *v, const memra_tensor *k_cache,
                                         const memra_tensor *v_cache, const memra_batch *batch,
                                         const memra_rope_params *p);
/* ABI 1.10: rope_kv_store then attention of decode rows in one launch (attention.cu). */
memra_status memra_cu_rope_kv_attend(memra_backend *be, const memra_tensor *out,
                                     const memra_tensor *q, const memra_tensor *k,
                                     const memra_tensor *v, const memra_tensor *k_cache,
                                     const memra_tensor *v_cache, const memra_batch *batch,
                                     const memra_rope_params *rope, const memra_attn_params *p);
memra_status memra_cu_attention(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k_cache, const memra_tensor *v_cache,
                                const memra_batch *batch, const memra_attn_params *p);
/* ABI 1.11: attention, then the output gate (attention.cu). */
memra_status memra_cu_attention_gate(memra_backend *be, const memra_tensor *out,
                                     const memra_tensor *q, const memra_tensor *k_cache,
                                     const memra_tensor *v_cache, const memra_batch *batch,
                                     const memra_attn_params *p, const memra_tensor *gate);
memra_status memra_cu_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *gate,
                          const memra_tensor *up, int32_t act);
memra_status memra_cu_add(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                          const memra_tensor *b);
memra_status memra_cu_scale(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                            float s);
memra_status memra_cu_argmax(memra_backend *be, const memra_tensor *ids,
                             const memra_tensor *logits);
memra_status memra_cu_add_i32(memra_backend *be, const memra_tensor *v, int32_t delta);

/* The tensor-core GEMM behind the gemm slot (gemm.cu, kernels per gemm.h), on the
 * architectures that have its kernel. */
#define MEMRA_CU_HAS_GEMM (MEMRA_CUDA_CC_MAJOR == 9 || MEMRA_CUDA_FAMILY_SM120)
#if MEMRA_CU_HAS_GEMM
memra_status memra_cu_gemm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *bias);
/* gemm_n: gemm for outputs sharing x, one grouped launch (gemm.cu). */
memra_status memra_cu_gemm_n(memra_backend *be, int32_t n, const memra_tensor *y,
                             const memra_tensor *x, const memra_tensor *w,
                             const memra_tensor *bias);
/* gemm_x_type (ABI 1.6): the 16-bit type gemm rounds x to for w_type, or F32 (gemm.cu). */
int32_t memra_cu_gemm_x_type(memra_backend *be, int32_t w_type);
#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120)
/* gemm_glu (ABI 1.6): gate, up and glu of prompt rows in one wgmma launch (gemm.cu). */
memra_status memra_cu_gemm_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w_gate, const memra_tensor *w_up, int32_t act);
#define MEMRA_CU_HAS_GEMM_GLU 1
#endif
#endif

memra_status memra_cu_graph_begin(memra_backend *be);
memra_status memra_cu_graph_end(memra_backend *be, memra_graph **out);
memra_status memra_cu_graph_launch(memra_backend *be, memra_graph *g);
void memra_cu_graph_free(memra_backend *be, memra_graph *g);

#endif /* MEMRA_CUDA_COMMON_H */
