// quant_test_util.h — shared by the tests of plugins/quant: the type list, seeded random
// blocks and fixture files.
#ifndef MEMRA_TESTS_QUANT_UTIL_H
#define MEMRA_TESTS_QUANT_UTIL_H

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "plugins/include/memra_types.h"
#include "plugins/quant/quant.h"
}

namespace memra_test {

// The 13 types quant.h promises, with the byte offsets of their fp16 scale fields.
struct QType {
  int32_t type;
  std::vector<int> half_offsets;
};

inline const std::vector<QType> &all_types() {
  static const std::vector<QType> t = {
      {MEMRA_TYPE_F32, {}},     {MEMRA_TYPE_F16, {}},      {MEMRA_TYPE_BF16, {}},
      {MEMRA_TYPE_Q8_0, {0}},   {MEMRA_TYPE_Q4_0, {0}},    {MEMRA_TYPE_Q4_1, {0, 2}},
      {MEMRA_TYPE_Q5_0, {0}},   {MEMRA_TYPE_Q5_1, {0, 2}}, {MEMRA_TYPE_Q2_K, {80, 82}},
      {MEMRA_TYPE_Q3_K, {108}}, {MEMRA_TYPE_Q4_K, {0, 2}}, {MEMRA_TYPE_Q5_K, {0, 2}},
      {MEMRA_TYPE_Q6_K, {208}},
  };
  return t;
}

inline std::string type_name(int32_t t) { return memra_type_info(t).name; }

// A random fp16 value of magnitude in [2^lo, 2^hi), either sign.
inline uint16_t random_half(std::mt19937 &rng, int lo, int hi) {
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(lo, hi - 1), sign(0, 1);
  float v = std::ldexp(mant(rng), ex(rng)) * (sign(rng) ? -1.0f : 1.0f);
  return memra_f32_to_fp16(v);
}

// nblocks random blocks of a quantized type: random bytes, fp16 scales finite and in
// [2^-10, 2^-1) so values and products stay far from overflow and underflow.
inline std::vector<uint8_t> random_blocks(const QType &q, int64_t nblocks, std::mt19937 &rng) {
  const memra_type_traits tr = memra_type_info(q.type);
  std::vector<uint8_t> b((size_t)(nblocks * tr.size));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto &v : b)
    v = (uint8_t)byte(rng);
  for (int64_t i = 0; i < nblocks; ++i)
    for (int off : q.half_offsets) {
      uint16_t h = random_half(rng, -10, -1);
      std::memcpy(&b[(size_t)(i * tr.size + off)], &h, 2);
    }
  return b;
}

inline std::vector<uint8_t> read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline std::vector<float> normal_floats(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto &v : x)
    v = g(rng);
  return x;
}

} // namespace memra_test

#endif
