/* gemm_bench.c — the gemm op (tensor-core prefill GEMM) of a GPU plugin, in TFLOP/s beside
 * the 790 TFLOP/s dense f16/bf16 peak measured on the H200, with cuBLAS as the yardstick.
 *
 *   gemm_bench PLUGIN.so [stage]  (MEMRA_CUBLAS / MEMRA_CUDART: library paths, optional)
 *
 * 1. M = N = K = 8192, F16 and BF16 weights: the op with F32 x (conversion included) and
 *    with x already 16-bit (the kernel alone), against cublasGemmEx (same operand type,
 *    f32 output, f32 compute, "TN": C = A B^T) timed with events in the same run.
 * 2. M = 512 rows on the Llama-3.1-8B projections (N x K = 4096x4096, 1024x4096,
 *    14336x4096, 4096x14336) per weight type, F32 x: the op as the model calls it
 *    (quantized weights include their decode to f16). Weights rotate over copies beyond
 *    the L2; each timed unit is a captured graph of many calls; median of 7.
 * 3. A GEMM-only prefill bound per type: 512 / (32 layers x the 7 projections' time).
 * 4. Each tile shape forced (MEMRA_GEMM_TILE) on the M = 512 shapes, x already F16: the
 *    table the dispatcher's throughput guesses are checked against.
 * 5. The staging pass (quantized weights decoded to f16 rows) of Q8_0, Q4_K and Q6_K on the
 *    gate/up and down shapes: op time with F16 x minus the F16-weight op time (F16 x: the
 *    kernel alone), in us and in GB/s of weight bytes read + f16 written; it works on any
 *    plugin binary, so old and new builds (or MEMRA_GEMM_DEQ=2, the v2 decode) compare
 *    directly. `stage` runs this table only.
 * cuBLAS is loaded with dlopen here only (never by the plugin); without it the yardstick
 * columns read "n/a". */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/quant/quant.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

#define PEAK_TFLOPS 790.0

static memra_plug G;
#define MUST(call, what) memra_plug_must(&G, (call), what)

/* --- cuBLAS and the runtime through dlopen (declared here: no CUDA headers) ---------- */
typedef int (*fn_malloc)(void **, size_t);
typedef int (*fn_free)(void *);
typedef int (*fn_memcpy)(void *, const void *, size_t, int);
typedef int (*fn_sync)(void);
typedef int (*fn_ev_create)(void **);
typedef int (*fn_ev_record)(void *, void *);
typedef int (*fn_ev_sync)(void *);
typedef int (*fn_ev_elapsed)(float *, void *, void *);
typedef int (*fn_cublas_create)(void **);
typedef int (*fn_gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int,
                          const void *, int, int, const void *, void *, int, int, int, int);
static struct {
  fn_malloc malloc_;
  fn_free free_;
  fn_memcpy memcpy_;
  fn_sync sync;
  fn_ev_create ev_create;
  fn_ev_record ev_record;
  fn_ev_sync ev_sync;
  fn_ev_elapsed ev_elapsed;
  fn_gemm_ex gemm_ex;
  void *handle;
} CB;
enum { R_32F = 0, R_16F = 2, R_16BF = 14, OP_N = 0, OP_T = 1, COMPUTE_32F = 68, ALGO_DEFAULT = -1 };

