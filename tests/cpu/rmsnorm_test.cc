// rmsnorm_test.cc — rmsnorm (with and without the residual add) against a double
// reference; per-head views; strided rows; shape errors.
// Tolerance: relative L2 error <= 1e-6 (float32 sum of squares over <= 1000 terms).
#include "tests/cpu/cpu_test_util.h"

using namespace cputest;

namespace {

// y = x / sqrt(mean(x^2) + eps) * w, rows of width d, in double.
std::vector<double> ref_rmsnorm(const std::vector<double> &x, const std::vector<float> &w,
                                int64_t rows, int64_t d, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i)
      ss += x[r * d + i] * x[r * d + i];
    double s = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = x[r * d + i] * s * w[i];
  }
  return y;
}

} // namespace

TEST(CpuRmsnorm, MatchesDoubleReference) {
  Cpu c;
  std::mt19937 g(11);
  for (int64_t rows : {1, 31, 97}) {
    for (int64_t d : {1, 31, 97, 576}) {
      for (bool with_res : {false, true}) {
        SCOPED_TRACE(testing::Message() << rows << "x" << d << " res=" << with_res);
        auto x = randf(g, rows * d, -3, 3), res = randf(g, rows * d), w = randf(g, d, 0.5f, 1.5f);
        Dev dx(c, MEMRA_TYPE_F32, d, rows), dres(c, MEMRA_TYPE_F32, d, rows),
            dw(c, MEMRA_TYPE_F32, d, 1), dy(c, MEMRA_TYPE_F32, d, rows, 12); // strided y
        dx.put(x);
        dres.put(res);
        dw.put(w);
        const float eps = 1e-5f;
        ASSERT_EQ(MEMRA_OK,
                  c.vt->rmsnorm(c.be, &dy.t, &dx.t, with_res ? &dres.t : nullptr, &dw.t, eps))
            << c.err();
        std::vector<double> xs(x.size());
        for (size_t i = 0; i < x.size(); ++i)
          xs[i] = with_res ? (double)(x[i] + res[i]) : x[i];
        EXPECT_LE(rel_l2(dy.get<float>(), ref_rmsnorm(xs, w, rows, d, eps)), 1e-6);
        EXPECT_TRUE(dy.guards_ok());
        // With res, x is written back as x + res (float sums, exactly).
        std::vector<float> xw = dx.get<float>();
        for (size_t i = 0; i < x.size(); ++i)
          ASSERT_EQ(with_res ? x[i] + res[i] : x[i], xw[i]) << i;
        EXPECT_TRUE(dx.guards_ok());
      }
    }
  }
}

TEST(CpuRmsnorm, PerHeadViewAndInPlace) {
  // q [tokens, n_head * d] viewed as [tokens * n_head, d], normalized in place.
  Cpu c;
  std::mt19937 g(12);
  const int64_t tokens = 7, n_head = 9, d = 64;
  auto x = randf(g, tokens * n_head * d, -2, 2), w = randf(g, d, 0.5f, 1.5f);
  Dev dx(c, MEMRA_TYPE_F32, n_head * d, tokens), dw(c, MEMRA_TYPE_F32, d, 1);
  dx.put(x);
  dw.put(w);
  memra_tensor view = dx.t;
  view.ne0 = d;
  view.ne1 = tokens * n_head;
  view.nb1 = d * 4;
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &view, &view, nullptr, &dw.t, 1e-6f)) << c.err();
  std::vector<double> xs(x.begin(), x.end());
  EXPECT_LE(rel_l2(dx.get<float>(), ref_rmsnorm(xs, w, tokens * n_head, d, 1e-6)), 1e-6);
  EXPECT_TRUE(dx.guards_ok());
}

