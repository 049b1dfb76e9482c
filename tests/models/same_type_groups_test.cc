// memra_blk_same_type_groups: how a decode step fuses the layer's projections sharing x into
// matmul_n calls (ABI 1.3). Weights group by type and row width, groups numbered in order of
// their first member: Q4_K_M's q, k (Q4_K) with v (Q6_K) apart is two calls, not three.
#include <gtest/gtest.h>

extern "C" {
#include "core/models/blocks.h"
}

namespace {
memra_tensor weight(int32_t type, int64_t ne0) {
  memra_tensor t = {};
  t.type = type;
  t.ne0 = ne0;
  t.ne1 = 1031;
  return t;
}
} // namespace

TEST(SameTypeGroups, Q4KMLayerFusesQAndKAndLeavesV) {
  const memra_tensor w[3] = {weight(MEMRA_TYPE_Q4_K, 4096), weight(MEMRA_TYPE_Q4_K, 4096),
                             weight(MEMRA_TYPE_Q6_K, 4096)};
  int g[3] = {7, 7, 7};
  EXPECT_EQ(2, memra_blk_same_type_groups(w, 3, g));
  EXPECT_EQ(0, g[0]);
  EXPECT_EQ(0, g[1]);
  EXPECT_EQ(1, g[2]);
}

TEST(SameTypeGroups, OneTypeIsOneGroup) {
  const memra_tensor w[3] = {weight(MEMRA_TYPE_F16, 576), weight(MEMRA_TYPE_F16, 576),
                             weight(MEMRA_TYPE_F16, 576)};
  int g[3];
  EXPECT_EQ(1, memra_blk_same_type_groups(w, 3, g));
  EXPECT_EQ(0, g[0] + g[1] + g[2]);
}

TEST(SameTypeGroups, GroupsNeedNotBeContiguous) {
  const memra_tensor w[3] = {weight(MEMRA_TYPE_Q8_0, 896), weight(MEMRA_TYPE_Q4_K, 896),
                             weight(MEMRA_TYPE_Q8_0, 896)};
  int g[3];
  EXPECT_EQ(2, memra_blk_same_type_groups(w, 3, g));
  EXPECT_EQ(0, g[0]);
  EXPECT_EQ(1, g[1]);
  EXPECT_EQ(0, g[2]);
}

TEST(SameTypeGroups, WidthsMustMatch) {
  const memra_tensor w[2] = {weight(MEMRA_TYPE_Q4_K, 4096), weight(MEMRA_TYPE_Q4_K, 14336)};
  int g[2];
  EXPECT_EQ(2, memra_blk_same_type_groups(w, 2, g));
  EXPECT_EQ(0, g[0]);
  EXPECT_EQ(1, g[1]);
}
