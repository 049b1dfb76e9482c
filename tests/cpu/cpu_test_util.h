// cpu_test_util.h — shared helpers for the CPU plugin tests: open the plugin through
// its entry point, device tensors with guard bytes, seeded random data, and the error
// measure every test states its tolerance in (relative L2 error vs a double reference).
#ifndef MEMRA_TESTS_CPU_TEST_UTIL_H
#define MEMRA_TESTS_CPU_TEST_UTIL_H

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "plugins/cpu/cpu_plugin.h"
#include "plugins/include/memra_plugin.h"
#include "plugins/quant/quant.h"
}

namespace cputest {

constexpr uint8_t kGuard = 0xA5;
constexpr uint64_t kFront = 64; // bytes before each view, guarded
constexpr uint64_t kBack = 192; // bytes after each view, guarded

// One opened backend.
struct Cpu {
  const memra_backend_vt *vt = nullptr;
  memra_backend *be = nullptr;
  explicit Cpu(int n_threads = 2) {
    memra_open_params p = {sizeof(memra_open_params), n_threads, 0};
    char err[256] = "";
    vt = memra_plugin_open(&p, &be, err, sizeof err);
    EXPECT_NE(vt, nullptr) << err;
  }
  ~Cpu() {
    if (vt) vt->close(be);
  }
  Cpu(const Cpu &) = delete;
  Cpu &operator=(const Cpu &) = delete;
  std::string err() const { return vt->last_error(be); }
};

// A device buffer holding one 2-D view [ne1, ne0] of `type` (rows packed unless
// row_pad adds bytes between rows), with guard bytes before, between and after.
struct Dev {
  Cpu *cpu;
  memra_buf *buf = nullptr;
  memra_tensor t{};
  uint64_t total = 0;
  std::vector<uint8_t> shadow; // what the guards and gaps must still hold

  Dev(Cpu &c, int32_t type, int64_t ne0, int64_t ne1, uint64_t row_pad = 0) : cpu(&c) {
    uint64_t row = memra_type_row_bytes(type, ne0);
    uint64_t nb1 = row + row_pad;
    total = kFront + (ne1 > 0 ? (uint64_t)(ne1 - 1) * nb1 + row : 0) + kBack;
    EXPECT_EQ(MEMRA_OK, c.vt->buf_alloc(c.be, total, &buf)) << c.err();
    shadow.assign(total, kGuard);
    EXPECT_EQ(MEMRA_OK, c.vt->buf_upload(c.be, buf, 0, shadow.data(), total));
    t.buf = buf;
    t.offset = kFront;
    t.type = type;
    t.ne0 = ne0;
    t.ne1 = ne1;
    t.nb1 = nb1;
  }
  ~Dev() {
    if (buf) cpu->vt->buf_free(cpu->be, buf);
  }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;

  uint64_t row_bytes() const { return memra_type_row_bytes(t.type, t.ne0); }
  // Raw row bytes in; packed host bytes [ne1 * row_bytes].
  void put_bytes(const void *src) {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    for (int64_t r = 0; r < t.ne1; ++r) {
      uint64_t off = t.offset + r * t.nb1;
      memcpy(&shadow[off], s + r * row_bytes(), row_bytes());
      EXPECT_EQ(MEMRA_OK, cpu->vt->buf_upload(cpu->be, buf, off, s + r * row_bytes(), row_bytes()));
    }
  }
  template <typename T> void put(const std::vector<T> &v) {
    EXPECT_EQ((uint64_t)v.size() * sizeof(T), (uint64_t)t.ne1 * row_bytes());
    put_bytes(v.data());
  }
  std::vector<uint8_t> all() const {
    std::vector<uint8_t> b(total);
    EXPECT_EQ(MEMRA_OK, cpu->vt->buf_download(cpu->be, buf, 0, b.data(), total));
    return b;
  }
  template <typename T> std::vector<T> get() const {
    std::vector<uint8_t> b = all();
    std::vector<T> v((size_t)(t.ne1 * row_bytes() / sizeof(T)));
    for (int64_t r = 0; r < t.ne1; ++r)
      memcpy(reinterpret_cast<uint8_t *>(v.data()) + r * row_bytes(), &b[t.offset + r * t.nb1],
             row_bytes());
    return v;
  }
  // True when no byte outside the view's rows changed (the front and back guards and
  // the gaps between padded rows).
  bool guards_ok() const {
    std::vector<uint8_t> b = all();
    for (uint64_t i = 0; i < total; ++i) {
      bool inside = false;
      if (i >= t.offset && t.ne1 > 0) {
        uint64_t rel = i - t.offset, r = rel / t.nb1;
        inside = r < (uint64_t)t.ne1 && rel % t.nb1 < row_bytes();
      }
      if (!inside && b[i] != shadow[i]) return false;
    }
    return true;
  }
};

inline std::vector<float> randf(std::mt19937 &g, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(g);
  return v;
}

// ||got - want|| / ||want|| in double; the measure every tolerance below is stated in.
inline double rel_l2(const std::vector<float> &got, const std::vector<double> &want) {
  double num = 0, den = 0;
  if (got.size() != want.size()) return INFINITY;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    double d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline bool bits_equal(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace cputest

#endif