TEST(CpuRmsnorm, BadShapesAreInvalidAndNamed) {
  Cpu c;
  Dev x(c, MEMRA_TYPE_F32, 31, 4), y(c, MEMRA_TYPE_F32, 31, 4), w(c, MEMRA_TYPE_F32, 30, 1),
      w31(c, MEMRA_TYPE_F32, 31, 1), y3(c, MEMRA_TYPE_F32, 31, 3), wh(c, MEMRA_TYPE_F16, 32, 1);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &x.t, nullptr, &w.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: x has shape [4, 31], expected [*, 30]")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y3.t, &x.t, nullptr, &w31.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: y has shape")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &x.t, &y3.t, &w31.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: res")) << c.err();
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->rmsnorm(c.be, &y.t, &x.t, nullptr, &wh.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: w has type F16")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &x.t, nullptr, &w31.t, -1.0f));
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, nullptr, nullptr, &w31.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: tensor x is absent")) << c.err();
  // A view running past its buffer.
  memra_tensor big = x.t;
  big.ne1 = 7; // past the 192 guard bytes too
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &big, nullptr, &w31.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: x needs bytes")) << c.err();
  memra_tensor wrap = x.t;
  wrap.offset = UINT64_MAX - 8;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &wrap, nullptr, &w31.t, 1e-5f));
  memra_tensor mis = x.t;
  mis.offset += 2;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &mis, nullptr, &w31.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: x offset")) << c.err();
  memra_tensor stride = x.t;
  stride.nb1 = 4;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &stride, nullptr, &w31.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: x row stride 4 is below its row size 124")) << c.err();
  memra_tensor huge = x.t;
  huge.ne1 = INT64_MAX;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &huge, nullptr, &w31.t, 1e-5f));
  memra_tensor badtype = x.t;
  badtype.type = 77;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &y.t, &badtype, nullptr, &w31.t, 1e-5f));
  EXPECT_EQ(0u, c.err().find("rmsnorm: x has unknown type id 77, expected F32")) << c.err();
  EXPECT_TRUE(y.guards_ok());
}

// ABI 1.6: a 16-bit y holds the F32 result of the same call rounded by the memra_op16 rule
// (nearest even; f16 saturates beyond +-65504); x still takes the residual.
TEST(CpuRmsnorm, SixteenBitYIsTheF32ResultRounded) {
  Cpu c;
  std::mt19937 g(12);
  for (int32_t t : {MEMRA_TYPE_F16, MEMRA_TYPE_BF16}) {
    const int64_t rows = 5, d = 999;
    SCOPED_TRACE(memra_type_info(t).name);
    auto x = randf(g, rows * d, -3, 3), res = randf(g, rows * d), w = randf(g, d, -1e5f, 1e5f);
    Dev dx(c, MEMRA_TYPE_F32, d, rows), dx2(c, MEMRA_TYPE_F32, d, rows),
        dres(c, MEMRA_TYPE_F32, d, rows), dw(c, MEMRA_TYPE_F32, d, 1),
        d32(c, MEMRA_TYPE_F32, d, rows), d16(c, t, d, rows, 2);
    dx.put(x);
    dx2.put(x);
    dres.put(res);
    dw.put(w);
    ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &d32.t, &dx.t, &dres.t, &dw.t, 1e-6f)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &d16.t, &dx2.t, &dres.t, &dw.t, 1e-6f)) << c.err();
    EXPECT_TRUE(bits_equal(dx.get<float>(), dx2.get<float>())) << "x + res written back alike";
    std::vector<float> y = d32.get<float>();
    std::vector<uint16_t> h = d16.get<uint16_t>();
    int saturated = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      float v = y[i];
      if (t == MEMRA_TYPE_F16 && std::fabs(v) > 65504.0f)
        v = std::copysign(65504.0f, v), ++saturated;
      ASSERT_EQ(t == MEMRA_TYPE_F16 ? memra_f32_to_fp16(v) : memra_f32_to_bf16(v), h[i]) << i;
    }
    if (t == MEMRA_TYPE_F16) {
      EXPECT_GT(saturated, 0) << "no value beyond the f16 range";
    }
    EXPECT_TRUE(d16.guards_ok());
    memra_tensor alias = dx.t;
    alias.type = t; // over x's own bytes
    EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm(c.be, &alias, &dx.t, nullptr, &dw.t, 1e-6f));
    EXPECT_EQ(0u, c.err().find(std::string("rmsnorm: a ") + memra_type_info(t).name +
                               " y must not overlap x or res"))
        << c.err();
  }
}

