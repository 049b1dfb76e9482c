/* backend.cu — memra_plugin_open and the backend's lifetime: device, stream, error line,
 * workspace, tensor checks, and the vtable that names every op file's entry point. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/buffer.h"
#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/families.h"

memra_status memra_cu_errf(memra_backend *be, memra_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(be->err, sizeof be->err, fmt, ap);
  va_end(ap);
  return st;
}

memra_status memra_cu_fail(memra_backend *be, cudaError_t e, const char *what, const char *file,
                           int line) {
  const char *base = strrchr(file, '/');
  return memra_cu_errf(be, MEMRA_E_DEVICE, "%s:%d: %s: %s (%s)", base ? base + 1 : file, line, what,
                       cudaGetErrorString(e), cudaGetErrorName(e));
}

memra_status memra_cu_check_tensor(memra_backend *be, const memra_tensor *t, const char *what,
                                   int32_t type) {
  if (!t || !t->buf) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: tensor is absent", what);
  memra_type_traits tr = memra_type_info(t->type);
  if (tr.blck <= 0) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: unknown type %d", what, t->type);
  if (type >= 0 && t->type != type)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: type %s, expected %s", what, tr.name,
                         memra_type_info(type).name);
  if (t->ne0 <= 0 || t->ne1 < 0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: shape [%lld, %lld] is not positive", what,
                         (long long)t->ne1, (long long)t->ne0);
  uint64_t row = memra_type_row_bytes(t->type, t->ne0);
  if (row == 0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %lld elements are not whole %s blocks of %d",
                         what, (long long)t->ne0, tr.name, tr.blck);
  if (t->ne1 > 1 && t->nb1 < row)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: row stride %llu below the row's %llu bytes",
                         what, (unsigned long long)t->nb1, (unsigned long long)row);
  uint64_t size = t->buf->size;
  uint64_t rows = (uint64_t)t->ne1;
  if (t->offset > size)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: offset %llu past the buffer's %llu bytes", what,
                         (unsigned long long)t->offset, (unsigned long long)size);
  if (rows > 0) {
    uint64_t avail = size - t->offset;
    /* (rows - 1) * nb1 + row <= avail, without overflow */
    if (row > avail || (rows > 1 && (t->nb1 == 0 || (rows - 1) > (avail - row) / t->nb1)))
      return memra_cu_errf(be, MEMRA_E_INVALID,
                           "%s: %llu rows of %llu bytes, %llu apart, overrun the buffer (%llu "
                           "bytes from offset %llu)",
                           what, (unsigned long long)rows, (unsigned long long)row,
                           (unsigned long long)t->nb1, (unsigned long long)avail,
                           (unsigned long long)t->offset);
  }
  return MEMRA_OK;
}

memra_status memra_cu_check_same_shape(memra_backend *be, const memra_tensor *a,
                                       const memra_tensor *b, const char *what) {
  if (a->ne0 != b->ne0 || a->ne1 != b->ne1)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: shapes [%lld, %lld] and [%lld, %lld] differ",
                         what, (long long)a->ne1, (long long)a->ne0, (long long)b->ne1,
                         (long long)b->ne0);
  return MEMRA_OK;
}

memra_status memra_cu_check_i32_vec(memra_backend *be, const memra_tensor *t, int64_t n,
                                    const char *what, const int32_t **out) {
  memra_status st = memra_cu_check_tensor(be, t, what, MEMRA_TYPE_I32);
  if (st != MEMRA_OK) return st;
  int64_t have =
      t->ne1 <= 1 ? (t->ne1 == 1 ? t->ne0 : 0) : (t->ne0 == 1 && t->nb1 == 4 ? t->ne1 : -1);
  if (have < 0)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: [%lld, %lld] is not a contiguous vector", what,
                         (long long)t->ne1, (long long)t->ne0);
  if (have < n)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: %lld elements, expected at least %lld", what,
                         (long long)have, (long long)n);
  *out = (const int32_t *)memra_cu_ptr(t);
  if ((uintptr_t)*out % 4)
    return memra_cu_errf(be, MEMRA_E_INVALID, "%s: not 4-byte aligned", what);
  return MEMRA_OK;
}

