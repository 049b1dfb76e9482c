// rope_kv_test.cc — ABI 1.4 rope_kv_store on the CPU plugin: bit for bit the composition
// rope(q), rope(k), kv_store(k, v) it stands for (NORM and NEOX, partial rotation,
// frequency factors, F32/F16/FP8 caches, odd head counts, shuffled pages), guard bytes
// intact, and one-line refusals that leave q untouched. ABI 1.16 matmul_n_rope_kv: bit for bit
// matmul_n of q, k (v given: n = 2) or q, k, v (n = 3), then rope_kv_store; refusals naming it
// that write nothing. ABI 1.19 rmsnorm_qk_rope_kv: bit for bit rmsnorm_qk, then rope_kv_store.
#include "tests/cpu/cpu_test_util.h"

#include <algorithm>
#include <memory>

using namespace cputest;

namespace {

struct Case {
  int mode, n_head, n_kv, hd, n_rot;
  bool ff;
  int32_t ctype;
};

// Three rows in two sequences over a shuffled page table of block size 4.
struct Step {
  std::unique_ptr<Dev> pos, seq, table;
  memra_batch b{};
  int64_t slots;
  Step(Cpu &c, std::mt19937 &g) {
    const int bs = 4, max_blocks = 8, n_seqs = 2, pages = n_seqs * max_blocks;
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; ++i)
      ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), g);
    std::vector<int32_t> p = {0, 13, 30}, s = {1, 0, 1}; // 0: rotation by 0 is exact
    pos.reset(new Dev(c, MEMRA_TYPE_I32, 3, 1));
    seq.reset(new Dev(c, MEMRA_TYPE_I32, 3, 1));
    table.reset(new Dev(c, MEMRA_TYPE_I32, max_blocks, n_seqs));
    pos->put(p);
    seq->put(s);
    table->put(ids);
    b.n_rows = 3;
    b.n_seqs = n_seqs;
    b.block_size = bs;
    b.max_blocks = max_blocks;
    b.kv_bucket = 32;
    b.pos = pos->t;
    b.seq = seq->t;
    b.block_table = table->t;
    slots = (int64_t)pages * bs;
  }
};

std::vector<uint8_t> random_cache(std::mt19937 &g, int32_t type, int64_t ne0, int64_t rows) {
  std::vector<uint8_t> b(memra_type_row_bytes(type, ne0) * rows);
  std::uniform_int_distribution<int> d(0, 0x3b); // finite values in every cache type
  for (auto &x : b)
    x = (uint8_t)d(g);
  return b;
}

} // namespace