// ABI 1.8 rmsnorm_qk: q and k per-head views normed in place in one call, bit-identical to
// two in-place rmsnorm calls (q then k, each its own weights); every argument is checked
// before either tensor is written.
TEST(CpuRmsnormQk, BitIdenticalToTwoRmsnormsAndRefusesBeforeWriting) {
  Cpu c;
  ASSERT_NE(nullptr, c.vt->rmsnorm_qk) << "the CPU plugin lacks rmsnorm_qk";
  std::mt19937 g(13);
  const int64_t tokens = 5, n_head = 7, n_kv = 3, d = 67;
  auto q = randf(g, tokens * n_head * d, -2, 2), k = randf(g, tokens * n_kv * d, -3, 3);
  auto wq = randf(g, d, 0.5f, 1.5f), wk = randf(g, d, 0.5f, 1.5f);
  Dev dq(c, MEMRA_TYPE_F32, n_head * d, tokens), dk(c, MEMRA_TYPE_F32, n_kv * d, tokens),
      rq(c, MEMRA_TYPE_F32, n_head * d, tokens), rk(c, MEMRA_TYPE_F32, n_kv * d, tokens),
      dwq(c, MEMRA_TYPE_F32, d, 1), dwk(c, MEMRA_TYPE_F32, d, 1), w5(c, MEMRA_TYPE_F32, d - 1, 1);
  dq.put(q);
  rq.put(q);
  dk.put(k);
  rk.put(k);
  dwq.put(wq);
  dwk.put(wk);
  auto heads = [d](const Dev &t, int64_t rows) {
    memra_tensor v = t.t;
    v.ne0 = d;
    v.ne1 = rows;
    v.nb1 = d * 4;
    return v;
  };
  memra_tensor qh = heads(dq, tokens * n_head), kh = heads(dk, tokens * n_kv),
               rqh = heads(rq, tokens * n_head), rkh = heads(rk, tokens * n_kv);
  const float eps = 1e-6f;
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm_qk(c.be, &qh, &dwq.t, &kh, &dwk.t, eps)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &rqh, &rqh, nullptr, &dwq.t, eps)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &rkh, &rkh, nullptr, &dwk.t, eps)) << c.err();
  const std::vector<float> gq = dq.get<float>(), gk = dk.get<float>();
  const std::vector<float> eq = rq.get<float>(), ek = rk.get<float>();
  EXPECT_EQ(0, memcmp(gq.data(), eq.data(), gq.size() * 4)) << "q";
  EXPECT_EQ(0, memcmp(gk.data(), ek.data(), gk.size() * 4)) << "k";
  std::vector<double> qs(q.begin(), q.end());
  EXPECT_LE(rel_l2(gq, ref_rmsnorm(qs, wq, tokens * n_head, d, eps)), 1e-6);
  EXPECT_TRUE(dq.guards_ok());
  EXPECT_TRUE(dk.guards_ok());

  // Refusals, each before q or k is written.
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_qk(c.be, &qh, &dwq.t, &kh, &w5.t, eps));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk: k has shape [15, 67], expected [*, 66]")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_qk(c.be, &qh, &dwq.t, &qh, &dwk.t, eps));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk: q overlaps k")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_qk(c.be, &qh, &dwq.t, &kh, &dwk.t, -1.0f));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk: eps -1 is not a finite value >= 0")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_qk(c.be, &qh, nullptr, &kh, &dwk.t, eps));
  EXPECT_EQ(0u, c.err().find("rmsnorm_qk: tensor wq is absent")) << c.err();
  EXPECT_EQ(0, memcmp(dq.get<float>().data(), gq.data(), gq.size() * 4)) << "q untouched";
  EXPECT_EQ(0, memcmp(dk.get<float>().data(), gk.data(), gk.size() * 4)) << "k untouched";
}
