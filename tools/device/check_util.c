/* check_util.c — random data, guarded device buffers and timers of the device tools (see
 * check_util.h). */
#define _POSIX_C_SOURCE 200809L
#include "tools/device/check_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugins/quant/fp8.h"
#include "plugins/quant/quant.h"
#include "tools/device/check_report.h"

/* --- random data ---------------------------------------------------------------------- */

uint64_t ck_rng = 0x9E3779B97F4A7C15ull;

uint64_t ck_rnd(void) { /* xorshift64* */
  ck_rng ^= ck_rng >> 12;
  ck_rng ^= ck_rng << 25;
  ck_rng ^= ck_rng >> 27;
  return ck_rng * 2685821657736338717ull;
}
float ck_frand(float lo, float hi) {
  return lo + (hi - lo) * (float)((ck_rnd() >> 40) * (1.0 / 16777216.0));
}
float ck_frand_milli(void) { return (float)((int)(ck_rnd() % 2001) - 1000) * 1e-3f; }

void *ck_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of host memory (%zu bytes)\n", n);
    exit(3);
  }
  return p;
}
float *ck_frand_vec(int64_t n, float lo, float hi) {
  float *v = ck_xmalloc((size_t)n * 4);
  for (int64_t i = 0; i < n; ++i)
    v[i] = ck_frand(lo, hi);
  return v;
}

void ck_rand_blocks(int32_t type, uint8_t *p, uint64_t bytes, float (*scale)(void)) {
  for (uint64_t i = 0; i < bytes; ++i)
    p[i] = (uint8_t)(ck_rnd() >> 56);
  int offs[2] = {-1, -1}; /* byte offsets of the f16 scale fields in a block */
  switch (type) {
  case MEMRA_TYPE_Q4_0:
  case MEMRA_TYPE_Q5_0:
  case MEMRA_TYPE_Q8_0: offs[0] = 0; break;
  case MEMRA_TYPE_Q4_1:
  case MEMRA_TYPE_Q5_1:
  case MEMRA_TYPE_Q4_K:
  case MEMRA_TYPE_Q5_K:
    offs[0] = 0;
    offs[1] = 2;
    break;
  case MEMRA_TYPE_Q6_K: offs[0] = 208; break;
  default: break;
  }
  const uint64_t bs = (uint64_t)memra_type_info(type).size;
  for (uint64_t b = 0; b < bytes / bs; ++b)
    for (int k = 0; k < 2; ++k)
      if (offs[k] >= 0) {
        const uint16_t h = memra_f32_to_fp16(scale());
        memcpy(p + b * bs + offs[k], &h, 2);
      }
}

static float rows_scale(void) { return ck_frand(0.001f, 0.02f); }

void *ck_rand_rows(int32_t type, int64_t ne0, int64_t rows, uint64_t *nbytes) {
  const uint64_t rb = memra_type_row_bytes(type, ne0);
  uint8_t *p = ck_xmalloc(rb * (uint64_t)rows);
  *nbytes = rb * (uint64_t)rows;
  const int64_t n = ne0 * rows;
  if (type == MEMRA_TYPE_F32) {
    for (int64_t i = 0; i < n; ++i)
      ((float *)p)[i] = ck_frand(-1, 1);
  } else if (type == MEMRA_TYPE_F8_E4M3) {
    for (int64_t i = 0; i < n; ++i)
      p[i] = memra_f32_to_fp8_e4m3(ck_frand(-1, 1));
  } else if (type == MEMRA_TYPE_F16 || type == MEMRA_TYPE_BF16) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = ck_frand(-1, 1);
      ((uint16_t *)p)[i] = type == MEMRA_TYPE_F16 ? memra_f32_to_fp16(v) : memra_f32_to_bf16(v);
    }
  } else {
    ck_rand_blocks(type, p, *nbytes, rows_scale);
  }
  return p;
}

/* --- one plugin's buffers ---------------------------------------------------------------- */

