// elementwise_test.cc — glu, add, scale, add_i32, argmax and get_rows against double
// references, with guard bytes and aliasing.
// Tolerances (relative L2): glu 1e-6 (expf/tanhf), add and scale 1e-7 (one rounding),
// get_rows exact (the floats memra_dequant_row gives), argmax and add_i32 exact.
#include "tests/cpu/cpu_test_util.h"

using namespace cputest;

TEST(CpuGlu, SiluAndGeluTanhMatchDouble) {
  Cpu c;
  std::mt19937 g(21);
  for (int64_t n : {1, 31, 97}) {
    for (int64_t ff : {1, 31, 1536}) {
      for (int act : {MEMRA_ACT_SILU, MEMRA_ACT_GELU_TANH}) {
        SCOPED_TRACE(testing::Message() << n << "x" << ff << " act=" << act);
        auto gate = randf(g, n * ff, -6, 6), up = randf(g, n * ff, -2, 2);
        Dev dg(c, MEMRA_TYPE_F32, ff, n), du(c, MEMRA_TYPE_F32, ff, n),
            dy(c, MEMRA_TYPE_F32, ff, n);
        dg.put(gate);
        du.put(up);
        ASSERT_EQ(MEMRA_OK, c.vt->glu(c.be, &dy.t, &dg.t, &du.t, act)) << c.err();
        std::vector<double> want(gate.size());
        for (size_t i = 0; i < gate.size(); ++i) {
          double x = gate[i];
          double a =
              act == MEMRA_ACT_SILU
                  ? x / (1 + std::exp(-x))
                  : 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
          want[i] = a * up[i];
        }
        EXPECT_LE(rel_l2(dy.get<float>(), want), 1e-6);
        EXPECT_TRUE(dy.guards_ok());
        // In place on gate gives the same bits.
        ASSERT_EQ(MEMRA_OK, c.vt->glu(c.be, &dg.t, &dg.t, &du.t, act));
        EXPECT_TRUE(bits_equal(dy.get<float>(), dg.get<float>()));
      }
    }
  }
  Dev a(c, MEMRA_TYPE_F32, 8, 2), b(c, MEMRA_TYPE_F32, 8, 3);
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->glu(c.be, &a.t, &a.t, &a.t, 7));
  EXPECT_EQ(0u, c.err().find("glu: unknown activation 7")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->glu(c.be, &a.t, &a.t, &b.t, MEMRA_ACT_SILU));
  EXPECT_EQ(0u, c.err().find("glu: up has shape [3, 8], expected [2, 8]")) << c.err();
}

TEST(CpuAddScale, MatchDoubleAndAlias) {
  Cpu c;
  std::mt19937 g(22);
  for (int64_t n : {1, 31, 97}) {
    for (int64_t w : {1, 31, 576}) {
      auto a = randf(g, n * w, -5, 5), b = randf(g, n * w, -5, 5);
      Dev da(c, MEMRA_TYPE_F32, w, n), db(c, MEMRA_TYPE_F32, w, n, 4), dy(c, MEMRA_TYPE_F32, w, n);
      da.put(a);
      db.put(b);
      ASSERT_EQ(MEMRA_OK, c.vt->add(c.be, &dy.t, &da.t, &db.t)) << c.err();
      std::vector<double> want(a.size());
      for (size_t i = 0; i < a.size(); ++i)
        want[i] = (double)a[i] + b[i];
      EXPECT_LE(rel_l2(dy.get<float>(), want), 1e-7);
      EXPECT_TRUE(dy.guards_ok());
      ASSERT_EQ(MEMRA_OK, c.vt->add(c.be, &da.t, &da.t, &db.t)); // y aliases a
      EXPECT_TRUE(bits_equal(dy.get<float>(), da.get<float>()));
      ASSERT_EQ(MEMRA_OK, c.vt->scale(c.be, &dy.t, &db.t, -0.37f)) << c.err();
      for (size_t i = 0; i < b.size(); ++i)
        want[i] = -0.37 * b[i];
      EXPECT_LE(rel_l2(dy.get<float>(), want), 1e-7);
      ASSERT_EQ(MEMRA_OK, c.vt->scale(c.be, &db.t, &db.t, -0.37f)); // in place
      EXPECT_TRUE(bits_equal(dy.get<float>(), db.get<float>()));
      EXPECT_TRUE(db.guards_ok());
    }
  }
  Dev a(c, MEMRA_TYPE_F32, 8, 2), b(c, MEMRA_TYPE_F32, 9, 2), i(c, MEMRA_TYPE_I32, 8, 2);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->add(c.be, &a.t, &a.t, &b.t));
  EXPECT_EQ(0u, c.err().find("add: b has shape [2, 9], expected [2, 8]")) << c.err();
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->scale(c.be, &a.t, &i.t, 2.0f));
  EXPECT_EQ(0u, c.err().find("scale: x has type I32")) << c.err();
}

