// threading_test.cc — every parallel op gives bit-identical results with 1, 2, 3 and 8
// threads: each output element is computed whole, in an order fixed by the element.
// Shapes are large enough that every op really runs in parallel.
#include "tests/cpu/cpu_test_util.h"

#include <memory>

using namespace cputest;

namespace {

// Runs a fixed workload of every op on a backend with n threads; returns all outputs.
std::vector<std::vector<float>> run_all(int n_threads) {
  Cpu c(n_threads);
  std::mt19937 g(61);
  std::vector<std::vector<float>> outs;
  const int64_t k = 576, n = 1536, m = 37;

  // matmul, decode and prefill, Q4_1 and Q6_K.
  for (int32_t type : {MEMRA_TYPE_Q4_1, MEMRA_TYPE_Q6_K}) {
    int64_t kk = type == MEMRA_TYPE_Q6_K ? 768 : k; // K-quants need whole 256 blocks
    uint64_t rb = memra_type_row_bytes(type, kk);
    std::vector<uint8_t> w(n * rb);
    auto src = randf(g, n * kk);
    for (int64_t r = 0; r < n; ++r)
      memra_quantize_row(type, &src[r * kk], &w[r * rb], kk);
    Dev dw(c, type, kk, n), dx(c, MEMRA_TYPE_F32, kk, m), dy(c, MEMRA_TYPE_F32, n, m),
        d1(c, MEMRA_TYPE_F32, n, 1);
    dw.put_bytes(w.data());
    dx.put(randf(g, m * kk));
    EXPECT_EQ(MEMRA_OK, c.vt->matmul(c.be, &dy.t, &dx.t, &dw.t, nullptr)) << c.err();
    memra_tensor x1 = dx.t;
    x1.ne1 = 1;
    EXPECT_EQ(MEMRA_OK, c.vt->matmul(c.be, &d1.t, &x1, &dw.t, nullptr)) << c.err();
    outs.push_back(dy.get<float>());
    outs.push_back(d1.get<float>());
  }
  // rmsnorm, rope, glu, add, scale over [m, 2048].
  const int64_t w = 2048;
  Dev a(c, MEMRA_TYPE_F32, w, m), b(c, MEMRA_TYPE_F32, w, m), y(c, MEMRA_TYPE_F32, w, m),
      nw(c, MEMRA_TYPE_F32, w, 1), pos(c, MEMRA_TYPE_I32, m, 1);
  a.put(randf(g, m * w, -3, 3));
  b.put(randf(g, m * w, -3, 3));
  nw.put(randf(g, w));
  std::vector<int32_t> pv(m);
  for (auto &p : pv)
    p = (int32_t)(g() % 5000);
  pos.put(pv);
  EXPECT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &y.t, &a.t, &b.t, &nw.t, 1e-5f));
  outs.push_back(y.get<float>());
  memra_rope_params rp = {32, 64, 64, MEMRA_ROPE_NEOX, 10000.0f, 1.0f, {}};
  EXPECT_EQ(MEMRA_OK, c.vt->rope(c.be, &y.t, &pos.t, &rp));
  outs.push_back(y.get<float>());
  EXPECT_EQ(MEMRA_OK, c.vt->glu(c.be, &y.t, &a.t, &b.t, MEMRA_ACT_GELU_TANH));
  outs.push_back(y.get<float>());
  EXPECT_EQ(MEMRA_OK, c.vt->add(c.be, &y.t, &y.t, &b.t));
  EXPECT_EQ(MEMRA_OK, c.vt->scale(c.be, &y.t, &y.t, 0.3f));
  outs.push_back(y.get<float>());

  // kv_store + attention: 2 sequences of 300 positions, pages of 16, GQA 3:1.
  const int hd = 64, nh = 9, nkv = 3, bs = 16, len = 300, blocks = (len + bs - 1) / bs;
  std::vector<int32_t> table(2 * blocks), kpos, kseq;
  for (int i = 0; i < 2 * blocks; ++i)
    table[i] = (i * 7) % (2 * blocks); // a permutation
  for (int s = 0; s < 2; ++s)
    for (int p = 0; p < len; ++p) {
      kseq.push_back(s);
      kpos.push_back(p);
    }
  Dev tb(c, MEMRA_TYPE_I32, blocks, 2), kp(c, MEMRA_TYPE_I32, 2 * len, 1),
      ks(c, MEMRA_TYPE_I32, 2 * len, 1), kk(c, MEMRA_TYPE_F32, nkv * hd, 2 * len),
      vv(c, MEMRA_TYPE_F32, nkv * hd, 2 * len), kc(c, MEMRA_TYPE_F16, nkv * hd, 2 * blocks * bs),
      vc(c, MEMRA_TYPE_F16, nkv * hd, 2 * blocks * bs);
  tb.put(table);
  kp.put(kpos);
  ks.put(kseq);
  kk.put(randf(g, 2 * len * nkv * hd));
  vv.put(randf(g, 2 * len * nkv * hd));
  memra_batch kb = {2 * len, 2, bs, blocks, len, 0, kp.t, ks.t, tb.t};
  EXPECT_EQ(MEMRA_OK, c.vt->kv_store(c.be, &kc.t, &vc.t, &kk.t, &vv.t, &kb)) << c.err();
  std::vector<int32_t> qpos = {299, 150, 0, 298, 17}, qseq = {0, 1, 1, 1, 0};
  Dev qp(c, MEMRA_TYPE_I32, 5, 1), qs(c, MEMRA_TYPE_I32, 5, 1), q(c, MEMRA_TYPE_F32, nh * hd, 5),
      o(c, MEMRA_TYPE_F32, nh * hd, 5);
  qp.put(qpos);
  qs.put(qseq);
  q.put(randf(g, 5 * nh * hd));
  memra_batch qb = {5, 2, bs, blocks, len, 0, qp.t, qs.t, tb.t};
  memra_attn_params ap = {nh, nkv, hd, 0, 0.125f, 0.0f};
  EXPECT_EQ(MEMRA_OK, c.vt->attention(c.be, &o.t, &q.t, &kc.t, &vc.t, &qb, &ap)) << c.err();
  outs.push_back(o.get<float>());

  // get_rows of a Q4_1 table, then argmax over its rows (ids carried as floats).
  const int64_t vocab = 4099, d = 576, n_ids = 257;
  uint64_t rb = memra_type_row_bytes(MEMRA_TYPE_Q4_1, d);
  std::vector<uint8_t> tbl(vocab * rb);
  auto tsrc = randf(g, vocab * d);
  for (int64_t r = 0; r < vocab; ++r)
    memra_quantize_row(MEMRA_TYPE_Q4_1, &tsrc[r * d], &tbl[r * rb], d);
  std::vector<int32_t> idv(n_ids);
  for (auto &i : idv)
    i = (int32_t)(g() % vocab);
  Dev dt(c, MEMRA_TYPE_Q4_1, d, vocab), di(c, MEMRA_TYPE_I32, n_ids, 1),
      dr(c, MEMRA_TYPE_F32, d, n_ids), am(c, MEMRA_TYPE_I32, n_ids, 1);
  dt.put_bytes(tbl.data());
  di.put(idv);
  EXPECT_EQ(MEMRA_OK, c.vt->get_rows(c.be, &dr.t, &dt.t, &di.t)) << c.err();
  outs.push_back(dr.get<float>());
  EXPECT_EQ(MEMRA_OK, c.vt->argmax(c.be, &am.t, &dr.t)) << c.err();
  std::vector<int32_t> amax = am.get<int32_t>();
  std::vector<float> af(amax.size());
  for (size_t i = 0; i < amax.size(); ++i)
    af[i] = (float)amax[i] + 1.0f; // never all zeros
  outs.push_back(af);
  return outs;
}

} // namespace

