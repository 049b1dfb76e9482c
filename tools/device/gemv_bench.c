/* gemv_bench.c — decode matmul (M = 1 row) timings of a GPU plugin on the
 * Llama-3.1-8B projection shapes, per weight type, against the device-to-device copy
 * bandwidth measured in the same run.
 *
 *   gemv_bench PLUGIN.so [TYPE...]     (TYPE: a type name such as Q8_0 or F16; default all)
 *
 * GEMV_BENCH_SHAPE=TEXT keeps the shapes whose name contains TEXT (e.g. "ffn_down"), so that a
 * profiler's first launches are the shape wanted (tools/device/profile_gemv.sh).
 *
 * Weights are rotated over enough copies that the working set is far larger than L2
 * (60 MB on an H200), and each timed unit is a captured graph of many matmuls, so launch
 * gaps and host timing add little. Bytes counted: the weight matrix, x and y, once each.
 * GB/s is 1e9 bytes per second; the copy figure counts bytes read plus bytes written.
 * Inputs come from a fixed seed, so each line's "y" (FNV-1a 64 of the last matmul's output
 * bytes) compares kernel versions bitwise across runs (e.g. MEMRA_GEMV_Q8=v8a). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/quant/quant.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

static memra_plug G;
#define MUST(call, what) memra_plug_must(&G, (call), what)

/* Median seconds of one run of fn over `reps` timed batches of `inner` runs. */
static double median_time(void (*fn)(void *), void *ctx, int inner, int reps) {
  double t[32];
  for (int w = 0; w < 3; ++w)
    fn(ctx);
  MUST(G.vt->synchronize(G.be), "synchronize");
  for (int r = 0; r < reps; ++r) {
    double t0 = ck_now();
    for (int i = 0; i < inner; ++i)
      fn(ctx);
    MUST(G.vt->synchronize(G.be), "synchronize");
    t[r] = (ck_now() - t0) / inner;
  }
  return ck_median(t, reps);
}

typedef struct copy_ctx {
  memra_buf *a, *b;
  uint64_t n;
} copy_ctx;
static void run_copy(void *p) {
  copy_ctx *c = p;
  MUST(G.vt->buf_copy(G.be, c->b, 0, c->a, 0, c->n), "buf_copy");
}

typedef struct graph_ctx {
  memra_graph *g;
} graph_ctx;
static void run_graph(void *p) {
  MUST(G.vt->graph_launch(G.be, ((graph_ctx *)p)->g), "graph_launch");
}

static void fill_random(int32_t type, uint8_t *p, uint64_t bytes) {
  for (uint64_t i = 0; i < bytes; ++i)
    p[i] = (uint8_t)(ck_rnd() >> 56);
  memra_type_traits tr = memra_type_info(type);
  if (tr.blck == 1) { /* float formats: keep values finite and moderate */
    for (uint64_t i = 0; i + 1 < bytes; i += 2) {
      uint16_t h = type == MEMRA_TYPE_BF16 ? memra_f32_to_bf16(ck_frand_milli())
                                           : memra_f32_to_fp16(ck_frand_milli());
      memcpy(p + i, &h, 2);
    }
  }
  /* Quantized formats: random scale bytes are valid blocks; timing does not depend on
   * their values (no data-dependent branches in the kernels). */
}

/* Whether the command line's type names (none: every type) include type. */
static int type_wanted(int32_t type, int n, char **names) {
  for (int i = 0; i < n; ++i)
    if (!strcmp(names[i], memra_type_info(type).name)) return 1;
  return n == 0;
}

