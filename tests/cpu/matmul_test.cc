// matmul_test.cc — y = x w^T (+ bias) for every weight type against a double dot over
// memra_dequant_row's floats; batch invariance; overlap and shape errors.
// Tolerance: relative L2 error <= 2e-6 (float32 accumulation over K <= 1536 terms;
// seen ~1e-7 in practice).
#include <memory>

#include "tests/cpu/cpu_test_util.h"

using namespace cputest;

namespace {

const int32_t kTypes[] = {MEMRA_TYPE_F32,  MEMRA_TYPE_F16,  MEMRA_TYPE_BF16, MEMRA_TYPE_Q4_0,
                          MEMRA_TYPE_Q4_1, MEMRA_TYPE_Q5_0, MEMRA_TYPE_Q5_1, MEMRA_TYPE_Q8_0,
                          MEMRA_TYPE_Q2_K, MEMRA_TYPE_Q3_K, MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q5_K,
                          MEMRA_TYPE_Q6_K};

struct Weights {
  std::vector<uint8_t> bytes; // [n, row bytes]
  std::vector<float> deq;     // [n, k], what the reference multiplies
};

Weights make_weights(std::mt19937 &g, int32_t type, int64_t n, int64_t k) {
  Weights w;
  uint64_t rb = memra_type_row_bytes(type, k);
  w.bytes.resize(n * rb);
  w.deq.resize(n * k);
  auto src = randf(g, n * k, -1, 1);
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_TRUE(memra_quantize_row(type, &src[r * k], &w.bytes[r * rb], k));
    memra_dequant_row(type, &w.bytes[r * rb], &w.deq[r * k], k);
  }
  return w;
}

std::vector<double> ref_matmul(const std::vector<float> &x, const std::vector<float> &w,
                               const std::vector<float> *bias, int64_t m, int64_t n, int64_t k) {
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? (*bias)[j] : 0.0;
      for (int64_t l = 0; l < k; ++l)
        s += (double)x[i * k + l] * w[j * k + l];
      y[i * n + j] = s;
    }
  return y;
}

} // namespace

TEST(CpuMatmul, EveryTypeMatchesDoubleDotOverDequantizedRows) {
  Cpu c;
  std::mt19937 g(31);
  for (int32_t type : kTypes) {
    int blck = memra_type_info(type).blck;
    std::vector<int64_t> ks = blck == 1    ? std::vector<int64_t>{31, 576}
                              : blck == 32 ? std::vector<int64_t>{32, 96, 576}
                                           : std::vector<int64_t>{256, 1536};
    for (int64_t k : ks) {
      for (int64_t m : {1, 31, 97}) {
        for (int64_t n : {1, 31, 97}) {
          bool with_bias = (m + n) % 2 == 0;
          SCOPED_TRACE(testing::Message() << memra_type_info(type).name << " M=" << m << " N=" << n
                                          << " K=" << k << " bias=" << with_bias);
          Weights w = make_weights(g, type, n, k);
          auto x = randf(g, m * k), bias = randf(g, n);
          Dev dw(c, type, k, n), dx(c, MEMRA_TYPE_F32, k, m, 8), db(c, MEMRA_TYPE_F32, n, 1),
              dy(c, MEMRA_TYPE_F32, n, m, 4);
          dw.put_bytes(w.bytes.data());
          dx.put(x);
          db.put(bias);
          ASSERT_EQ(MEMRA_OK, c.vt->matmul(c.be, &dy.t, &dx.t, &dw.t, with_bias ? &db.t : nullptr))
              << c.err();
          EXPECT_LE(
              rel_l2(dy.get<float>(), ref_matmul(x, w.deq, with_bias ? &bias : nullptr, m, n, k)),
              2e-6);
          EXPECT_TRUE(dy.guards_ok());
        }
      }
    }
  }
}

