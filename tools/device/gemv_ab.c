/* gemv_ab.c — the K-quant decode GEMV of a GPU plugin (v9, the default) against v5
 * (MEMRA_GEMV=v5) bit for bit: v9 keeps v5's per-row arithmetic, so every output float
 * must be the same bits.
 *
 *   gemv_ab [--quick] [--seed N] PLUGIN.so
 *
 * MEMRA_GEMV is read once per process, so the v5 outputs come from a child: this program
 * re-executed (/proc/self/exe, before any CUDA call here) with MEMRA_GEMV=v5 and
 * `--dump FILE`, which runs the cases and writes every output to FILE; this process then
 * runs them with MEMRA_GEMV=v9 (every shape on v9) and compares. Both draw the same seeded inputs
 * in the same order. Cases: Q4_K, Q5_K, Q6_K; K 256 x 5, 256 x 17, 4096, 14336 (a partial step,
 * whole steps, one and several steps per warp); N 1, 7, 4099 (2 and 8 rows per group, rows past N);
 * M 1..8 (bias on odd M); Q6_K rows of 1050 / 3570 bytes also padded to 16-byte strides (v9 needs
 * 16-byte-aligned rows: packed they run v5 in both processes); matmul_n over three outputs (4099 +
 * 1031 + 1031 rows, K 4096) at M 1 and 3. A line per case; the exit status is non-zero when any
 * output differs. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, setenv, fork/exec */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugins/quant/quant.h"
#include "tools/device/check_report.h"
#include "tools/device/check_util.h"
#include "tools/device/plugpair.h"

static memra_plug P;
static int g_quick;
static FILE *g_dump; /* child: outputs are written here */
static FILE *g_ref;  /* parent: the child's outputs, read in case order */

/* One case's output: written (child) or compared with the child's bits (parent). */
static void take(const char *what, const float *y, uint64_t n) {
  if (g_dump) {
    if (fwrite(&n, sizeof n, 1, g_dump) != 1 || fwrite(y, 4, n, g_dump) != n) {
      fprintf(stderr, "gemv_ab: cannot write the v5 outputs\n");
      exit(3);
    }
    return;
  }
  uint64_t rn = 0;
  float *r = NULL;
  if (fread(&rn, sizeof rn, 1, g_ref) != 1 || rn != n) {
    ck_line(what, 0, "v5 run gave no output of %" PRIu64 " floats for this case", n);
    return;
  }
  r = ck_xmalloc(n * 4);
  if (fread(r, 4, n, g_ref) != n) {
    ck_line(what, 0, "v5 output truncated");
    free(r);
    return;
  }
  uint64_t diff = 0, first = 0;
  for (uint64_t i = 0; i < n; ++i)
    if (memcmp(&r[i], &y[i], 4) != 0 && diff++ == 0) first = i;
  if (diff)
    ck_line(what, 0,
            "%" PRIu64 " of %" PRIu64 " floats differ; first [%" PRIu64 "] v5 %.9g v9 %.9g", diff,
            n, first, (double)r[first], (double)y[first]);
  else
    ck_line(what, 1, "%" PRIu64 " floats bit-identical", n);
  free(r);
}

/* Weight rows of type, K elements each, ld bytes apart (ld >= the row's bytes; padding random). */
static uint8_t *rand_rows_ld(int32_t type, int64_t K, int64_t N, uint64_t ld) {
  uint64_t nb;
  uint8_t *w = ck_rand_rows(type, K, N, &nb);
  const uint64_t rb = nb / (uint64_t)N;
  uint8_t *wp = ck_xmalloc(ld * (uint64_t)N);
  for (uint64_t i = 0; i < ld * (uint64_t)N; ++i)
    wp[i] = (uint8_t)(ck_rnd() >> 56);
  for (int64_t n = 0; n < N; ++n)
    memcpy(wp + ld * (uint64_t)n, w + rb * (uint64_t)n, rb);
  free(w);
  return wp;
}

static void matmul_case(int32_t type, int64_t N, int64_t K, uint64_t ld, int64_t M0, int64_t M1) {
  uint8_t *w = rand_rows_ld(type, K, N, ld);
  float *bias = ck_frand_vec(N, -1, 1);
  ck_buf dw = ck_new(ld * (uint64_t)N, w), db = ck_new((uint64_t)N * 4, bias);
  for (int64_t M = M0; M <= M1; ++M) {
    float *x = ck_frand_vec(M * K, -1, 1);
    ck_buf dx = ck_new((uint64_t)M * K * 4, x), dy = ck_new((uint64_t)M * N * 4, NULL);
    const int use_bias = (int)(M & 1);
    memra_tensor tw = ck_t(&dw, 0, type, K, N), ty = ck_t(&dy, 0, 0, N, M),
                 tx = ck_t(&dx, 0, 0, K, M), tb = ck_t(&db, 0, 0, N, 1);
    tw.nb1 = ld;
    memra_plug_must(&P, P.vt->matmul(P.be, &ty, &tx, &tw, use_bias ? &tb : NULL), "matmul");
    float *y = ck_get(&dy, 0);
    char what[96];
    snprintf(what, sizeof what, "%s M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " ld %" PRIu64 "%s",
             memra_type_info(type).name, M, N, K, ld, use_bias ? " +bias" : "");
    take(what, y, (uint64_t)(M * N));
    free(y);
    ck_free(&dx);
    ck_free(&dy);
    free(x);
  }
  ck_free(&dw);
  ck_free(&db);
  free(w);
  free(bias);
}