TEST(CpuAddI32, AddsAndWraps) {
  Cpu c;
  std::vector<int32_t> v = {0, -5, 7, INT32_MAX, 123456, -1, 42};
  Dev d(c, MEMRA_TYPE_I32, (int64_t)v.size(), 1);
  d.put(v);
  ASSERT_EQ(MEMRA_OK, c.vt->add_i32(c.be, &d.t, 3)) << c.err();
  std::vector<int32_t> want = {3, -2, 10, INT32_MIN + 2, 123459, 2, 45};
  EXPECT_EQ(want, d.get<int32_t>());
  ASSERT_EQ(MEMRA_OK, c.vt->add_i32(c.be, &d.t, -3));
  EXPECT_EQ(v, d.get<int32_t>());
  EXPECT_TRUE(d.guards_ok());
  Dev f(c, MEMRA_TYPE_F32, 4, 1);
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->add_i32(c.be, &f.t, 1));
  EXPECT_EQ(0u, c.err().find("add_i32: v has type F32, expected I32")) << c.err();
}

TEST(CpuArgmax, LowestIndexWinsTies) {
  Cpu c;
  std::mt19937 g(23);
  const int64_t rows = 31, vocab = 49152 + 7;
  auto x = randf(g, rows * vocab, -10, 10);
  std::vector<int32_t> want(rows);
  for (int64_t r = 0; r < rows; ++r) {
    float *row = &x[r * vocab];
    int64_t a = g() % vocab, b = g() % vocab;
    if (r % 3 == 0) b = a;   // some rows: one maximum
    row[a] = row[b] = 11.0f; // the tie: the lower index must win
    want[r] = (int32_t)std::min(a, b);
  }
  x[5 * vocab + 0] = NAN; // NaN never wins
  Dev dx(c, MEMRA_TYPE_F32, vocab, rows), ids(c, MEMRA_TYPE_I32, rows, 1);
  dx.put(x);
  ASSERT_EQ(MEMRA_OK, c.vt->argmax(c.be, &ids.t, &dx.t)) << c.err();
  EXPECT_EQ(want, ids.get<int32_t>());
  EXPECT_TRUE(ids.guards_ok());
  Dev bad(c, MEMRA_TYPE_I32, rows - 1, 1);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->argmax(c.be, &bad.t, &dx.t));
  EXPECT_EQ(0u, c.err().find("argmax: ids has shape [1, 30], expected [1, 31]")) << c.err();
}

TEST(CpuGetRows, EveryTypeGivesDequantizedRows) {
  Cpu c;
  std::mt19937 g(24);
  const int32_t types[] = {MEMRA_TYPE_F32,  MEMRA_TYPE_F16,  MEMRA_TYPE_BF16, MEMRA_TYPE_Q4_0,
                           MEMRA_TYPE_Q4_1, MEMRA_TYPE_Q5_0, MEMRA_TYPE_Q5_1, MEMRA_TYPE_Q8_0,
                           MEMRA_TYPE_Q2_K, MEMRA_TYPE_Q3_K, MEMRA_TYPE_Q4_K, MEMRA_TYPE_Q5_K,
                           MEMRA_TYPE_Q6_K};
  for (int32_t type : types) {
    SCOPED_TRACE(memra_type_info(type).name);
    const int64_t ne0 = memra_type_info(type).blck == 256 ? 512 : 96, vocab = 97, n = 31;
    uint64_t rb = memra_type_row_bytes(type, ne0);
    std::vector<uint8_t> table(vocab * rb);
    auto src = randf(g, vocab * ne0, -2, 2);
    for (int64_t r = 0; r < vocab; ++r)
      ASSERT_TRUE(memra_quantize_row(type, &src[r * ne0], &table[r * rb], ne0));
    std::vector<int32_t> ids(n);
    for (auto &i : ids)
      i = (int32_t)(g() % vocab);
    ids[0] = 0;
    ids[1] = vocab - 1;
    Dev dt(c, type, ne0, vocab), di(c, MEMRA_TYPE_I32, n, 1), dy(c, MEMRA_TYPE_F32, ne0, n);
    dt.put_bytes(table.data());
    di.put(ids);
    ASSERT_EQ(MEMRA_OK, c.vt->get_rows(c.be, &dy.t, &dt.t, &di.t)) << c.err();
    std::vector<float> want(n * ne0);
    for (int64_t r = 0; r < n; ++r)
      memra_dequant_row(type, &table[ids[r] * rb], &want[r * ne0], ne0);
    EXPECT_TRUE(bits_equal(want, dy.get<float>()));
    EXPECT_TRUE(dy.guards_ok());
    ids[3] = vocab; // one past the end
    di.put(ids);
    EXPECT_EQ(MEMRA_E_INVALID, c.vt->get_rows(c.be, &dy.t, &dt.t, &di.t));
    EXPECT_EQ(0u, c.err().find("get_rows: ids[3] = 97 is outside the table's 97 rows")) << c.err();
  }
  Dev q8k(c, MEMRA_TYPE_Q8_K, 256, 2), di(c, MEMRA_TYPE_I32, 1, 1), dy(c, MEMRA_TYPE_F32, 256, 1);
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->get_rows(c.be, &dy.t, &q8k.t, &di.t));
  EXPECT_EQ(0u, c.err().find("get_rows: table type Q8_K")) << c.err();
}