// A row's outputs do not depend on the other rows of x: decode (M = 1) and any batch
// give the same bits (DESIGN.md: batch invariance).
TEST(CpuMatmul, BatchInvariantBits) {
  Cpu c(3);
  std::mt19937 g(32);
  for (int32_t type : {MEMRA_TYPE_Q4_1, MEMRA_TYPE_Q6_K, MEMRA_TYPE_F16, MEMRA_TYPE_F32}) {
    SCOPED_TRACE(memra_type_info(type).name);
    const int64_t k = 512, n = 97, m = 13;
    Weights w = make_weights(g, type, n, k);
    auto x = randf(g, m * k);
    Dev dw(c, type, k, n), dx(c, MEMRA_TYPE_F32, k, m), dy(c, MEMRA_TYPE_F32, n, m);
    dw.put_bytes(w.bytes.data());
    dx.put(x);
    ASSERT_EQ(MEMRA_OK, c.vt->matmul(c.be, &dy.t, &dx.t, &dw.t, nullptr)) << c.err();
    std::vector<float> all = dy.get<float>();
    for (int64_t r : {0, 6, 12}) {
      memra_tensor x1 = dx.t, y1 = dy.t;
      x1.offset += r * x1.nb1;
      x1.ne1 = 1;
      Dev d1(c, MEMRA_TYPE_F32, n, 1);
      ASSERT_EQ(MEMRA_OK, c.vt->matmul(c.be, &d1.t, &x1, &dw.t, nullptr)) << c.err();
      std::vector<float> one = d1.get<float>();
      std::vector<float> in_batch(all.begin() + r * n, all.begin() + (r + 1) * n);
      EXPECT_TRUE(bits_equal(one, in_batch)) << "row " << r;
      (void)y1;
    }
  }
}

