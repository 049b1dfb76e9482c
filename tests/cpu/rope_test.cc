// rope_test.cc — NORM and NEOX rope, with and without freq_factors, partial rotation,
// linear scaling, large positions; against a double reference.
// Tolerance: relative L2 error <= 1e-6 (one rounding of cos/sin and of each product).
#include "tests/cpu/cpu_test_util.h"

using namespace cputest;

namespace {

void ref_rope(std::vector<double> &x, const std::vector<int32_t> &pos, int n_head, int hd,
              int n_rot, int mode, double base, double fscale, const std::vector<float> *ff) {
  for (size_t r = 0; r < pos.size(); ++r)
    for (int h = 0; h < n_head; ++h) {
      double *v = &x[(r * n_head + h) * hd];
      for (int i = 0; i < n_rot / 2; ++i) {
        double theta = pos[r] * fscale * std::pow(base, -2.0 * i / n_rot);
        if (ff) theta /= (*ff)[i];
        int a = mode == MEMRA_ROPE_NEOX ? i : 2 * i,
            b = mode == MEMRA_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
        v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
    }
}

} // namespace

TEST(CpuRope, NormAndNeoxMatchDouble) {
  Cpu c;
  std::mt19937 g(41);
  struct Case {
    int n_head, hd, n_rot;
    float base, fscale;
  } cases[] = {{9, 64, 64, 10000.0f, 1.0f},
               {3, 80, 80, 1000000.0f, 1.0f},
               {5, 80, 32, 10000.0f, 0.25f}, // partial rotation, linear scaling
               {1, 64, 64, 500000.0f, 1.0f}};
  for (const Case &k : cases)
    for (int mode : {MEMRA_ROPE_NORM, MEMRA_ROPE_NEOX})
      for (bool with_ff : {false, true})
        for (int64_t rows : {1, 31, 97}) {
          SCOPED_TRACE(testing::Message() << "hd=" << k.hd << " n_rot=" << k.n_rot << " mode="
                                          << mode << " ff=" << with_ff << " rows=" << rows);
          int64_t w = (int64_t)k.n_head * k.hd;
          auto x = randf(g, rows * w);
          std::vector<int32_t> pos(rows);
          for (auto &p : pos)
            p = (int32_t)(g() % 8192);
          pos[0] = rows > 1 ? 0 : 4097;
          auto ff = randf(g, k.n_rot / 2, 1.0f, 8.0f);
          Dev dx(c, MEMRA_TYPE_F32, w, rows, 20), dp(c, MEMRA_TYPE_I32, rows, 1),
              df(c, MEMRA_TYPE_F32, k.n_rot / 2, 1);
          dx.put(x);
          dp.put(pos);
          df.put(ff);
          memra_rope_params p = {k.n_head, k.hd, k.n_rot, mode, k.base, k.fscale, {}};
          if (with_ff) p.freq_factors = df.t;
          ASSERT_EQ(MEMRA_OK, c.vt->rope(c.be, &dx.t, &dp.t, &p)) << c.err();
          std::vector<double> want(x.begin(), x.end());
          ref_rope(want, pos, k.n_head, k.hd, k.n_rot, mode, k.base, k.fscale,
                   with_ff ? &ff : nullptr);
          EXPECT_LE(rel_l2(dx.get<float>(), want), 1e-6);
          EXPECT_TRUE(dx.guards_ok());
          if (k.n_rot < k.hd) { // dims past n_rot are untouched, bit for bit
            std::vector<float> got = dx.get<float>();
            for (int64_t r = 0; r < rows; ++r)
              for (int h = 0; h < k.n_head; ++h)
                for (int i = k.n_rot; i < k.hd; ++i) {
                  size_t at = (r * k.n_head + h) * k.hd + i;
                  ASSERT_EQ(x[at], got[at]);
                }
          }
        }
}

TEST(CpuRope, PositionZeroIsIdentityAndNormDiffersFromNeox) {
  Cpu c;
  std::mt19937 g(42);
  auto x = randf(g, 2 * 64);
  Dev a(c, MEMRA_TYPE_F32, 64, 2), b(c, MEMRA_TYPE_F32, 64, 2), dp(c, MEMRA_TYPE_I32, 2, 1);
  a.put(x);
  b.put(x);
  dp.put(std::vector<int32_t>{0, 5});
  memra_rope_params p = {1, 64, 64, MEMRA_ROPE_NORM, 10000.0f, 1.0f, {}};
  ASSERT_EQ(MEMRA_OK, c.vt->rope(c.be, &a.t, &dp.t, &p));
  p.mode = MEMRA_ROPE_NEOX;
  ASSERT_EQ(MEMRA_OK, c.vt->rope(c.be, &b.t, &dp.t, &p));
  std::vector<float> ga = a.get<float>(), gb = b.get<float>();
  EXPECT_TRUE(std::equal(x.begin(), x.begin() + 64, ga.begin()));
  EXPECT_TRUE(std::equal(x.begin(), x.begin() + 64, gb.begin()));
  EXPECT_FALSE(std::equal(ga.begin() + 64, ga.end(), gb.begin() + 64));
}

TEST(CpuRope, BadParamsAreRefused) {
  Cpu c;
  Dev x(c, MEMRA_TYPE_F32, 128, 3), pos(c, MEMRA_TYPE_I32, 3, 1), pos2(c, MEMRA_TYPE_I32, 2, 1),
      ff(c, MEMRA_TYPE_F32, 31, 1);
  memra_rope_params p = {2, 64, 64, MEMRA_ROPE_NORM, 10000.0f, 1.0f, {}};
  memra_rope_params bad = p;
  bad.n_rot = 63;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rope(c.be, &x.t, &pos.t, &bad));
  EXPECT_EQ(0u, c.err().find("rope: n_head 2, head_dim 64, n_rot 63")) << c.err();
  bad = p;
  bad.mode = 1;
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->rope(c.be, &x.t, &pos.t, &bad));
  EXPECT_EQ(0u, c.err().find("rope: mode 1")) << c.err();
  bad = p;
  bad.n_head = 3;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rope(c.be, &x.t, &pos.t, &bad));
  EXPECT_EQ(0u, c.err().find("rope: x has shape [3, 128], expected [*, 192]")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rope(c.be, &x.t, &pos2.t, &p));
  EXPECT_EQ(0u, c.err().find("rope: pos has 2 entries, x has 3 rows")) << c.err();
  bad = p;
  bad.freq_factors = ff.t;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rope(c.be, &x.t, &pos.t, &bad));
  EXPECT_EQ(0u, c.err().find("rope: freq_factors has shape [1, 31], expected [1, 32]")) << c.err();
  bad = p;
  bad.freq_base = 0.0f;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rope(c.be, &x.t, &pos.t, &bad));
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rope(c.be, &x.t, &pos.t, nullptr));
}