TEST(CpuRopeKv, EqualsRopeRopeKvStoreBitForBit) {
  const Case cases[] = {
      {MEMRA_ROPE_NORM, 4, 2, 64, 64, false, MEMRA_TYPE_F16},
      {MEMRA_ROPE_NEOX, 5, 1, 48, 16, true, MEMRA_TYPE_F32}, // partial: 32 dims pass through
      {MEMRA_ROPE_NORM, 6, 3, 32, 32, true, MEMRA_TYPE_F8_E4M3},
      {MEMRA_ROPE_NEOX, 8, 8, 128, 128, false, MEMRA_TYPE_F16}, // no GQA
  };
  Cpu c;
  int n = 0;
  for (const Case &k : cases) {
    std::mt19937 g(1000 + n++);
    Step st(c, g);
    const int qw = k.n_head * k.hd, kw = k.n_kv * k.hd;
    std::vector<float> q = randf(g, (size_t)3 * qw), kk = randf(g, (size_t)3 * kw),
                       v = randf(g, (size_t)3 * kw), ff = randf(g, (size_t)k.n_rot / 2, 1, 8);
    std::vector<uint8_t> kc0 = random_cache(g, k.ctype, kw, st.slots),
                         vc0 = random_cache(g, k.ctype, kw, st.slots);
    Dev dff(c, MEMRA_TYPE_F32, k.n_rot / 2, 1);
    dff.put(ff);
    memra_rope_params p = {k.n_head, k.hd, k.n_rot, k.mode, 10000.0f, 0.5f, {}};
    if (k.ff) p.freq_factors = dff.t;
    memra_rope_params pk = p;
    pk.n_head = k.n_kv;
    // [0]: the fused call, [1]: the three separate calls, on identical inputs
    std::unique_ptr<Dev> dq[2], dk[2], dv[2], kc[2], vc[2];
    for (int i = 0; i < 2; ++i) {
      dq[i].reset(new Dev(c, MEMRA_TYPE_F32, qw, 3, 12)); // padded rows: strides honoured
      dk[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
      dv[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
      kc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      vc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      dq[i]->put(q);
      dk[i]->put(kk);
      dv[i]->put(v);
      kc[i]->put_bytes(kc0.data());
      vc[i]->put_bytes(vc0.data());
    }
    ASSERT_EQ(MEMRA_OK, c.vt->rope_kv_store(c.be, &dq[0]->t, &dk[0]->t, &dv[0]->t, &kc[0]->t,
                                            &vc[0]->t, &st.b, &p))
        << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->rope(c.be, &dq[1]->t, &st.b.pos, &p)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->rope(c.be, &dk[1]->t, &st.b.pos, &pk)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->kv_store(c.be, &kc[1]->t, &vc[1]->t, &dk[1]->t, &dv[1]->t, &st.b))
        << c.err();
    const std::string what = "case " + std::to_string(n - 1);
    EXPECT_TRUE(bits_equal(dq[0]->get<float>(), dq[1]->get<float>())) << what << ": q";
    EXPECT_TRUE(bits_equal(dk[0]->get<float>(), dk[1]->get<float>())) << what << ": k";
    EXPECT_FALSE(bits_equal(dq[0]->get<float>(), q)) << what << ": q was not rotated";
    EXPECT_EQ(kc[0]->all(), kc[1]->all()) << what << ": k cache";
    EXPECT_EQ(vc[0]->all(), vc[1]->all()) << what << ": v cache";
    EXPECT_NE(kc[0]->all(), kc[0]->shadow) << what << ": nothing stored";
    for (int i = 0; i < 2; ++i)
      EXPECT_TRUE(dq[i]->guards_ok() && dk[i]->guards_ok() && dv[i]->guards_ok()) << what;
  }
}

TEST(CpuRopeKv, RefusalsNameTheProblemAndLeaveQAlone) {
  Cpu c;
  std::mt19937 g(7);
  Step st(c, g);
  const int hd = 32, qw = 4 * hd, kw = 2 * hd;
  std::vector<float> q = randf(g, (size_t)3 * qw);
  Dev dq(c, MEMRA_TYPE_F32, qw, 3), dk(c, MEMRA_TYPE_F32, kw, 3), dv(c, MEMRA_TYPE_F32, kw, 3),
      kc(c, MEMRA_TYPE_F16, kw, st.slots), vc(c, MEMRA_TYPE_F16, kw, st.slots),
      dk2(c, MEMRA_TYPE_F32, kw, 2), dodd(c, MEMRA_TYPE_F32, kw + 3, 3);
  dq.put(q);
  dk.put(randf(g, (size_t)3 * kw));
  dv.put(randf(g, (size_t)3 * kw));
  memra_rope_params p = {4, hd, hd, MEMRA_ROPE_NORM, 10000.0f, 1.0f, {}};
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rope_kv_store(c.be, &dq.t, &dodd.t, &dodd.t, &kc.t, &vc.t, &st.b, &p));
  EXPECT_EQ(0u, c.err().find("rope_kv_store: k rows have 67 elements, not a multiple of "
                             "head_dim 32"))
      << c.err();
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rope_kv_store(c.be, &dq.t, &dk2.t, &dv.t, &kc.t, &vc.t, &st.b, &p));
  EXPECT_EQ(0u, c.err().find("rope_kv_store: q, k, v have 3, 2, 3 rows, batch 3")) << c.err();
  memra_rope_params bad = p;
  bad.mode = 1;
  EXPECT_EQ(MEMRA_E_UNSUPPORTED,
            c.vt->rope_kv_store(c.be, &dq.t, &dk.t, &dv.t, &kc.t, &vc.t, &st.b, &bad));
  EXPECT_EQ(0u, c.err().find("rope: mode 1")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rope_kv_store(c.be, &dq.t, &dk.t, &dv.t, &kc.t, &vc.t, nullptr, &p));
  EXPECT_EQ(0u, c.err().find("rope_kv_store: q, k, v, batch and params are required")) << c.err();
  EXPECT_TRUE(bits_equal(dq.get<float>(), q)) << "a refused call rotated q";
  EXPECT_TRUE(dq.guards_ok());
}