static void *open_first(const char *env, const char *const *names) {
  const char *e = getenv(env);
  if (e && *e) return dlopen(e, RTLD_NOW | RTLD_LOCAL);
  for (; *names; ++names) {
    void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  return NULL;
}
static int cublas_load(void) {
  static const char *const rt[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                   "/usr/local/cuda/lib64/libcudart.so", NULL};
  static const char *const bl[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12",
                                   "/usr/local/cuda/lib64/libcublas.so", NULL};
  void *hr = open_first("MEMRA_CUDART", rt), *hb = open_first("MEMRA_CUBLAS", bl);
  if (!hr || !hb) {
    fprintf(stderr, "cuBLAS yardstick unavailable: %s\n", dlerror());
    return 0;
  }
  CB.malloc_ = (fn_malloc)dlsym(hr, "cudaMalloc");
  CB.free_ = (fn_free)dlsym(hr, "cudaFree");
  CB.memcpy_ = (fn_memcpy)dlsym(hr, "cudaMemcpy");
  CB.sync = (fn_sync)dlsym(hr, "cudaDeviceSynchronize");
  CB.ev_create = (fn_ev_create)dlsym(hr, "cudaEventCreate");
  CB.ev_record = (fn_ev_record)dlsym(hr, "cudaEventRecord");
  CB.ev_sync = (fn_ev_sync)dlsym(hr, "cudaEventSynchronize");
  CB.ev_elapsed = (fn_ev_elapsed)dlsym(hr, "cudaEventElapsedTime");
  fn_cublas_create create = (fn_cublas_create)dlsym(hb, "cublasCreate_v2");
  CB.gemm_ex = (fn_gemm_ex)dlsym(hb, "cublasGemmEx");
  if (!CB.malloc_ || !CB.free_ || !CB.memcpy_ || !CB.sync || !CB.ev_create || !CB.ev_record ||
      !CB.ev_sync || !CB.ev_elapsed || !create || !CB.gemm_ex || create(&CB.handle) != 0) {
    fprintf(stderr, "cuBLAS yardstick unavailable: missing symbols or cublasCreate failed\n");
    return 0;
  }
  return 1;
}

/* Seconds per cublasGemmEx of C [m, n] (f32) = A [m, k] . B [n, k]^T, 16-bit operands
 * filled with the same kind of random data; median of 7 event-timed batches. 0 = failed. */
static double cublas_time(int64_t m, int64_t n, int64_t k, int bf16) {
  void *a = NULL, *b = NULL, *c = NULL;
  const size_t ab = (size_t)(m * k) * 2, bb = (size_t)(n * k) * 2, cb = (size_t)(m * n) * 4;
  if (CB.malloc_(&a, ab) || CB.malloc_(&b, bb) || CB.malloc_(&c, cb)) return 0;
  uint16_t *h = ck_xmalloc(ab > bb ? ab : bb);
  for (size_t i = 0; i < (ab > bb ? ab : bb) / 2; ++i)
    h[i] = bf16 ? memra_f32_to_bf16(ck_frand_milli()) : memra_f32_to_fp16(ck_frand_milli());
  CB.memcpy_(a, h, ab, 1);
  CB.memcpy_(b, h, bb, 1);
  free(h);
  const float one = 1.f, zero = 0.f;
  const int ty = bf16 ? R_16BF : R_16F;
  /* column-major: C^T [n, m] = (B [k, n] col-major)^T . A^T [k, m] */
#define CB_GEMM()                                                                                  \
  CB.gemm_ex(CB.handle, OP_T, OP_N, (int)n, (int)m, (int)k, &one, b, ty, (int)k, a, ty, (int)k,    \
             &zero, c, R_32F, (int)n, COMPUTE_32F, ALGO_DEFAULT)
  double t[7];
  void *e0 = NULL, *e1 = NULL;
  CB.ev_create(&e0);
  CB.ev_create(&e1);
  int bad = 0;
  for (int w = 0; w < 3; ++w)
    bad |= CB_GEMM();
  const int inner = m * n * k > (int64_t)1 << 36 ? 5 : 40;
  for (int r = 0; r < 7 && !bad; ++r) {
    CB.ev_record(e0, NULL);
    for (int i = 0; i < inner; ++i)
      bad |= CB_GEMM();
    CB.ev_record(e1, NULL);
    CB.ev_sync(e1);
    float ms = 0;
    CB.ev_elapsed(&ms, e0, e1);
    t[r] = ms * 1e-3 / inner;
  }
#undef CB_GEMM
  CB.sync();
  CB.free_(a);
  CB.free_(b);
  CB.free_(c);
  if (bad) return 0;
  return ck_median(t, 7);
}

/* --- the plugin's gemm op --------------------------------------------------------------- */

/* f16 scale fields small and finite (random bytes there can be Inf/NaN) */
static float bench_scale(void) { return 0.001f + 0.019f * (float)(ck_rnd() % 1000) / 1000.f; }

static void fill_w(int32_t type, uint8_t *p, uint64_t bytes) {
  if (memra_type_info(type).blck == 1) {
    for (uint64_t i = 0; i + 1 < bytes; i += 2) {
      const float v = ck_frand_milli();
      const uint16_t h = type == MEMRA_TYPE_BF16 ? memra_f32_to_bf16(v) : memra_f32_to_fp16(v);
      memcpy(p + i, &h, 2);
    }
    return;
  }
  ck_rand_blocks(type, p, bytes, bench_scale);
}

/* Seconds per gemm op of y [m, n] = x [m, k] (x_type: F32 or 16-bit) . w^T, weights of
 * `type` rotated over enough copies to exceed the L2; median of 7 graph replays. */
static double op_time(int32_t type, int32_t x_type, int64_t m, int64_t n, int64_t k) {
  const uint64_t wrow = memra_type_row_bytes(type, k), wbytes = wrow * (uint64_t)n;
  int copies = (int)((256ull << 20) / wbytes) + 1;
  if (copies < 2) copies = 2;
  if (copies > 8) copies = 8;
  const uint64_t xrow = (uint64_t)k * (x_type == MEMRA_TYPE_F32 ? 4 : 2);
  memra_buf *w = NULL, *x = NULL, *y = NULL;
  MUST(G.vt->buf_alloc(G.be, wbytes * copies, &w), "buf_alloc w");
  MUST(G.vt->buf_alloc(G.be, xrow * m, &x), "buf_alloc x");
  MUST(G.vt->buf_alloc(G.be, (uint64_t)(m * n) * 4, &y), "buf_alloc y");
  uint8_t *h = ck_xmalloc(wbytes > xrow * m ? wbytes : xrow * m);
  fill_w(type, h, wbytes);
  for (int c = 0; c < copies; ++c)
    MUST(G.vt->buf_upload(G.be, w, wbytes * c, h, wbytes), "upload w");
  if (x_type == MEMRA_TYPE_F32)
    for (int64_t i = 0; i < m * k; ++i)
      ((float *)h)[i] = ck_frand_milli();
  else
    fill_w(x_type, h, xrow * m);
  MUST(G.vt->buf_upload(G.be, x, 0, h, xrow * m), "upload x");
  free(h);
  const memra_tensor tx = {x, 0, x_type, 0, k, m, xrow};
  const memra_tensor ty = {y, 0, MEMRA_TYPE_F32, 0, n, m, (uint64_t)n * 4};
  const memra_tensor none = {0};
  const double flop = 2.0 * m * n * k;
  int per_graph = (int)(0.02 * 700e12 / flop) + 1; /* about 20 ms of work per replay */
  if (per_graph < copies) per_graph = copies;
  /* one eager call first: lazy one-time setup stays outside the capture */
  memra_tensor tw0 = {w, 0, type, 0, k, n, wrow};
  MUST(G.vt->gemm(G.be, &ty, &tx, &tw0, &none), "gemm");
  MUST(G.vt->synchronize(G.be), "synchronize");
  memra_graph *g = NULL;
  MUST(G.vt->graph_begin(G.be), "graph_begin");
  for (int i = 0; i < per_graph; ++i) {
    memra_tensor tw = {w, wbytes * (uint64_t)(i % copies), type, 0, k, n, wrow};
    MUST(G.vt->gemm(G.be, &ty, &tx, &tw, &none), "gemm");
  }
  MUST(G.vt->graph_end(G.be, &g), "graph_end");
  double t[7];
  MUST(G.vt->graph_launch(G.be, g), "graph_launch");
  MUST(G.vt->synchronize(G.be), "synchronize");
  for (int r = 0; r < 7; ++r) {
    const double t0 = ck_now();
    MUST(G.vt->graph_launch(G.be, g), "graph_launch");
    MUST(G.vt->synchronize(G.be), "synchronize");
    t[r] = (ck_now() - t0) / per_graph;
  }
  G.vt->graph_free(G.be, g);
  G.vt->buf_free(G.be, w);
  G.vt->buf_free(G.be, x);
  G.vt->buf_free(G.be, y);
  return ck_median(t, 7);
}

static double tflops(int64_t m, int64_t n, int64_t k, double s) {
  return s > 0 ? 2.0 * m * n * k / s / 1e12 : 0;
}

/* Sections 1-4 of the header into out from line no; returns the next line. */
static int bench_ops(char out[][200], int no, int have_cublas) {
  /* 1. the square case against cuBLAS */
  snprintf(out[no++], sizeof out[0], "%-5s %-16s %12s %12s %12s %9s", "type", "M=N=K=8192",
           "op (F32 x)", "kernel", "cuBLAS", "kernel/cuBLAS");
  for (int bf = 0; bf < 2; ++bf) {
    const int64_t s = 8192;
    const int32_t wt = bf ? MEMRA_TYPE_BF16 : MEMRA_TYPE_F16;
    const double t_op = op_time(wt, MEMRA_TYPE_F32, s, s, s);
    const double t_k = op_time(wt, wt, s, s, s);
    const double t_cb = have_cublas ? cublas_time(s, s, s, bf) : 0;
    char cb[32] = "n/a", ratio[32] = "n/a";
    if (t_cb > 0) {
      snprintf(cb, sizeof cb, "%.0f TF/s", tflops(s, s, s, t_cb));
      snprintf(ratio, sizeof ratio, "%.1f%%", 100.0 * t_cb / t_k);
    }
    snprintf(out[no++], sizeof out[0], "%-5s %-16s %7.0f TF/s %7.0f TF/s %12s %9s",
             memra_type_info(wt).name, "", tflops(s, s, s, t_op), tflops(s, s, s, t_k), cb, ratio);
    fprintf(stderr, "%s\n", out[no - 1]);
  }

  /* 2. M = 512 on the Llama-3.1-8B projections, per type */
  static const struct {
    const char *name;
    int64_t n, k;
    int per_layer;
  } shapes[] = {{"q/o 4096x4096", 4096, 4096, 2},
                {"k/v 1024x4096", 1024, 4096, 2},
                {"gate/up 14336x4096", 14336, 4096, 2},
                {"down 4096x14336", 4096, 14336, 1}};
  static const int32_t types[] = {MEMRA_TYPE_F16,  MEMRA_TYPE_BF16, MEMRA_TYPE_Q8_0,
                                  MEMRA_TYPE_Q4_0, MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q5_K,
                                  MEMRA_TYPE_Q6_K};
  const int64_t M = 512;
  snprintf(out[no++], sizeof out[0], "%-5s %-20s %10s %9s %7s %10s", "type", "M=512 shape", "us",
           "TFLOP/s", "% peak", "cuBLAS F16");
  double cb_shape[4] = {0, 0, 0, 0};
  if (have_cublas)
    for (int si = 0; si < 4; ++si)
      cb_shape[si] = cublas_time(M, shapes[si].n, shapes[si].k, 0);
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ++ti) {
    double layer = 0;
    for (int si = 0; si < 4; ++si) {
      const double t = op_time(types[ti], MEMRA_TYPE_F32, M, shapes[si].n, shapes[si].k);
      layer += t * shapes[si].per_layer;
      const double tf = tflops(M, shapes[si].n, shapes[si].k, t);
      char cb[32] = "n/a";
      if (cb_shape[si] > 0)
        snprintf(cb, sizeof cb, "%.0f TF/s", tflops(M, shapes[si].n, shapes[si].k, cb_shape[si]));
      snprintf(out[no++], sizeof out[0], "%-5s %-20s %10.1f %9.0f %6.1f%% %10s",
               memra_type_info(types[ti]).name, shapes[si].name, t * 1e6, tf,
               100.0 * tf / PEAK_TFLOPS, cb);
      fprintf(stderr, "%s\n", out[no - 1]);
    }
    snprintf(out[no++], sizeof out[0],
             "%-5s GEMM-only pp512 bound: %.0f tok/s (32 layers x 7 projections, %.1f ms)",
             memra_type_info(types[ti]).name, M / (32 * layer), 32 * layer * 1e3);
  }
  /* 4. the tile shapes on the M = 512 shapes, kernel alone (F16 x), forced one at a time
   * (MEMRA_GEMM_TILE), beside the dispatcher's own choice ("auto") */
  static const char *const tiles[] = {"auto",    "128x256", "128x224", "128x192",
                                      "128x128", "64x256",  "64x128",  "64x64"};
  enum { N_TILES = sizeof tiles / sizeof tiles[0] };
  int len = snprintf(out[no], sizeof out[0], "%-20s", "F16 x, TFLOP/s");
  for (int ti = 0; ti < N_TILES; ++ti)
    len += snprintf(out[no] + len, sizeof out[0] - (size_t)len, " %7s", tiles[ti]);
  ++no;
  for (int si = 0; si < 4; ++si) {
    len = snprintf(out[no], sizeof out[0], "%-20s", shapes[si].name);
    for (int ti = 0; ti < N_TILES; ++ti) {
      if (ti)
        setenv("MEMRA_GEMM_TILE", tiles[ti], 1);
      else
        unsetenv("MEMRA_GEMM_TILE");
      const double t = op_time(MEMRA_TYPE_F16, MEMRA_TYPE_F16, M, shapes[si].n, shapes[si].k);
      len += snprintf(out[no] + len, sizeof out[0] - (size_t)len, " %7.0f",
                      tflops(M, shapes[si].n, shapes[si].k, t));
    }
    unsetenv("MEMRA_GEMM_TILE");
    fprintf(stderr, "%s\n", out[no]);
    ++no;
  }
  return no;
}