TEST(CpuMatmul, ErrorsNameTheOp) {
  Cpu c;
  Dev w(c, MEMRA_TYPE_Q4_1, 64, 8), x(c, MEMRA_TYPE_F32, 64, 3), y(c, MEMRA_TYPE_F32, 8, 3),
      x65(c, MEMRA_TYPE_F32, 65, 3), y9(c, MEMRA_TYPE_F32, 9, 3), b7(c, MEMRA_TYPE_F32, 7, 1),
      q8k(c, MEMRA_TYPE_Q8_K, 256, 2), xi(c, MEMRA_TYPE_I32, 64, 3);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul(c.be, &y.t, &x65.t, &w.t, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul: x has shape [3, 65], expected [*, 64]")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul(c.be, &y9.t, &x.t, &w.t, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul: y has shape [3, 9], expected [3, 8]")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul(c.be, &y.t, &x.t, &w.t, &b7.t));
  EXPECT_EQ(0u, c.err().find("matmul: bias")) << c.err();
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->matmul(c.be, &y.t, &x.t, &q8k.t, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul: weight type Q8_K")) << c.err();
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->matmul(c.be, &y.t, &xi.t, &w.t, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul: x has type I32, expected F32")) << c.err();
  // A weight row that is not a whole number of blocks.
  memra_tensor odd = w.t;
  odd.ne0 = 48;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul(c.be, &y.t, &x.t, &odd, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul: w row of 48 elements is not a whole number of Q4_1 blocks"))
      << c.err();
  // y on top of x: refused, not silently wrong.
  memra_tensor alias = x.t;
  alias.ne0 = 8;
  alias.nb1 = 8 * 4;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul(c.be, &alias, &x.t, &w.t, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul: y overlaps")) << c.err();
  EXPECT_TRUE(y.guards_ok());
}

// The plugin's float32 dot sums in memra_vec_dot's order, bit for bit, for every length
// (whole lane groups, tails, both ISA clones): what makes prefill equal decode above.
extern "C" float cpu_dot_f32(const float *a, const float *b, int64_t n);

TEST(CpuMatmul, DotOrderIsTheQuantLibrarys) {
  std::mt19937 g(33);
  for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 64, 97, 576, 1536, 4097}) {
    auto a = randf(g, n, -3, 3), b = randf(g, n, -3, 3);
    float mine = cpu_dot_f32(a.data(), b.data(), n);
    float quant = memra_vec_dot(MEMRA_TYPE_F32, a.data(), b.data(), n);
    EXPECT_EQ(0, memcmp(&mine, &quant, 4)) << "n=" << n << ": " << mine << " vs " << quant;
  }
}

// n (2 or 3) outputs sharing x, for matmul_n / gemm_n: weights of one type with ns[i] rows
// and K k, random biases with bias 1 absent among present ones (the llama family's zero
// views), the outputs and their references, M rows.
struct Group {
  std::vector<std::unique_ptr<Dev>> dw, db, dy, dref;
  memra_tensor ws[3], bs[3], ys[3];
  int n;
  Group(Cpu &c, std::mt19937 &g, int32_t type, int n_out, const int64_t *ns, int64_t k, int64_t m)
      : n(n_out) {
    for (int i = 0; i < n; ++i) {
      Weights w = make_weights(g, type, ns[i], k);
      dw.emplace_back(new Dev(c, type, k, ns[i]));
      dw[i]->put_bytes(w.bytes.data());
      db.emplace_back(new Dev(c, MEMRA_TYPE_F32, ns[i], 1));
      db[i]->put(randf(g, ns[i]));
      dy.emplace_back(new Dev(c, MEMRA_TYPE_F32, ns[i], m));
      dref.emplace_back(new Dev(c, MEMRA_TYPE_F32, ns[i], m));
      ws[i] = dw[i]->t;
      bs[i] = db[i]->t;
      ys[i] = dy[i]->t;
    }
    bs[1].buf = nullptr;
  }
  // Each output equals a separate matmul of the same operands bit for bit.
  void expect_each_is_matmul(Cpu &c, const memra_tensor *x, bool with_bias) {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(MEMRA_OK,
                c.vt->matmul(c.be, &dref[i]->t, x, &ws[i], with_bias && i != 1 ? &bs[i] : nullptr))
          << c.err();
      auto got = dy[i]->get<float>(), want = dref[i]->get<float>();
      EXPECT_EQ(0, memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "y" << i;
      EXPECT_TRUE(dy[i]->guards_ok());
    }
  }
};

// ABI 1.3 matmul_n: q, k, v shaped outputs sharing x equal three matmul calls bit for bit
// (the contract every fused plugin is checked against), with and without biases.
TEST(CpuMatmulN, EqualsSeparateMatmulsBitForBit) {
  Cpu c;
  ASSERT_NE(nullptr, c.vt->matmul_n);
  std::mt19937 g(41);
  for (int32_t type : {MEMRA_TYPE_F16, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q6_K}) {
    const int64_t k = memra_type_info(type).blck == 256 ? 512 : 96;
    const int64_t ns[3] = {37, 11, 13};
    for (int64_t m : {1, 5}) {
      for (int with_bias = 0; with_bias < 2; ++with_bias) {
        SCOPED_TRACE(testing::Message()
                     << memra_type_info(type).name << " M=" << m << " bias=" << with_bias);
        Dev dx(c, MEMRA_TYPE_F32, k, m);
        dx.put(randf(g, m * k));
        Group gr(c, g, type, 3, ns, k, m);
        ASSERT_EQ(MEMRA_OK,
                  c.vt->matmul_n(c.be, 3, gr.ys, &dx.t, gr.ws, with_bias ? gr.bs : nullptr))
            << c.err();
        gr.expect_each_is_matmul(c, &dx.t, with_bias);
      }
    }
  }
}

TEST(CpuMatmulN, RefusesBadGroups) {
  Cpu c;
  std::mt19937 g(43);
  Dev dx(c, MEMRA_TYPE_F32, 64, 2), w0(c, MEMRA_TYPE_F16, 64, 5), w1(c, MEMRA_TYPE_Q8_0, 64, 5),
      w2(c, MEMRA_TYPE_F16, 32, 5), y0(c, MEMRA_TYPE_F32, 5, 2), y1(c, MEMRA_TYPE_F32, 5, 2);
  dx.put(randf(g, 128));
  memra_tensor ys[2] = {y0.t, y1.t}, ws[2] = {w0.t, w1.t};
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_n(c.be, 0, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul_n: 0 outputs")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_n(c.be, 5, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul_n: 5 outputs")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_n(c.be, 2, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul_n: w[1] is Q8_0 with K 64, w[0] F16")) << c.err();
  ws[1] = w2.t;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_n(c.be, 2, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul_n: w[1] is F16 with K 32")) << c.err();
  ws[1] = w0.t;
  ys[1] = y0.t;
  ys[1].offset += 4; // overlaps y[0]
  ys[1].ne0 = 4;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_n(c.be, 2, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("matmul_n: y[1] overlaps y[0]")) << c.err();
  EXPECT_TRUE(y0.guards_ok());
}

// ABI 1.5 gemm_n: the CPU plugin has no gemm (prompt rows go to matmul), so its gemm_n is
// the oracle the GPU's grouped GEMM is held to: each output equals a separate matmul bit for
// bit, for q/k/v-shaped (3 outputs, biases with a gap) and gate/up-shaped (2) groups, M odd.
TEST(CpuGemmN, EqualsSeparateMatmulsBitForBit) {
  Cpu c;
  ASSERT_NE(nullptr, c.vt->gemm_n);
  std::mt19937 g(47);
  for (int32_t type : {MEMRA_TYPE_F16, MEMRA_TYPE_BF16, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K}) {
    const int64_t k = memra_type_info(type).blck == 256 ? 256 : 160;
    for (int32_t n_out : {2, 3}) {
      const int64_t ns[3] = {29, 9, 17};
      for (int64_t m : {1, 7, 33}) {
        SCOPED_TRACE(testing::Message()
                     << memra_type_info(type).name << " n=" << n_out << " M=" << m);
        Dev dx(c, MEMRA_TYPE_F32, k, m);
        dx.put(randf(g, m * k));
        Group gr(c, g, type, n_out, ns, k, m);
        const bool with_bias = n_out == 3;
        ASSERT_EQ(MEMRA_OK,
                  c.vt->gemm_n(c.be, n_out, gr.ys, &dx.t, gr.ws, with_bias ? gr.bs : nullptr))
            << c.err();
        gr.expect_each_is_matmul(c, &dx.t, with_bias);
      }
    }
  }
}

TEST(CpuGemmN, RefusesBadGroups) {
  Cpu c;
  std::mt19937 g(53);
  Dev dx(c, MEMRA_TYPE_F32, 64, 3), w0(c, MEMRA_TYPE_F16, 64, 5), w1(c, MEMRA_TYPE_BF16, 64, 5),
      w2(c, MEMRA_TYPE_F16, 96, 5), y0(c, MEMRA_TYPE_F32, 5, 3), y1(c, MEMRA_TYPE_F32, 5, 3);
  dx.put(randf(g, 192));
  memra_tensor ys[2] = {y0.t, y1.t}, ws[2] = {w0.t, w1.t};
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->gemm_n(c.be, 0, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("gemm_n: 0 outputs")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->gemm_n(c.be, 5, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("gemm_n: 5 outputs")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->gemm_n(c.be, 2, nullptr, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("gemm_n: 2 outputs (1..4 with y and w arrays)")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->gemm_n(c.be, 2, ys, nullptr, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("gemm_n: 2 outputs")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->gemm_n(c.be, 2, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("gemm_n: w[1] is BF16 with K 64, w[0] F16")) << c.err();
  ws[1] = w2.t;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->gemm_n(c.be, 2, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("gemm_n: w[1] is F16 with K 96")) << c.err();
  ws[1] = w0.t;
  ys[1] = y0.t;
  ys[1].offset += 8; // overlaps y[0]
  ys[1].ne0 = 3;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->gemm_n(c.be, 2, ys, &dx.t, ws, nullptr));
  EXPECT_EQ(0u, c.err().find("gemm_n: y[1] overlaps y[0]")) << c.err();
  EXPECT_TRUE(y0.guards_ok());
}

// ABI 1.12 ffn_glu: a decode FFN (gate and up into h and u, glu in place in h, down into y)
// equals its composition of matmul_n, glu and matmul bit for bit — the contract the GPU's one
// launch is held to — for odd F, both activations and M 1 and 3; bad arguments are refused.
TEST(CpuFfnGlu, EqualsTheCompositionBitForBit) {
  Cpu c;
  ASSERT_NE(nullptr, c.vt->ffn_glu);
  std::mt19937 g(59);
  for (int32_t type : {MEMRA_TYPE_F16, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K}) {
    const bool k256 = memra_type_info(type).blck == 256; // down's K is F
    const int64_t d = k256 ? 256 : 96, f = k256 ? 768 : 288 + 32 * (type & 1);
    for (int32_t act : {MEMRA_ACT_SILU, MEMRA_ACT_GELU_TANH}) {
      for (int64_t m : {1, 3}) {
        SCOPED_TRACE(testing::Message()
                     << memra_type_info(type).name << " act=" << act << " M=" << m << " F=" << f);
        Dev dx(c, MEMRA_TYPE_F32, d, m);
        dx.put(randf(g, m * d));
        const int64_t ns[2] = {f, f};
        Group gu(c, g, type, 2, ns, d, m);
        Weights wd = make_weights(g, type, d, f);
        Dev dwd(c, type, f, d), y(c, MEMRA_TYPE_F32, d, m), y_ref(c, MEMRA_TYPE_F32, d, m);
        dwd.put_bytes(wd.bytes.data());
        ASSERT_EQ(MEMRA_OK, c.vt->ffn_glu(c.be, &y.t, &gu.ys[0], &gu.ys[1], &dx.t, &gu.ws[0],
                                          &gu.ws[1], &dwd.t, act))
            << c.err();
        const std::vector<float> h = gu.dy[0]->get<float>();
        ASSERT_EQ(MEMRA_OK, c.vt->matmul_n(c.be, 2, gu.ys, &dx.t, gu.ws, nullptr)) << c.err();
        ASSERT_EQ(MEMRA_OK, c.vt->glu(c.be, &gu.ys[0], &gu.ys[0], &gu.ys[1], act)) << c.err();
        ASSERT_EQ(MEMRA_OK, c.vt->matmul(c.be, &y_ref.t, &gu.ys[0], &dwd.t, nullptr)) << c.err();
        const std::vector<float> got = y.get<float>(), want = y_ref.get<float>();
        const std::vector<float> h_ref = gu.dy[0]->get<float>();
        EXPECT_EQ(0, memcmp(got.data(), want.data(), got.size() * sizeof(float)));
        EXPECT_EQ(0, memcmp(h.data(), h_ref.data(), h.size() * sizeof(float))) << "h";
        EXPECT_TRUE(y.guards_ok() && gu.dy[0]->guards_ok() && gu.dy[1]->guards_ok());
      }
    }
  }
}

TEST(CpuFfnGlu, RefusesBadArguments) {
  Cpu c;
  std::mt19937 g(61);
  Dev dx(c, MEMRA_TYPE_F32, 64, 1), wg(c, MEMRA_TYPE_F16, 64, 40), wu(c, MEMRA_TYPE_F16, 64, 40),
      wd(c, MEMRA_TYPE_F16, 40, 64), h(c, MEMRA_TYPE_F32, 40, 1), u(c, MEMRA_TYPE_F32, 40, 1),
      y(c, MEMRA_TYPE_F32, 64, 1);
  dx.put(randf(g, 64));
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->ffn_glu(c.be, &y.t, &h.t, nullptr, &dx.t, &wg.t, &wu.t, &wd.t, MEMRA_ACT_SILU));
  EXPECT_EQ(0u, c.err().find("ffn_glu: a tensor argument is NULL")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->ffn_glu(c.be, &y.t, &h.t, &h.t, &dx.t, &wg.t, &wu.t, &wd.t, MEMRA_ACT_SILU));
  EXPECT_EQ(0u, c.err().find("ffn_glu: u overlaps h or y")) << c.err();
  EXPECT_EQ(MEMRA_E_UNSUPPORTED,
            c.vt->ffn_glu(c.be, &y.t, &h.t, &u.t, &dx.t, &wg.t, &wu.t, &wd.t, 9));
  EXPECT_EQ(0u, c.err().find("ffn_glu: unknown activation 9")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->ffn_glu(c.be, &y.t, &h.t, &u.t, &dx.t, &wg.t, &wu.t, &wg.t, MEMRA_ACT_SILU));
  EXPECT_NE(std::string::npos, c.err().find("matmul")) << c.err();
  EXPECT_TRUE(y.guards_ok() && h.guards_ok() && u.guards_ok());
}

// ABI 1.14 rmsnorm_matmul_n / rmsnorm_ffn_glu: a decode norm (x += res, xn = rmsnorm(x) w) with
// the projections that read xn equals rmsnorm followed by matmul_n / ffn_glu bit for bit in x,
// xn and every output (the contract a GPU's one launch is held to), with and without res, at an
// odd width; bad arguments are refused with the slot's name.
TEST(CpuRmsnormProj, EqualsTheCompositionBitForBit) {
  Cpu c;
  ASSERT_NE(nullptr, c.vt->rmsnorm_matmul_n);
  ASSERT_NE(nullptr, c.vt->rmsnorm_ffn_glu);
  std::mt19937 g(67);
  const int64_t d = 96, f = 160, m = 3;
  for (bool with_res : {true, false}) {
    SCOPED_TRACE(testing::Message() << "res=" << with_res);
    const std::vector<float> x0 = randf(g, m * d, -2.f, 2.f), r0 = randf(g, m * d),
                             wn0 = randf(g, d, 0.5f, 1.5f);
    Dev x(c, MEMRA_TYPE_F32, d, m), x_ref(c, MEMRA_TYPE_F32, d, m), res(c, MEMRA_TYPE_F32, d, m),
        wn(c, MEMRA_TYPE_F32, d, 1), xn(c, MEMRA_TYPE_F32, d, m), xn_ref(c, MEMRA_TYPE_F32, d, m);
    res.put(r0);
    wn.put(wn0);
    memra_tensor none = {};
    const memra_tensor *rp = with_res ? &res.t : &none;
    const int64_t ns[3] = {64, 32, 48};
    Group qkv(c, g, MEMRA_TYPE_Q8_0, 3, ns, d, m);
    x.put(x0);
    x_ref.put(x0);
    ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm_matmul_n(c.be, &xn.t, &x.t, rp, &wn.t, 1e-5f, 3, qkv.ys,
                                               qkv.ws, qkv.bs))
        << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &xn_ref.t, &x_ref.t, rp, &wn.t, 1e-5f)) << c.err();
    EXPECT_TRUE(bits_equal(x.get<float>(), x_ref.get<float>())) << "x";
    EXPECT_TRUE(bits_equal(xn.get<float>(), xn_ref.get<float>())) << "xn";
    qkv.expect_each_is_matmul(c, &xn_ref.t, true);

    const int64_t fs[2] = {f, f};
    Group gu(c, g, MEMRA_TYPE_Q8_0, 2, fs, d, m);
    Weights wd = make_weights(g, MEMRA_TYPE_Q8_0, d, f);
    Dev dwd(c, MEMRA_TYPE_Q8_0, f, d), y(c, MEMRA_TYPE_F32, d, m), y_ref(c, MEMRA_TYPE_F32, d, m);
    dwd.put_bytes(wd.bytes.data());
    x.put(x0);
    x_ref.put(x0);
    ASSERT_EQ(MEMRA_OK,
              c.vt->rmsnorm_ffn_glu(c.be, &xn.t, &x.t, rp, &wn.t, 1e-5f, &y.t, &gu.ys[0], &gu.ys[1],
                                    &gu.ws[0], &gu.ws[1], &dwd.t, MEMRA_ACT_SILU))
        << c.err();
    const std::vector<float> h = gu.dy[0]->get<float>();
    ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &xn_ref.t, &x_ref.t, rp, &wn.t, 1e-5f)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->ffn_glu(c.be, &y_ref.t, &gu.ys[0], &gu.ys[1], &xn_ref.t, &gu.ws[0],
                                      &gu.ws[1], &dwd.t, MEMRA_ACT_SILU))
        << c.err();
    EXPECT_TRUE(bits_equal(x.get<float>(), x_ref.get<float>())) << "x";
    EXPECT_TRUE(bits_equal(xn.get<float>(), xn_ref.get<float>())) << "xn";
    EXPECT_TRUE(bits_equal(y.get<float>(), y_ref.get<float>())) << "y";
    EXPECT_TRUE(bits_equal(h, gu.dy[0]->get<float>())) << "h";
    EXPECT_TRUE(x.guards_ok() && xn.guards_ok() && y.guards_ok());
    if (!with_res) continue;
    // y into res itself, as the core calls it (the residual branch is the FFN's output)
    x.put(x0);
    ASSERT_EQ(MEMRA_OK,
              c.vt->rmsnorm_ffn_glu(c.be, &xn.t, &x.t, &res.t, &wn.t, 1e-5f, &res.t, &gu.ys[0],
                                    &gu.ys[1], &gu.ws[0], &gu.ws[1], &dwd.t, MEMRA_ACT_SILU))
        << c.err();
    EXPECT_TRUE(bits_equal(res.get<float>(), y_ref.get<float>())) << "y into res";
    EXPECT_TRUE(bits_equal(x.get<float>(), x_ref.get<float>())) << "x, y into res";
  }
}

