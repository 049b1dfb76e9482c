// decode_bench.cc — one SmolLM2-135M forward step through the CPU plugin's vtable, with
// the real model's shapes and types (30 layers, d 576, ff 1536, 9 heads / 3 KV heads of
// 64, Q4_1 layers, Q8_0 tied 49152-row output, F16 KV cache) and seeded random weights.
// Prints ms per decode token at a given context position and ms for a prefill chunk.
// usage: decode_bench [n_threads (default 2)] [position (default 128)] [steps (default 20)]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

extern "C" {
#include "plugins/cpu/cpu_plugin.h"
#include "plugins/quant/quant.h"
}

namespace {

const memra_backend_vt *vt;
memra_backend *be;
std::mt19937 rng(5);

void check(memra_status st, const char *what) {
  if (st != MEMRA_OK) {
    fprintf(stderr, "%s: %s\n", what, vt->last_error(be));
    exit(1);
  }
}

memra_tensor alloc(int32_t type, int64_t ne0, int64_t ne1) {
  memra_tensor t = {};
  t.type = type;
  t.ne0 = ne0;
  t.ne1 = ne1;
  t.nb1 = memra_type_row_bytes(type, ne0);
  check(vt->buf_alloc(be, t.nb1 * ne1, &t.buf), "alloc");
  return t;
}

memra_tensor weight(int32_t type, int64_t k, int64_t n, float amp) {
  memra_tensor t = alloc(type, k, n);
  std::uniform_real_distribution<float> d(-amp, amp);
  std::vector<float> src(k);
  std::vector<uint8_t> bytes(t.nb1 * n);
  for (int64_t r = 0; r < n; ++r) {
    for (auto &v : src)
      v = d(rng);
    memra_quantize_row(type, src.data(), &bytes[r * t.nb1], k);
  }
  check(vt->buf_upload(be, t.buf, 0, bytes.data(), bytes.size()), "upload");
  return t;
}

void put_i32(const memra_tensor &t, const std::vector<int32_t> &v) {
  check(vt->buf_upload(be, t.buf, 0, v.data(), v.size() * 4), "upload");
}

memra_tensor rows(memra_tensor t, int64_t n) {
  t.ne1 = n;
  return t;
}

} // namespace