memra_buf *ck_alloc(const memra_plug *p, uint64_t size, const void *init) {
  memra_buf *b = NULL;
  uint8_t *tmp = ck_xmalloc(size + CK_GUARD);
  if (init)
    memcpy(tmp, init, size);
  else
    memset(tmp, 0xFF, size);
  memset(tmp + size, 0xA5, CK_GUARD);
  memra_plug_must(p, p->vt->buf_alloc(p->be, size + CK_GUARD, &b), "buf_alloc");
  memra_plug_must(p, p->vt->buf_upload(p->be, b, 0, tmp, size + CK_GUARD), "upload");
  free(tmp);
  return b;
}
void ck_poison1(const memra_plug *p, memra_buf *b, uint64_t size) {
  uint8_t *tmp = ck_xmalloc(size);
  memset(tmp, 0xFF, size);
  memra_plug_must(p, p->vt->buf_upload(p->be, b, 0, tmp, size), "upload");
  free(tmp);
}
void *ck_download(const memra_plug *p, memra_buf *b, uint64_t off, uint64_t size) {
  void *h = ck_xmalloc(size);
  memra_plug_must(p, p->vt->buf_download(p->be, b, off, h, size), "download");
  return h;
}
int ck_guard_ok1(const memra_plug *p, memra_buf *b, uint64_t size) {
  uint8_t g[CK_GUARD];
  memra_plug_must(p, p->vt->buf_download(p->be, b, size, g, CK_GUARD), "download");
  for (int k = 0; k < CK_GUARD; ++k)
    if (g[k] != 0xA5) return 0;
  return 1;
}
memra_tensor ck_tensor(memra_buf *b, uint64_t off, int32_t type, int64_t ne0, int64_t ne1,
                       uint64_t nb1) {
  memra_tensor t = ck_none();
  t.buf = b;
  t.offset = off;
  t.type = type;
  t.ne0 = ne0;
  t.ne1 = ne1;
  t.nb1 = nb1 ? nb1 : memra_type_row_bytes(type, ne0);
  return t;
}
memra_tensor ck_none(void) {
  memra_tensor t;
  memset(&t, 0, sizeof t);
  return t;
}

/* --- the same bytes on several plugins ---------------------------------------------------- */

static memra_plug *g_plugs;
static int g_n_default;

void ck_use_plugs(memra_plug *plugs, int n_default) {
  g_plugs = plugs;
  g_n_default = n_default;
}
ck_buf ck_new_in(int n, uint64_t size, const void *init) {
  ck_buf d;
  memset(&d, 0, sizeof d);
  d.size = size;
  for (int i = 0; i < n && i < CK_MAX_PLUGS; ++i)
    d.b[i] = ck_alloc(&g_plugs[i], size, init);
  return d;
}
ck_buf ck_new(uint64_t size, const void *init) { return ck_new_in(g_n_default, size, init); }
void ck_free(ck_buf *d) {
  for (int i = 0; i < CK_MAX_PLUGS; ++i)
    if (d->b[i]) g_plugs[i].vt->buf_free(g_plugs[i].be, d->b[i]);
  memset(d, 0, sizeof *d);
}
void ck_poison(const ck_buf *d) {
  for (int i = 0; i < CK_MAX_PLUGS; ++i)
    if (d->b[i]) ck_poison1(&g_plugs[i], d->b[i], d->size);
}
void *ck_get(const ck_buf *d, int i) { return ck_download(&g_plugs[i], d->b[i], 0, d->size); }
int ck_guard_ok(const ck_buf *d) {
  for (int i = 0; i < CK_MAX_PLUGS; ++i)
    if (d->b[i] && !ck_guard_ok1(&g_plugs[i], d->b[i], d->size)) return 0;
  return 1;
}
memra_tensor ck_view(const ck_buf *d, int i, int32_t type, int64_t ne0, int64_t ne1, uint64_t nb1,
                     uint64_t off) {
  return ck_tensor(d->b[i], off, type, ne0, ne1, nb1);
}
memra_tensor ck_t(const ck_buf *d, int i, int32_t type, int64_t ne0, int64_t ne1) {
  return ck_tensor(d->b[i], 0, type, ne0, ne1, 0);
}

/* --- command line -------------------------------------------------------------------- */

/* 1 (and a is advanced past a seed's value) when argv[*a] is --quick or --seed N. */
static int flag(int argc, char **argv, int *a, int *quick) {
  if (!strcmp(argv[*a], "--quick")) {
    *quick = 1;
    return 1;
  }
  if (!strcmp(argv[*a], "--seed") && *a + 1 < argc) {
    ck_rng = strtoull(argv[++*a], NULL, 0) | 1;
    return 1;
  }
  return 0;
}
int ck_args(int argc, char **argv, int *quick, const char **paths, int max) {
  int np = 0;
  for (int a = 1; a < argc; ++a)
    if (!flag(argc, argv, &a, quick)) {
      if (np < max)
        paths[np++] = argv[a];
      else
        np = max + 1;
    }
  return np;
}
int ck_flags(int argc, char **argv, int *quick, int strict) {
  int a = 1;
  for (; a < argc && argv[a][0] == '-'; ++a)
    if (!flag(argc, argv, &a, quick)) return strict ? -1 : a;
  return a;
}

/* --- timing -------------------------------------------------------------------------------- */

double ck_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
double ck_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return t[n / 2];
}

void ck_cmp_i32(const char *op, const char *what, const ck_buf *d, int64_t n) {
  int32_t *a = ck_get(d, 0), *b = ck_get(d, 1);
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; ++i)
    if (a[i] != b[i]) bad = i;
  char note[96] = "";
  if (bad >= 0) snprintf(note, sizeof note, "at %" PRId64 ": %d vs %d", bad, a[bad], b[bad]);
  ck_record(op, what, bad >= 0 ? 1 : 0, 0, bad < 0 && ck_guard_ok(d), note);
  free(a);
  free(b);
}
