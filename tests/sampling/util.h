// util.h — helpers for the sampling / FP8 tests: the CPU plugin opened through its entry
// point and device tensors filled from and read back to host vectors.
#ifndef MEMRA_TESTS_SAMPLING_UTIL_H
#define MEMRA_TESTS_SAMPLING_UTIL_H

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cpu/cpu_test_util.h"

namespace samptest {

// The CPU plugin opened through its entry point (shared with tests/cpu).
using Cpu = cputest::Cpu;

// A packed [ne1, ne0] tensor of `type` in its own buffer.
struct Dev {
  Cpu *cpu;
  memra_buf *buf = nullptr;
  memra_tensor t{};
  Dev(Cpu &c, int32_t type, int64_t ne0, int64_t ne1) : cpu(&c) {
    uint64_t row = memra_type_row_bytes(type, ne0), bytes = row * (uint64_t)ne1 + 64;
    EXPECT_EQ(MEMRA_OK, c.vt->buf_alloc(c.be, bytes, &buf)) << c.err();
    std::vector<uint8_t> junk(bytes, 0x5a); // never zero-initialized
    EXPECT_EQ(MEMRA_OK, c.vt->buf_upload(c.be, buf, 0, junk.data(), bytes));
    t.buf = buf;
    t.type = type;
    t.ne0 = ne0;
    t.ne1 = ne1;
    t.nb1 = row;
  }
  ~Dev() {
    if (buf) cpu->vt->buf_free(cpu->be, buf);
  }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  uint64_t bytes() const { return t.nb1 * (uint64_t)t.ne1; }
  template <typename T> void put(const std::vector<T> &v) {
    ASSERT_EQ(v.size() * sizeof(T), bytes());
    ASSERT_EQ(MEMRA_OK, cpu->vt->buf_upload(cpu->be, buf, 0, v.data(), bytes()));
  }
  template <typename T> std::vector<T> get() const {
    std::vector<T> v(bytes() / sizeof(T));
    EXPECT_EQ(MEMRA_OK, cpu->vt->buf_download(cpu->be, buf, 0, v.data(), bytes()));
    return v;
  }
};

} // namespace samptest

#endif