// ABI 1.17 matmul_acc: y += x w^T equals matmul into t, then add(y, y, t), bit for bit (the
// residual sum rmsnorm would have made), at odd sizes and over several rows; bad arguments are
// refused with the slot's name and y left as it was.
TEST(CpuMatmulAcc, EqualsMatmulThenAddBitForBit) {
  Cpu c;
  ASSERT_NE(nullptr, c.vt->matmul_acc);
  std::mt19937 g(83);
  for (int32_t type : {MEMRA_TYPE_F32, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K}) {
    SCOPED_TRACE(memra_type_info(type).name);
    const int64_t k = type == MEMRA_TYPE_Q4_K ? 256 : 96, n = 37, m = 3;
    Weights w = make_weights(g, type, n, k);
    Dev dw(c, type, k, n), x(c, MEMRA_TYPE_F32, k, m), y(c, MEMRA_TYPE_F32, n, m),
        t(c, MEMRA_TYPE_F32, n, m), ref(c, MEMRA_TYPE_F32, n, m), p(c, MEMRA_TYPE_F32, n, m);
    dw.put_bytes(w.bytes.data());
    x.put(randf(g, m * k));
    const std::vector<float> y0 = randf(g, m * n, -3.f, 3.f);
    y.put(y0);
    ref.put(y0);
    ASSERT_EQ(MEMRA_OK, c.vt->matmul_acc(c.be, &y.t, &t.t, &x.t, &dw.t)) << c.err();
    memra_tensor none = {};
    ASSERT_EQ(MEMRA_OK, c.vt->matmul(c.be, &p.t, &x.t, &dw.t, &none)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->add(c.be, &ref.t, &ref.t, &p.t)) << c.err();
    const std::vector<float> got = y.get<float>();
    EXPECT_TRUE(bits_equal(got, ref.get<float>()));
    EXPECT_FALSE(bits_equal(got, y0)) << "nothing was added";
    EXPECT_TRUE(y.guards_ok() && t.guards_ok());
  }
  Dev x(c, MEMRA_TYPE_F32, 64, 1), w(c, MEMRA_TYPE_F16, 64, 40), y(c, MEMRA_TYPE_F32, 40, 1),
      t16(c, MEMRA_TYPE_F16, 40, 1);
  x.put(randf(g, 64));
  const std::vector<float> y0 = randf(g, 40);
  y.put(y0);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_acc(c.be, &y.t, &y.t, &x.t, &w.t));
  EXPECT_EQ(0u, c.err().find("matmul_acc: y, t and x overlap")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_acc(c.be, &y.t, &t16.t, &x.t, &w.t));
  EXPECT_EQ(0u, c.err().find("matmul_acc: t is not F32 of y's shape")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->matmul_acc(c.be, &y.t, nullptr, &x.t, &w.t));
  EXPECT_EQ(0u, c.err().find("matmul_acc: a tensor argument is NULL")) << c.err();
  EXPECT_TRUE(bits_equal(y.get<float>(), y0));
}