namespace {

// A weight [N, K] of type (F32 or a quantized type) from random floats.
std::unique_ptr<Dev> weight(Cpu &c, std::mt19937 &g, int32_t type, int64_t K, int64_t N) {
  const std::vector<float> f = randf(g, (size_t)(K * N));
  std::unique_ptr<Dev> d(new Dev(c, type, K, N));
  if (type == MEMRA_TYPE_F32) {
    d->put(f);
    return d;
  }
  const uint64_t rb = memra_type_row_bytes(type, K);
  std::vector<uint8_t> b(rb * (uint64_t)N);
  for (int64_t r = 0; r < N; ++r)
    EXPECT_TRUE(memra_quantize_row(type, &f[(size_t)(r * K)], &b[rb * (uint64_t)r], K));
  d->put_bytes(b.data());
  return d;
}

} // namespace

// ABI 1.16 matmul_n_rope_kv: bit for bit matmul_n of the first n of q, k, v (n == 2: v written
// before the call, here by a matmul of a weight of another type, as a Q4_K_M layer's Q6_K v),
// then rope_kv_store of the three: q, k, v and both caches whole.
TEST(CpuMatmulNRopeKv, EqualsMatmulNThenRopeKvStoreBitForBit) {
  const struct {
    int n, mode, n_head, n_kv, hd, n_rot;
    int32_t wtype, vtype, ctype;
    bool bias;
  } cases[] = {
      {2, MEMRA_ROPE_NORM, 4, 2, 32, 32, MEMRA_TYPE_Q8_0, MEMRA_TYPE_F32, MEMRA_TYPE_F16, true},
      {2, MEMRA_ROPE_NEOX, 4, 1, 32, 16, MEMRA_TYPE_F32, MEMRA_TYPE_Q8_0, MEMRA_TYPE_F32, false},
      {3, MEMRA_ROPE_NORM, 6, 3, 16, 16, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q8_0, MEMRA_TYPE_F8_E4M3,
       true},
      {3, MEMRA_ROPE_NEOX, 4, 4, 32, 32, MEMRA_TYPE_F32, MEMRA_TYPE_F32, MEMRA_TYPE_F16, false},
  };
  const int64_t K = 64;
  Cpu c;
  int idx = 0;
  for (const auto &k : cases) {
    const std::string what = "case " + std::to_string(idx) + " n " + std::to_string(k.n);
    std::mt19937 g(2000 + idx++);
    Step st(c, g);
    const int qw = k.n_head * k.hd, kw = k.n_kv * k.hd;
    const int64_t ns[3] = {qw, kw, kw};
    Dev dx(c, MEMRA_TYPE_F32, K, 3);
    dx.put(randf(g, (size_t)(3 * K)));
    std::unique_ptr<Dev> dw[3], db[3];
    for (int j = 0; j < 3; ++j) {
      dw[j] = weight(c, g, j == 2 ? k.vtype : k.wtype, K, ns[j]);
      db[j].reset(new Dev(c, MEMRA_TYPE_F32, ns[j], 1));
      db[j]->put(randf(g, (size_t)ns[j]));
    }
    const std::vector<uint8_t> kc0 = random_cache(g, k.ctype, kw, st.slots),
                               vc0 = random_cache(g, k.ctype, kw, st.slots);
    const memra_rope_params p = {k.n_head, k.hd, k.n_rot, k.mode, 500000.0f, 1.0f, {}};
    const memra_tensor ws[3] = {dw[0]->t, dw[1]->t, dw[2]->t},
                       bs[3] = {db[0]->t, db[1]->t, db[2]->t};
    // [0]: the slot, [1]: matmul_n, then rope_kv_store, on identical inputs
    std::unique_ptr<Dev> dy[2][3], kc[2], vc[2];
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j)
        dy[i][j].reset(new Dev(c, MEMRA_TYPE_F32, ns[j], 3, j == 0 ? 8 : 0)); // padded q rows
      kc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      vc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      kc[i]->put_bytes(kc0.data());
      vc[i]->put_bytes(vc0.data());
      if (k.n == 2) { // v first, by a projection of its own
        ASSERT_EQ(MEMRA_OK,
                  c.vt->matmul(c.be, &dy[i][2]->t, &dx.t, &dw[2]->t, k.bias ? &db[2]->t : nullptr))
            << c.err();
      }
    }
    const memra_tensor y0[3] = {dy[0][0]->t, dy[0][1]->t, dy[0][2]->t},
                       y1[3] = {dy[1][0]->t, dy[1][1]->t, dy[1][2]->t};
    ASSERT_EQ(MEMRA_OK, c.vt->matmul_n_rope_kv(c.be, k.n, y0, &dx.t, ws, k.bias ? bs : nullptr,
                                               &kc[0]->t, &vc[0]->t, &st.b, &p))
        << what << ": " << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->matmul_n(c.be, k.n, y1, &dx.t, ws, k.bias ? bs : nullptr)) << c.err();
    ASSERT_EQ(MEMRA_OK,
              c.vt->rope_kv_store(c.be, &y1[0], &y1[1], &y1[2], &kc[1]->t, &vc[1]->t, &st.b, &p))
        << c.err();
    static const char *const names[3] = {"q", "k", "v"};
    for (int j = 0; j < 3; ++j) {
      EXPECT_TRUE(bits_equal(dy[0][j]->get<float>(), dy[1][j]->get<float>()))
          << what << ": " << names[j];
      EXPECT_TRUE(dy[0][j]->guards_ok()) << what << ": " << names[j];
    }
    EXPECT_EQ(kc[0]->all(), kc[1]->all()) << what << ": k cache";
    EXPECT_EQ(vc[0]->all(), vc[1]->all()) << what << ": v cache";
    EXPECT_NE(kc[0]->all(), kc[0]->shadow) << what << ": nothing stored";
  }
}

