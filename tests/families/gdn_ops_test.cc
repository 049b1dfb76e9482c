// The CPU plugin's recurrent-layer ops (sigmoid_gate, ssm_conv, gated_delta_rule) against
// double-precision references computed here: two sequences interleaved row by row, one
// starting at position 0 over a stale state (which must be ignored), one continuing from
// its state; odd channel counts and head dims; both q/k -> v head orders.
#include <tuple>

#include "tests/families/ops_util.h"

namespace {
using namespace famtest;

// Rows (sequence, position): seq 0 starts, seq 1 continues at 5.
const std::vector<int32_t> kSeq = {0, 1, 0, 1, 0}, kPos = {0, 5, 1, 6, 2};

struct Batch {
  Dev pos, seq, table;
  memra_batch b{};
  explicit Batch(Cpu &c)
      : pos(c, MEMRA_TYPE_I32, (int64_t)kPos.size(), 1),
        seq(c, MEMRA_TYPE_I32, (int64_t)kSeq.size(), 1), table(c, MEMRA_TYPE_I32, 4, 2) {
    pos.put(kPos.data());
    seq.put(kSeq.data());
    std::vector<int32_t> t = {0, 1, 2, 3, 4, 5, 6, 7};
    table.put(t.data());
    b = {(int32_t)kPos.size(), 2, 256, 4, 1024, 0, pos.t, seq.t, table.t};
  }
};

TEST(SigmoidGate, ElementwiseAndBroadcastMatchDoubleReference) {
  Cpu c;
  const int n = 5, w = 23;
  for (int gw : {w, 1}) {
    std::vector<float> x = rnd((size_t)n * w, 1), g = rnd((size_t)n * gw, 2, -5, 5);
    Dev X(c, MEMRA_TYPE_F32, w, n), G(c, MEMRA_TYPE_F32, gw, n);
    X.put(x.data());
    G.put(g.data());
    ASSERT_EQ(MEMRA_OK, c.vt->sigmoid_gate(c.be, &X.t, &X.t, &G.t)) << c.err();
    std::vector<double> ref;
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < w; ++i)
        ref.push_back(x[(size_t)r * w + i] /
                      (1 + std::exp(-(double)g[(size_t)r * gw + (gw == 1 ? 0 : i)])));
    EXPECT_LT(rel_l2(X.get<float>(), ref), 1e-6) << "g width " << gw;
  }
  Dev X(c, MEMRA_TYPE_F32, 7, 3), G(c, MEMRA_TYPE_F32, 2, 3);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->sigmoid_gate(c.be, &X.t, &X.t, &G.t));
  EXPECT_EQ("sigmoid_gate: g [3, 2] for x [3, 7] (need the same shape or one column)", c.err());
}

// ABI 1.7: the Gated DeltaNet output norm in one pass gives the bits of rmsnorm, then
// glu(y, z, y), on per-head views of an odd head size, in place; and refuses a y on z.
TEST(RmsnormGate, BitIdenticalToRmsnormThenGlu) {
  Cpu c;
  const int n = 3, heads = 4, d = 19;
  std::vector<float> x = rnd((size_t)n * heads * d, 21), z = rnd((size_t)n * heads * d, 22, -4, 4),
                     w = rnd((size_t)d, 23, 0.5f, 1.5f);
  Dev X(c, MEMRA_TYPE_F32, d, n * heads), X2(c, MEMRA_TYPE_F32, d, n * heads),
      Z(c, MEMRA_TYPE_F32, d, n * heads), W(c, MEMRA_TYPE_F32, d, 1);
  X.put(x.data());
  X2.put(x.data());
  Z.put(z.data());
  W.put(w.data());
  const memra_tensor none{};
  ASSERT_NE(nullptr, c.vt->rmsnorm_gate);
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm_gate(c.be, &X.t, &X.t, &W.t, &Z.t, 1e-6f, MEMRA_ACT_SILU))
      << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &X2.t, &X2.t, &none, &W.t, 1e-6f)) << c.err();
  const std::vector<float> normed = X2.get<float>();
  ASSERT_EQ(MEMRA_OK, c.vt->glu(c.be, &X2.t, &Z.t, &X2.t, MEMRA_ACT_SILU)) << c.err();
  const std::vector<float> a = X.get<float>(), b = X2.get<float>();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_NE(0, memcmp(a.data(), normed.data(), a.size() * sizeof(float))) << "the gate applied";
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rmsnorm_gate(c.be, &Z.t, &X.t, &W.t, &Z.t, 1e-6f, MEMRA_ACT_SILU));
  EXPECT_EQ("rmsnorm_gate: y overlaps z", c.err());
}

