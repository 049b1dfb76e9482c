// vec_dot_test — memra_vec_dot against a double-precision dot over memra_dequant_row's
// floats (themselves checked bit-exact against the gguf package), on random rows.
//
// Bound: memra_vec_dot sums in 16 F32 lanes (n/16 products each) and then a 4-level
// tree, so |error| <= k * 2^-24 * sum|w_i x_i| with k = n/16 + 6 (one rounding per
// product, per lane addition and per tree level, plus slack): the classic gamma_k bound.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/quant/quant_test_util.h"

using memra_test::all_types;
using memra_test::type_name;

namespace {

void check_dot(int32_t type, const void *w, const float *x, int64_t n, const std::string &what) {
  std::vector<float> wf((size_t)n);
  memra_dequant_row(type, w, wf.data(), n);
  double ref = 0.0, mag = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    ref += (double)wf[(size_t)i] * (double)x[i];
    mag += std::fabs((double)wf[(size_t)i] * (double)x[i]);
  }
  ASSERT_GT(mag, 0.0) << what << ": degenerate row";
  const float got = memra_vec_dot(type, w, x, n);
  const double k = (double)n / 16.0 + 6.0;
  EXPECT_LE(std::fabs((double)got - ref), k * std::ldexp(1.0, -24) * mag)
      << what << ": got " << got << " want " << ref << " (sum|wx| " << mag << ")";
}

} // namespace

TEST(QuantVecDot, QuantizedRowsOddBlockCounts) {
  std::mt19937 rng(12345);
  for (const auto &q : all_types()) {
    if (memra_type_info(q.type).blck == 1) continue; // element types: below
    const memra_type_traits tr = memra_type_info(q.type);
    for (int64_t nb : {1, 3, 17}) {
      for (int rep = 0; rep < 4; ++rep) {
        std::vector<uint8_t> w = memra_test::random_blocks(q, nb, rng);
        std::vector<float> x = memra_test::normal_floats((size_t)(nb * tr.blck), rng);
        check_dot(q.type, w.data(), x.data(), nb * tr.blck,
                  type_name(q.type) + " blocks=" + std::to_string(nb));
      }
    }
  }
}

// F32/F16/BF16 rows of any length, including ones that leave a tail after the 16 lanes.
TEST(QuantVecDot, ElementTypesOddLengths) {
  std::mt19937 rng(777);
  for (int64_t n : {1, 15, 31, 33, 4097}) {
    std::vector<float> wf = memra_test::normal_floats((size_t)n, rng);
    std::vector<float> x = memra_test::normal_floats((size_t)n, rng);
    std::vector<uint16_t> h((size_t)n), bf((size_t)n);
    for (int64_t i = 0; i < n; ++i) {
      h[(size_t)i] = memra_f32_to_fp16(wf[(size_t)i]);
      bf[(size_t)i] = memra_f32_to_bf16(wf[(size_t)i]);
    }
    const std::string len = " n=" + std::to_string(n);
    check_dot(MEMRA_TYPE_F32, wf.data(), x.data(), n, "F32" + len);
    check_dot(MEMRA_TYPE_F16, h.data(), x.data(), n, "F16" + len);
    check_dot(MEMRA_TYPE_BF16, bf.data(), x.data(), n, "BF16" + len);
  }
}

// The result depends only on the row and x: a copy of the row at another address, and
// the same row inside a longer buffer, give the same bits (batch invariance needs this).
TEST(QuantVecDot, Reproducible) {
  std::mt19937 rng(99);
  for (const auto &q : all_types()) {
    const memra_type_traits tr = memra_type_info(q.type);
    const int64_t nb = q.type == MEMRA_TYPE_F32 || tr.blck == 1 ? 300 : 9;
    std::vector<uint8_t> w = memra_test::random_blocks(q, nb, rng);
    if (tr.blck == 1) { // element types: make the bytes finite values
      std::vector<float> v = memra_test::normal_floats((size_t)nb, rng);
      for (int64_t i = 0; i < nb; ++i) {
        if (q.type == MEMRA_TYPE_F32) std::memcpy(&w[(size_t)i * 4], &v[(size_t)i], 4);
        uint16_t hv = q.type == MEMRA_TYPE_F16 ? memra_f32_to_fp16(v[(size_t)i])
                                               : memra_f32_to_bf16(v[(size_t)i]);
        if (q.type != MEMRA_TYPE_F32) std::memcpy(&w[(size_t)i * 2], &hv, 2);
      }
    }
    std::vector<float> x = memra_test::normal_floats((size_t)(nb * tr.blck), rng);
    std::vector<uint8_t> copy(w.size() + 64);
    std::memcpy(copy.data() + 32, w.data(), w.size());
    float a = memra_vec_dot(q.type, w.data(), x.data(), nb * tr.blck);
    float b = memra_vec_dot(q.type, copy.data() + 32, x.data(), nb * tr.blck);
    EXPECT_EQ(0, std::memcmp(&a, &b, 4)) << type_name(q.type);
    EXPECT_TRUE(std::isfinite(a)) << type_name(q.type);
  }
}

