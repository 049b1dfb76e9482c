/* plugin.c — the CPU reference plugin's entry points: probe, open, and the vtable.
 *
 * Runs everywhere (score 1: the fallback every machine has). Executes eagerly, so the
 * graph_* slots are NULL; step state (positions, tables, ids) is read from its buffers
 * at each call exactly as a GPU kernel would read device memory. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/cpu/cpu_backend.h"
#include "plugins/cpu/cpu_plugin.h"

memra_status cpu_fail(memra_backend *be, memra_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(be->err, sizeof be->err, fmt, ap);
  va_end(ap);
  return st;
}

memra_status cpu_scratch_reserve(memra_backend *be, const char *op, size_t n) {
  if (n <= be->scratch_len) return MEMRA_OK;
  if (n > SIZE_MAX / sizeof(float) / 2)
    return cpu_fail(be, MEMRA_E_OOM, "%s: scratch of %zu floats is too large", op, n);
  size_t len = n < 1024 ? 1024 : n + n / 2;
  for (int i = 0; i < be->n_threads; ++i) {
    float *p = realloc(be->scratch[i], len * sizeof(float));
    if (!p)
      return cpu_fail(be, MEMRA_E_OOM, "%s: cannot allocate %zu bytes of scratch", op,
                      len * sizeof(float));
    be->scratch[i] = p;
  }
  be->scratch_len = len;
  return MEMRA_OK;
}

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > CPU_MAX_THREADS ? CPU_MAX_THREADS : (int)n;
}

static void cpu_close(memra_backend *be) {
  if (!be) return;
  cpu_pool_destroy(be->pool);
  for (int i = 0; i < CPU_MAX_THREADS; ++i)
    free(be->scratch[i]);
  free(be);
}

static const char *cpu_last_error(memra_backend *be) { return be ? be->err : "no backend"; }

static memra_status cpu_device_info(memra_backend *be, memra_device_info *out) {
  if (!out) return cpu_fail(be, MEMRA_E_INVALID, "device_info: out is NULL");
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "CPU (%d thread%s)", be->n_threads,
           be->n_threads == 1 ? "" : "s");
  long page = sysconf(_SC_PAGESIZE), total = sysconf(_SC_PHYS_PAGES),
       avail = sysconf(_SC_AVPHYS_PAGES);
  if (page > 0 && total > 0) out->mem_total = (uint64_t)page * (uint64_t)total;
  if (page > 0 && avail > 0) out->mem_free = (uint64_t)page * (uint64_t)avail;
  out->n_sms = be->n_threads;
  return MEMRA_OK;
}

static memra_status cpu_synchronize(memra_backend *be) {
  (void)be; /* every op has finished when it returns */
  return MEMRA_OK;
}

static void *cpu_get_proc(memra_backend *be, const char *name) {
  (void)be;
  (void)name;
  return NULL;
}

