// The CPU plugin's mixture-of-experts ops (moe_route, matmul_id, moe_combine) against
// double-precision references computed here, on seeded random inputs of odd sizes, plus
// their one-line errors on hostile arguments.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "tests/families/ops_util.h"

namespace {
using namespace famtest;

TEST(MoeRoute, TopKAndWeightsMatchDoubleReference) {
  Cpu c;
  for (int norm : {1, 0})
    for (auto [n, ne, k] : {std::tuple<int, int, int>{7, 13, 3}, {1, 5, 1}, {4, 33, 8}}) {
      std::vector<float> lg = rnd((size_t)n * ne, 100 + ne + k, -4, 4);
      Dev L(c, MEMRA_TYPE_F32, ne, n), I(c, MEMRA_TYPE_I32, k, n), W(c, MEMRA_TYPE_F32, k, n);
      L.put(lg.data());
      ASSERT_EQ(MEMRA_OK, c.vt->moe_route(c.be, &I.t, &W.t, &L.t, norm)) << c.err();
      std::vector<int32_t> ids = I.get<int32_t>();
      std::vector<float> w = W.get<float>();
      std::vector<double> wref;
      for (int r = 0; r < n; ++r) {
        const float *l = &lg[(size_t)r * ne];
        double mx = *std::max_element(l, l + ne), s = 0;
        std::vector<double> p(ne);
        for (int e = 0; e < ne; ++e)
          s += p[e] = std::exp(l[e] - mx);
        for (auto &x : p)
          x /= s;
        std::vector<int> ord(ne);
        std::iota(ord.begin(), ord.end(), 0);
        std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) { return p[a] > p[b]; });
        double ks = 0;
        for (int j = 0; j < k; ++j)
          ks += p[ord[j]];
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(ord[j], ids[(size_t)r * k + j]) << "row " << r << " slot " << j;
          wref.push_back(p[ord[j]] / (norm ? ks : 1.0));
        }
      }
      EXPECT_LT(rel_l2(w, wref), 1e-6) << "n " << n << " experts " << ne << " k " << k;
    }
}

TEST(MoeRoute, RejectsMoreSlotsThanExperts) {
  Cpu c;
  Dev L(c, MEMRA_TYPE_F32, 3, 2), I(c, MEMRA_TYPE_I32, 4, 2), W(c, MEMRA_TYPE_F32, 4, 2);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->moe_route(c.be, &I.t, &W.t, &L.t, 1));
  EXPECT_EQ("moe_route: ids [2, 4] for logits [2, 3] (need one row per token and k <= n_expert)",
            c.err());
}

// y[r k + j] = x[r or r k + j] . w_{ids[r, j]}^T with w in a block format, vs double math on
// the dequantized weights.
TEST(MatmulId, QuantizedExpertsMatchDoubleReference) {
  Cpu c;
  const int n = 5, k = 2, ne = 6, N = 11, K = 96;
  for (int32_t type : {MEMRA_TYPE_F32, MEMRA_TYPE_Q8_0, MEMRA_TYPE_F16})
    for (bool shared : {true, false}) {
      std::vector<float> wf = rnd((size_t)ne * N * K, 7 + type);
      Dev W(c, type, K, (int64_t)ne * N);
      std::vector<uint8_t> wq(W.t.nb1 * W.t.ne1);
      for (int64_t i = 0; i < ne * N; ++i)
        ASSERT_TRUE(memra_quantize_row(type, &wf[(size_t)i * K], &wq[i * W.t.nb1], K));
      W.put(wq.data());
      std::vector<float> deq((size_t)ne * N * K);
      for (int64_t i = 0; i < ne * N; ++i)
        memra_dequant_row(type, &wq[i * W.t.nb1], &deq[(size_t)i * K], K);
      const int nx = shared ? n : n * k;
      std::vector<float> x = rnd((size_t)nx * K, 11 + shared);
      std::vector<int32_t> ids = {5, 0, 2, 2, 1, 4, 3, 5, 0, 1};
      Dev X(c, MEMRA_TYPE_F32, K, nx), I(c, MEMRA_TYPE_I32, k, n), Y(c, MEMRA_TYPE_F32, N, n * k);
      X.put(x.data());
      I.put(ids.data());
      ASSERT_EQ(MEMRA_OK, c.vt->matmul_id(c.be, &Y.t, &X.t, &W.t, &I.t, ne)) << c.err();
      std::vector<double> ref;
      for (int rj = 0; rj < n * k; ++rj)
        for (int o = 0; o < N; ++o) {
          const float *xr = &x[(size_t)(shared ? rj / k : rj) * K];
          const float *wr = &deq[((size_t)ids[rj] * N + o) * K];
          double s = 0;
          for (int i = 0; i < K; ++i)
            s += (double)xr[i] * wr[i];
          ref.push_back(s);
        }
      EXPECT_LT(rel_l2(Y.get<float>(), ref), 1e-6) << "type " << type << " shared " << shared;
    }
}