/* q, k, v in one matmul_n call (bias on the first and last), every output compared. */
static void matmul_n_case(int32_t type, int64_t K, int64_t M) {
  static const int64_t ns[3] = {4099, 1031, 1031};
  ck_buf dw[3], db[3], dy[3];
  uint8_t *w[3];
  float *bias[3];
  memra_tensor ys[3], ws[3], bs[3];
  for (int j = 0; j < 3; ++j) {
    uint64_t nb;
    w[j] = ck_rand_rows(type, K, ns[j], &nb);
    bias[j] = ck_frand_vec(ns[j], -1, 1);
    dw[j] = ck_new(nb, w[j]);
    db[j] = ck_new((uint64_t)ns[j] * 4, bias[j]);
    dy[j] = ck_new((uint64_t)(M * ns[j]) * 4, NULL);
    ys[j] = ck_t(&dy[j], 0, 0, ns[j], M);
    ws[j] = ck_t(&dw[j], 0, type, K, ns[j]);
    bs[j] = j == 1 ? ck_none() : ck_t(&db[j], 0, 0, ns[j], 1);
  }
  float *x = ck_frand_vec(M * K, -1, 1);
  ck_buf dx = ck_new((uint64_t)M * K * 4, x);
  memra_tensor xt = ck_t(&dx, 0, 0, K, M);
  memra_plug_must(&P, P.vt->matmul_n(P.be, 3, ys, &xt, ws, bs), "matmul_n");
  for (int j = 0; j < 3; ++j) {
    float *y = ck_get(&dy[j], 0);
    char what[96];
    snprintf(what, sizeof what, "matmul_n %s M=%" PRId64 " K=%" PRId64 " output %d (N=%" PRId64 ")",
             memra_type_info(type).name, M, K, j, ns[j]);
    take(what, y, (uint64_t)(M * ns[j]));
    free(y);
    ck_free(&dw[j]);
    ck_free(&db[j]);
    ck_free(&dy[j]);
    free(w[j]);
    free(bias[j]);
  }
  ck_free(&dx);
  free(x);
}

static void run_cases(void) {
  static const int32_t types[] = {MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q5_K, MEMRA_TYPE_Q6_K};
  static const int64_t ks[] = {256 * 5, 256 * 17, 4096, 14336}, ns[] = {1, 7, 4099};
  for (int t = 0; t < 3; ++t)
    for (int ki = 0; ki < 4; ++ki)
      for (int ni = 0; ni < 3; ++ni) {
        const int32_t type = types[t];
        const int64_t K = ks[ki], N = ns[ni];
        if (g_quick && (type == MEMRA_TYPE_Q5_K || ki == 3)) continue;
        const uint64_t rb = memra_type_row_bytes(type, K);
        matmul_case(type, N, K, rb, 1, g_quick ? 3 : 8);
        if (rb % 16) /* 2-byte-aligned rows: v5 in both; padded to 16 bytes, v9 */
          matmul_case(type, N, K, (rb + 15) & ~(uint64_t)15, 1, g_quick ? 3 : 8);
      }
  if (P.vt->matmul_n)
    for (int t = 0; t < 3; t += 2)
      for (int64_t M = 1; M <= 3; M += 2)
        matmul_n_case(types[t], 4096, M);
}

int main(int argc, char **argv) {
  ck_rng = 0x9E3779B97F4A7C15ull; /* the default seed */
  const char *dump = NULL;
  int a0 = 1;
  if (argc > 2 && !strcmp(argv[1], "--dump")) dump = argv[2], a0 = 3;
  const char *path = NULL;
  if (ck_args(argc - a0 + 1, argv + a0 - 1, &g_quick, &path, 1) != 1) {
    fprintf(stderr, "usage: gemv_ab [--quick] [--seed N] PLUGIN.so\n");
    return 2;
  }
  char tmp[] = "/tmp/gemv_ab_XXXXXX";
  if (!dump) { /* the v5 run first, in a child with MEMRA_GEMV=v5 */
    const int fd = mkstemp(tmp);
    if (fd < 0) {
      perror("gemv_ab: mkstemp");
      return 3;
    }
    close(fd);
    char **cargv = ck_xmalloc(sizeof(char *) * (size_t)(argc + 3));
    cargv[0] = argv[0];
    cargv[1] = "--dump";
    cargv[2] = tmp;
    for (int i = 1; i < argc; ++i)
      cargv[2 + i] = argv[i];
    cargv[argc + 2] = NULL;
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
      perror("gemv_ab: fork");
      return 3;
    }
    if (pid == 0) {
      setenv("MEMRA_GEMV", "v5", 1);
      execv("/proc/self/exe", cargv);
      perror("gemv_ab: exec");
      _exit(3);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "gemv_ab: the MEMRA_GEMV=v5 run failed\n");
      unlink(tmp);
      return 3;
    }
    free(cargv);
    setenv("MEMRA_GEMV", "v9", 1); /* this process: v9 for every shape, small ones too */
    g_ref = fopen(tmp, "rb");
    if (!g_ref) {
      perror("gemv_ab: the v5 outputs");
      unlink(tmp);
      return 3;
    }
  } else {
    g_dump = fopen(dump, "wb");
    if (!g_dump) {
      perror("gemv_ab: --dump");
      return 3;
    }
  }
  if (memra_plug_open(&P, path)) return 2;
  ck_use_plugs(&P, 1);
  ck_lines_width(64);
  run_cases();
  memra_plug_close(&P);
  if (g_dump) return fclose(g_dump) == 0 ? 0 : 3;
  fclose(g_ref);
  unlink(tmp);
  printf("gemv_ab %s: v9 vs v5, %d cases, %d differ\n", path, ck_lines_passed() + ck_lines_failed(),
         ck_lines_failed());
  return ck_lines_failed() ? 1 : 0;
}