// Refusals: a one-line message naming the slot, nothing written (outputs and caches untouched).
TEST(CpuMatmulNRopeKv, RefusalsNameTheSlotAndWriteNothing) {
  Cpu c;
  std::mt19937 g(17);
  Step st(c, g);
  const int hd = 32, qw = 4 * hd, kw = 2 * hd;
  const int64_t K = 64;
  Dev dx(c, MEMRA_TYPE_F32, K, 3), wq(c, MEMRA_TYPE_F32, K, qw), wk(c, MEMRA_TYPE_F32, K, kw),
      wv(c, MEMRA_TYPE_F32, K, kw), yq(c, MEMRA_TYPE_F32, qw, 3), yk(c, MEMRA_TYPE_F32, kw, 3),
      yv(c, MEMRA_TYPE_F32, kw, 3), yk2(c, MEMRA_TYPE_F32, kw, 2),
      kc(c, MEMRA_TYPE_F16, kw, st.slots), vc(c, MEMRA_TYPE_F16, kw, st.slots);
  dx.put(randf(g, (size_t)(3 * K)));
  wq.put(randf(g, (size_t)(K * qw)));
  wk.put(randf(g, (size_t)(K * kw)));
  wv.put(randf(g, (size_t)(K * kw)));
  const memra_tensor ws[3] = {wq.t, wk.t, wv.t}, ys[3] = {yq.t, yk.t, yv.t};
  const memra_rope_params p = {4, hd, hd, MEMRA_ROPE_NORM, 10000.0f, 1.0f, {}};
  auto call = [&](int32_t n, const memra_tensor *y, const memra_batch *b) {
    return c.vt->matmul_n_rope_kv(c.be, n, y, &dx.t, ws, nullptr, &kc.t, &vc.t, b, &p);
  };
  for (int32_t n : {0, 1, 4}) {
    EXPECT_EQ(MEMRA_E_INVALID, call(n, ys, &st.b)) << n;
    EXPECT_EQ(0u, c.err().find("matmul_n_rope_kv: " + std::to_string(n) + " outputs computed"))
        << c.err();
  }
  EXPECT_EQ(MEMRA_E_INVALID, call(3, ys, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul_n_rope_kv: y, x, w, k_cache, v_cache, batch and params are "
                             "required"))
      << c.err();
  const struct {
    memra_tensor y[3];
    const char *msg;
  } bad[] = {
      {{dx.t, yk.t, yv.t}, "matmul_n_rope_kv: y[0] (q) overlaps x"},
      {{yq.t, yk.t, wq.t}, "matmul_n_rope_kv: y[2] (v) overlaps w[0]"},
      {{yq.t, yq.t, yv.t}, "matmul_n_rope_kv: y[1] (k) overlaps y[0]"},
      {{yq.t, yk.t, kc.t}, "matmul_n_rope_kv: y[2] (v) overlaps a cache"},
      {{yq.t, yk2.t, yv.t}, "matmul_n_rope_kv: y[1] (k) has 2 rows, batch 3"},
  };
  for (const auto &b : bad) {
    EXPECT_EQ(MEMRA_E_INVALID, call(2, b.y, &st.b)) << b.msg;
    EXPECT_EQ(0u, c.err().find(b.msg)) << c.err();
  }
  for (const Dev *d : {&yq, &yk, &yv, &kc, &vc, &dx})
    EXPECT_EQ(d->shadow, d->all()) << "a refused call wrote";
}

