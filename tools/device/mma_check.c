/* mma_check.c — the tensor-core prefill kernels against the CPU oracle, through the plugin
 * ABI of a GPU plugin: the warp-level ones (gemm_mma.cu, attention_prefill.cu) in the sm_90a
 * test build of the sm120a sources (libmemra_sm120a_sm90test.so), the warpgroup ones
 * (gemm_wgmma.cu, attention_prefill_wgmma.cu) in libmemra_sm90a.so.
 *
 *   mma_check [--quick] [--seed N] CPU.so TEST.so [OTHER.so]
 *
 * Checks (each prints a line; a table and PASS/FAIL last; exit status 1 on any failure):
 *  gemm       the gemm op vs the CPU matmul for ragged M (1..1000, odd), N and K (not
 *             multiples of the 128x128x32 tile): F16/BF16 weights with x rounded to the
 *             operand type (the products are then exact; only the f32 summation order
 *             differs: rel L2 <= 1e-5), Q8_0/Q4_K weights (x and the decoded weights
 *             rounded to f16: rel L2 <= 2e-3); bias on some cases. Outputs are poisoned
 *             (NaN) first, so an unwritten element fails.
 *  gemm rows  the rows of a 1000-row product computed in chunks of 67 rows equal the
 *             one-shot rows bit for bit (no split-K chosen by shape).
 *  attention  prefill batches vs the CPU attention, F16 paged caches with shuffled pages
 *             and NaN in every cache slot no sequence owns: several sequences of odd
 *             lengths (rows of one tile from different sequences), GQA 1, 4 and 8, head
 *             dims 64 and 128, a continued prompt (positions from 300), rows of sequences
 *             interleaved, sliding window + softcap, pages of 16 and 64 positions.
 *             Tolerance rel L2 <= 4e-3 (Q and P in f16, as in FlashAttention-2).
 *  chunked    a prompt's attention computed in chunks of 67 rows equals one-shot, bit for
 *             bit (700 rows, d 128 / GQA 4; 403 rows, d 64 / GQA 8, whose last chunk is one
 *             row). Every batch is flagged MEMRA_BATCH_PROMPT, as the core flags prompts.
 *  bench      gemm F16 M=N=K=8192 and the Llama-3.1-8B prefill attention of 4096 tokens
 *             (32 heads, 8 KV heads, d 128, causal): median of 10 timed runs, TFLOP/s; the
 *             same on OTHER.so when given (e.g. the sm90a plugin).
 * --quick: two small cases of each check and no benchmark (for compute-sanitizer). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/quant/quant.h"
#include "tools/device/check_report.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

enum { NP = 2 }; /* 0: CPU oracle, 1: plugin under test */
static memra_plug P[3];
static int g_quick;

/* rel L2 error of b against the reference a, max abs error; NaN anywhere fails. */
static int compare(const char *what, const float *ref, const float *got, int64_t n, double tol,
                   double *rel_out) {
  double num = 0, den = 0, mx = 0;
  int64_t nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (isnan(got[i]) || isnan(ref[i])) {
      ++nan;
      continue;
    }
    const double d = (double)got[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
    if (fabs(d) > mx) mx = fabs(d);
  }
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  const int pass = nan == 0 && rel <= tol;
  ck_line(what, pass, "rel L2 %.2e (tol %.0e), max abs %.2e%s", rel, tol, mx,
          nan ? ", NaN present" : "");
  if (rel_out) *rel_out = rel;
  return pass;
}

/* --- gemm --------------------------------------------------------------------------- */