static const memra_backend_vt cpu_vt = {
    .abi_major = MEMRA_ABI_MAJOR,
    .abi_minor = MEMRA_ABI_MINOR,
    .struct_size = sizeof(memra_backend_vt),
    .name = "cpu",
    .close = cpu_close,
    .last_error = cpu_last_error,
    .device_info = cpu_device_info,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .buf_upload = cpu_buf_upload,
    .buf_download = cpu_buf_download,
    .buf_copy = cpu_buf_copy,
    .synchronize = cpu_synchronize,
    .get_rows = cpu_get_rows,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .glu = cpu_glu,
    .add = cpu_add,
    .scale = cpu_scale,
    .argmax = cpu_argmax,
    .add_i32 = cpu_add_i32,
    .graph_begin = NULL,
    .graph_end = NULL,
    .graph_launch = NULL,
    .graph_free = NULL,
    .get_proc = cpu_get_proc,
#if MEMRA_ABI_MINOR >= 1 /* MoE and Gated DeltaNet slots (moe.c, ssm_conv.c, delta_rule.c) */
    .moe_route = cpu_moe_route,
    .matmul_id = cpu_matmul_id,
    .moe_combine = cpu_moe_combine,
    .sigmoid_gate = cpu_sigmoid_gate,
    .ssm_conv = cpu_ssm_conv,
    .gated_delta_rule = cpu_gated_delta_rule,
#endif
#if MEMRA_ABI_MINOR >= 2 /* sampling on the device (sample.c) */
    .sample = cpu_sample,
#endif
#if MEMRA_ABI_MINOR >= 3 /* fused decode steps (matmul.c); no gemm: matmul is the oracle */
    .matmul_n = cpu_matmul_n,
#endif
#if MEMRA_ABI_MINOR >= 4 /* rope + kv_store in one call: their composition (rope_kv.c) */
    .rope_kv_store = cpu_rope_kv_store,
#endif
#if MEMRA_ABI_MINOR >= 5 /* grouped prompt GEMM: matmul per output, the oracle (matmul.c) */
    .gemm_n = cpu_gemm_n,
#endif
#if MEMRA_ABI_MINOR >= 7 /* the shared expert in the routed combine (moe.c) */
    .moe_combine_gated = cpu_moe_combine_gated,
    .matmul_id_glu = cpu_matmul_id_glu,
    .rmsnorm_gate = cpu_rmsnorm_gate,
#endif
#if MEMRA_ABI_MINOR >= 8 /* the attention's q / k norms in one call (rmsnorm.c) */
    .rmsnorm_qk = cpu_rmsnorm_qk,
#endif
#if MEMRA_ABI_MINOR >= 9 /* the shared expert as the stacks' last expert (moe.c) */
    .moe_combine_shexp = cpu_moe_combine_shexp,
    .matmul_id_combine = cpu_matmul_id_combine,
#endif
#if MEMRA_ABI_MINOR >= 10 /* rope, kv_store and attention of decode rows in one call (rope_kv.c)   \
                           */
    .rope_kv_attend = cpu_rope_kv_attend,
#endif
#if MEMRA_ABI_MINOR >= 11 /* a GDN layer's projections and its conv, attention and its gate */
    .matmul_n_conv = cpu_matmul_n_conv,
    .attention_gate = cpu_attention_gate,
    .gated_delta_rule_norm = cpu_gated_delta_rule_norm,
#endif
#if MEMRA_ABI_MINOR >= 12 /* a dense FFN's three calls in one (matmul.c) */
    .ffn_glu = cpu_ffn_glu,
#endif
#if MEMRA_ABI_MINOR >= 14 /* a decode norm with the projections that read it (matmul.c) */
    .rmsnorm_matmul_n = cpu_rmsnorm_matmul_n,
    .rmsnorm_ffn_glu = cpu_rmsnorm_ffn_glu,
#endif
#if MEMRA_ABI_MINOR >= 15 /* a decode projection with the norm that adds it (matmul.c) */
    .matmul_rmsnorm = cpu_matmul_rmsnorm,
#endif
#if MEMRA_ABI_MINOR >= 16 /* a decode step's q, k, v projections with rope and the KV store */
    .matmul_n_rope_kv = cpu_matmul_n_rope_kv,
#endif
#if MEMRA_ABI_MINOR >= 17 /* a decode projection added into the residual stream (matmul.c) */
    .matmul_acc = cpu_matmul_acc,
#endif
#if MEMRA_ABI_MINOR >= 18 /* the token's copy in two halves (buffers.c) */
    .download_start = cpu_download_start,
    .download_wait = cpu_download_wait,
#endif
#if MEMRA_ABI_MINOR >= 19 /* an attention's q / k norms with rope and the KV store (rope_kv.c) */
    .rmsnorm_qk_rope_kv = cpu_rmsnorm_qk_rope_kv,
#endif
#if MEMRA_ABI_MINOR >= 20 /* a MoE layer's combine with the norm that adds it (moe.c) */
    .moe_combine_rmsnorm = cpu_moe_combine_rmsnorm,
#endif
#if MEMRA_ABI_MINOR >= 21 /* a MoE layer's route with its experts' gate, up and glu (moe.c) */
    .moe_route_glu = cpu_moe_route_glu,
#endif
#if MEMRA_ABI_MINOR >= 22 /* a MoE layer's router with its route (moe.c) */
    .matmul_n_route = cpu_matmul_n_route,
#endif
#if MEMRA_ABI_MINOR >= 23 /* the norm with projections of several types (matmul.c) */
    .rmsnorm_matmul_mixed = cpu_rmsnorm_matmul_mixed,
#endif
};

MEMRA_PLUGIN_EXPORT const memra_plugin_info *memra_plugin_probe(void) {
  static char why[64];
  static memra_plugin_info info;
  int n = online_cores();
  snprintf(why, sizeof why, "CPU reference plugin, %d thread%s", n, n == 1 ? "" : "s");
  info = (memra_plugin_info){.abi_major = MEMRA_ABI_MAJOR,
                             .abi_minor = MEMRA_ABI_MINOR,
                             .struct_size = sizeof(memra_plugin_info),
                             .score = 1,
                             .name = "cpu",
                             .why = why};
  return &info;
}

static const memra_backend_vt *open_fail(char *err, size_t err_size, const char *msg) {
  if (err && err_size) snprintf(err, err_size, "%s", msg);
  return NULL;
}

MEMRA_PLUGIN_EXPORT const memra_backend_vt *memra_plugin_open(const memra_open_params *params,
                                                              memra_backend **out, char *err,
                                                              size_t err_size) {
  if (!out) return open_fail(err, err_size, "cpu: open needs an output pointer");
  *out = NULL;
  int n = 0;
  /* n_threads is present only if the caller's struct reaches it. */
  if (params && params->struct_size >= offsetof(memra_open_params, n_threads) + sizeof(int32_t))
    n = params->n_threads;
  if (n < 0 || n > CPU_MAX_THREADS) {
    char msg[96];
    snprintf(msg, sizeof msg, "cpu: n_threads %d is outside [0, %d] (0 = all cores)", n,
             CPU_MAX_THREADS);
    return open_fail(err, err_size, msg);
  }
  if (n == 0) n = online_cores();
  memra_backend *be = calloc(1, sizeof *be);
  if (!be) return open_fail(err, err_size, "cpu: out of memory opening the backend");
  be->n_threads = n;
  be->pool = cpu_pool_create(n);
  if (!be->pool) {
    free(be);
    return open_fail(err, err_size, "cpu: cannot start the worker threads");
  }
  *out = be;
  return &cpu_vt;
}