memra_status memra_cu_workspace(memra_backend *be, uint64_t nbytes, void **out) {
  if (nbytes <= be->ws_size) {
    *out = be->ws;
    return MEMRA_OK;
  }
  uint64_t want = nbytes + nbytes / 2; /* grow geometrically: few retired copies */
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, want);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return memra_cu_errf(be, MEMRA_E_OOM, "workspace: cudaMalloc of %llu bytes failed: %s",
                         (unsigned long long)want, cudaGetErrorString(e));
  }
  if (be->ws) {
    /* A captured graph may still point at the old workspace: keep it until close. */
    memra_cu_retired *r = (memra_cu_retired *)malloc(sizeof *r);
    if (!r) {
      cudaFree(p);
      return memra_cu_errf(be, MEMRA_E_OOM, "workspace: out of host memory");
    }
    r->ptr = be->ws;
    r->next = be->retired;
    be->retired = r;
  }
  be->ws = p;
  be->ws_size = want;
  *out = p;
  return MEMRA_OK;
}

static const char *cu_last_error(memra_backend *be) { return be->err; }

static memra_status cu_device_info(memra_backend *be, memra_device_info *out) {
  if (!out) return memra_cu_errf(be, MEMRA_E_INVALID, "device_info: out is NULL");
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%.127s", be->prop.name);
  size_t free_b = 0, total_b = 0;
  MEMRA_CU(cudaMemGetInfo(&free_b, &total_b));
  out->mem_total = total_b;
  out->mem_free = free_b;
  out->n_sms = be->n_sms;
  out->cc_major = be->prop.major;
  out->cc_minor = be->prop.minor;
  return MEMRA_OK;
}

#ifdef MEMRA_CUDA_TRACE
/* trace.cuh's files (EXPERIMENT builds only): their rings written out at close */
static void (*trace_dumps[64])(FILE *);
static int trace_n;
extern "C" void memra_trace_register(void (*dump)(FILE *)) {
  if (trace_n < 64) trace_dumps[trace_n++] = dump;
}
static void trace_write(void) {
  const char *path = getenv("MEMRA_TRACE_OUT");
  FILE *f = path ? fopen(path, "wb") : NULL;
  if (!f) return;
  for (int i = 0; i < trace_n; ++i)
    trace_dumps[i](f);
  fclose(f);
}
#endif

static void cu_close(memra_backend *be) {
  if (!be) return;
  if (be->stream) {
    cudaStreamSynchronize(be->stream);
#ifdef MEMRA_CUDA_TRACE
    trace_write();
#endif
    cudaStreamDestroy(be->stream);
  }
  memra_cu_stage_free(be);
  cudaFree(be->ws);
  while (be->retired) {
    memra_cu_retired *r = be->retired;
    be->retired = r->next;
    cudaFree(r->ptr);
    free(r);
  }
  free(be);
}

static void *cu_get_proc(memra_backend *be, const char *name) {
  (void)be;
  (void)name;
  return NULL;
}

#if MEMRA_ABI_MINOR >= 2 /* sample.cu */
memra_status memra_cu_sample(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits,
                             const memra_tensor *rng, const memra_sample_params *p);
#endif

/* Filled by name, not position: slots a later ABI minor appends stay NULL ("no kernel")
 * until this plugin implements them, and the file builds against either header. */
