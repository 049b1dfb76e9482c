// fp8_test.cc — plugins/quant/fp8.h against a reference built here from the format's
// definition (value = (-1)^s 2^(e-7) (1 + m/8), subnormal m 2^-9, S.1111.111 NaN):
// every one of the 256 codes decodes exactly; every finite code round-trips; encoding
// equals "nearest finite code, ties to the even mantissa, saturate to +-448" on every
// midpoint between adjacent codes, on the points one float ulp either side, and on
// 300000 seeded random floats spanning 2^-14 .. 2^10; NaN, inf and zero signs.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "plugins/quant/fp8.h"
}

namespace {

double ref_value(int c) {
  int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -v : v;
}

// Nearest finite code by exhaustive search; ties go to the even code (mantissa bit 0).
int ref_encode(float f) {
  if (std::isnan(f)) return std::signbit(f) ? 0xff : 0x7f;
  int sign = std::signbit(f) ? 0x80 : 0;
  double a = std::fabs((double)f);
  if (a >= 448.0) return sign | 0x7e;
  int best = 0;
  double bd = INFINITY;
  for (int c = 0; c < 0x7f; ++c) {
    double d = std::fabs(ref_value(c) - a);
    if (d < bd || (d == bd && (c & 1) == 0)) {
      bd = d;
      best = c;
    }
  }
  return sign | best;
}

TEST(Fp8, AllCodesDecodeExactly) {
  for (int c = 0; c < 256; ++c) {
    float got = memra_fp8_e4m3_to_f32((uint8_t)c);
    double want = ref_value(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      continue;
    }
    EXPECT_EQ((double)got, want) << "code " << c;
    EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << c; // -0 stays -0
  }
  EXPECT_EQ(memra_fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(memra_fp8_e4m3_to_f32(0x01), 0.001953125f); // 2^-9
  EXPECT_EQ(memra_fp8_e4m3_to_f32(0x08), 0.015625f);    // 2^-6
}

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(memra_f32_to_fp8_e4m3(memra_fp8_e4m3_to_f32((uint8_t)c)), c) << c;
  }
}

TEST(Fp8, MidpointsAndNeighboursRoundToNearestEven) {
  int checked = 0;
  for (int c = 0; c < 0x7e; ++c) { // adjacent positive codes c, c + 1
    double lo = ref_value(c), hi = ref_value(c + 1), mid = (lo + hi) / 2;
    float fm = (float)mid; // exact: 5 significant bits
    ASSERT_EQ((double)fm, mid);
    for (float f : {fm, std::nextafter(fm, 0.0f), std::nextafter(fm, 1e9f)}) {
      for (float sf : {f, -f}) {
        EXPECT_EQ(memra_f32_to_fp8_e4m3(sf), ref_encode(sf)) << sf;
        ++checked;
      }
    }
    // The tie itself goes to the even code.
    EXPECT_EQ(memra_f32_to_fp8_e4m3(fm), (c & 1) ? c + 1 : c) << mid;
  }
  EXPECT_EQ(checked, 126 * 6);
}

TEST(Fp8, SaturatesAndKeepsNan) {
  const float big[] = {448.0f, 448.5f, 463.9f, 464.0f, 480.0f, 1e6f, 3.4e38f, INFINITY};
  for (float f : big) {
    EXPECT_EQ(memra_f32_to_fp8_e4m3(f), 0x7e) << f;
    EXPECT_EQ(memra_f32_to_fp8_e4m3(-f), 0xfe) << f;
  }
  EXPECT_EQ(memra_f32_to_fp8_e4m3(NAN), 0x7f);
  EXPECT_EQ(memra_f32_to_fp8_e4m3(-NAN), 0xff);
  EXPECT_EQ(memra_f32_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(memra_f32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(memra_f32_to_fp8_e4m3(0.0009765625f), 0x00); // 2^-10: tie to 0 (even)
  EXPECT_EQ(memra_f32_to_fp8_e4m3(0.0029296875f), 0x02); // 3 2^-10: tie to 2 2^-9
  EXPECT_EQ(memra_f32_to_fp8_e4m3(1e-40f), 0x00);        // float subnormal
  EXPECT_EQ(memra_f32_to_fp8_e4m3(0.0146484375f), 0x08); // 7.5 2^-9: tie up to 2^-6
  EXPECT_EQ(memra_f32_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(memra_f32_to_fp8_e4m3(-2.0f), 0xc0);
}

TEST(Fp8, RandomFloatsMatchTheExhaustiveReference) {
  std::mt19937 g(20261129);
  std::uniform_real_distribution<float> ex(-14.0f, 10.0f), mant(1.0f, 2.0f);
  int mismatches = 0;
  for (int i = 0; i < 300000; ++i) {
    float f = std::ldexp(mant(g), (int)std::floor(ex(g))) * (g() & 1 ? 1.0f : -1.0f);
    if (memra_f32_to_fp8_e4m3(f) != ref_encode(f) && ++mismatches < 10)
      ADD_FAILURE() << f << " -> " << (int)memra_f32_to_fp8_e4m3(f) << ", want " << ref_encode(f);
  }
  EXPECT_EQ(mismatches, 0);
}

} // namespace