TEST(MatmulId, RejectsOutOfRangeExpertId) {
  Cpu c;
  Dev W(c, MEMRA_TYPE_F32, 8, 12), X(c, MEMRA_TYPE_F32, 8, 2), I(c, MEMRA_TYPE_I32, 1, 2),
      Y(c, MEMRA_TYPE_F32, 4, 2);
  std::vector<float> w = rnd(96, 1), x = rnd(16, 2);
  W.put(w.data());
  X.put(x.data());
  std::vector<int32_t> ids = {1, 3};
  I.put(ids.data());
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_id(c.be, &Y.t, &X.t, &W.t, &I.t, 3));
  EXPECT_EQ("matmul_id: ids[1, 0] = 3, expected 0..2", c.err());
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_id(c.be, &Y.t, &X.t, &W.t, &I.t, 5));
  EXPECT_EQ("matmul_id: 12 weight rows do not split into 5 experts", c.err());
}

TEST(MoeCombine, WeightedSumMatchesDoubleReference) {
  Cpu c;
  const int n = 5, k = 3, E = 17;
  std::vector<float> x = rnd((size_t)n * k * E, 3), w = rnd((size_t)n * k, 4, 0, 1);
  Dev X(c, MEMRA_TYPE_F32, E, n * k), Wt(c, MEMRA_TYPE_F32, k, n), Y(c, MEMRA_TYPE_F32, E, n);
  X.put(x.data());
  Wt.put(w.data());
  ASSERT_EQ(MEMRA_OK, c.vt->moe_combine(c.be, &Y.t, &X.t, &Wt.t)) << c.err();
  std::vector<double> ref((size_t)n * E, 0.0);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < k; ++j)
      for (int i = 0; i < E; ++i)
        ref[(size_t)r * E + i] += (double)w[(size_t)r * k + j] * x[((size_t)r * k + j) * E + i];
  EXPECT_LT(rel_l2(Y.get<float>(), ref), 1e-6);
  Dev Ybad(c, MEMRA_TYPE_F32, E, n + 1);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->moe_combine(c.be, &Ybad.t, &X.t, &Wt.t));
}

