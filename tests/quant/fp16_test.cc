// fp16_test — fp16/bf16 conversions: hand-computed bit patterns for the edge cases
// (exact values, rounding ties, overflow, Inf, NaN, subnormals), then exhaustive and
// random checks against independent references (a formula for fp16 -> f32, the
// compiler's own _Float16 conversion for f32 -> fp16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

extern "C" {
#include "plugins/quant/quant.h"
}

namespace {

float f_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

} // namespace

TEST(Fp16, ToF32HandPicked) {
  struct {
    uint16_t h;
    uint32_t f;
  } cases[] = {
      {0x0000, 0x00000000}, {0x8000, 0x80000000}, // +-0
      {0x3c00, 0x3f800000}, {0xc000, 0xc0000000}, // 1, -2
      {0x3555, 0x3eaaa000},                       // 0.333251953125
      {0x7bff, 0x477fe000},                       // 65504, the largest finite
      {0x0400, 0x38800000},                       // 2^-14, smallest normal
      {0x0001, 0x33800000},                       // 2^-24, smallest subnormal
      {0x03ff, 0x387fc000},                       // 1023 * 2^-24, largest subnormal
      {0x8200, 0xb8000000},                       // -2^-15, a negative subnormal
      {0x7c00, 0x7f800000}, {0xfc00, 0xff800000}, // +-Inf
      {0x7e00, 0x7fc00000},                       // quiet NaN
      {0x7c01, 0x7f802000}, {0xfd55, 0xffaaa000}, // NaN payloads move with the bits
  };
  for (auto c : cases)
    EXPECT_EQ(c.f, bits_of(memra_fp16_to_f32(c.h))) << std::hex << "h=0x" << c.h;
}

TEST(Fp16, FromF32HandPicked) {
  struct {
    uint32_t f;
    uint16_t h;
  } cases[] = {
      {0x3f800000, 0x3c00}, {0x80000000, 0x8000},
      {0xc0000000, 0xc000}, {0x477fe000, 0x7bff}, // 65504
      {0x477fefff, 0x7bff},                       // just below the 65520 tie
      {0x477ff000, 0x7c00},                       // 65520: tie, rounds to even = Inf
      {0x7f7fffff, 0x7c00}, {0xff7fffff, 0xfc00}, // FLT_MAX overflows to +-Inf
      {0x3f801000, 0x3c00},                       // 1 + 2^-11: tie -> even (1.0)
      {0x3f803000, 0x3c02},                       // 1 + 3*2^-11: tie -> even (1 + 2^-9)
      {0x3f801001, 0x3c01},                       // just above the tie
      {0x3f800fff, 0x3c00},                       // just below
      {0x38800000, 0x0400},                       // 2^-14
      {0x33800000, 0x0001},                       // 2^-24
      {0x33000000, 0x0000},                       // 2^-25: tie -> even (0)
      {0x33000001, 0x0001},                       // just above 2^-25
      {0x33c00000, 0x0002},                       // 1.5 * 2^-24: tie -> even (2)
      {0x38000000, 0x0200},                       // 2^-15
      {0x387fe000, 0x0400},                       // (1023.5) * 2^-24: tie -> 1024 = 2^-14
      {0x387fa000, 0x03fe},                       // 1022.5 * 2^-24: tie -> even 1022
      {0x00000001, 0x0000}, {0x80000001, 0x8000}, // f32 subnormals flush to signed zero
      {0x7f800000, 0x7c00}, {0xff800000, 0xfc00}, // +-Inf
      {0x7fc00000, 0x7e00}, {0xffc00000, 0xfe00}, // quiet NaN
      {0x7f800001, 0x7e00},                       // signalling NaN, low payload: stays NaN
      {0x7fbfe000, 0x7fff},                       // payload's top bits kept, made quiet
  };
  for (auto c : cases)
    EXPECT_EQ(c.h, memra_f32_to_fp16(f_of(c.f))) << std::hex << "f=0x" << c.f;
}

// Every fp16 value: decodes to the value of the formula, and encodes back to itself.
TEST(Fp16, ExhaustiveAgainstFormula) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = memra_fp16_to_f32((uint16_t)h);
    const int e = (h >> 10) & 31, m = h & 1023;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got) && std::signbit(got) == (sign < 0)) << h;
        EXPECT_EQ(h, memra_f32_to_fp16(got)) << h;
      } else {
        EXPECT_TRUE(std::isnan(got)) << h;
        EXPECT_TRUE(half_is_nan(memra_f32_to_fp16(got))) << h;
      }
      continue;
    }
    const double want =
        sign * (e == 0 ? std::ldexp((double)m, -24) : std::ldexp(1024.0 + m, e - 25));
    ASSERT_EQ(want, (double)got) << "h=" << h;
    ASSERT_EQ(std::signbit(want), std::signbit(got)) << "h=" << h;
    ASSERT_EQ(h, memra_f32_to_fp16(got)) << "h=" << h;
  }
}

