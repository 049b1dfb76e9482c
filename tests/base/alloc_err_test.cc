// The core's allocator fault injection and error formatting.
extern "C" {
#include "core/base/alloc.h"
#include "core/base/err.h"
}
#include <gtest/gtest.h>

TEST(Alloc, FailsExactlyTheNthAllocation) {
  long live0 = memra_test_live_allocs();
  memra_test_fail_alloc_at(3);
  void *a = memra_malloc(7), *b = memra_malloc(9), *c = memra_malloc(11), *d = memra_malloc(5);
  memra_test_fail_alloc_at(0);
  EXPECT_NE(nullptr, a);
  EXPECT_NE(nullptr, b);
  EXPECT_EQ(nullptr, c);
  EXPECT_NE(nullptr, d);
  EXPECT_EQ(live0 + 3, memra_test_live_allocs());
  memra_free(a), memra_free(b), memra_free(d);
  EXPECT_EQ(live0, memra_test_live_allocs());
}

TEST(Alloc, CallocRejectsOverflow) {
  EXPECT_EQ(nullptr, memra_calloc((size_t)1 << 40, (size_t)1 << 40));
}

TEST(Err, FormatsAndReturnsStatus) {
  memra_err e = {};
  EXPECT_EQ(MEMRA_E_FORMAT, memra_errf(&e, MEMRA_E_FORMAT, "%s: bad %d", "x.gguf", 42));
  EXPECT_STREQ("x.gguf: bad 42", e.msg);
  EXPECT_EQ(MEMRA_E_IO, memra_errf(nullptr, MEMRA_E_IO, "ignored"));
  EXPECT_STREQ("malformed file", memra_status_str(MEMRA_E_FORMAT));
}

TEST(Err, ControlCharactersInArgumentsKeepOneLine) {
  memra_err e = {};
  EXPECT_EQ(MEMRA_E_INVALID,
            memra_errf(&e, MEMRA_E_INVALID, "unknown option '%s' (%s)", "--a\nb\r\tc", "\x7f!"));
  EXPECT_STREQ("unknown option '--a b  c' ( !)", e.msg);
  memra_errf(&e, MEMRA_E_INVALID, "caf\xc3\xa9"); // UTF-8 stays as it is
  EXPECT_STREQ("caf\xc3\xa9", e.msg);
}