// ABI 1.7: the shared expert folded into the combine gives the bits of moe_combine, then
// sigmoid_gate (g [n, 1]) and add, on odd sizes; and refuses a g of the wrong shape.
TEST(MoeCombineGated, BitIdenticalToCombineSigmoidGateAdd) {
  Cpu c;
  const int n = 3, k = 5, E = 37;
  std::vector<float> x = rnd((size_t)n * k * E, 5), w = rnd((size_t)n * k, 6, 0, 1),
                     sh = rnd((size_t)n * E, 7), g = rnd((size_t)n, 8, -6, 6);
  Dev X(c, MEMRA_TYPE_F32, E, n * k), Wt(c, MEMRA_TYPE_F32, k, n), S(c, MEMRA_TYPE_F32, E, n),
      G(c, MEMRA_TYPE_F32, 1, n), Y(c, MEMRA_TYPE_F32, E, n), Y2(c, MEMRA_TYPE_F32, E, n);
  X.put(x.data());
  Wt.put(w.data());
  S.put(sh.data());
  G.put(g.data());
  ASSERT_NE(nullptr, c.vt->moe_combine_gated);
  ASSERT_EQ(MEMRA_OK, c.vt->moe_combine_gated(c.be, &Y.t, &X.t, &Wt.t, &S.t, &G.t)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->moe_combine(c.be, &Y2.t, &X.t, &Wt.t)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->sigmoid_gate(c.be, &S.t, &S.t, &G.t)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->add(c.be, &Y2.t, &Y2.t, &S.t)) << c.err();
  const std::vector<float> a = Y.get<float>(), b = Y2.get<float>();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // not the composition of nothing: the gated term moved every row
  Dev Y3(c, MEMRA_TYPE_F32, E, n);
  ASSERT_EQ(MEMRA_OK, c.vt->moe_combine(c.be, &Y3.t, &X.t, &Wt.t));
  EXPECT_NE(0, memcmp(a.data(), Y3.get<float>().data(), a.size() * sizeof(float)));
  Dev Gbad(c, MEMRA_TYPE_F32, 2, n);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->moe_combine_gated(c.be, &Y.t, &X.t, &Wt.t, &S.t, &Gbad.t));
}

// ABI 1.9: with the shared expert as every token's (k+1)-th row of x, the combine gives the
// bits of moe_combine_gated over the routed rows and the shared rows taken apart; odd sizes;
// refuses an x of n k rows (the gated form's shape) with its message.
TEST(MoeCombineShexp, BitIdenticalToGatedOnTheRowsApart) {
  Cpu c;
  const int n = 3, k = 5, E = 37;
  std::vector<float> x = rnd((size_t)n * (k + 1) * E, 11), w = rnd((size_t)n * k, 12, 0, 1),
                     g = rnd((size_t)n, 13, -6, 6), xr, sh;
  for (int r = 0; r < n; ++r)
    for (int j = 0; j <= k; ++j) {
      const float *row = x.data() + ((size_t)r * (k + 1) + j) * E;
      (j < k ? xr : sh).insert((j < k ? xr : sh).end(), row, row + E);
    }
  Dev X(c, MEMRA_TYPE_F32, E, n * (k + 1)), Xr(c, MEMRA_TYPE_F32, E, n * k),
      S(c, MEMRA_TYPE_F32, E, n), Wt(c, MEMRA_TYPE_F32, k, n), G(c, MEMRA_TYPE_F32, 1, n),
      Y(c, MEMRA_TYPE_F32, E, n), Y2(c, MEMRA_TYPE_F32, E, n);
  X.put(x.data());
  Xr.put(xr.data());
  S.put(sh.data());
  Wt.put(w.data());
  G.put(g.data());
  ASSERT_NE(nullptr, c.vt->moe_combine_shexp);
  ASSERT_EQ(MEMRA_OK, c.vt->moe_combine_shexp(c.be, &Y.t, &X.t, &Wt.t, &G.t)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->moe_combine_gated(c.be, &Y2.t, &Xr.t, &Wt.t, &S.t, &G.t)) << c.err();
  const std::vector<float> a = Y.get<float>(), b = Y2.get<float>();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // the shared rows count: the combine of the routed rows alone differs in every row
  ASSERT_EQ(MEMRA_OK, c.vt->moe_combine(c.be, &Y2.t, &Xr.t, &Wt.t)) << c.err();
  const std::vector<float> d = Y2.get<float>();
  for (int r = 0; r < n; ++r)
    EXPECT_NE(0, memcmp(a.data() + (size_t)r * E, d.data() + (size_t)r * E, E * sizeof(float)))
        << "row " << r;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->moe_combine_shexp(c.be, &Y.t, &Xr.t, &Wt.t, &G.t));
  EXPECT_EQ("moe_combine_shexp: x has shape [15, 37], expected [18, *]", c.err());
}