static const memra_backend_vt *cu_vtable(void) {
  static const memra_backend_vt vt = [] {
    memra_backend_vt v;
    memset(&v, 0, sizeof v);
    v.abi_major = MEMRA_ABI_MAJOR;
    v.abi_minor = MEMRA_ABI_MINOR;
    v.struct_size = (uint32_t)sizeof(memra_backend_vt);
    v.name = MEMRA_CUDA_NAME;
    v.close = cu_close;
    v.last_error = cu_last_error;
    v.device_info = cu_device_info;
    v.buf_alloc = memra_cu_buf_alloc;
    v.buf_free = memra_cu_buf_free;
    v.buf_upload = memra_cu_buf_upload;
    v.buf_download = memra_cu_buf_download;
    v.buf_copy = memra_cu_buf_copy;
    v.synchronize = memra_cu_synchronize;
    v.get_rows = memra_cu_get_rows;
    v.rmsnorm = memra_cu_rmsnorm;
    v.matmul = memra_cu_matmul;
    v.rope = memra_cu_rope;
    v.kv_store = memra_cu_kv_store;
    v.attention = memra_cu_attention;
    v.glu = memra_cu_glu;
    v.add = memra_cu_add;
    v.scale = memra_cu_scale;
    v.argmax = memra_cu_argmax;
    v.add_i32 = memra_cu_add_i32;
    v.graph_begin = memra_cu_graph_begin;
    v.graph_end = memra_cu_graph_end;
    v.graph_launch = memra_cu_graph_launch;
    v.graph_free = memra_cu_graph_free;
    v.get_proc = cu_get_proc;
    v.matmul_n = memra_cu_matmul_n;           /* ABI 1.3 fused slot (matmul.cu) */
    v.rope_kv_store = memra_cu_rope_kv_store; /* ABI 1.4 fused slot (rope_kv.cu) */
#if MEMRA_ABI_MINOR >= 2
    v.sample = memra_cu_sample;
#endif
    v.moe_route = memra_cu_moe_route; /* moe.cu, gdn.cu (families.h) */
    v.matmul_id = memra_cu_matmul_id;
    v.moe_combine = memra_cu_moe_combine;
    v.moe_combine_gated = memra_cu_moe_combine_gated; /* ABI 1.7 (moe.cu) */
    /* ABI 1.7 fusions; MEMRA_MMID_GLU=0 / MEMRA_RMS_GATE=0 leave a slot out (A/B: the core
     * then makes the calls it replaces) */
    v.matmul_id_glu = memra_cu_env_is("MEMRA_MMID_GLU", "0") ? NULL : memra_cu_matmul_id_glu;
    v.rmsnorm_gate =
        memra_cu_env_is("MEMRA_RMS_GATE", "0") ? NULL : memra_cu_rmsnorm_gate; /* rmsnorm.cu */
#if MEMRA_ABI_MINOR >= 8
    /* ABI 1.8 rmsnorm_qk (H200, docs/PERF.md: bitwise the two rmsnorm calls, MoE 8-layer tg128
     * +2.2%); MEMRA_RMS_QK=0 leaves it out (A/B) */
    v.rmsnorm_qk = memra_cu_env_is("MEMRA_RMS_QK", "0") ? NULL : memra_cu_rmsnorm_qk;
#endif
#if MEMRA_ABI_MINOR >= 9
    /* ABI 1.9 moe_combine_shexp: the shared expert rides in the routed expert launches;
     * MEMRA_SHEXP_STACK=0 leaves it out (A/B: the core then keeps the shared expert apart) */
    v.moe_combine_shexp =
        memra_cu_env_is("MEMRA_SHEXP_STACK", "0") ? NULL : memra_cu_moe_combine_shexp;
    /* ABI 1.9 matmul_id_combine (the experts' down projection and the combine in one launch,
     * F16 / BF16) is opt-in, MEMRA_MMID_COMBINE=1: on the H200 its kernel lost to matmul_id
     * and the combine (hybrid F16 tg128 2,130 vs 2,235, docs/PERF.md) */
    v.matmul_id_combine =
        memra_cu_env_is("MEMRA_MMID_COMBINE", "1") ? memra_cu_matmul_id_combine : NULL;
#endif
#if MEMRA_ABI_MINOR >= 10
    /* ABI 1.10 rope_kv_attend (attention.cu) is opt-in, MEMRA_ROPE_ATT=1: on the H200 its one
     * launch ran no faster than rope_kv_store and attention (Llama Q8_0 tg128 @ d512 332 vs 334,
     * hybrid F16 2,248 vs 2,243, docs/PERF.md) */
    v.rope_kv_attend = memra_cu_env_is("MEMRA_ROPE_ATT", "1") ? memra_cu_rope_kv_attend : NULL;
#endif
#if MEMRA_ABI_MINOR >= 11
    /* ABI 1.11 matmul_n_conv (matmul.cu: the GDN conv in the ring GEMVs' last step);
     * MEMRA_MNCONV=0 leaves it out (A/B: the core then calls matmul_n and ssm_conv) */
    v.matmul_n_conv = memra_cu_env_is("MEMRA_MNCONV", "0") ? NULL : memra_cu_matmul_n_conv;
    /* ABI 1.11 attention_gate (attention.cu: the output gate at v5's store); MEMRA_ATT_GATE=0
     * leaves it out (A/B: the core then calls attention and sigmoid_gate) */
    v.attention_gate = memra_cu_env_is("MEMRA_ATT_GATE", "0") ? NULL : memra_cu_attention_gate;
    /* ABI 1.11 gated_delta_rule_norm (gdn.cu: a d 128 head a block, the gated norm at each
     * token); MEMRA_GDN_NORM=0 leaves it out (A/B) */
    v.gated_delta_rule_norm =
        memra_cu_env_is("MEMRA_GDN_NORM", "0") ? NULL : memra_cu_gated_delta_rule_norm;
#endif
#if MEMRA_ABI_MINOR >= 12
    /* ABI 1.12 ffn_glu (matmul.cu: for one row of Q8_0 weights v13 launches): opt-in, slower
     * under PDL so far (docs/PERF.md): MEMRA_FFN_GLU=1 gate, up, glu and down in one launch,
     * MEMRA_FFN_GLU=2 gate, up and glu in one launch, then down */
    v.ffn_glu = memra_cu_env_is("MEMRA_FFN_GLU", "1") || memra_cu_env_is("MEMRA_FFN_GLU", "2")
                    ? memra_cu_ffn_glu
                    : NULL;
#endif
#if MEMRA_ABI_MINOR >= 14
    /* ABI 1.14 (matmul.cu: for one row of 4096 and Q8_0 / Q4_K weights the norm in the v13 / v11
     * launch; otherwise the composition): with matmul_acc below (no residual then), or with one
     * by MEMRA_NORM_MM=1 (same bits, slower in a live step on the H200: docs/PERF.md) */
    if (memra_cu_env_is("MEMRA_NORM_MM", "1") || !memra_cu_env_is("MEMRA_ACC", "0")) {
      v.rmsnorm_matmul_n = memra_cu_rmsnorm_matmul_n;
      v.rmsnorm_ffn_glu = memra_cu_rmsnorm_ffn_glu;
    }
#endif
#if MEMRA_ABI_MINOR >= 17
    /* ABI 1.17 matmul_acc (matmul.cu: the ring kernels of one row and v7 add at their store),
     * with the 1.14 slots: a decode step's o and down add into x, its norms go into the Q4_K
     * projections after them without a residual (v11's head; other types keep the norm's launch).
     * H200 tg128 @ d512: Q4_K_M 426-427 -> 431 (+1.1%), Q8_0 364-366 -> 368-369 (+0.8%);
     * MEMRA_ACC=0: off (and the 1.14 slots with it, unless MEMRA_NORM_MM=1) */
    v.matmul_acc = memra_cu_env_is("MEMRA_ACC", "0") ? NULL : memra_cu_matmul_acc;
#endif
#if MEMRA_ABI_MINOR >= 18
    /* ABI 1.18: the token's download in two halves (buffer.cu), so the decoder queues step n + 1
     * before it waits for step n's token: the GPU does not idle while the host returns and
     * launches (MEMRA_LOOKAHEAD=0 in the decoder turns the overlap off) */
    v.download_start = memra_cu_download_start;
    v.download_wait = memra_cu_download_wait;
#endif
#if MEMRA_ABI_MINOR >= 19
    /* ABI 1.19: the q / k norms with rope and the KV store in one launch (norm_rope_kv.cu):
     * opt-in (MEMRA_QK_ROPE=1): the same bits, slower on the H200 (MoE tg128 -7%) */
    v.rmsnorm_qk_rope_kv =
        memra_cu_env_is("MEMRA_QK_ROPE", "1") ? memra_cu_rmsnorm_qk_rope_kv : NULL;
#endif
#if MEMRA_ABI_MINOR >= 20
    /* ABI 1.20: a MoE layer's combine with the norm after it (rmsnorm.cu): opt-in
     * (MEMRA_COMBINE_NORM=1): the same bits, no faster on the H200 (hybrid tg128 -3%) */
    v.moe_combine_rmsnorm =
        memra_cu_env_is("MEMRA_COMBINE_NORM", "1") ? memra_cu_moe_combine_rmsnorm : NULL;
#endif
#if MEMRA_ABI_MINOR >= 21
    /* ABI 1.21: a decode step's route inside the experts' gate / up launch (moe.cu), the same
     * bits: opt-in, MEMRA_ROUTE_GLU=1 (slower on the H200: hybrid tg128 -5.5%, MoE -2.8%; with
     * MEMRA_ROUTE_DOWN=0 even at best, docs/PERF.md) */
    v.moe_route_glu =
        memra_cu_env_is("MEMRA_ROUTE_GLU", "1") && v.matmul_id_glu ? memra_cu_moe_route_glu : NULL;
#endif
#if MEMRA_ABI_MINOR >= 22
    /* ABI 1.22: a decode row's route in the router GEMV's last block (matmul.cu, matmul_v6.cuh),
     * the same bits: opt-in, MEMRA_ROUTER_ROUTE=1 (slower on the H200: MoE tg128 -0.5%, hybrid
     * -0.8%: every block's fence and ticket, then one warp's route, cost more than the launch) */
    v.matmul_n_route = memra_cu_env_is("MEMRA_ROUTER_ROUTE", "1") ? memra_cu_matmul_n_route : NULL;
#endif
#if MEMRA_ABI_MINOR >= 23
    /* ABI 1.23: q / k (Q4_K) and v (Q6_K) of one row in one v11 launch with the norm in its head
     * (matmul_tc11mx.cuh), with the 1.14 slots; H100 Llama Q4_K_M tg128 @ d512 +1.6% (docs/PERF.md,
     * thirty-seventh session). MEMRA_QKV_MIXED=0: off (q / k with the norm, v its own launch) */
    v.rmsnorm_matmul_mixed = v.rmsnorm_matmul_n && !memra_cu_env_is("MEMRA_QKV_MIXED", "0")
                                 ? memra_cu_rmsnorm_matmul_mixed
                                 : NULL;
#endif
#if MEMRA_ABI_MINOR >= 15
    /* ABI 1.15 (matmul.cu: for one row of 4096 and Q8_0 / Q4_K weights the norm at the end of
     * the v13 / v11 launch, by its last block; otherwise the composition): opt-in,
     * MEMRA_MM_NORM=1 (same bits, slower in a live step on the H200: docs/PERF.md) */
    v.matmul_rmsnorm = memra_cu_env_is("MEMRA_MM_NORM", "1") ? memra_cu_matmul_rmsnorm : NULL;
#endif
#if MEMRA_ABI_MINOR >= 16
    /* ABI 1.16 matmul_n_rope_kv (matmul.cu: for one row of Q8_0 / Q4_K weights rope and the
     * cache stores at the v13 / v11 launch's stores; otherwise the composition): opt-in,
     * MEMRA_QKV_ROPE=1 (same bits, slower in a live step on the H200: Llama Q8_0 tg128 @ d512
     * 338 vs 356, Q4_K_M 396 vs 402, docs/PERF.md) */
    v.matmul_n_rope_kv = memra_cu_env_is("MEMRA_QKV_ROPE", "1") ? memra_cu_matmul_n_rope_kv : NULL;
#endif
    v.sigmoid_gate = memra_cu_sigmoid_gate;
    v.ssm_conv = memra_cu_ssm_conv;
    v.gated_delta_rule = memra_cu_gated_delta_rule;
#if MEMRA_CU_HAS_GEMM
    v.gemm = memra_cu_gemm;
    v.gemm_n = memra_cu_gemm_n;           /* ABI 1.5 grouped prompt GEMM (gemm.cu) */
    v.gemm_x_type = memra_cu_gemm_x_type; /* ABI 1.6 16-bit operands from rmsnorm/glu */
#ifdef MEMRA_CU_HAS_GEMM_GLU
    v.gemm_glu = memra_cu_gemm_glu; /* ABI 1.6 gate, up and glu in one wgmma launch */
#endif
#endif
    return v;
  }();
  return &vt;
}

