// Shared helpers of the op tests in tests/families: the CPU plugin opened through its
// entry point, device tensors, seeded random data and the relative L2 error vs a double
// reference.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "plugins/cpu/cpu_plugin.h"
#include "plugins/include/memra_plugin.h"
#include "plugins/quant/quant.h"
}

namespace famtest {

struct Cpu {
  const memra_backend_vt *vt = nullptr;
  memra_backend *be = nullptr;
  Cpu() {
    memra_open_params p = {sizeof p, 2, 0};
    char err[256] = "";
    vt = memra_plugin_open(&p, &be, err, sizeof err);
    EXPECT_NE(vt, nullptr) << err;
  }
  ~Cpu() { vt->close(be); }
  std::string err() const { return vt->last_error(be); }
};

// One device tensor [ne1, ne0] of type, packed rows.
struct Dev {
  Cpu &c;
  memra_tensor t{};
  Dev(Cpu &cpu, int32_t type, int64_t ne0, int64_t ne1) : c(cpu) {
    t.type = type;
    t.ne0 = ne0;
    t.ne1 = ne1;
    t.nb1 = memra_type_row_bytes(type, ne0);
    EXPECT_EQ(MEMRA_OK, c.vt->buf_alloc(c.be, t.nb1 * ne1 + 64, &t.buf));
  }
  ~Dev() { c.vt->buf_free(c.be, t.buf); }
  void put(const void *src) {
    ASSERT_EQ(MEMRA_OK, c.vt->buf_upload(c.be, t.buf, 0, src, t.nb1 * t.ne1));
  }
  template <class T> std::vector<T> get() {
    std::vector<T> v(t.nb1 * t.ne1 / sizeof(T));
    EXPECT_EQ(MEMRA_OK, c.vt->buf_download(c.be, t.buf, 0, v.data(), t.nb1 * t.ne1));
    return v;
  }
};

inline std::vector<float> rnd(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(g);
  return v;
}

inline double rel_l2(const std::vector<float> &a, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

} // namespace famtest