// ABI 1.7: matmul_id_glu over a fused gate/up stack (per expert N gate rows, then N up
// rows) gives the bits of matmul_id over the 2 N rows, then glu; odd N and K, a shared x; and
// refuses an odd row count an expert and a y of the wrong width.
TEST(MatmulIdGlu, BitIdenticalToMatmulIdThenGlu) {
  Cpu c;
  const int E = 5, N = 13, K = 67, n = 3, k = 2;
  std::vector<float> x = rnd((size_t)n * K, 9), w = rnd((size_t)E * 2 * N * K, 10);
  const std::vector<int32_t> ids = {4, 1, 0, 3, 2, 4};
  Dev X(c, MEMRA_TYPE_F32, K, n), W(c, MEMRA_TYPE_F32, K, E * 2 * N), I(c, MEMRA_TYPE_I32, k, n),
      Y(c, MEMRA_TYPE_F32, N, n * k), GU(c, MEMRA_TYPE_F32, 2 * N, n * k),
      Y2(c, MEMRA_TYPE_F32, N, n * k);
  X.put(x.data());
  W.put(w.data());
  I.put(ids.data());
  ASSERT_NE(nullptr, c.vt->matmul_id_glu);
  ASSERT_EQ(MEMRA_OK, c.vt->matmul_id_glu(c.be, &Y.t, &X.t, &W.t, &I.t, E, MEMRA_ACT_SILU))
      << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->matmul_id(c.be, &GU.t, &X.t, &W.t, &I.t, E)) << c.err();
  memra_tensor g = GU.t, u = GU.t;
  g.ne0 = u.ne0 = N;
  u.offset += 4u * N;
  ASSERT_EQ(MEMRA_OK, c.vt->glu(c.be, &Y2.t, &g, &u, MEMRA_ACT_SILU)) << c.err();
  const std::vector<float> a = Y.get<float>(), b = Y2.get<float>();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // and not the gate rows' plain products: the activation and up were applied
  const std::vector<float> gu = GU.get<float>();
  EXPECT_NE(0, memcmp(a.data(), gu.data(), (size_t)N * sizeof(float)));
  Dev Wodd(c, MEMRA_TYPE_F32, K, E * 3);
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->matmul_id_glu(c.be, &Y.t, &X.t, &Wodd.t, &I.t, E, MEMRA_ACT_SILU));
  EXPECT_EQ("matmul_id_glu: 3 rows an expert do not split into gate and up", c.err());
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_id_glu(c.be, &GU.t, &X.t, &W.t, &I.t, E, MEMRA_ACT_SILU));
}

} // namespace