static const memra_backend_vt *open_fail(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static const memra_backend_vt *open_fail(char *err, size_t err_size, const char *fmt, ...) {
  if (err && err_size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
  }
  return NULL;
}

extern "C" MEMRA_PLUGIN_EXPORT const memra_backend_vt *
memra_plugin_open(const memra_open_params *params, memra_backend **out, char *err,
                  size_t err_size) {
  if (!out) return open_fail(err, err_size, MEMRA_CUDA_NAME ": out is NULL");
  *out = NULL;
  int device = 0;
  if (params && params->struct_size >= offsetof(memra_open_params, device) + sizeof(int32_t))
    device = params->device;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return open_fail(err, err_size, MEMRA_CUDA_NAME ": no usable CUDA device: %s",
                     cudaGetErrorString(e));
  if (device < 0 || device >= count)
    return open_fail(err, err_size, MEMRA_CUDA_NAME ": device %d requested, %d present", device,
                     count);
  memra_backend *be = (memra_backend *)calloc(1, sizeof *be);
  if (!be) return open_fail(err, err_size, MEMRA_CUDA_NAME ": out of host memory");
  be->device = device;
  if ((e = cudaGetDeviceProperties(&be->prop, device)) != cudaSuccess) {
    free(be);
    return open_fail(err, err_size, MEMRA_CUDA_NAME ": device %d: %s", device,
                     cudaGetErrorString(e));
  }
  if (be->prop.major != MEMRA_CUDA_CC_MAJOR || be->prop.minor != MEMRA_CUDA_CC_MINOR) {
    open_fail(err, err_size,
              MEMRA_CUDA_NAME ": device %d is sm_%d%d (%s), this plugin needs sm_%d%d", device,
              be->prop.major, be->prop.minor, be->prop.name, MEMRA_CUDA_CC_MAJOR,
              MEMRA_CUDA_CC_MINOR);
    free(be);
    return NULL;
  }
  be->n_sms = be->prop.multiProcessorCount;
  /* Programmatic dependent launch (launch.cuh) unless MEMRA_PDL=0 asks for plain launches. */
  const char *pdl = getenv("MEMRA_PDL");
  be->pdl = be->prop.major >= 9 && !(pdl && pdl[0] == '0');
  if ((e = cudaSetDevice(device)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    free(be);
    return open_fail(err, err_size, MEMRA_CUDA_NAME ": device %d: %s", device,
                     cudaGetErrorString(e));
  }
  *out = be;
  return cu_vtable();
}