// quant.h's promise: the fused dot equals the F32 dot of the dequantized row, bit for bit,
// so dequantize-once (prefill) and fused (decode) paths agree exactly.
TEST(QuantVecDot, FusedEqualsDequantThenF32Dot) {
  std::mt19937 rng(2468);
  for (const auto &q : all_types()) {
    const memra_type_traits tr = memra_type_info(q.type);
    if (tr.blck == 1) continue;
    for (int64_t nb : {1, 2, 7}) {
      const int64_t n = nb * tr.blck;
      std::vector<uint8_t> w = memra_test::random_blocks(q, nb, rng);
      std::vector<float> x = memra_test::normal_floats((size_t)n, rng), wf((size_t)n);
      memra_dequant_row(q.type, w.data(), wf.data(), n);
      const float fused = memra_vec_dot(q.type, w.data(), x.data(), n);
      const float twostep = memra_vec_dot(MEMRA_TYPE_F32, wf.data(), x.data(), n);
      EXPECT_EQ(0, std::memcmp(&fused, &twostep, 4))
          << type_name(q.type) << " nb=" << nb << ": " << fused << " vs " << twostep;
    }
  }
  for (int64_t n : {1, 17, 33, 100}) { // F16/BF16, tails included
    std::vector<float> v = memra_test::normal_floats((size_t)n, rng);
    std::vector<float> x = memra_test::normal_floats((size_t)n, rng), wf((size_t)n);
    std::vector<uint16_t> h((size_t)n), bf((size_t)n);
    for (int64_t i = 0; i < n; ++i) {
      h[(size_t)i] = memra_f32_to_fp16(v[(size_t)i]);
      bf[(size_t)i] = memra_f32_to_bf16(v[(size_t)i]);
    }
    for (auto [type, p] : {std::pair<int32_t, const void *>{MEMRA_TYPE_F16, h.data()},
                           std::pair<int32_t, const void *>{MEMRA_TYPE_BF16, bf.data()}}) {
      memra_dequant_row(type, p, wf.data(), n);
      const float a = memra_vec_dot(type, p, x.data(), n);
      const float b = memra_vec_dot(MEMRA_TYPE_F32, wf.data(), x.data(), n);
      EXPECT_EQ(0, std::memcmp(&a, &b, 4)) << type_name(type) << " n=" << n;
    }
  }
}

// memra_vec_dot_n gives each x exactly memra_vec_dot's bits, for counts below, at and
// above its internal group of 8, with a padded x stride; nothing written past out[nx).
TEST(QuantVecDot, ManyXEqualsSingleDots) {
  std::mt19937 rng(1357);
  for (const auto &q : all_types()) {
    const memra_type_traits tr = memra_type_info(q.type);
    const int64_t nb = tr.blck == 1 ? 0 : 3, n = tr.blck == 1 ? 37 : nb * tr.blck;
    std::vector<uint8_t> w;
    if (tr.blck == 1) { // finite element values
      std::vector<float> v = memra_test::normal_floats((size_t)n, rng);
      w.resize((size_t)(n * tr.size));
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = q.type == MEMRA_TYPE_F16 ? memra_f32_to_fp16(v[(size_t)i])
                                              : memra_f32_to_bf16(v[(size_t)i]);
        if (q.type == MEMRA_TYPE_F32)
          std::memcpy(&w[(size_t)i * 4], &v[(size_t)i], 4);
        else
          std::memcpy(&w[(size_t)i * 2], &h, 2);
      }
    } else {
      w = memra_test::random_blocks(q, nb, rng);
    }
    for (int64_t nx : {1, 3, 8, 11}) {
      const int64_t stride = n + 5;
      std::vector<float> x = memra_test::normal_floats((size_t)(nx * stride), rng);
      std::vector<float> out((size_t)nx + 1, 777.0f);
      memra_vec_dot_n(q.type, w.data(), x.data(), stride, nx, n, out.data());
      for (int64_t t = 0; t < nx; ++t) {
        const float one = memra_vec_dot(q.type, w.data(), x.data() + t * stride, n);
        EXPECT_EQ(0, std::memcmp(&one, &out[(size_t)t], 4))
            << type_name(q.type) << " nx=" << nx << " t=" << t;
      }
      EXPECT_EQ(777.0f, out[(size_t)nx]) << type_name(q.type) << ": wrote past out";
    }
  }
}