/* Weights [n, k] of type t from random floats; x values rounded to what the kernel sees. */
static void *make_w(int32_t t, int64_t n, int64_t k, uint64_t *bytes) {
  const uint64_t rb = memra_type_row_bytes(t, k);
  uint8_t *w = ck_xmalloc(rb * n);
  float *row = ck_xmalloc((size_t)k * 4);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i)
      row[i] = ck_frand(-1, 1);
    if (t == MEMRA_TYPE_F16)
      for (int64_t i = 0; i < k; ++i)
        ((uint16_t *)(w + r * rb))[i] = memra_f32_to_fp16(row[i]);
    else if (t == MEMRA_TYPE_BF16)
      for (int64_t i = 0; i < k; ++i)
        ((uint16_t *)(w + r * rb))[i] = memra_f32_to_bf16(row[i]);
    else if (!memra_quantize_row(t, row, w + r * rb, k)) {
      fprintf(stderr, "FATAL no quantizer for %s\n", memra_type_info(t).name);
      exit(3);
    }
  }
  free(row);
  *bytes = rb * n;
  return w;
}
static float *make_x(int32_t wt, int64_t m, int64_t k) {
  float *x = ck_xmalloc((size_t)(m * k) * 4);
  for (int64_t i = 0; i < m * k; ++i) {
    float v = ck_frand(-1, 1);
    if (wt == MEMRA_TYPE_F16) v = memra_fp16_to_f32(memra_f32_to_fp16(v));
    if (wt == MEMRA_TYPE_BF16) v = memra_bf16_to_f32(memra_f32_to_bf16(v));
    x[i] = v;
  }
  return x;
}

static void check_gemm_case(int M, int N, int K, int32_t wt, int with_bias, int chunk_rows) {
  uint64_t wb;
  void *w = make_w(wt, N, K, &wb);
  float *x = make_x(wt, M, K), *bias = ck_xmalloc((size_t)N * 4);
  for (int i = 0; i < N; ++i)
    bias[i] = ck_frand(-1, 1);
  ck_buf dw = ck_new(wb, w), dx = ck_new((uint64_t)M * K * 4, x),
         db = ck_new((uint64_t)N * 4, bias), dy = ck_new((uint64_t)M * N * 4, NULL);
  for (int i = 0; i < NP; ++i) {
    memra_tensor ty = ck_t(&dy, i, MEMRA_TYPE_F32, N, M), tx = ck_t(&dx, i, MEMRA_TYPE_F32, K, M),
                 tw = ck_t(&dw, i, wt, K, N),
                 tb = with_bias ? ck_t(&db, i, MEMRA_TYPE_F32, N, 1) : ck_none();
    memra_status st = i == 0 ? P[i].vt->matmul(P[i].be, &ty, &tx, &tw, &tb)
                             : P[i].vt->gemm(P[i].be, &ty, &tx, &tw, &tb);
    memra_plug_must(&P[i], st, i ? "gemm" : "matmul");
    memra_plug_must(&P[i], P[i].vt->synchronize(P[i].be), "synchronize");
  }
  float *ref = ck_get(&dy, 0), *got = ck_get(&dy, 1);
  char what[96];
  snprintf(what, sizeof what, "gemm %s M %d N %d K %d%s", memra_type_info(wt).name, M, N, K,
           with_bias ? " +bias" : "");
  const double tol = wt == MEMRA_TYPE_F16 || wt == MEMRA_TYPE_BF16 ? 1e-5 : 2e-3;
  compare(what, ref, got, (int64_t)M * N, tol, NULL);
  if (chunk_rows > 0) { /* rows in chunks == one-shot, bit for bit */
    ck_buf dc = ck_new_in(NP, (uint64_t)M * N * 4, NULL);
    for (int r0 = 0; r0 < M; r0 += chunk_rows) {
      const int mr = M - r0 < chunk_rows ? M - r0 : chunk_rows;
      memra_tensor ty = ck_t(&dc, 1, MEMRA_TYPE_F32, N, mr),
                   tx = ck_t(&dx, 1, MEMRA_TYPE_F32, K, mr), tw = ck_t(&dw, 1, wt, K, N),
                   tb = with_bias ? ck_t(&db, 1, MEMRA_TYPE_F32, N, 1) : ck_none();
      ty.offset = (uint64_t)r0 * N * 4;
      tx.offset = (uint64_t)r0 * K * 4;
      memra_plug_must(&P[1], P[1].vt->gemm(P[1].be, &ty, &tx, &tw, &tb), "gemm chunk");
    }
    float *c = ck_get(&dc, 1);
    int64_t diff = 0;
    for (int64_t i = 0; i < (int64_t)M * N; ++i)
      diff += memcmp(&c[i], &got[i], 4) != 0;
    snprintf(what, sizeof what, "gemm %s M %d in chunks of %d rows == one-shot",
             memra_type_info(wt).name, M, chunk_rows);
    ck_line(what, diff == 0, "%" PRId64 " of %" PRId64 " elements differ", diff, (int64_t)M * N);
    free(c);
    ck_free(&dc);
  }
  free(ref);
  free(got);
  ck_free(&dw);
  ck_free(&dx);
  ck_free(&db);
  ck_free(&dy);
  free(w);
  free(x);
  free(bias);
}

