// quantize_test — memra_quantize_row then memra_dequant_row stays close to the input.
//
// Error measure: RMS(dequant(quant(x)) - x) / RMS(x) over 17 super-blocks (4352 values)
// of N(0,1) data. The bounds are what these simple round-to-nearest quantizers reach
// with ~20% margin (measured: F16 2.1e-4, BF16 1.7e-3, Q8_0 5.4e-3, Q6_K 0.018,
// Q5_K 0.039, Q5_1 0.038, Q5_0 0.042, Q4_K 0.078, Q4_1 0.080, Q4_0 0.086, Q3_K 0.156,
// Q2_K 0.333); each is well under the step of the next coarser grid, so a packing bug
// (a misplaced bit or nibble) fails it.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/quant/quant_test_util.h"

using memra_test::type_name;

namespace {

struct Bound {
  int32_t type;
  double rel_rms;
};

const Bound kBounds[] = {
    {MEMRA_TYPE_F32, 0.0},     {MEMRA_TYPE_F16, 2.6e-4}, {MEMRA_TYPE_BF16, 2.1e-3},
    {MEMRA_TYPE_Q8_0, 0.0065}, {MEMRA_TYPE_Q6_K, 0.022}, {MEMRA_TYPE_Q5_K, 0.047},
    {MEMRA_TYPE_Q5_1, 0.046},  {MEMRA_TYPE_Q5_0, 0.051}, {MEMRA_TYPE_Q4_K, 0.094},
    {MEMRA_TYPE_Q4_1, 0.096},  {MEMRA_TYPE_Q4_0, 0.104}, {MEMRA_TYPE_Q3_K, 0.19},
    {MEMRA_TYPE_Q2_K, 0.40},
};

// Quantizes x, checks the bytes written stay inside the row, returns the decoded row.
std::vector<float> round_trip(int32_t type, const std::vector<float> &x) {
  const int64_t n = (int64_t)x.size();
  const size_t bytes = (size_t)memra_type_row_bytes(type, n);
  std::vector<uint8_t> q(bytes + 16, 0xA5);
  EXPECT_TRUE(memra_quantize_row(type, x.data(), q.data(), n)) << type_name(type);
  for (size_t i = bytes; i < q.size(); ++i)
    EXPECT_EQ(0xA5, q[i]) << type_name(type) << ": wrote past row";
  std::vector<float> y((size_t)n);
  memra_dequant_row(type, q.data(), y.data(), n);
  return y;
}

double rel_rms(const std::vector<float> &x, const std::vector<float> &y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i)
    e += (double)(y[i] - x[i]) * (y[i] - x[i]), s += (double)x[i] * x[i];
  return std::sqrt(e / s);
}

} // namespace

TEST(QuantQuantize, GaussianRoundTripWithinBounds) {
  std::mt19937 rng(2026);
  for (const Bound &b : kBounds) {
    std::vector<float> x = memra_test::normal_floats(17 * 256, rng);
    const double err = rel_rms(x, round_trip(b.type, x));
    EXPECT_LE(err, b.rel_rms) << type_name(b.type);
    if (b.type != MEMRA_TYPE_F32) {
      EXPECT_GT(err, 0.0) << type_name(b.type); // really lossy, so the bound means something
    }
    std::printf("%-5s rel RMS error %.3g (bound %.3g)\n", type_name(b.type).c_str(), err,
                b.rel_rms);
  }
}

// Shifted and scaled data: all-positive (mins clamp to 0 in the K formats), all-negative,
// and a large magnitude; the error relative to the data's spread stays within 1.5x the
// Gaussian bound.
TEST(QuantQuantize, OffsetAndScaledData) {
  std::mt19937 rng(31);
  const float offsets[] = {3.0f, -3.0f, 0.0f};
  const float scales[] = {1.0f, 1.0f, 1000.0f};
  for (const Bound &b : kBounds) {
    for (int c = 0; c < 3; ++c) {
      std::vector<float> x = memra_test::normal_floats(3 * 256, rng);
      for (float &v : x)
        v = v * scales[c] + offsets[c];
      std::vector<float> y = round_trip(b.type, x);
      double e = 0, s = 0;
      for (size_t i = 0; i < x.size(); ++i)
        e += (double)(y[i] - x[i]) * (y[i] - x[i]),
            s += (double)(x[i] - offsets[c]) * (x[i] - offsets[c]);
      // Asymmetric data costs symmetric formats (Q4_0, Q3_K, ...) range; allow |offset|.
      const double allow = 1.5 * b.rel_rms * (1.0 + std::fabs(offsets[c]));
      EXPECT_LE(std::sqrt(e / s), allow) << type_name(b.type) << " case " << c;
    }
  }
}

TEST(QuantQuantize, ZerosStayZeros) {
  std::vector<float> x(512, 0.0f);
  for (const Bound &b : kBounds) {
    std::vector<float> y = round_trip(b.type, x);
    for (float v : y)
      ASSERT_EQ(0.0f, v) << type_name(b.type);
  }
}

// One large outlier per block must come back close (it sets the scale), and must not
// wreck the block into NaN.
TEST(QuantQuantize, OutlierKeepsItsValue) {
  std::mt19937 rng(5);
  for (const Bound &b : kBounds) {
    std::vector<float> x = memra_test::normal_floats(256, rng);
    x[77] = 50.0f;
    std::vector<float> y = round_trip(b.type, x);
    EXPECT_NEAR(50.0f, y[77], 50.0 * std::max(b.rel_rms, 0.01)) << type_name(b.type);
    for (float v : y)
      ASSERT_TRUE(std::isfinite(v)) << type_name(b.type);
  }
}

TEST(QuantQuantize, RefusesWhatItCannotEncode) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(2048, 0);
  EXPECT_FALSE(memra_quantize_row(MEMRA_TYPE_Q8_1, x.data(), out.data(), 256));
  EXPECT_FALSE(memra_quantize_row(MEMRA_TYPE_Q8_K, x.data(), out.data(), 256));
  EXPECT_FALSE(memra_quantize_row(MEMRA_TYPE_I32, x.data(), out.data(), 256));
  EXPECT_FALSE(memra_quantize_row(12345, x.data(), out.data(), 256));
  EXPECT_FALSE(memra_quantize_row(MEMRA_TYPE_Q4_K, x.data(), out.data(), 255));
  EXPECT_FALSE(memra_quantize_row(MEMRA_TYPE_Q4_0, x.data(), out.data(), 33));
  EXPECT_FALSE(memra_quantize_row(MEMRA_TYPE_F16, x.data(), out.data(), -1));
  for (uint8_t v : out)
    ASSERT_EQ(0, v); // nothing written
}

// Non-finite input is garbage in, but must not crash or trip the sanitizers.
TEST(QuantQuantize, NonFiniteInputIsSafe) {
  std::vector<float> x(256, 1.0f);
  x[3] = NAN;
  x[100] = INFINITY;
  x[200] = -INFINITY;
  std::vector<float> y(256);
  for (const Bound &b : kBounds) {
    std::vector<uint8_t> q((size_t)memra_type_row_bytes(b.type, 256));
    EXPECT_TRUE(memra_quantize_row(b.type, x.data(), q.data(), 256)) << type_name(b.type);
    memra_dequant_row(b.type, q.data(), y.data(), 256);
  }
}