// ABI 1.19 rmsnorm_qk_rope_kv: bit for bit rmsnorm_qk over q's and k's per-head views, then
// rope_kv_store (NEOX after the norms as qwen3, a partial NORM rotation, F16 and FP8 caches); the
// norm really ran (q differs from rope_kv_store alone); refusals name the op.
TEST(CpuRmsnormQkRopeKv, EqualsRmsnormQkThenRopeKvStoreBitForBit) {
  const Case cases[] = {
      {MEMRA_ROPE_NEOX, 4, 2, 64, 64, false, MEMRA_TYPE_F16},
      {MEMRA_ROPE_NORM, 5, 1, 48, 16, true, MEMRA_TYPE_F32},
      {MEMRA_ROPE_NEOX, 6, 3, 32, 32, false, MEMRA_TYPE_F8_E4M3},
  };
  Cpu c;
  int n = 0;
  for (const Case &k : cases) {
    const std::string what = "case " + std::to_string(n);
    std::mt19937 g(3000 + n++);
    Step st(c, g);
    const int qw = k.n_head * k.hd, kw = k.n_kv * k.hd;
    std::vector<float> q = randf(g, (size_t)3 * qw, -3, 3), kk = randf(g, (size_t)3 * kw, -3, 3),
                       v = randf(g, (size_t)3 * kw), ff = randf(g, (size_t)k.n_rot / 2, 1, 8),
                       wq = randf(g, (size_t)k.hd, 0.5f, 1.5f),
                       wk = randf(g, (size_t)k.hd, 0.5f, 1.5f);
    std::vector<uint8_t> kc0 = random_cache(g, k.ctype, kw, st.slots),
                         vc0 = random_cache(g, k.ctype, kw, st.slots);
    Dev dff(c, MEMRA_TYPE_F32, k.n_rot / 2, 1), dwq(c, MEMRA_TYPE_F32, k.hd, 1),
        dwk(c, MEMRA_TYPE_F32, k.hd, 1);
    dff.put(ff);
    dwq.put(wq);
    dwk.put(wk);
    memra_rope_params p = {k.n_head, k.hd, k.n_rot, k.mode, 10000.0f, 0.5f, {}};
    if (k.ff) p.freq_factors = dff.t;
    // [0]: the fused call, [1]: rmsnorm_qk then rope_kv_store, [2]: rope_kv_store alone
    std::unique_ptr<Dev> dq[3], dk[3], dv[3], kc[3], vc[3];
    for (int i = 0; i < 3; ++i) {
      dq[i].reset(new Dev(c, MEMRA_TYPE_F32, qw, 3));
      dk[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
      dv[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
      kc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      vc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      dq[i]->put(q);
      dk[i]->put(kk);
      dv[i]->put(v);
      kc[i]->put_bytes(kc0.data());
      vc[i]->put_bytes(vc0.data());
    }
    ASSERT_EQ(MEMRA_OK,
              c.vt->rmsnorm_qk_rope_kv(c.be, &dq[0]->t, nullptr, &dwq.t, &dk[0]->t, &dwk.t, 1e-6f,
                                       &dv[0]->t, &kc[0]->t, &vc[0]->t, &st.b, &p))
        << c.err();
    memra_tensor qh = dq[1]->t, kh = dk[1]->t;
    qh.ne1 = 3 * k.n_head, kh.ne1 = 3 * k.n_kv;
    qh.ne0 = kh.ne0 = k.hd;
    qh.nb1 = kh.nb1 = 4u * (uint64_t)k.hd;
    ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm_qk(c.be, &qh, &dwq.t, &kh, &dwk.t, 1e-6f)) << c.err();
    for (int i = 1; i < 3; ++i)
      ASSERT_EQ(MEMRA_OK, c.vt->rope_kv_store(c.be, &dq[i]->t, &dk[i]->t, &dv[i]->t, &kc[i]->t,
                                              &vc[i]->t, &st.b, &p))
          << c.err();
    EXPECT_TRUE(bits_equal(dq[0]->get<float>(), dq[1]->get<float>())) << what << ": q";
    EXPECT_TRUE(bits_equal(dk[0]->get<float>(), dk[1]->get<float>())) << what << ": k";
    EXPECT_EQ(kc[0]->all(), kc[1]->all()) << what << ": k cache";
    EXPECT_EQ(vc[0]->all(), vc[1]->all()) << what << ": v cache";
    EXPECT_FALSE(bits_equal(dq[0]->get<float>(), dq[2]->get<float>())) << what << ": no norm";
    EXPECT_NE(kc[0]->all(), kc[2]->all()) << what << ": the cache got unnormed k";
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(dq[i]->guards_ok() && dk[i]->guards_ok() && dv[i]->guards_ok()) << what;
  }
}

TEST(CpuRmsnormQkRopeKv, RefusalsNameTheProblem) {
  Cpu c;
  std::mt19937 g(11);
  Step st(c, g);
  const int hd = 32, qw = 4 * hd, kw = 2 * hd;
  Dev dq(c, MEMRA_TYPE_F32, qw, 3), dk(c, MEMRA_TYPE_F32, kw, 3), dv(c, MEMRA_TYPE_F32, kw, 3),
      kc(c, MEMRA_TYPE_F16, kw, st.slots), vc(c, MEMRA_TYPE_F16, kw, st.slots),
      dpad(c, MEMRA_TYPE_F32, qw, 3, 8), dw(c, MEMRA_TYPE_F32, hd, 1);
  dq.put(randf(g, (size_t)3 * qw));
  dk.put(randf(g, (size_t)3 * kw));
  dv.put(randf(g, (size_t)3 * kw));
  dw.put(randf(g, (size_t)hd, 0.5f, 1.5f));
  memra_rope_params p = {4, hd, hd, MEMRA_ROPE_NEOX, 10000.0f, 1.0f, {}};
  memra_rope_params odd = p;
  odd.head_dim = 24;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_qk_rope_kv(c.be, &dq.t, nullptr, &dw.t, &dk.t, &dw.t,
                                                      1e-6f, &dv.t, &kc.t, &vc.t, &st.b, &odd));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk_rope_kv: q, k rows of 128, 64 elements, not whole "
                             "heads of 24"))
      << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_qk_rope_kv(c.be, &dpad.t, nullptr, &dw.t, &dk.t, &dw.t,
                                                      1e-6f, &dv.t, &kc.t, &vc.t, &st.b, &p));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk_rope_kv: q and k must be F32 with packed rows"))
      << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_qk_rope_kv(c.be, &dq.t, nullptr, nullptr, &dk.t, &dw.t,
                                                      1e-6f, &dv.t, &kc.t, &vc.t, &st.b, &p));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk_rope_kv: q, wq, k, wk and params are required"))
      << c.err();
}