static void check_gemm(void) {
  struct {
    int m, n, k;
    int32_t t;
    int bias, chunk;
  } cs[] = {
      {1, 136, 72, MEMRA_TYPE_F16, 0, 0},       {7, 129, 264, MEMRA_TYPE_F16, 1, 0},
      {31, 1000, 1000, MEMRA_TYPE_F16, 0, 0},   {129, 255, 136, MEMRA_TYPE_BF16, 1, 0},
      {333, 520, 4104, MEMRA_TYPE_F16, 0, 0},   {1000, 777, 520, MEMRA_TYPE_F16, 1, 67},
      {1000, 259, 328, MEMRA_TYPE_BF16, 0, 67}, {2, 8, 8, MEMRA_TYPE_BF16, 1, 0},
      {127, 1031, 96, MEMRA_TYPE_Q8_0, 1, 0},   {511, 300, 1024, MEMRA_TYPE_Q4_K, 0, 67},
      {64, 4096, 512, MEMRA_TYPE_Q4_K, 0, 0},
  };
  const int n = g_quick ? 2 : (int)(sizeof cs / sizeof cs[0]);
  for (int c = 0; c < n; ++c)
    check_gemm_case(cs[c].m, cs[c].n, cs[c].k, cs[c].t, cs[c].bias, cs[c].chunk);
}

/* --- attention ----------------------------------------------------------------------- */

typedef struct attn_case {
  const char *name;
  int n_head, n_kv, hd, window;
  float softcap;
  int n_seqs;
  int len[4];     /* rows of each sequence in the batch */
  int start[4];   /* first position of each sequence's rows (context before it) */
  int interleave; /* rows of the sequences interleaved instead of one after another */
  int bs;         /* positions per cache page */
} attn_case;

typedef struct attn_fix {
  int n_rows, n_seqs, bs, max_blocks, n_pages, width, qw;
  int64_t slots;
  int32_t *pos, *seq, *bt;
  uint16_t *kc, *vc;
  float *q;
} attn_fix;

/* Caches with the slots of every sequence's positions [0, start + len) filled, NaN (f16
 * 0xFFFF) elsewhere; pages shuffled. */
