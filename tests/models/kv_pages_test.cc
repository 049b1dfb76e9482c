// Paged KV bookkeeping: pages are handed out, returned and never shared.
extern "C" {
#include "core/sched/kv_pages.h"
}
#include <gtest/gtest.h>

#include <set>

TEST(KvPages, ReserveReleaseAndExhaustion) {
  memra_kv_pages kv;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_kv_pages_init(&kv, 7, 5, 4, 3, &err));
  ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&kv, 0, 11, &err)); // 3 blocks of 5
  ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&kv, 2, 4, &err));  // 1 block
  EXPECT_EQ(3, kv.n_blocks[0]);
  EXPECT_EQ(1, kv.n_blocks[2]);
  EXPECT_EQ(4, memra_kv_pages_in_use(&kv));
  std::set<int32_t> pages;
  for (int b = 0; b < 3; ++b)
    pages.insert(kv.tables[0 * 4 + b]);
  pages.insert(kv.tables[2 * 4 + 0]);
  EXPECT_EQ(4u, pages.size()) << "a page was handed out twice";
  // 4 more pages are needed for 20 positions of sequence 1, only 3 are free.
  EXPECT_EQ(MEMRA_E_OOM, memra_kv_pages_reserve(&kv, 1, 20, &err));
  EXPECT_STREQ("kv cache full: need 4 more pages, 3 free", err.msg);
  EXPECT_EQ(0, kv.n_blocks[1]); // nothing changed
  EXPECT_EQ(MEMRA_E_OOM, memra_kv_pages_reserve(&kv, 1, 21, &err));
  EXPECT_STREQ("context full: 21 positions exceed the context of 20", err.msg);
  memra_kv_pages_release(&kv, 0);
  EXPECT_EQ(1, memra_kv_pages_in_use(&kv));
  ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&kv, 1, 20, &err)) << err.msg;
  EXPECT_EQ(5, memra_kv_pages_in_use(&kv));
  EXPECT_EQ(MEMRA_E_INVALID, memra_kv_pages_reserve(&kv, 3, 1, &err));
  memra_kv_pages_free(&kv);
}