// q_in: q's norm from another per-head view (Qwen3-Next's q rows inside its q + gate rows): bit for
// bit rmsnorm(q heads, q_in) and rmsnorm(k heads in place), then rope_kv_store; a q_in of the
// wrong shape is refused with its message.
TEST(CpuRmsnormQkRopeKv, QInEqualsTheTwoNormsThenRopeKvStore) {
  Cpu c;
  std::mt19937 g(17);
  Step st(c, g);
  const int hd = 32, nh = 4, nkv = 2, qw = nh * hd, kw = nkv * hd;
  const std::vector<float> qg = randf(g, (size_t)3 * 2 * qw, -3, 3), kk = randf(g, (size_t)3 * kw),
                           v = randf(g, (size_t)3 * kw), w = randf(g, (size_t)hd, 0.5f, 1.5f);
  Dev dqg(c, MEMRA_TYPE_F32, 2 * qw, 3), dw(c, MEMRA_TYPE_F32, hd, 1);
  dqg.put(qg);
  dw.put(w);
  memra_tensor qin = dqg.t; /* per head [q (hd), gate (hd)]: the q halves */
  qin.ne0 = hd;
  qin.ne1 = 3 * nh;
  qin.nb1 = 2u * 4u * hd;
  memra_rope_params p = {nh, hd, hd, MEMRA_ROPE_NEOX, 10000.0f, 1.0f, {}};
  std::unique_ptr<Dev> dq[2], dk[2], dv[2], kc[2], vc[2];
  for (int i = 0; i < 2; ++i) {
    dq[i].reset(new Dev(c, MEMRA_TYPE_F32, qw, 3));
    dk[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
    dv[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
    kc[i].reset(new Dev(c, MEMRA_TYPE_F16, kw, st.slots));
    vc[i].reset(new Dev(c, MEMRA_TYPE_F16, kw, st.slots));
    dq[i]->put(randf(g, (size_t)3 * qw)); /* overwritten: q comes from q_in */
    dk[i]->put(kk);
    dv[i]->put(v);
  }
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm_qk_rope_kv(c.be, &dq[0]->t, &qin, &dw.t, &dk[0]->t, &dw.t,
                                               1e-6f, &dv[0]->t, &kc[0]->t, &vc[0]->t, &st.b, &p))
      << c.err();
  memra_tensor qh = dq[1]->t, kh = dk[1]->t;
  qh.ne1 = 3 * nh, kh.ne1 = 3 * nkv;
  qh.ne0 = kh.ne0 = hd;
  qh.nb1 = kh.nb1 = 4u * hd;
  const memra_tensor none = {};
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &qh, &qin, &none, &dw.t, 1e-6f)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &kh, &kh, &none, &dw.t, 1e-6f)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->rope_kv_store(c.be, &dq[1]->t, &dk[1]->t, &dv[1]->t, &kc[1]->t,
                                          &vc[1]->t, &st.b, &p))
      << c.err();
  EXPECT_TRUE(bits_equal(dq[0]->get<float>(), dq[1]->get<float>())) << "q";
  EXPECT_TRUE(bits_equal(dk[0]->get<float>(), dk[1]->get<float>())) << "k";
  EXPECT_EQ(kc[0]->all(), kc[1]->all()) << "k cache";
  EXPECT_EQ(vc[0]->all(), vc[1]->all()) << "v cache";
  memra_tensor bad = qin;
  bad.ne1 = 3 * nh - 1;
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rmsnorm_qk_rope_kv(c.be, &dq[0]->t, &bad, &dw.t, &dk[0]->t, &dw.t, 1e-6f,
                                     &dv[0]->t, &kc[0]->t, &vc[0]->t, &st.b, &p));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk_rope_kv: q_in has shape [11, 32], expected [12, 32]"))
      << c.err();
}