// ABI 1.23 rmsnorm_matmul_mixed: the norm with projections of several types (a Q4_K_M layer's
// Q4_K q / k and Q6_K v) equals rmsnorm followed by a matmul each, bit for bit in x, xn and every
// output, at odd row counts; weights of another K are refused with the slot's name.
TEST(CpuRmsnormProj, MixedTypesEqualTheCompositionBitForBit) {
  Cpu c;
  ASSERT_NE(nullptr, c.vt->rmsnorm_matmul_mixed);
  std::mt19937 g(73);
  const int64_t d = 256, m = 3;
  const std::vector<float> x0 = randf(g, m * d, -2.f, 2.f), r0 = randf(g, m * d),
                           wn0 = randf(g, d, 0.5f, 1.5f);
  Dev x(c, MEMRA_TYPE_F32, d, m), x_ref(c, MEMRA_TYPE_F32, d, m), res(c, MEMRA_TYPE_F32, d, m),
      wn(c, MEMRA_TYPE_F32, d, 1), xn(c, MEMRA_TYPE_F32, d, m), xn_ref(c, MEMRA_TYPE_F32, d, m);
  x.put(x0);
  x_ref.put(x0);
  res.put(r0);
  wn.put(wn0);
  const int64_t nqk[2] = {48, 17}, nv[1] = {33};
  Group qk(c, g, MEMRA_TYPE_Q4_K, 2, nqk, d, m), v(c, g, MEMRA_TYPE_Q6_K, 1, nv, d, m);
  const memra_tensor ys[3] = {qk.ys[0], qk.ys[1], v.ys[0]}, ws[3] = {qk.ws[0], qk.ws[1], v.ws[0]},
                     bs[3] = {qk.bs[0], qk.bs[1], v.bs[0]};
  ASSERT_EQ(MEMRA_OK,
            c.vt->rmsnorm_matmul_mixed(c.be, &xn.t, &x.t, &res.t, &wn.t, 1e-5f, 3, ys, ws, bs))
      << c.err();
  ASSERT_EQ(MEMRA_OK, c.vt->rmsnorm(c.be, &xn_ref.t, &x_ref.t, &res.t, &wn.t, 1e-5f)) << c.err();
  EXPECT_TRUE(bits_equal(x.get<float>(), x_ref.get<float>())) << "x";
  EXPECT_TRUE(bits_equal(xn.get<float>(), xn_ref.get<float>())) << "xn";
  qk.expect_each_is_matmul(c, &xn_ref.t, true);
  v.expect_each_is_matmul(c, &xn_ref.t, true);

  Dev w512(c, MEMRA_TYPE_Q4_K, 512, 16), y16(c, MEMRA_TYPE_F32, 16, m);
  const memra_tensor ys2[2] = {qk.ys[0], y16.t}, ws2[2] = {qk.ws[0], w512.t};
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_matmul_mixed(c.be, &xn.t, &x.t, &res.t, &wn.t, 1e-5f, 2,
                                                        ys2, ws2, nullptr));
  EXPECT_EQ(0u, c.err().find("rmsnorm_matmul_mixed: w[1] has K 512, w[0] 256")) << c.err();
}