TEST(SsmConv, CausalConvWithStateMatchesDoubleReference) {
  Cpu c;
  const int C = 37, K = 4, n = (int)kPos.size();
  std::vector<float> x = rnd((size_t)n * C, 3), w = rnd((size_t)C * K, 4),
                     s0 = rnd((size_t)2 * (K - 1) * C, 5);
  Dev X(c, MEMRA_TYPE_F32, C, n), W(c, MEMRA_TYPE_F32, K, C), S(c, MEMRA_TYPE_F32, (K - 1) * C, 2),
      Y(c, MEMRA_TYPE_F32, C, n);
  X.put(x.data());
  W.put(w.data());
  S.put(s0.data());
  Batch bt(c);
  ASSERT_EQ(MEMRA_OK, c.vt->ssm_conv(c.be, &Y.t, &X.t, &W.t, &S.t, &bt.b)) << c.err();
  std::vector<double> st(s0.begin(), s0.end()), ref((size_t)n * C);
  for (int r = 0; r < n; ++r)
    for (int ch = 0; ch < C; ++ch) {
      double *h = &st[(size_t)kSeq[r] * (K - 1) * C + (size_t)ch * (K - 1)];
      if (kPos[r] == 0)
        for (int i = 0; i < K - 1; ++i)
          h[i] = 0;
      double xv = x[(size_t)r * C + ch], acc = w[(size_t)ch * K + K - 1] * xv;
      for (int i = 0; i < K - 1; ++i)
        acc += w[(size_t)ch * K + i] * h[i];
      ref[(size_t)r * C + ch] = acc / (1 + std::exp(-acc));
      for (int i = 0; i + 1 < K - 1; ++i)
        h[i] = h[i + 1];
      h[K - 2] = xv;
    }
  EXPECT_LT(rel_l2(Y.get<float>(), ref), 1e-6);
  EXPECT_LT(rel_l2(S.get<float>(), st), 1e-7) << "conv state after the step";
}

// ABI 1.11: a GDN layer's projections with the conv on the first output in one call give the
// bits of matmul_n, then ssm_conv (outputs and the conv state after), over the interleaved rows;
// and a y[0] over the state is refused.
TEST(MatmulNConv, BitIdenticalToMatmulNThenSsmConv) {
  Cpu c;
  const int C = 37, K = 4, E = 29, N1 = 11, n = (int)kPos.size();
  std::vector<float> x = rnd((size_t)n * E, 31), w0 = rnd((size_t)C * E, 32),
                     w1 = rnd((size_t)N1 * E, 33), cw = rnd((size_t)C * K, 34),
                     s0 = rnd((size_t)2 * (K - 1) * C, 35);
  Dev X(c, MEMRA_TYPE_F32, E, n), W0(c, MEMRA_TYPE_F32, E, C), W1(c, MEMRA_TYPE_F32, E, N1),
      CW(c, MEMRA_TYPE_F32, K, C), S(c, MEMRA_TYPE_F32, (K - 1) * C, 2),
      S2(c, MEMRA_TYPE_F32, (K - 1) * C, 2), U(c, MEMRA_TYPE_F32, C, n),
      Y1(c, MEMRA_TYPE_F32, N1, n), T(c, MEMRA_TYPE_F32, C, n), U2(c, MEMRA_TYPE_F32, C, n),
      Y12(c, MEMRA_TYPE_F32, N1, n);
  X.put(x.data());
  W0.put(w0.data());
  W1.put(w1.data());
  CW.put(cw.data());
  S.put(s0.data());
  S2.put(s0.data());
  Batch bt(c);
  ASSERT_NE(nullptr, c.vt->matmul_n_conv);
  const memra_tensor ys[2] = {U.t, Y1.t}, ws[2] = {W0.t, W1.t}, ys2[2] = {T.t, Y12.t};
  ASSERT_EQ(MEMRA_OK, c.vt->matmul_n_conv(c.be, 2, ys, &X.t, ws, &CW.t, &S.t, &bt.b)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->matmul_n(c.be, 2, ys2, &X.t, ws, nullptr)) << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->ssm_conv(c.be, &U2.t, &T.t, &CW.t, &S2.t, &bt.b)) << c.err();
  for (auto [a, b, what] : {std::tuple<Dev *, Dev *, const char *>{&U, &U2, "u"},
                            {&Y1, &Y12, "y[1]"},
                            {&S, &S2, "conv state"}}) {
    const std::vector<float> va = a->get<float>(), vb = b->get<float>();
    EXPECT_EQ(0, memcmp(va.data(), vb.data(), va.size() * sizeof(float))) << what;
  }
  EXPECT_NE(0, memcmp(U.get<float>().data(), T.get<float>().data(), (size_t)n * C * 4))
      << "the conv applied";
  memra_tensor on_state = U.t; // u's shape over the state's bytes
  on_state.buf = S.t.buf;
  const memra_tensor bad[2] = {on_state, Y1.t};
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_n_conv(c.be, 2, bad, &X.t, ws, &CW.t, &S.t, &bt.b));
  EXPECT_EQ("matmul_n_conv: y[0] overlaps the conv state or weights", c.err());
}

