// matmul_bench.cc — GFLOP/s of the CPU plugin's matmul on SmolLM2-135M's FFN shapes
// (Q4_1, 576 <-> 1536) at M = 1 (decode) and M = 32 (prefill).
// usage: matmul_bench [n_threads (default 2)] [seconds per shape (default 1)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

extern "C" {
#include "plugins/cpu/cpu_plugin.h"
#include "plugins/include/memra_plugin.h"
#include "plugins/quant/quant.h"
}

int main(int argc, char **argv) {
  int n_threads = argc > 1 ? atoi(argv[1]) : 2;
  double secs = argc > 2 ? atof(argv[2]) : 1.0;
  memra_open_params op = {sizeof op, n_threads, 0};
  memra_backend *be = nullptr;
  char err[256];
  const memra_backend_vt *vt = memra_plugin_open(&op, &be, err, sizeof err);
  if (!vt) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  std::mt19937 g(1);
  std::uniform_real_distribution<float> d(-1, 1);
  struct Shape {
    int64_t n, k, m;
    const char *what;
  } shapes[] = {{1536, 576, 1, "ffn_up/gate  [1536 x 576]"},
                {576, 1536, 1, "ffn_down     [576 x 1536]"},
                {1536, 576, 32, "ffn_up/gate  [1536 x 576]"},
                {576, 1536, 32, "ffn_down     [576 x 1536]"}};
  printf("| weight (Q4_1) | M | threads | us/call | GFLOP/s |\n|---|---|---|---|---|\n");
  for (const Shape &s : shapes) {
    uint64_t rb = memra_type_row_bytes(MEMRA_TYPE_Q4_1, s.k);
    std::vector<float> src(s.n * s.k), x(s.m * s.k);
    for (auto &v : src)
      v = d(g);
    for (auto &v : x)
      v = d(g);
    std::vector<uint8_t> w(s.n * rb);
    for (int64_t r = 0; r < s.n; ++r)
      memra_quantize_row(MEMRA_TYPE_Q4_1, &src[r * s.k], &w[r * rb], s.k);
    memra_buf *bw, *bx, *by;
    if (vt->buf_alloc(be, w.size(), &bw) || vt->buf_alloc(be, x.size() * 4, &bx) ||
        vt->buf_alloc(be, s.m * s.n * 4, &by)) {
      fprintf(stderr, "%s\n", vt->last_error(be));
      return 1;
    }
    vt->buf_upload(be, bw, 0, w.data(), w.size());
    vt->buf_upload(be, bx, 0, x.data(), x.size() * 4);
    memra_tensor tw = {bw, 0, MEMRA_TYPE_Q4_1, 0, s.k, s.n, rb};
    memra_tensor tx = {bx, 0, MEMRA_TYPE_F32, 0, s.k, s.m, (uint64_t)s.k * 4};
    memra_tensor ty = {by, 0, MEMRA_TYPE_F32, 0, s.n, s.m, (uint64_t)s.n * 4};
    for (int i = 0; i < 10; ++i)
      vt->matmul(be, &ty, &tx, &tw, nullptr); // warm up
    long iters = 0;
    auto t0 = std::chrono::steady_clock::now();
    double el = 0;
    do {
      for (int i = 0; i < 20; ++i)
        if (vt->matmul(be, &ty, &tx, &tw, nullptr) != MEMRA_OK) {
          fprintf(stderr, "%s\n", vt->last_error(be));
          return 1;
        }
      iters += 20;
      el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (el < secs);
    double us = el / iters * 1e6, gflops = 2.0 * s.m * s.n * s.k * iters / el / 1e9;
    printf("| %s | %lld | %d | %.1f | %.2f |\n", s.what, (long long)s.m, n_threads, us, gflops);
    vt->buf_free(be, bw);
    vt->buf_free(be, bx);
    vt->buf_free(be, by);
  }
  vt->close(be);
  return 0;
}