// Random f32 bit patterns (all exponents, so overflow, subnormal and tie cases occur)
// plus values near fp16 rounding ties, against the compiler's float -> _Float16.
TEST(Fp16, RandomAgainstCompiler) {
  std::mt19937 rng(4242);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = any(rng);
    if (i & 1)
      u = (u & 0x8000ffffu) | ((0x33000000u + (u % 0x14800000u)) & 0x7fff0000u); // fp16 range
    if (i % 4 == 2) u = (u & ~0x1fffu) | 0x1000u; // exactly halfway between two fp16 values
    const float f = f_of(u);
    if (std::isnan(f)) {
      EXPECT_TRUE(half_is_nan(memra_f32_to_fp16(f)));
      continue;
    }
    _Float16 ref = (_Float16)f;
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    ASSERT_EQ(want, memra_f32_to_fp16(f)) << std::hex << "f=0x" << u;
  }
}

TEST(Bf16, HandPicked) {
  struct {
    uint32_t f;
    uint16_t h;
  } to[] = {
      {0x3f800000, 0x3f80}, {0xc0490fdb, 0xc049}, // 1, -pi
      {0x3f808000, 0x3f80},                       // tie -> even (down)
      {0x3f818000, 0x3f82},                       // tie -> even (up)
      {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80}, // either side of a tie
      {0x7f7fffff, 0x7f80},                       // FLT_MAX rounds to Inf
      {0x7f7f7fff, 0x7f7f},                       // just below that tie: stays finite
      {0x7f800000, 0x7f80}, {0xff800000, 0xff80}, // +-Inf
      {0x7fc00000, 0x7fc0}, {0xffc00000, 0xffc0}, // quiet NaN
      {0x7f800001, 0x7fc0},                       // NaN that rounding would make Inf
      {0x7fffffff, 0x7fff},                       // NaN that rounding would carry out
      {0x00000001, 0x0000}, {0x00008000, 0x0000}, // subnormal tie -> even 0
      {0x00018000, 0x0002}, {0x80000000, 0x8000},
  };
  for (auto c : to)
    EXPECT_EQ(c.h, memra_f32_to_bf16(f_of(c.f))) << std::hex << "f=0x" << c.f;
  EXPECT_EQ(0x3f800000u, bits_of(memra_bf16_to_f32(0x3f80)));
  EXPECT_EQ(0x00010000u, bits_of(memra_bf16_to_f32(0x0001))); // subnormal
  EXPECT_EQ(0xff800000u, bits_of(memra_bf16_to_f32(0xff80)));
  EXPECT_EQ(0x7f810000u, bits_of(memra_bf16_to_f32(0x7f81))); // NaN payload kept
}

// Every bf16 value round-trips; random floats land on one of their two bf16 neighbours,
// the nearer one (ties to even), computed in double.
TEST(Bf16, ExhaustiveAndRandom) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = memra_bf16_to_f32((uint16_t)h);
    if (bf16_is_nan((uint16_t)h)) {
      EXPECT_TRUE(std::isnan(f) && bf16_is_nan(memra_f32_to_bf16(f))) << h;
      continue;
    }
    ASSERT_EQ(h, memra_f32_to_bf16(f)) << h;
  }
  std::mt19937 rng(17);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t u = any(rng) & 0x7fffffffu;
    if (u >= 0x7f800000u) continue;
    const uint16_t got = memra_f32_to_bf16(f_of(u));
    const uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u; // neighbours (hi may be Inf)
    // Past the largest finite bf16, IEEE rounds as if the next value were 2^128 (= Inf).
    const double vhi = hi == 0x7f800000u ? std::ldexp(1.0, 128) : (double)f_of(hi);
    const double dlo = (double)f_of(u) - f_of(lo), dhi = vhi - f_of(u);
    uint32_t want = dlo < dhi ? lo : dhi < dlo ? hi : (((lo >> 16) & 1) ? hi : lo);
    ASSERT_EQ(want >> 16, got) << std::hex << "f=0x" << u;
  }
}