static attn_fix attn_make(const attn_case *c) {
  attn_fix f;
  memset(&f, 0, sizeof f);
  f.n_seqs = c->n_seqs;
  f.bs = c->bs;
  int maxlen = 0;
  for (int s = 0; s < c->n_seqs; ++s) {
    f.n_rows += c->len[s];
    if (c->start[s] + c->len[s] > maxlen) maxlen = c->start[s] + c->len[s];
  }
  f.max_blocks = (maxlen + f.bs - 1) / f.bs + 1;
  f.n_pages = f.n_seqs * f.max_blocks + 3; /* 3 pages nobody owns */
  f.slots = (int64_t)f.n_pages * f.bs;
  f.width = c->n_kv * c->hd;
  f.qw = c->n_head * c->hd;
  int32_t *perm = ck_xmalloc((size_t)f.n_pages * 4);
  for (int i = 0; i < f.n_pages; ++i)
    perm[i] = i;
  for (int i = f.n_pages - 1; i > 0; --i) {
    const int j = (int)(ck_rnd() % (uint64_t)(i + 1));
    const int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  f.bt = ck_xmalloc((size_t)f.n_seqs * f.max_blocks * 4);
  for (int i = 0; i < f.n_seqs * f.max_blocks; ++i)
    f.bt[i] = perm[i];
  free(perm);
  f.kc = ck_xmalloc((size_t)(f.slots * f.width) * 2);
  f.vc = ck_xmalloc((size_t)(f.slots * f.width) * 2);
  memset(f.kc, 0xFF, (size_t)(f.slots * f.width) * 2);
  memset(f.vc, 0xFF, (size_t)(f.slots * f.width) * 2);
  for (int s = 0; s < f.n_seqs; ++s)
    for (int p = 0; p < c->start[s] + c->len[s]; ++p) {
      const int64_t slot = (int64_t)f.bt[s * f.max_blocks + p / f.bs] * f.bs + p % f.bs;
      for (int e = 0; e < f.width; ++e) {
        f.kc[slot * f.width + e] = memra_f32_to_fp16(ck_frand(-1, 1));
        f.vc[slot * f.width + e] = memra_f32_to_fp16(ck_frand(-1, 1));
      }
    }
  f.pos = ck_xmalloc((size_t)f.n_rows * 4);
  f.seq = ck_xmalloc((size_t)f.n_rows * 4);
  int r = 0;
  if (c->interleave) {
    int next[4] = {0, 0, 0, 0};
    while (r < f.n_rows)
      for (int s = 0; s < f.n_seqs; ++s)
        if (next[s] < c->len[s]) {
          f.seq[r] = s;
          f.pos[r++] = c->start[s] + next[s]++;
        }
  } else {
    for (int s = 0; s < f.n_seqs; ++s)
      for (int i = 0; i < c->len[s]; ++i) {
        f.seq[r] = s;
        f.pos[r++] = c->start[s] + i;
      }
  }
  f.q = ck_xmalloc((size_t)f.n_rows * f.qw * 4);
  for (int64_t i = 0; i < (int64_t)f.n_rows * f.qw; ++i)
    f.q[i] = ck_frand(-2, 2);
  return f;
}
static void attn_free(attn_fix *f) {
  free(f->pos);
  free(f->seq);
  free(f->bt);
  free(f->kc);
  free(f->vc);
  free(f->q);
}

typedef struct attn_dev {
  ck_buf kc, vc, q, out, pos, seq, bt;
} attn_dev;

static attn_dev attn_upload(const attn_fix *f, int n) {
  attn_dev d;
  d.kc = ck_new_in(n, (uint64_t)f->slots * f->width * 2, f->kc);
  d.vc = ck_new_in(n, (uint64_t)f->slots * f->width * 2, f->vc);
  d.q = ck_new_in(n, (uint64_t)f->n_rows * f->qw * 4, f->q);
  d.out = ck_new_in(n, (uint64_t)f->n_rows * f->qw * 4, NULL);
  d.pos = ck_new_in(n, (uint64_t)f->n_rows * 4, f->pos);
  d.seq = ck_new_in(n, (uint64_t)f->n_rows * 4, f->seq);
  d.bt = ck_new_in(n, (uint64_t)f->n_seqs * f->max_blocks * 4, f->bt);
  return d;
}
static void attn_dfree(attn_dev *d) {
  ck_free(&d->kc);
  ck_free(&d->vc);
  ck_free(&d->q);
  ck_free(&d->out);
  ck_free(&d->pos);
  ck_free(&d->seq);
  ck_free(&d->bt);
}

/* Rows [r0, r0 + nr) of the fixture through plugin i's attention op. */
static memra_status attn_run(const attn_fix *f, const attn_dev *d, int i, const attn_case *c,
                             int r0, int nr) {
  memra_batch b;
  memset(&b, 0, sizeof b);
  b.n_rows = nr;
  b.n_seqs = f->n_seqs;
  b.block_size = f->bs;
  b.max_blocks = f->max_blocks;
  b.kv_bucket = 0;
  b.flags = MEMRA_BATCH_PROMPT; /* prompt rows: the tensor-core kernel */
  for (int r = r0; r < r0 + nr; ++r)
    if (f->pos[r] + 1 > b.kv_bucket) b.kv_bucket = f->pos[r] + 1;
  b.pos = ck_t(&d->pos, i, MEMRA_TYPE_I32, nr, 1);
  b.pos.offset = (uint64_t)r0 * 4;
  b.seq = ck_t(&d->seq, i, MEMRA_TYPE_I32, nr, 1);
  b.seq.offset = (uint64_t)r0 * 4;
  b.block_table = ck_t(&d->bt, i, MEMRA_TYPE_I32, f->max_blocks, f->n_seqs);
  memra_tensor out = ck_t(&d->out, i, MEMRA_TYPE_F32, f->qw, nr),
               q = ck_t(&d->q, i, MEMRA_TYPE_F32, f->qw, nr),
               kc = ck_t(&d->kc, i, MEMRA_TYPE_F16, f->width, f->slots),
               vc = ck_t(&d->vc, i, MEMRA_TYPE_F16, f->width, f->slots);
  out.offset = q.offset = (uint64_t)r0 * f->qw * 4;
  memra_attn_params p = {c->n_head, c->n_kv, c->hd, c->window, 1.0f / sqrtf((float)c->hd),
                         c->softcap};
  return P[i].vt->attention(P[i].be, &out, &q, &kc, &vc, &b, &p);
}

static void check_attention(void) {
  const attn_case cs[] = {
      {"3 seqs 37/150/301 rows from 0", 32, 8, 128, 0, 0.f, 3, {37, 150, 301}, {0, 0, 0}, 0, 16},
      {"2 seqs 77/200 from 0", 16, 2, 64, 0, 0.f, 2, {77, 200}, {0, 0}, 0, 16},
      {"continued prompt: 131 rows from 300", 8, 2, 128, 0, 0.f, 1, {131}, {300}, 0, 16},
      {"4 seqs mixed 41/33/29/17", 32, 4, 64, 0, 0.f, 4, {41, 33, 29, 17}, {0, 5, 90, 0}, 1, 16},
      {"window 50 + softcap 30, 2 seqs 90/211", 16, 4, 64, 50, 30.f, 2, {90, 211}, {0, 7}, 0, 16},
      {"GQA 8 d128, 1 seq 257 rows from 64", 16, 2, 128, 0, 0.f, 1, {257}, {64}, 0, 16},
      {"GQA 1, 4 seqs, pages of 64", 8, 8, 128, 0, 0.f, 4, {5, 64, 65, 129}, {0, 0, 3}, 1, 64},
      {"GQA 1 window 33, 3 seqs mixed", 12, 12, 64, 33, 0.f, 3, {70, 45, 130}, {20, 0, 100}, 1, 16},
  };
  const int n = g_quick ? 2 : (int)(sizeof cs / sizeof cs[0]);
  for (int ci = 0; ci < n; ++ci) {
    const attn_case *c = &cs[ci];
    attn_fix f = attn_make(c);
    attn_dev d = attn_upload(&f, NP);
    for (int i = 0; i < NP; ++i) {
      memra_plug_must(&P[i], attn_run(&f, &d, i, c, 0, f.n_rows), "attention");
      memra_plug_must(&P[i], P[i].vt->synchronize(P[i].be), "synchronize");
    }
    float *ref = ck_get(&d.out, 0), *got = ck_get(&d.out, 1);
    char what[120];
    snprintf(what, sizeof what, "attn h%d/kv%d d%d: %s", c->n_head, c->n_kv, c->hd, c->name);
    compare(what, ref, got, (int64_t)f.n_rows * f.qw, 4e-3, NULL);
    free(ref);
    free(got);
    attn_dfree(&d);
    attn_free(&f);
  }
}

/* A prompt's attention in chunks of 67 rows == one-shot, bit for bit. */
static void check_chunked(void) {
  const attn_case cs[] = {
      {"chunked", 32, 8, 128, 0, 0.f, 1, {700}, {0}, 0, 16},
      {"chunked", 16, 2, 64, 0, 0.f, 1, {403}, {0}, 0, 16}, /* last chunk: 1 row */
  };
  const int n = g_quick ? 1 : 2;
  for (int ci = 0; ci < n; ++ci) {
    const attn_case *c = &cs[ci];
    attn_fix f = attn_make(c);
    attn_dev d = attn_upload(&f, NP);
    memra_plug_must(&P[1], attn_run(&f, &d, 1, c, 0, f.n_rows), "attention");
    float *one = ck_get(&d.out, 1);
    for (int r0 = 0; r0 < f.n_rows; r0 += 67)
      memra_plug_must(&P[1], attn_run(&f, &d, 1, c, r0, f.n_rows - r0 < 67 ? f.n_rows - r0 : 67),
                      "attention chunk");
    float *ch = ck_get(&d.out, 1);
    int64_t diff = 0;
    for (int64_t i = 0; i < (int64_t)f.n_rows * f.qw; ++i)
      diff += memcmp(&one[i], &ch[i], 4) != 0;
    char what[120];
    snprintf(what, sizeof what, "attn h%d/kv%d d%d: %d rows in chunks of 67 == one-shot", c->n_head,
             c->n_kv, c->hd, f.n_rows);
    ck_line(what, diff == 0, "%" PRId64 " of %" PRId64 " elements differ", diff,
            (int64_t)f.n_rows * f.qw);
    /* and against the oracle, so bit-equality is not equality of two wrong answers */
    memra_plug_must(&P[0], attn_run(&f, &d, 0, c, 0, f.n_rows), "attention");
    float *ref = ck_get(&d.out, 0);
    snprintf(what, sizeof what, "attn h%d/kv%d d%d: %d rows chunked vs cpu", c->n_head, c->n_kv,
             c->hd, f.n_rows);
    compare(what, ref, ch, (int64_t)f.n_rows * f.qw, 4e-3, NULL);
    free(ref);
    free(one);
    free(ch);
    attn_dfree(&d);
    attn_free(&f);
  }
}

/* --- benchmarks (plugin i alone) ----------------------------------------------------- */

static double time_median(int i, memra_status (*fn)(int, void *), void *ctx, int reps) {
  double t[32];
  for (int w = 0; w < 2; ++w)
    memra_plug_must(&P[i], fn(i, ctx), "bench warm-up");
  memra_plug_must(&P[i], P[i].vt->synchronize(P[i].be), "synchronize");
  for (int r = 0; r < reps; ++r) {
    const double t0 = ck_now();
    memra_plug_must(&P[i], fn(i, ctx), "bench");
    memra_plug_must(&P[i], P[i].vt->synchronize(P[i].be), "synchronize");
    t[r] = ck_now() - t0;
  }
  return ck_median(t, reps);
}

typedef struct gemm_bench {
  int m, n, k;
  ck_buf x, w, y;
} gemm_bench;
static memra_status gemm_bench_run(int i, void *ctx) {
  gemm_bench *g = ctx;
  memra_tensor y = ck_t(&g->y, i, MEMRA_TYPE_F32, g->n, g->m),
               x = ck_t(&g->x, i, MEMRA_TYPE_F16, g->k, g->m),
               w = ck_t(&g->w, i, MEMRA_TYPE_F16, g->k, g->n), b = ck_none();
  return P[i].vt->gemm(P[i].be, &y, &x, &w, &b);
}

typedef struct attn_bench {
  const attn_case *c;
  const attn_fix *f;
  attn_dev d;
} attn_bench;
static memra_status attn_bench_run(int i, void *ctx) {
  attn_bench *a = ctx;
  return attn_run(a->f, &a->d, i, a->c, 0, a->f->n_rows);
}

static void bench(int n_plugins) {
  /* GEMM 8192^3, x given as F16 (the op's benchmark form: no conversion step). */
  gemm_bench g = {8192, 8192, 8192, {{0}, 0}, {{0}, 0}, {{0}, 0}};
  const int64_t e = (int64_t)g.m * g.k;
  uint16_t *h = ck_xmalloc((size_t)e * 2);
  for (int64_t i = 0; i < e; ++i)
    h[i] = memra_f32_to_fp16(ck_frand(-1, 1));
  ck_buf x = {{0}, 0}, w = {{0}, 0}, y = {{0}, 0};
  for (int i = 1; i < n_plugins; ++i) {
    memra_plug_must(&P[i], P[i].vt->buf_alloc(P[i].be, (uint64_t)e * 2, &x.b[i]), "buf_alloc");
    memra_plug_must(&P[i], P[i].vt->buf_alloc(P[i].be, (uint64_t)e * 2, &w.b[i]), "buf_alloc");
    memra_plug_must(&P[i], P[i].vt->buf_alloc(P[i].be, (uint64_t)e * 4, &y.b[i]), "buf_alloc");
    memra_plug_must(&P[i], P[i].vt->buf_upload(P[i].be, x.b[i], 0, h, (uint64_t)e * 2), "upload");
    memra_plug_must(&P[i], P[i].vt->buf_upload(P[i].be, w.b[i], 0, h, (uint64_t)e * 2), "upload");
  }
  g.x = x;
  g.w = w;
  g.y = y;
  const double flop = 2.0 * g.m * g.n * g.k;
  for (int i = 1; i < n_plugins; ++i) {
    if (!P[i].vt->gemm) {
      printf("bench %-12s gemm F16 8192^3: no gemm op\n", P[i].vt->name);
      continue;
    }
    const double t = time_median(i, gemm_bench_run, &g, 10);
    printf("bench %-40s gemm F16 M=N=K=8192: %8.3f ms  %6.1f TFLOP/s\n", P[i].path, t * 1e3,
           flop / t * 1e-12);
  }
  ck_free(&x);
  ck_free(&w);
  ck_free(&y);
  free(h);

  /* Llama-3.1-8B prefill attention, 4096 tokens, causal. */
  const attn_case c = {"bench", 32, 8, 128, 0, 0.f, 1, {4096}, {0}, 0, 16};
  attn_fix f = attn_make(&c);
  attn_bench a;
  memset(&a, 0, sizeof a);
  a.c = &c;
  a.f = &f;
  for (int i = 1; i < n_plugins; ++i) { /* per plugin, without the CPU copy */
    attn_dev d;
    ck_buf *fields[] = {&d.kc, &d.vc, &d.q, &d.out, &d.pos, &d.seq, &d.bt};
    const void *src[] = {f.kc, f.vc, f.q, NULL, f.pos, f.seq, f.bt};
    const uint64_t sz[] = {(uint64_t)f.slots * f.width * 2,
                           (uint64_t)f.slots * f.width * 2,
                           (uint64_t)f.n_rows * f.qw * 4,
                           (uint64_t)f.n_rows * f.qw * 4,
                           (uint64_t)f.n_rows * 4,
                           (uint64_t)f.n_rows * 4,
                           (uint64_t)f.n_seqs * f.max_blocks * 4};
    for (int k = 0; k < 7; ++k) {
      memset(fields[k], 0, sizeof(ck_buf));
      fields[k]->size = sz[k];
      memra_plug_must(&P[i], P[i].vt->buf_alloc(P[i].be, sz[k], &fields[k]->b[i]), "buf_alloc");
      if (src[k])
        memra_plug_must(&P[i], P[i].vt->buf_upload(P[i].be, fields[k]->b[i], 0, src[k], sz[k]),
                        "upload");
    }
    a.d = d;
    double pairs = 0;
    for (int r = 0; r < f.n_rows; ++r)
      pairs += f.pos[r] + 1;
    const double aflop = 4.0 * c.n_head * c.hd * pairs;
    const double t = time_median(i, attn_bench_run, &a, 10);
    printf("bench %-40s attention 4096 tokens h32/kv8 d128: %8.3f ms  %6.1f TFLOP/s\n", P[i].path,
           t * 1e3, aflop / t * 1e-12);
    attn_dfree(&a.d);
  }
  attn_free(&f);
}

int main(int argc, char **argv) {
  ck_lines_width(58);
  ck_rng = 0x5EEDF00Dull; /* the default seed */
  const int a = ck_flags(argc, argv, &g_quick, 1);
  if (a < 0 || argc - a < 2 || argc - a > 3) {
    fprintf(stderr, "usage: mma_check [--quick] [--seed N] CPU.so TEST.so [OTHER.so]\n");
    return 2;
  }
  const int n_plugins = argc - a;
  for (int i = 0; i < n_plugins; ++i)
    if (memra_plug_open(&P[i], argv[a + i])) return 2;
  ck_use_plugs(P, NP);
  if (P[1].vt->struct_size < offsetof(memra_backend_vt, gemm) + sizeof(void *) || !P[1].vt->gemm) {
    ck_line("gemm op present in the plugin under test", 0, "%s has no gemm op", P[1].vt->name);
  } else {
    check_gemm();
  }
  check_attention();
  check_chunked();
  if (!g_quick) bench(n_plugins);
  printf("mma_check: %d passed, %d failed: %s\n", ck_lines_passed(), ck_lines_failed(),
         ck_lines_failed() ? "FAIL" : "PASS");
  for (int i = n_plugins - 1; i >= 0; --i)
    memra_plug_close(&P[i]);
  return ck_lines_failed() ? 1 : 0;
}