// ABI 1.20: the combine with the norm that adds it gives the bits of moe_combine (or
// moe_combine_shexp with a logit) into y, then rmsnorm(xn, x, y) (x += y written back); odd
// sizes; refuses a y overlapping x with its message.
TEST(MoeCombineRmsnorm, BitIdenticalToTheCombineThenTheNorm) {
  Cpu c;
  const int n = 3, k = 4, E = 45;
  ASSERT_NE(nullptr, c.vt->moe_combine_rmsnorm);
  for (int shexp = 0; shexp < 2; ++shexp) {
    SCOPED_TRACE(shexp ? "with the shared expert" : "routed only");
    const int kx = shexp ? k + 1 : k;
    std::vector<float> d = rnd((size_t)n * kx * E, 21 + shexp), w = rnd((size_t)n * k, 22, 0, 1),
                       g = rnd((size_t)n, 23, -6, 6), x = rnd((size_t)n * E, 24, -2, 2),
                       wn = rnd((size_t)E, 25, 0.5f, 1.5f);
    Dev D(c, MEMRA_TYPE_F32, E, n * kx), Wt(c, MEMRA_TYPE_F32, k, n), G(c, MEMRA_TYPE_F32, 1, n),
        Wn(c, MEMRA_TYPE_F32, E, 1), X1(c, MEMRA_TYPE_F32, E, n), X2(c, MEMRA_TYPE_F32, E, n),
        Y1(c, MEMRA_TYPE_F32, E, n), Y2(c, MEMRA_TYPE_F32, E, n), N1(c, MEMRA_TYPE_F32, E, n),
        N2(c, MEMRA_TYPE_F32, E, n);
    D.put(d.data());
    Wt.put(w.data());
    G.put(g.data());
    Wn.put(wn.data());
    X1.put(x.data());
    X2.put(x.data());
    ASSERT_EQ(MEMRA_OK, c.vt->moe_combine_rmsnorm(c.be, &N1.t, &X1.t, &Wn.t, 1e-6f, &Y1.t, &D.t,
                                                  &Wt.t, shexp ? &G.t : nullptr))
        << c.err();
    ASSERT_EQ(MEMRA_OK, shexp ? c.vt->moe_combine_shexp(c.be, &Y2.t, &D.t, &Wt.t, &G.t)
                              : c.vt->moe_combine(c.be, &Y2.t, &D.t, &Wt.t))
        << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &N2.t, &X2.t, &Y2.t, &Wn.t, 1e-6f)) << c.err();
    const std::pair<Dev *, Dev *> same[3] = {{&Y1, &Y2}, {&X1, &X2}, {&N1, &N2}};
    for (const auto &p : same) {
      const std::vector<float> a = p.first->get<float>(), b = p.second->get<float>();
      EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    }
    EXPECT_NE(0, memcmp(X1.get<float>().data(), x.data(), x.size() * sizeof(float)))
        << "x was not added into";
  }
  Dev Y(c, MEMRA_TYPE_F32, E, n), D(c, MEMRA_TYPE_F32, E, n * k), Wt(c, MEMRA_TYPE_F32, k, n),
      Wn(c, MEMRA_TYPE_F32, E, 1), N(c, MEMRA_TYPE_F32, E, n);
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->moe_combine_rmsnorm(c.be, &N.t, &Y.t, &Wn.t, 1e-6f, &Y.t, &D.t, &Wt.t, nullptr));
  EXPECT_EQ("moe_combine_rmsnorm: y overlaps x or xn", c.err());
}