TEST(CpuThreading, OneTwoThreeEightThreadsGiveIdenticalBits) {
  std::vector<std::vector<float>> one = run_all(1);
  for (int n : {2, 3, 8}) { // 8: more threads than this machine may have cores
    std::vector<std::vector<float>> other = run_all(n);
    ASSERT_EQ(one.size(), other.size());
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(bits_equal(one[i], other[i])) << "output " << i << " with " << n << " threads";
      double nz = 0;
      for (float v : one[i])
        nz += std::fabs(v);
      EXPECT_GT(nz, 0.0) << "output " << i << " is all zeros: the test would prove nothing";
    }
  }
}

// Many short parallel regions back to back: the pool neither loses nor repeats work.
TEST(CpuThreading, ManySmallRegionsStayCorrect) {
  Cpu c(3);
  std::mt19937 g(62);
  const int64_t rows = 64, w = 1024;
  auto x = randf(g, rows * w);
  Dev a(c, MEMRA_TYPE_F32, w, rows);
  a.put(x);
  for (int i = 0; i < 500; ++i)
    ASSERT_EQ(MEMRA_OK, c.vt->scale(c.be, &a.t, &a.t, i % 2 ? 2.0f : 0.5f));
  EXPECT_TRUE(bits_equal(x, a.get<float>())); // powers of two: exact round trip
}
