/* attn_bench.c — decode attention timings of a GPU plugin on the Llama-3.1-8B layer shape
 * (32 q heads, 8 KV heads, head dim 128, paged cache of 16-position pages), against the
 * device-to-device copy bandwidth measured in the same run.
 *
 *   attn_bench PLUGIN.so [L...]
 *
 * Cases: KV length L in {512, 4096, 4224} (every row at position L - 1, its own sequence;
 * the bucket is the core's: the power of two >= 256 bounding the positions, so 4224 runs in
 * the 8192 bucket as tg128 @ d4096 does), batch 1 and 8, F16 and FP8 e4m3 caches, the
 * default kernels (v6 on sm_90a) beside v5, v4 and v2 (MEMRA_ATT=5, =4, =2, read per call). Each
 * timed unit is a captured graph of one attention call per layer copy, the copies rotating over
 * more than 256 MB so K and V come from DRAM; the figure is the median of 7 replays of 5, divided
 * by the copies. Bytes counted: K and V of every row's L positions. With lengths L given, only the
 * default kernel on an F16 cache at batch 1, at those lengths (a quick A/B of one kernel's
 * variants; MEMRA_ATT=5 in the environment times v5 there). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/quant/fp8.h"
#include "plugins/quant/quant.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

static memra_plug G;
#define MUST(call, what) memra_plug_must(&G, (call), what)

static double median_graph(memra_graph *g, int inner, int reps) {
  double t[16];
  for (int w = 0; w < 3; ++w)
    MUST(G.vt->graph_launch(G.be, g), "graph_launch");
  MUST(G.vt->synchronize(G.be), "synchronize");
  for (int r = 0; r < reps; ++r) {
    double t0 = ck_now();
    for (int i = 0; i < inner; ++i)
      MUST(G.vt->graph_launch(G.be, g), "graph_launch");
    MUST(G.vt->synchronize(G.be), "synchronize");
    t[r] = (ck_now() - t0) / inner;
  }
  return ck_median(t, reps);
}

static double copy_bandwidth(void) {
  const uint64_t n = 2ull << 30;
  memra_buf *a = NULL, *b = NULL;
  MUST(G.vt->buf_alloc(G.be, n, &a), "buf_alloc");
  MUST(G.vt->buf_alloc(G.be, n, &b), "buf_alloc");
  uint8_t *tmp = ck_xmalloc(64u << 20);
  for (uint64_t i = 0; i < (64u << 20); ++i)
    tmp[i] = (uint8_t)(ck_rnd() >> 56);
  for (uint64_t o = 0; o < n; o += 64u << 20)
    MUST(G.vt->buf_upload(G.be, a, o, tmp, 64u << 20), "upload");
  free(tmp);
  double t[7];
  MUST(G.vt->buf_copy(G.be, b, 0, a, 0, n), "buf_copy");
  MUST(G.vt->synchronize(G.be), "synchronize");
  for (int r = 0; r < 7; ++r) {
    double t0 = ck_now();
    for (int i = 0; i < 5; ++i)
      MUST(G.vt->buf_copy(G.be, b, 0, a, 0, n), "buf_copy");
    MUST(G.vt->synchronize(G.be), "synchronize");
    t[r] = (ck_now() - t0) / 5;
  }
  G.vt->buf_free(G.be, a);
  G.vt->buf_free(G.be, b);
  return 2.0 * n / ck_median(t, 7) / 1e9;
}

/* us per layer of one configuration. */
static double bench_one(int32_t ctype, int L, int B, const char *ver) {
  enum { NH = 32, NKV = 8, HD = 128, BS = 16 };
  const int width = NKV * HD, nb = (L + BS - 1) / BS;
  const uint64_t esz = ctype == MEMRA_TYPE_F16 ? 2 : 1;
  const uint64_t cbytes = (uint64_t)B * nb * BS * width * esz; /* one layer's K (or V) */
  int copies = (int)((256ull << 20) / (2 * cbytes)) + 1;
  if (copies < 2) copies = 2;
  if (copies > 128) copies = 128;
  memra_buf *kc = NULL, *vc = NULL, *q = NULL, *o = NULL, *bt = NULL, *ps = NULL;
  MUST(G.vt->buf_alloc(G.be, cbytes * copies, &kc), "buf_alloc");
  MUST(G.vt->buf_alloc(G.be, cbytes * copies, &vc), "buf_alloc");
  MUST(G.vt->buf_alloc(G.be, (uint64_t)B * NH * HD * 4, &q), "buf_alloc");
  MUST(G.vt->buf_alloc(G.be, (uint64_t)B * NH * HD * 4, &o), "buf_alloc");
  MUST(G.vt->buf_alloc(G.be, (uint64_t)B * nb * 4, &bt), "buf_alloc");
  MUST(G.vt->buf_alloc(G.be, (uint64_t)B * 8, &ps), "buf_alloc");
  uint8_t *h = ck_xmalloc(cbytes);
  for (uint64_t i = 0; i < cbytes; i += esz) {
    const float x = ck_frand_milli();
    if (esz == 2) {
      const uint16_t hv = memra_f32_to_fp16(x);
      memcpy(h + i, &hv, 2);
    } else
      h[i] = memra_f32_to_fp8_e4m3(x);
  }
  for (int l = 0; l < copies; ++l) {
    MUST(G.vt->buf_upload(G.be, kc, cbytes * l, h, cbytes), "upload");
    MUST(G.vt->buf_upload(G.be, vc, cbytes * l, h, cbytes), "upload");
  }
  free(h);
  int32_t *bth = ck_xmalloc((size_t)B * nb * 4), *psh = ck_xmalloc((size_t)B * 8);
  for (int s = 0; s < B; ++s) {
    for (int i = 0; i < nb; ++i) /* each sequence its own pages, in a shuffled order */
      bth[s * nb + i] = s * nb + (int32_t)(((int64_t)i * 7) % nb);
    psh[s] = L - 1;
    psh[B + s] = s;
  }
  MUST(G.vt->buf_upload(G.be, bt, 0, bth, (uint64_t)B * nb * 4), "upload");
  MUST(G.vt->buf_upload(G.be, ps, 0, psh, (uint64_t)B * 8), "upload");
  free(bth);
  free(psh);
  float *qh = ck_xmalloc((size_t)B * NH * HD * 4);
  for (int i = 0; i < B * NH * HD; ++i)
    qh[i] = ck_frand_milli();
  MUST(G.vt->buf_upload(G.be, q, 0, qh, (uint64_t)B * NH * HD * 4), "upload");
  free(qh);
  int32_t bucket = 256;
  while (bucket < L)
    bucket *= 2;
  memra_batch b;
  memset(&b, 0, sizeof b);
  b.n_rows = B;
  b.n_seqs = B;
  b.block_size = BS;
  b.max_blocks = nb;
  b.kv_bucket = bucket;
  b.flags = MEMRA_BATCH_DISTINCT; /* a sequence a row, as the core says of decode rows */
  b.pos = (memra_tensor){ps, 0, MEMRA_TYPE_I32, 0, B, 1, (uint64_t)B * 4};
  b.seq = (memra_tensor){ps, (uint64_t)B * 4, MEMRA_TYPE_I32, 0, B, 1, (uint64_t)B * 4};
  b.block_table = (memra_tensor){bt, 0, MEMRA_TYPE_I32, 0, nb, B, (uint64_t)nb * 4};
  memra_attn_params ap = {NH, NKV, HD, 0, 1.0f / sqrtf((float)HD), 0.f};
  memra_tensor tq = {q, 0, MEMRA_TYPE_F32, 0, NH * HD, B, NH * HD * 4};
  memra_tensor to = {o, 0, MEMRA_TYPE_F32, 0, NH * HD, B, NH * HD * 4};
  if (ver) setenv("MEMRA_ATT", ver, 1);
  memra_graph *g = NULL;
  MUST(G.vt->synchronize(G.be), "synchronize");
  MUST(G.vt->graph_begin(G.be), "graph_begin");
  const int64_t slots = (int64_t)B * nb * BS;
  for (int l = 0; l < copies; ++l) {
    memra_tensor tk = {kc, cbytes * l, ctype, 0, width, slots, (uint64_t)width * esz};
    memra_tensor tv = {vc, cbytes * l, ctype, 0, width, slots, (uint64_t)width * esz};
    MUST(G.vt->attention(G.be, &to, &tq, &tk, &tv, &b, &ap), "attention");
  }
  MUST(G.vt->graph_end(G.be, &g), "graph_end");
  if (ver) unsetenv("MEMRA_ATT");
  const double t = median_graph(g, 5, 7) / copies;
  G.vt->graph_free(G.be, g);
  G.vt->buf_free(G.be, kc);
  G.vt->buf_free(G.be, vc);
  G.vt->buf_free(G.be, q);
  G.vt->buf_free(G.be, o);
  G.vt->buf_free(G.be, bt);
  G.vt->buf_free(G.be, ps);
  return t * 1e6;
}