// ABI 1.21: the route with the experts' gate, up and glu gives the bits of moe_route into ids'
// first weights->ne0 columns, then matmul_id_glu over all of ids' columns (with the stacked
// shared expert's preset last column, which it reads and keeps); odd sizes; refuses more routed
// columns than ids has and a y overlapping the logits, each with its message.
TEST(MoeRouteGlu, BitIdenticalToTheRouteThenMatmulIdGlu) {
  Cpu c;
  const int E = 7, N = 13, K = 67, n = 3, k = 3;
  ASSERT_NE(nullptr, c.vt->moe_route_glu);
  for (int shexp = 0; shexp < 2; ++shexp) {
    SCOPED_TRACE(shexp ? "with the stacked shared expert" : "routed only");
    const int k1 = k + shexp, ne = E - shexp; /* the shared expert is expert E - 1 of the stack */
    std::vector<float> x = rnd((size_t)n * K, 31 + shexp), w = rnd((size_t)E * 2 * N * K, 32),
                       lg = rnd((size_t)n * ne, 33 + shexp, -3, 3);
    std::vector<int32_t> preset((size_t)n * k1, -7);
    for (int r = 0; r < n; ++r)
      if (shexp) preset[(size_t)r * k1 + k] = ne;
    Dev X(c, MEMRA_TYPE_F32, K, n), Wg(c, MEMRA_TYPE_F32, K, E * 2 * N),
        L(c, MEMRA_TYPE_F32, ne, n), I1(c, MEMRA_TYPE_I32, k1, n), I2(c, MEMRA_TYPE_I32, k1, n),
        W1(c, MEMRA_TYPE_F32, k, n), W2(c, MEMRA_TYPE_F32, k, n), Y1(c, MEMRA_TYPE_F32, N, n * k1),
        Y2(c, MEMRA_TYPE_F32, N, n * k1);
    X.put(x.data());
    Wg.put(w.data());
    L.put(lg.data());
    I1.put(preset.data());
    I2.put(preset.data());
    ASSERT_EQ(MEMRA_OK, c.vt->moe_route_glu(c.be, &Y1.t, &X.t, &Wg.t, &I1.t, E, MEMRA_ACT_SILU,
                                            &W1.t, &L.t, 1))
        << c.err();
    memra_tensor routed = I2.t;
    routed.ne0 = k;
    ASSERT_EQ(MEMRA_OK, c.vt->moe_route(c.be, &routed, &W2.t, &L.t, 1)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->matmul_id_glu(c.be, &Y2.t, &X.t, &Wg.t, &I2.t, E, MEMRA_ACT_SILU))
        << c.err();
    const std::vector<int32_t> i1 = I1.get<int32_t>(), i2 = I2.get<int32_t>();
    EXPECT_EQ(i2, i1);
    for (int r = 0; r < n; ++r) {
      for (int j = 0; j < k; ++j)
        EXPECT_NE(-7, i1[(size_t)r * k1 + j]) << "row " << r << " slot " << j << " not routed";
      if (shexp) {
        EXPECT_EQ(ne, i1[(size_t)r * k1 + k]) << "the shared expert's column changed";
      }
    }
    const std::pair<Dev *, Dev *> same[2] = {{&W1, &W2}, {&Y1, &Y2}};
    for (const auto &p : same) {
      const std::vector<float> a = p.first->get<float>(), b = p.second->get<float>();
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    }
  }
  Dev X(c, MEMRA_TYPE_F32, K, n), Wg(c, MEMRA_TYPE_F32, K, E * 2 * N), L(c, MEMRA_TYPE_F32, E, n),
      I(c, MEMRA_TYPE_I32, k, n), W4(c, MEMRA_TYPE_F32, k + 1, n), Y(c, MEMRA_TYPE_F32, N, n * k);
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->moe_route_glu(c.be, &Y.t, &X.t, &Wg.t, &I.t, E, MEMRA_ACT_SILU, &W4.t, &L.t, 1));
  EXPECT_EQ("moe_route_glu: 4 routed columns, ids has 3", c.err());
  Dev Wk(c, MEMRA_TYPE_F32, k, n);
  memra_tensor ly = Y.t; /* the logits inside y */
  ly.ne0 = E;
  ly.ne1 = n;
  ly.nb1 = 4u * E;
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->moe_route_glu(c.be, &Y.t, &X.t, &Wg.t, &I.t, E, MEMRA_ACT_SILU, &Wk.t, &ly, 1));
  EXPECT_EQ("moe_route_glu: y overlaps weights or logits", c.err());
}