// ABI 1.6: a 16-bit y is the f32 result (the F32 y of the same call) rounded by the
// memra_op16 rule: bf16 nearest even; f16 nearest even, beyond +-65504 saturated.
TEST(CpuGlu, SixteenBitYIsTheF32ResultRounded) {
  Cpu c;
  std::mt19937 g(23);
  for (int32_t t : {MEMRA_TYPE_F16, MEMRA_TYPE_BF16}) {
    for (int act : {MEMRA_ACT_SILU, MEMRA_ACT_GELU_TANH}) {
      const int64_t n = 7, ff = 1031;
      SCOPED_TRACE(testing::Message() << memra_type_info(t).name << " act=" << act);
      // gate and up wide enough that some products pass 65504 (f16 saturates them)
      auto gate = randf(g, n * ff, -300, 300), up = randf(g, n * ff, -400, 400);
      Dev dg(c, MEMRA_TYPE_F32, ff, n), du(c, MEMRA_TYPE_F32, ff, n), d32(c, MEMRA_TYPE_F32, ff, n),
          d16(c, t, ff, n, 6); // strided 16-bit rows
      dg.put(gate);
      du.put(up);
      ASSERT_EQ(MEMRA_OK, c.vt->glu(c.be, &d32.t, &dg.t, &du.t, act)) << c.err();
      ASSERT_EQ(MEMRA_OK, c.vt->glu(c.be, &d16.t, &dg.t, &du.t, act)) << c.err();
      std::vector<float> y = d32.get<float>();
      std::vector<uint16_t> h = d16.get<uint16_t>();
      int saturated = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        float v = y[i];
        if (t == MEMRA_TYPE_F16 && std::fabs(v) > 65504.0f)
          v = std::copysign(65504.0f, v), ++saturated;
        const uint16_t want = t == MEMRA_TYPE_F16 ? memra_f32_to_fp16(v) : memra_f32_to_bf16(v);
        ASSERT_EQ(want, h[i]) << i << " of " << y[i];
      }
      if (t == MEMRA_TYPE_F16) {
        EXPECT_GT(saturated, 0) << "no product beyond the f16 range";
      }
      EXPECT_TRUE(d16.guards_ok());
    }
  }
  Dev a(c, MEMRA_TYPE_F32, 8, 2), h(c, MEMRA_TYPE_F16, 8, 2), i32(c, MEMRA_TYPE_I32, 8, 2);
  memra_tensor alias = a.t;
  alias.type = MEMRA_TYPE_F16; // a 16-bit view over gate's own bytes
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->glu(c.be, &alias, &a.t, &a.t, MEMRA_ACT_SILU));
  EXPECT_EQ(0u, c.err().find("glu: a F16 y must not overlap gate or up")) << c.err();
  EXPECT_NE(MEMRA_OK, c.vt->glu(c.be, &i32.t, &a.t, &a.t, MEMRA_ACT_SILU));
  EXPECT_EQ(0u, c.err().find("glu: y")) << c.err();
  EXPECT_EQ(MEMRA_OK, c.vt->glu(c.be, &h.t, &a.t, &a.t, MEMRA_ACT_SILU)) << c.err();
}