/* Section 5: the staging pass estimated as (quantized op - F16 op), both with F16 x. */
static int bench_stage(char out[][200], int no) {
  static const struct {
    const char *name;
    int64_t n, k;
  } shapes[] = {{"gate/up 14336x4096", 14336, 4096}, {"down 4096x14336", 4096, 14336}};
  static const int32_t types[] = {MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q6_K};
  const int64_t M = 512;
  const char *deq = getenv("MEMRA_GEMM_DEQ");
  snprintf(out[no++], sizeof out[0],
           "%-5s %-20s %10s %10s %10s %9s  staging = op - F16 op, F16 x, M=512%s%s", "type",
           "shape", "op us", "F16 us", "stage us", "GB/s", deq ? ", MEMRA_GEMM_DEQ=" : "",
           deq ? deq : "");
  for (int si = 0; si < 2; ++si) {
    const int64_t n = shapes[si].n, k = shapes[si].k;
    const double t_f = op_time(MEMRA_TYPE_F16, MEMRA_TYPE_F16, M, n, k);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ++ti) {
      const double t_q = op_time(types[ti], MEMRA_TYPE_F16, M, n, k), st = t_q - t_f;
      const double bytes = (double)memra_type_row_bytes(types[ti], k) * n + 2.0 * n * k;
      snprintf(out[no++], sizeof out[0], "%-5s %-20s %10.1f %10.1f %10.1f %9.0f",
               memra_type_info(types[ti]).name, shapes[si].name, t_q * 1e6, t_f * 1e6, st * 1e6,
               st > 0 ? bytes / st / 1e9 : 0.0);
      fprintf(stderr, "%s\n", out[no - 1]);
    }
  }
  return no;
}

int main(int argc, char **argv) {
  ck_rng = 0x3C6EF372FE94F82Bull; /* the default seed */
  const int stage_only = argc == 3 && strcmp(argv[2], "stage") == 0;
  if (argc != 2 && !stage_only) {
    fprintf(stderr, "usage: gemm_bench PLUGIN.so [stage]\n");
    return 2;
  }
  if (memra_plug_open(&G, argv[1])) return 2;
  if (!G.vt->gemm) {
    fprintf(stderr, "%s: the plugin has no gemm op\n", argv[1]);
    return 2;
  }
  memra_device_info di;
  MUST(G.vt->device_info(G.be, &di), "device_info");
  const int have_cublas = stage_only ? 0 : cublas_load();
  char out[80][200];
  int no = 0;
  snprintf(out[no++], sizeof out[0], "device: %s, %d SMs; peak %.0f TFLOP/s (f16/bf16 dense)",
           di.name, di.n_sms, PEAK_TFLOPS);
  if (!stage_only) no = bench_ops(out, no, have_cublas);
  no = bench_stage(out, no);

  printf("\n==== gemm_bench ====\n");
  for (int i = 0; i < no; ++i)
    printf("%s\n", out[i]);
  memra_plug_close(&G);
  return 0;
}