// The recurrence of the ABI comment, in double.
void gdn_ref(const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v,
             const std::vector<float> &a, const std::vector<float> &b,
             const std::vector<float> &alog, const std::vector<float> &dt, std::vector<double> &S,
             std::vector<double> &out, int hk, int hv, int d, bool tiled) {
  const int n = (int)kPos.size(), r_ = hv / hk;
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < hv; ++h) {
      int kh = tiled ? h % hk : h / r_;
      double *Sh = &S[((size_t)kSeq[r] * hv + h) * d * d];
      if (kPos[r] == 0)
        for (int i = 0; i < d * d; ++i)
          Sh[i] = 0;
      std::vector<double> qq(d), kk(d);
      double sq = 0, sk = 0;
      for (int i = 0; i < d; ++i) {
        qq[i] = q[(size_t)r * hk * d + kh * d + i];
        kk[i] = k[(size_t)r * hk * d + kh * d + i];
        sq += qq[i] * qq[i];
        sk += kk[i] * kk[i];
      }
      for (int i = 0; i < d; ++i) {
        qq[i] /= std::sqrt(sq + 1e-6) * std::sqrt((double)d);
        kk[i] /= std::sqrt(sk + 1e-6);
      }
      double beta = 1 / (1 + std::exp(-(double)b[(size_t)r * hv + h]));
      double x = (double)a[(size_t)r * hv + h] + dt[h];
      double decay = std::exp(alog[h] * (x > 20 ? x : std::log1p(std::exp(x))));
      for (int j = 0; j < d; ++j) {
        double kv = 0;
        for (int i = 0; i < d; ++i)
          kv += (Sh[j * d + i] *= decay) * kk[i];
        double delta = beta * (v[(size_t)r * hv * d + h * d + j] - kv), o = 0;
        for (int i = 0; i < d; ++i)
          o += (Sh[j * d + i] += kk[i] * delta) * qq[i];
        out[(size_t)r * hv * d + h * d + j] = o;
      }
    }
}

TEST(GatedDeltaRule, RecurrenceMatchesDoubleReference) {
  Cpu c;
  const int hk = 2, hv = 6, d = 5, n = (int)kPos.size();
  for (int heads : {MEMRA_GDN_GROUPED, MEMRA_GDN_TILED}) {
    std::vector<float> q = rnd((size_t)n * hk * d, 6), k = rnd((size_t)n * hk * d, 7),
                       v = rnd((size_t)n * hv * d, 8), a = rnd((size_t)n * hv, 9, -3, 3),
                       b = rnd((size_t)n * hv, 10, -3, 3), alog = rnd(hv, 11, -2, -0.1f),
                       dt = rnd(hv, 12), s0 = rnd((size_t)2 * hv * d * d, 13);
    Dev Q(c, MEMRA_TYPE_F32, hk * d, n), Kt(c, MEMRA_TYPE_F32, hk * d, n),
        V(c, MEMRA_TYPE_F32, hv * d, n), A(c, MEMRA_TYPE_F32, hv, n), B(c, MEMRA_TYPE_F32, hv, n),
        AL(c, MEMRA_TYPE_F32, hv, 1), DT(c, MEMRA_TYPE_F32, hv, 1),
        S(c, MEMRA_TYPE_F32, hv * d * d, 2), O(c, MEMRA_TYPE_F32, hv * d, n);
    Q.put(q.data());
    Kt.put(k.data());
    V.put(v.data());
    A.put(a.data());
    B.put(b.data());
    AL.put(alog.data());
    DT.put(dt.data());
    S.put(s0.data());
    Batch bt(c);
    memra_gdn_params p = {hk, hv, d, heads, 1e-6f, 0};
    ASSERT_EQ(MEMRA_OK, c.vt->gated_delta_rule(c.be, &O.t, &Q.t, &Kt.t, &V.t, &A.t, &B.t, &AL.t,
                                               &DT.t, &S.t, &bt.b, &p))
        << c.err();
    std::vector<double> st(s0.begin(), s0.end()), out((size_t)n * hv * d);
    gdn_ref(q, k, v, a, b, alog, dt, st, out, hk, hv, d, heads == MEMRA_GDN_TILED);
    EXPECT_LT(rel_l2(O.get<float>(), out), 1e-5) << "heads " << heads;
    EXPECT_LT(rel_l2(S.get<float>(), st), 1e-5) << "state, heads " << heads;
    if (heads == MEMRA_GDN_TILED) {
      p.n_v_head = 5;
      EXPECT_EQ(MEMRA_E_INVALID, c.vt->gated_delta_rule(c.be, &O.t, &Q.t, &Kt.t, &V.t, &A.t, &B.t,
                                                        &AL.t, &DT.t, &S.t, &bt.b, &p));
      EXPECT_EQ("gated_delta_rule: H_k 2, H_v 5, head_dim 5, heads 1 (need H_v a multiple of H_k, "
                "head_dim 1..512, heads grouped or tiled)",
                c.err());
    }
  }
}

} // namespace