TEST(CpuRmsnormProj, RefusesBadArguments) {
  Cpu c;
  std::mt19937 g(71);
  Dev x(c, MEMRA_TYPE_F32, 64, 1), wn(c, MEMRA_TYPE_F32, 64, 1), xn(c, MEMRA_TYPE_F32, 64, 1),
      w(c, MEMRA_TYPE_F16, 64, 40), y(c, MEMRA_TYPE_F32, 40, 1), wd(c, MEMRA_TYPE_F16, 40, 64),
      h(c, MEMRA_TYPE_F32, 40, 1), u(c, MEMRA_TYPE_F32, 40, 1), yd(c, MEMRA_TYPE_F32, 64, 1);
  x.put(randf(g, 64));
  wn.put(randf(g, 64));
  memra_tensor none = {};
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rmsnorm_matmul_n(c.be, &xn.t, &x.t, &none, &wn.t, 1e-5f, 5, &y.t, &w.t, nullptr));
  EXPECT_EQ(0u, c.err().find("rmsnorm_matmul_n: 5 outputs (1..4)")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_matmul_n(c.be, &xn.t, &x.t, &none, &wn.t, 1e-5f, 1,
                                                    &xn.t, &w.t, nullptr));
  EXPECT_EQ(0u, c.err().find("rmsnorm_matmul_n: y[0] overlaps xn, x or res")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->rmsnorm_ffn_glu(c.be, &xn.t, &x.t, &none, &wn.t, 1e-5f, &x.t,
                                                   &h.t, &u.t, &w.t, &w.t, &wd.t, MEMRA_ACT_SILU));
  EXPECT_EQ(0u, c.err().find("rmsnorm_ffn_glu: y overlaps xn or x")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rmsnorm_ffn_glu(c.be, &xn.t, &x.t, &none, &wn.t, 1e-5f, &yd.t, nullptr, &u.t,
                                  &w.t, &w.t, &wd.t, MEMRA_ACT_SILU));
  EXPECT_EQ(0u, c.err().find("rmsnorm_ffn_glu: a tensor argument is NULL")) << c.err();
  EXPECT_TRUE(y.guards_ok() && xn.guards_ok());
}