int main(int argc, char **argv) {
  ck_rng = 0x2545F4914F6CDD1Dull; /* the default seed */
  if (argc < 2) {
    fprintf(stderr, "usage: attn_bench PLUGIN.so [L...]\n");
    return 2;
  }
  if (memra_plug_open(&G, argv[1])) return 2;
  if (!G.vt->graph_begin || !G.vt->graph_end || !G.vt->graph_launch || !G.vt->graph_free) {
    fprintf(stderr, "attn_bench: %s has no graph capture (the timings replay graphs)\n", argv[1]);
    return 2;
  }
  memra_device_info di;
  MUST(G.vt->device_info(G.be, &di), "device_info");
  const double copy_gbs = copy_bandwidth();
  printf("device: %s, %d SMs; copy bandwidth %.0f GB/s (read+write)\n", di.name, di.n_sms,
         copy_gbs);
  printf("decode attention, Llama-3.1-8B layer (32/8 heads x 128), us per layer (graph "
         "replay, median of 7)\n");
  printf("%-7s %5s %6s %3s %10s %8s %8s %8s %8s %7s %7s %7s %7s\n", "cache", "L", "bucket", "B",
         "default us", "v5 us", "v4 us", "v2 us", "floor us", "%copy", "v5/def", "v4/def",
         "v2/def");
  int Ls[16] = {512, 4096, 4224}, nl = 3;
  const int quick = argc > 2; /* lengths given: the default kernel, F16, batch 1 */
  if (quick) {
    nl = 0;
    if (argc - 2 > 16) {
      fprintf(stderr, "attn_bench: %d lengths given, at most 16\n", argc - 2);
      return 2;
    }
    for (int i = 2; i < argc; ++i) {
      const int L = atoi(argv[i]);
      if (L < 1 || L > 65536) {
        fprintf(stderr, "attn_bench: length '%s': expected 1 to 65536\n", argv[i]);
        return 2;
      }
      Ls[nl++] = L;
    }
  }
  static const int Bs[] = {1, 8};
  static const int32_t types[] = {MEMRA_TYPE_F16, MEMRA_TYPE_F8_E4M3};
  for (int ti = 0; ti < (quick ? 1 : 2); ++ti)
    for (int bi = 0; bi < (quick ? 1 : 2); ++bi)
      for (int li = 0; li < nl; ++li) {
        const int L = Ls[li], B = Bs[bi];
        const double td = bench_one(types[ti], L, B, NULL),
                     t5 = quick ? 0.0 : bench_one(types[ti], L, B, "5"),
                     t4 = quick ? 0.0 : bench_one(types[ti], L, B, "4"),
                     t2 = quick ? 0.0 : bench_one(types[ti], L, B, "2");
        const double bytes = 2.0 * B * L * 8 * 128 * (types[ti] == MEMRA_TYPE_F16 ? 2 : 1);
        const double floor_us = bytes / (copy_gbs * 1e9) * 1e6;
        int32_t bucket = 256;
        while (bucket < L)
          bucket *= 2;
        printf("%-7s %5d %6d %3d %10.2f %8.2f %8.2f %8.2f %8.2f %6.1f%% %7.2f %7.2f %7.2f\n",
               memra_type_info(types[ti]).name, L, bucket, B, td, t5, t4, t2, floor_us,
               100.0 * floor_us / td, t5 / td, t4 / td, t2 / td);
        fflush(stdout);
      }
  memra_plug_close(&G);
  return 0;
}