int main(int argc, char **argv) {
  int n_threads = argc > 1 ? atoi(argv[1]) : 2, pos0 = argc > 2 ? atoi(argv[2]) : 128,
      steps = argc > 3 ? atoi(argv[3]) : 20;
  const int L = 30, D = 576, FF = 1536, H = 9, HKV = 3, HD = 64, V = 49152, BS = 16, R = 64;
  const int n_ctx = pos0 + steps + R + 1, blocks = (n_ctx + BS - 1) / BS;
  memra_open_params op = {sizeof op, n_threads, 0};
  char err[256];
  vt = memra_plugin_open(&op, &be, err, sizeof err);
  if (!vt) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  struct Layer {
    memra_tensor an, fn, wq, wk, wv, wo, wg, wu, wd, kc, vc;
  };
  std::vector<Layer> ls(L);
  for (Layer &l : ls) {
    l.an = weight(MEMRA_TYPE_F32, D, 1, 1.0f);
    l.fn = weight(MEMRA_TYPE_F32, D, 1, 1.0f);
    l.wq = weight(MEMRA_TYPE_Q4_1, D, H * HD, 0.05f);
    l.wk = weight(MEMRA_TYPE_Q4_1, D, HKV * HD, 0.05f);
    l.wv = weight(MEMRA_TYPE_Q4_1, D, HKV * HD, 0.05f);
    l.wo = weight(MEMRA_TYPE_Q4_1, H * HD, D, 0.05f);
    l.wg = weight(MEMRA_TYPE_Q4_1, D, FF, 0.05f);
    l.wu = weight(MEMRA_TYPE_Q4_1, D, FF, 0.05f);
    l.wd = weight(MEMRA_TYPE_Q4_1, FF, D, 0.05f);
    l.kc = weight(MEMRA_TYPE_F16, HKV * HD, blocks * BS, 1.0f); // a filled cache
    l.vc = weight(MEMRA_TYPE_F16, HKV * HD, blocks * BS, 1.0f);
  }
  memra_tensor embd = weight(MEMRA_TYPE_Q8_0, D, V, 0.1f),
               onorm = weight(MEMRA_TYPE_F32, D, 1, 1.0f);
  memra_tensor x = alloc(MEMRA_TYPE_F32, D, R), xn = alloc(MEMRA_TYPE_F32, D, R),
               q = alloc(MEMRA_TYPE_F32, H * HD, R), k = alloc(MEMRA_TYPE_F32, HKV * HD, R),
               v = alloc(MEMRA_TYPE_F32, HKV * HD, R), at = alloc(MEMRA_TYPE_F32, H * HD, R),
               pr = alloc(MEMRA_TYPE_F32, D, R), g = alloc(MEMRA_TYPE_F32, FF, R),
               u = alloc(MEMRA_TYPE_F32, FF, R), logits = alloc(MEMRA_TYPE_F32, V, 1),
               ids = alloc(MEMRA_TYPE_I32, R, 1), pos = alloc(MEMRA_TYPE_I32, R, 1),
               seq = alloc(MEMRA_TYPE_I32, R, 1), table = alloc(MEMRA_TYPE_I32, blocks, 1),
               next = alloc(MEMRA_TYPE_I32, 1, 1);
  std::vector<int32_t> tb(blocks);
  for (int i = 0; i < blocks; ++i)
    tb[i] = i;
  std::shuffle(tb.begin(), tb.end(), rng);
  put_i32(table, tb);
  put_i32(seq, std::vector<int32_t>(R, 0));
  std::vector<int32_t> tok(R);
  for (auto &t : tok)
    t = (int32_t)(rng() % V);
  put_i32(ids, tok);
  const memra_tensor none = {};
  memra_rope_params rq = {H, HD, HD, MEMRA_ROPE_NORM, 100000.0f, 1.0f, {}}, rk = rq;
  rk.n_head = HKV;
  memra_attn_params ap = {H, HKV, HD, 0, 0.125f, 0.0f};

  // One forward step of n rows at positions p0..p0+n-1; greedy id of the last row.
  auto step = [&](int n, int p0) {
    std::vector<int32_t> pv(n);
    for (int i = 0; i < n; ++i)
      pv[i] = p0 + i;
    put_i32(pos, pv);
    memra_batch b = {n, 1, BS, blocks, n_ctx, 0, rows(pos, n), rows(seq, n), table};
    b.pos.ne0 = b.seq.ne0 = n;
    b.pos.ne1 = b.seq.ne1 = 1;
    memra_tensor X = rows(x, n), XN = rows(xn, n), Q = rows(q, n), K = rows(k, n), Vv = rows(v, n),
                 A = rows(at, n), P = rows(pr, n), G = rows(g, n), U = rows(u, n), I = ids;
    I.ne0 = n;
    check(vt->get_rows(be, &X, &embd, &I), "get_rows");
    for (Layer &l : ls) {
      check(vt->rmsnorm(be, &XN, &X, &none, &l.an, 1e-5f), "rmsnorm");
      check(vt->matmul(be, &Q, &XN, &l.wq, &none), "wq");
      check(vt->matmul(be, &K, &XN, &l.wk, &none), "wk");
      check(vt->matmul(be, &Vv, &XN, &l.wv, &none), "wv");
      check(vt->rope(be, &Q, &b.pos, &rq), "rope q");
      check(vt->rope(be, &K, &b.pos, &rk), "rope k");
      check(vt->kv_store(be, &l.kc, &l.vc, &K, &Vv, &b), "kv_store");
      check(vt->attention(be, &A, &Q, &l.kc, &l.vc, &b, &ap), "attention");
      check(vt->matmul(be, &P, &A, &l.wo, &none), "wo");
      check(vt->rmsnorm(be, &XN, &X, &P, &l.fn, 1e-5f), "rmsnorm");
      check(vt->matmul(be, &G, &XN, &l.wg, &none), "wg");
      check(vt->matmul(be, &U, &XN, &l.wu, &none), "wu");
      check(vt->glu(be, &G, &G, &U, MEMRA_ACT_SILU), "glu");
      check(vt->matmul(be, &P, &G, &l.wd, &none), "wd");
      check(vt->add(be, &X, &X, &P), "add");
    }
    memra_tensor lastrow = rows(xn, 1);
    lastrow.offset = (uint64_t)(n - 1) * xn.nb1;
    memra_tensor xl = rows(x, 1);
    xl.offset = lastrow.offset;
    check(vt->rmsnorm(be, &lastrow, &xl, &none, &onorm, 1e-5f), "rmsnorm");
    check(vt->matmul(be, &logits, &lastrow, &embd, &none), "output");
    check(vt->argmax(be, &next, &logits), "argmax");
  };
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  step(R, pos0 - R > 0 ? pos0 - R : 0);
  double prefill_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  std::vector<double> ms;
  for (int s = 0; s < steps; ++s) {
    auto t1 = clk::now();
    step(1, pos0 + s);
    ms.push_back(std::chrono::duration<double, std::milli>(clk::now() - t1).count());
  }
  std::sort(ms.begin(), ms.end());
  double med = ms[ms.size() / 2];
  printf("SmolLM2-135M shapes, Q4_1 + Q8_0 output, F16 KV, %d threads:\n", n_threads);
  printf("  prefill %d tokens: %.1f ms (%.1f tokens/s)\n", R, prefill_ms, R * 1000.0 / prefill_ms);
  printf("  decode at position %d: median %.1f ms/token (%.1f tokens/s), best %.1f ms\n", pos0, med,
         1000.0 / med, ms[0]);
  vt->close(be); // buffers are reclaimed with the process
  return 0;
}
