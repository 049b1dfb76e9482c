// dequant_fixture_test — memra_dequant_row is bit-exact with the official `gguf` Python
// package's dequantizers on random blocks (fixtures: tools/gen_quant_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/quant/quant_test_util.h"

extern "C" {
#include "plugins/quant/blocks.h"
}

using memra_test::all_types;
using memra_test::type_name;

TEST(QuantBlocks, SizesMatchTypeTable) {
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q4_0).size, (int)sizeof(memra_block_q4_0));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q4_1).size, (int)sizeof(memra_block_q4_1));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q5_0).size, (int)sizeof(memra_block_q5_0));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q5_1).size, (int)sizeof(memra_block_q5_1));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q8_0).size, (int)sizeof(memra_block_q8_0));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q8_1).size, (int)sizeof(memra_block_q8_1));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q2_K).size, (int)sizeof(memra_block_q2_K));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q3_K).size, (int)sizeof(memra_block_q3_K));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q4_K).size, (int)sizeof(memra_block_q4_K));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q5_K).size, (int)sizeof(memra_block_q5_K));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q6_K).size, (int)sizeof(memra_block_q6_K));
  EXPECT_EQ(memra_type_info(MEMRA_TYPE_Q8_K).size, (int)sizeof(memra_block_q8_K));
  EXPECT_EQ(MEMRA_QK_K, memra_type_info(MEMRA_TYPE_Q4_K).blck);
  EXPECT_EQ(MEMRA_QK4_0, memra_type_info(MEMRA_TYPE_Q4_0).blck);
}

TEST(QuantBlocks, SupportedSet) {
  int n = 0;
  for (int32_t t = 0; t < MEMRA_TYPE_COUNT; ++t)
    n += memra_quant_supported(t);
  EXPECT_EQ(13, n);
  for (const auto &q : all_types())
    EXPECT_TRUE(memra_quant_supported(q.type)) << q.type;
  EXPECT_FALSE(memra_quant_supported(MEMRA_TYPE_Q8_1));
  EXPECT_FALSE(memra_quant_supported(MEMRA_TYPE_Q8_K));
  EXPECT_FALSE(memra_quant_supported(-1));
  EXPECT_FALSE(memra_quant_supported(1000));
}

// Every type: the fixture's floats, compared as bit patterns (so -0.0 vs 0.0 counts).
TEST(QuantDequant, BitExactWithGgufPackage) {
  for (const auto &q : all_types()) {
    const std::string name = type_name(q.type);
    const std::string dir = "tests/quant/fixtures/";
    std::vector<uint8_t> blocks = memra_test::read_file(dir + name + ".blocks");
    std::vector<uint8_t> expect = memra_test::read_file(dir + name + ".f32");
    const memra_type_traits tr = memra_type_info(q.type);
    ASSERT_FALSE(blocks.empty()) << "missing fixture " << dir << name << ".blocks";
    ASSERT_EQ(0u, blocks.size() % (size_t)tr.size) << name;
    const int64_t n = (int64_t)(blocks.size() / (size_t)tr.size) * tr.blck;
    ASSERT_EQ((size_t)n * 4, expect.size()) << name;

    // A guard float after the row catches writes past n.
    std::vector<float> out((size_t)n + 1, 12345.0f);
    memra_dequant_row(q.type, blocks.data(), out.data(), n);
    EXPECT_EQ(12345.0f, out[(size_t)n]) << name << ": wrote past the row";
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; ++i) {
      uint32_t got, want;
      std::memcpy(&got, &out[(size_t)i], 4);
      std::memcpy(&want, &expect[(size_t)i * 4], 4);
      if (got != want) {
        ++bad;
        ADD_FAILURE() << name << " element " << i << " (block " << i / tr.blck << "): got 0x"
                      << std::hex << got << " want 0x" << want;
      }
    }
    // The fixture is not degenerate: it has both signs and more than a few distinct values.
    int pos = 0, neg = 0;
    for (int64_t i = 0; i < n; ++i)
      pos += out[(size_t)i] > 0, neg += out[(size_t)i] < 0;
    EXPECT_GT(pos, n / 8) << name;
    EXPECT_GT(neg, n / 8) << name;
  }
}

// Rows of several blocks decode block by block: decoding block i alone gives the same
// floats as the middle of a row (no state carried across blocks).
TEST(QuantDequant, BlocksAreIndependent) {
  std::mt19937 rng(7);
  for (const auto &q : all_types()) {
    const memra_type_traits tr = memra_type_info(q.type);
    const int64_t nb = 5;
    std::vector<uint8_t> b = memra_test::random_blocks(q, nb, rng);
    std::vector<float> row((size_t)(nb * tr.blck)), one((size_t)tr.blck);
    memra_dequant_row(q.type, b.data(), row.data(), nb * tr.blck);
    for (int64_t i = 0; i < nb; ++i) {
      memra_dequant_row(q.type, b.data() + i * tr.size, one.data(), tr.blck);
      EXPECT_EQ(0, std::memcmp(one.data(), row.data() + i * tr.blck, (size_t)tr.blck * 4))
          << type_name(q.type) << " block " << i;
    }
  }
}

TEST(QuantDequant, UnsupportedTypeGivesNaN) {
  uint8_t junk[64] = {1, 2, 3};
  float out[4] = {0, 0, 0, 0};
  memra_dequant_row(MEMRA_TYPE_I32, junk, out, 4);
  for (float v : out)
    EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(std::isnan(memra_vec_dot(MEMRA_TYPE_I32, junk, out, 4)));
}