// ABI 1.22: the router's projections with the route of y[0] give the bits of matmul_n, then
// moe_route (odd sizes, the router with a second projection of x beside it); refuses ids or
// weights overlapping x, a y or a w, and a route the logits cannot feed, each with its message.
TEST(MatmulNRoute, BitIdenticalToMatmulNThenTheRoute) {
  Cpu c;
  const int E = 11, K = 37, n = 3, k = 4;
  ASSERT_NE(nullptr, c.vt->matmul_n_route);
  for (int outs = 1; outs <= 2; ++outs) {
    SCOPED_TRACE(outs == 1 ? "the router alone" : "with a shared gate logit");
    std::vector<float> x = rnd((size_t)n * K, 41 + outs, -2, 2), wr = rnd((size_t)E * K, 43),
                       wl = rnd((size_t)K, 44);
    Dev X(c, MEMRA_TYPE_F32, K, n), Wr(c, MEMRA_TYPE_F32, K, E), Wl(c, MEMRA_TYPE_F32, K, 1),
        L1(c, MEMRA_TYPE_F32, E, n), L2(c, MEMRA_TYPE_F32, E, n), G1(c, MEMRA_TYPE_F32, 1, n),
        G2(c, MEMRA_TYPE_F32, 1, n), I1(c, MEMRA_TYPE_I32, k, n), I2(c, MEMRA_TYPE_I32, k, n),
        W1(c, MEMRA_TYPE_F32, k, n), W2(c, MEMRA_TYPE_F32, k, n);
    X.put(x.data());
    Wr.put(wr.data());
    Wl.put(wl.data());
    const memra_tensor y1[2] = {L1.t, G1.t}, y2[2] = {L2.t, G2.t}, w[2] = {Wr.t, Wl.t};
    ASSERT_EQ(MEMRA_OK, c.vt->matmul_n_route(c.be, outs, y1, &X.t, w, nullptr, &I1.t, &W1.t, 1))
        << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->matmul_n(c.be, outs, y2, &X.t, w, nullptr)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->moe_route(c.be, &I2.t, &W2.t, &L2.t, 1)) << c.err();
    EXPECT_EQ(I2.get<int32_t>(), I1.get<int32_t>());
    const std::pair<Dev *, Dev *> same[3] = {{&L1, &L2}, {&G1, &G2}, {&W1, &W2}};
    for (int i = 0; i < 3; ++i) {
      if (i == 1 && outs == 1) continue;
      const std::vector<float> a = same[i].first->get<float>(), b = same[i].second->get<float>();
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "output " << i;
    }
    const std::vector<float> lg = L1.get<float>();
    const std::vector<int32_t> ids = I1.get<int32_t>();
    for (int r = 0; r < n; ++r) /* the first choice is the row's largest logit */
      EXPECT_EQ(std::max_element(&lg[(size_t)r * E], &lg[(size_t)r * E] + E) - &lg[(size_t)r * E],
                ids[(size_t)r * k])
          << "row " << r;
  }
  Dev X(c, MEMRA_TYPE_F32, K, n), Wr(c, MEMRA_TYPE_F32, K, E), L(c, MEMRA_TYPE_F32, E, n),
      I(c, MEMRA_TYPE_I32, k, n), W(c, MEMRA_TYPE_F32, k, n), Wbig(c, MEMRA_TYPE_F32, E + 1, n);
  memra_tensor in_l = L.t; /* ids inside the logits */
  in_l.type = MEMRA_TYPE_I32;
  in_l.ne0 = k;
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->matmul_n_route(c.be, 1, &L.t, &X.t, &Wr.t, nullptr, &in_l, &W.t, 1));
  EXPECT_EQ("matmul_n_route: ids overlaps y[0] or w[0]", c.err());
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->matmul_n_route(c.be, 1, &L.t, &X.t, &Wr.t, nullptr, &I.t, &X.t, 1));
  EXPECT_EQ("matmul_n_route: weights overlaps x", c.err());
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->matmul_n_route(c.be, 5, &L.t, &X.t, &Wr.t, nullptr, &I.t, &W.t, 1));
  EXPECT_EQ("matmul_n_route: 5 outputs (1..4)", c.err());
  Dev Ibig(c, MEMRA_TYPE_I32, E + 1, n);
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->matmul_n_route(c.be, 1, &L.t, &X.t, &Wr.t, nullptr, &Ibig.t, &Wbig.t, 1));
  EXPECT_EQ("moe_route: ids [3, 12] for logits [3, 11] (need one row per token and k <= n_expert)",
            c.err());
}