int main(int argc, char **argv) {
  ck_rng = 0x2545F4914F6CDD1Dull; /* the default seed */
  if (argc < 2) {
    fprintf(stderr, "usage: gemv_bench PLUGIN.so [TYPE...]\n");
    return 2;
  }
  if (memra_plug_open(&G, argv[1])) return 2;
  if (!G.vt->graph_begin || !G.vt->graph_end || !G.vt->graph_launch || !G.vt->graph_free) {
    fprintf(stderr, "gemv_bench: %s has no graph capture (the timings replay graphs)\n", argv[1]);
    return 2;
  }
  memra_device_info di;
  MUST(G.vt->device_info(G.be, &di), "device_info");

  /* 1. copy bandwidth: 2 GiB device to device */
  copy_ctx cc = {NULL, NULL, 2ull << 30};
  MUST(G.vt->buf_alloc(G.be, cc.n, &cc.a), "buf_alloc");
  MUST(G.vt->buf_alloc(G.be, cc.n, &cc.b), "buf_alloc");
  {
    uint8_t *tmp = malloc(64 << 20);
    if (!tmp) {
      fprintf(stderr, "gemv_bench: out of host memory\n");
      return 2;
    }
    for (uint64_t i = 0; i < (64u << 20); ++i)
      tmp[i] = (uint8_t)(ck_rnd() >> 56);
    for (uint64_t o = 0; o < cc.n; o += 64u << 20)
      MUST(G.vt->buf_upload(G.be, cc.a, o, tmp, 64u << 20), "upload");
    free(tmp);
  }
  double tc = median_time(run_copy, &cc, 10, 7);
  double copy_gbs = 2.0 * cc.n / tc / 1e9;
  G.vt->buf_free(G.be, cc.a);
  G.vt->buf_free(G.be, cc.b);
  printf("device: %s, %d SMs; copy %.0f MiB d2d: %.1f us, %.0f GB/s (read+write)\n", di.name,
         di.n_sms, cc.n / 1048576.0, tc * 1e6, copy_gbs);

  static const struct {
    const char *name;
    int64_t n, k, m;
  } shapes[] = {
      {"attn_q/out 4096x4096", 4096, 4096, 1}, {"ffn_gate/up 14336x4096", 14336, 4096, 1},
      {"ffn_down 4096x14336", 4096, 14336, 1}, {"output 128256x4096", 128256, 4096, 1},
      {"ffn_gate/up M=8", 14336, 4096, 8},     {"ffn_gate/up M=4", 14336, 4096, 4},
      {"output 151936x2048", 151936, 2048, 1},
  };
  static const int32_t types[] = {MEMRA_TYPE_F16,  MEMRA_TYPE_BF16, MEMRA_TYPE_Q8_0,
                                  MEMRA_TYPE_Q4_0, MEMRA_TYPE_Q4_1, MEMRA_TYPE_Q4_K,
                                  MEMRA_TYPE_Q5_K, MEMRA_TYPE_Q6_K};
  const char *shape_want = getenv("GEMV_BENCH_SHAPE");
  char table[64][160];
  int nt = 0;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ++ti) {
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
      const int32_t type = types[ti];
      const int64_t N = shapes[si].n, K = shapes[si].k, M = shapes[si].m;
      if (!type_wanted(type, argc - 2, argv + 2)) continue;
      if (shape_want && !strstr(shapes[si].name, shape_want)) continue;
      if (M > 1 && type != MEMRA_TYPE_Q4_K && type != MEMRA_TYPE_F16 && type != MEMRA_TYPE_Q8_0)
        continue;
      if (M == 4 && type != MEMRA_TYPE_Q8_0) continue; /* Q8_0's one full group of 4 rows */
      const uint64_t wbytes = memra_type_row_bytes(type, K) * (uint64_t)N;
      int copies = (int)((512ull << 20) / wbytes) + 1;
      if (copies < 2) copies = 2;
      const int per_graph = copies < 24 ? 24 : copies; /* matmuls per graph */
      memra_buf *w = NULL, *x = NULL, *y = NULL;
      MUST(G.vt->buf_alloc(G.be, wbytes * copies, &w), "buf_alloc w");
      MUST(G.vt->buf_alloc(G.be, (uint64_t)M * K * 4, &x), "buf_alloc x");
      MUST(G.vt->buf_alloc(G.be, (uint64_t)M * N * 4, &y), "buf_alloc y");
      uint8_t *host = malloc(wbytes);
      fill_random(type, host, wbytes);
      for (int c = 0; c < copies; ++c)
        MUST(G.vt->buf_upload(G.be, w, wbytes * c, host, wbytes), "upload w");
      free(host);
      float *xh = malloc((size_t)(M * K) * 4);
      for (int64_t i = 0; i < M * K; ++i)
        xh[i] = ck_frand_milli();
      MUST(G.vt->buf_upload(G.be, x, 0, xh, (uint64_t)(M * K) * 4), "upload x");
      free(xh);
      memra_tensor tx = {x, 0, MEMRA_TYPE_F32, 0, K, M, (uint64_t)K * 4};
      memra_tensor ty = {y, 0, MEMRA_TYPE_F32, 0, N, M, (uint64_t)N * 4};
      graph_ctx gc = {NULL};
      MUST(G.vt->synchronize(G.be), "synchronize");
      MUST(G.vt->graph_begin(G.be), "graph_begin");
      for (int i = 0; i < per_graph; ++i) {
        memra_tensor tw = {w, wbytes * (uint64_t)(i % copies), type, 0, K,
                           N, memra_type_row_bytes(type, K)};
        MUST(G.vt->matmul(G.be, &ty, &tx, &tw, NULL), "matmul");
      }
      MUST(G.vt->graph_end(G.be, &gc.g), "graph_end");
      double t = median_time(run_graph, &gc, 5, 7) / per_graph;
      G.vt->graph_free(G.be, gc.g);
      float *yh = malloc((size_t)(M * N) * 4);
      MUST(G.vt->buf_download(G.be, y, 0, yh, (uint64_t)(M * N) * 4), "download y");
      uint64_t hash = 14695981039346656037ull;
      for (size_t i = 0; i < (size_t)(M * N) * 4; ++i)
        hash = (hash ^ ((const uint8_t *)yh)[i]) * 1099511628211ull;
      free(yh);
      const double bytes = (double)wbytes + M * (K * 4.0 + N * 4.0);
      const double gbs = bytes / t / 1e9;
      snprintf(table[nt++], sizeof table[0],
               "%-5s %-24s %9.1f %8.0f %6.1f%%  (%.1f MB, %d copies) y %016llx",
               memra_type_info(type).name, shapes[si].name, t * 1e6, gbs, 100.0 * gbs / copy_gbs,
               wbytes / 1e6, copies, (unsigned long long)hash);
      fprintf(stderr, "%s\n", table[nt - 1]);
      G.vt->buf_free(G.be, w);
      G.vt->buf_free(G.be, x);
      G.vt->buf_free(G.be, y);
    }
  }
  /* Split-KV decode attention, Llama-3.1-8B layer (32 q heads, 8 kv heads, d 128), F16
   * paged cache, one row at position L-1: bytes = K and V of L positions. */
  for (int li = 0; li < 2; ++li) {
    const int L = li ? 4096 : 512, bs = 16, nb = L / bs, width = 8 * 128;
    const int layers = 32; /* rotate over 32 layers' caches: beyond L2 */
    const uint64_t cbytes = (uint64_t)L * width * 2;
    memra_buf *kc = NULL, *vc = NULL, *q = NULL, *o = NULL, *bt = NULL, *ps = NULL;
    MUST(G.vt->buf_alloc(G.be, cbytes * layers, &kc), "buf_alloc");
    MUST(G.vt->buf_alloc(G.be, cbytes * layers, &vc), "buf_alloc");
    MUST(G.vt->buf_alloc(G.be, 32 * 128 * 4, &q), "buf_alloc");
    MUST(G.vt->buf_alloc(G.be, 32 * 128 * 4, &o), "buf_alloc");
    MUST(G.vt->buf_alloc(G.be, (uint64_t)nb * 4, &bt), "buf_alloc");
    MUST(G.vt->buf_alloc(G.be, 8, &ps), "buf_alloc");
    uint8_t *h = malloc(cbytes);
    fill_random(MEMRA_TYPE_F16, h, cbytes);
    for (int l = 0; l < layers; ++l) {
      MUST(G.vt->buf_upload(G.be, kc, cbytes * l, h, cbytes), "upload");
      MUST(G.vt->buf_upload(G.be, vc, cbytes * l, h, cbytes), "upload");
    }
    free(h);
    int32_t *bth = malloc((size_t)nb * 4);
    for (int i = 0; i < nb; ++i)
      bth[i] = (i * 7) % nb; /* a shuffled page order */
    MUST(G.vt->buf_upload(G.be, bt, 0, bth, (uint64_t)nb * 4), "upload");
    free(bth);
    int32_t ps_h[2] = {L - 1, 0};
    MUST(G.vt->buf_upload(G.be, ps, 0, ps_h, 8), "upload");
    float *qh = malloc(32 * 128 * 4);
    for (int i = 0; i < 32 * 128; ++i)
      qh[i] = ck_frand_milli();
    MUST(G.vt->buf_upload(G.be, q, 0, qh, 32 * 128 * 4), "upload");
    free(qh);
    memra_batch b;
    memset(&b, 0, sizeof b);
    b.n_rows = 1;
    b.n_seqs = 1;
    b.block_size = bs;
    b.max_blocks = nb;
    b.kv_bucket = L;
    b.pos = (memra_tensor){ps, 0, MEMRA_TYPE_I32, 0, 1, 1, 4};
    b.seq = (memra_tensor){ps, 4, MEMRA_TYPE_I32, 0, 1, 1, 4};
    b.block_table = (memra_tensor){bt, 0, MEMRA_TYPE_I32, 0, nb, 1, (uint64_t)nb * 4};
    memra_attn_params ap = {32, 8, 128, 0, 0.08838834764831845f, 0.f};
    memra_tensor tq = {q, 0, MEMRA_TYPE_F32, 0, 32 * 128, 1, 32 * 128 * 4};
    memra_tensor to = {o, 0, MEMRA_TYPE_F32, 0, 32 * 128, 1, 32 * 128 * 4};
    graph_ctx gc = {NULL};
    MUST(G.vt->synchronize(G.be), "synchronize");
    MUST(G.vt->graph_begin(G.be), "graph_begin");
    for (int l = 0; l < layers; ++l) {
      memra_tensor tk = {kc, cbytes * l, MEMRA_TYPE_F16, 0, width, L, (uint64_t)width * 2};
      memra_tensor tv = {vc, cbytes * l, MEMRA_TYPE_F16, 0, width, L, (uint64_t)width * 2};
      MUST(G.vt->attention(G.be, &to, &tq, &tk, &tv, &b, &ap), "attention");
    }
    MUST(G.vt->graph_end(G.be, &gc.g), "graph_end");
    double t = median_time(run_graph, &gc, 5, 7) / layers;
    G.vt->graph_free(G.be, gc.g);
    const double gbs = 2.0 * cbytes / t / 1e9;
    snprintf(table[nt++], sizeof table[0],
             "%-5s %-24s %9.1f %8.0f %6.1f%%  (KV %.1f MB, 32 layers)", "F16",
             li ? "attention L=4096 32/8x128" : "attention L=512 32/8x128", t * 1e6, gbs,
             100.0 * gbs / copy_gbs, 2.0 * cbytes / 1e6);
    G.vt->buf_free(G.be, kc);
    G.vt->buf_free(G.be, vc);
    G.vt->buf_free(G.be, q);
    G.vt->buf_free(G.be, o);
    G.vt->buf_free(G.be, bt);
    G.vt->buf_free(G.be, ps);
  }
  printf("\nmatmul v3, attention v2 on %s; copy bandwidth %.0f GB/s\n", di.name, copy_gbs);
  printf("%-5s %-24s %9s %8s %7s\n", "type", "shape (N x K)", "us", "GB/s", "%copy");
  for (int i = 0; i < nt; ++i)
    printf("%s\n", table[i]);
  memra_plug_close(&G);
  return 0;
}
