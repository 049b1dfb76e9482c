// Files written by the official gguf-py package (tests/gguf/make_fixtures.py): the reader
// must see exactly the values that script wrote.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "tests/gguf/gguf_test_util.h"

extern "C" {
#include "plugins/include/memra_types.h"
}

namespace {

const char *kAll = "tests/gguf/fixtures/py_all_types.gguf";
const char *kAlign64 = "tests/gguf/fixtures/py_align64.gguf";

// IEEE half -> float, written out here so the test does not share code with the library.
float half_to_float(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? std::ldexp((float)m, -24) : std::ldexp((float)(m | 1024), e - 25);
  return s ? -v : v;
}

// make_fixtures.py's pattern(): ((i * mul) % mod) / scale - shift.
double pattern(int64_t i, int64_t mul, int64_t mod, double scale, double shift) {
  return (double)((i * mul) % mod) / scale - shift;
}

class PyRef : public ::testing::Test {
protected:
  void SetUp() override {
    memra_err err = {};
    ASSERT_EQ(MEMRA_OK, memra_gguf_open(kAll, &g, &err)) << err.msg;
  }
  void TearDown() override { memra_gguf_close(g); }
  memra_gguf *g = nullptr;
};

} // namespace

TEST_F(PyRef, HeaderAndScalars) {
  EXPECT_EQ(3u, memra_gguf_version(g));
  EXPECT_EQ(32u, memra_gguf_alignment(g));
  EXPECT_EQ(28u - 1, memra_gguf_n_kv(g));
  const memra_gguf_kv *first = memra_gguf_kv_at(g, 0);
  EXPECT_TRUE(memra_str_eq(first->key, "general.architecture"));
  EXPECT_TRUE(memra_str_eq(first->v.str, "memratest"));
  auto kv = [&](const char *k) {
    const memra_gguf_kv *p = memra_gguf_kv_find(g, k);
    EXPECT_NE(nullptr, p) << k;
    return p;
  };
  EXPECT_EQ(MEMRA_GGUF_U8, kv("t.u8")->type);
  EXPECT_EQ(200u, kv("t.u8")->v.u64);
  EXPECT_EQ(MEMRA_GGUF_I8, kv("t.i8")->type);
  EXPECT_EQ(-100, kv("t.i8")->v.i64);
  EXPECT_EQ(60000u, kv("t.u16")->v.u64);
  EXPECT_EQ(-30000, kv("t.i16")->v.i64);
  EXPECT_EQ(4000000000u, kv("t.u32")->v.u64);
  EXPECT_EQ(-2000000000, kv("t.i32")->v.i64);
  EXPECT_EQ(MEMRA_GGUF_F32, kv("t.f32")->type);
  EXPECT_EQ(3.25, kv("t.f32")->v.f64);
  EXPECT_EQ((1ull << 63) + 5, kv("t.u64")->v.u64);
  EXPECT_EQ(-(1ll << 62) - 3, kv("t.i64")->v.i64);
  EXPECT_EQ(MEMRA_GGUF_F64, kv("t.f64")->type);
  EXPECT_EQ(-1.0 / 3.0, kv("t.f64")->v.f64);
  EXPECT_EQ(MEMRA_GGUF_BOOL, kv("t.bool")->type);
  EXPECT_EQ(1u, kv("t.bool")->v.u64);
  EXPECT_EQ(0u, kv("t.bool_false")->v.u64);
  memra_str s = {};
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_get_str(g, "t.str", &s, &err));
  EXPECT_EQ("h\xc3\xa9llo, GGUF\n\"quoted\"", std::string(s.ptr, s.len));
  uint32_t u = 0;
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_u32(g, "t.u8", &u, &err));
  EXPECT_EQ(200u, u);
  int64_t i = 0;
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_i64(g, "t.u64", &i, &err));
  EXPECT_STREQ("tests/gguf/fixtures/py_all_types.gguf: key 't.u64' (u64) is 9223372036854775813, "
               "does not fit i64",
               err.msg);
}

TEST_F(PyRef, Arrays) {
  auto arr = [&](const char *k, int et, uint64_t n) {
    uint64_t got = 0;
    const memra_gguf_kv *kv = nullptr;
    memra_err err = {};
    EXPECT_EQ(MEMRA_OK, memra_gguf_get_arr(g, k, et, &got, &kv, &err)) << err.msg;
    EXPECT_EQ(n, got) << k;
    return kv;
  };
  const memra_gguf_kv *a = arr("t.arr_u8", MEMRA_GGUF_U8, 7);
  const int64_t u8[] = {1, 2, 3, 255, 0, 7, 9};
  for (int j = 0; j < 7; ++j)
    EXPECT_EQ(u8[j], memra_gguf_arr_i64(a, j));
  a = arr("t.arr_i8", MEMRA_GGUF_I8, 3);
  EXPECT_EQ(-128, memra_gguf_arr_i64(a, 0));
  EXPECT_EQ(127, memra_gguf_arr_i64(a, 1));
  EXPECT_EQ(-1, memra_gguf_arr_i64(a, 2));
  a = arr("t.arr_u16", MEMRA_GGUF_U16, 3);
  EXPECT_EQ(65535, memra_gguf_arr_i64(a, 0));
  EXPECT_EQ(300, memra_gguf_arr_i64(a, 2));
  a = arr("t.arr_i16", MEMRA_GGUF_I16, 3);
  EXPECT_EQ(-32768, memra_gguf_arr_i64(a, 0));
  EXPECT_EQ(-5, memra_gguf_arr_i64(a, 2));
  a = arr("t.arr_u32", MEMRA_GGUF_U32, 2);
  EXPECT_EQ(4294967295, memra_gguf_arr_i64(a, 0));
  a = arr("t.arr_i32", MEMRA_GGUF_I32, 31);
  for (int j = 0; j < 31; ++j)
    EXPECT_EQ(j * 7 - 50, memra_gguf_arr_i64(a, j));
  a = arr("t.arr_f32", MEMRA_GGUF_F32, 3);
  EXPECT_EQ(0.5, memra_gguf_arr_f64(a, 0));
  EXPECT_EQ(-2.75, memra_gguf_arr_f64(a, 1));
  EXPECT_EQ((double)1e-3f, memra_gguf_arr_f64(a, 2));
  a = arr("t.arr_u64", MEMRA_GGUF_U64, 2);
  EXPECT_EQ(UINT64_MAX, (uint64_t)memra_gguf_arr_i64(a, 0));
  EXPECT_EQ(3, memra_gguf_arr_i64(a, 1));
  a = arr("t.arr_i64", MEMRA_GGUF_I64, 3);
  EXPECT_EQ(INT64_MIN, memra_gguf_arr_i64(a, 0));
  EXPECT_EQ(INT64_MAX, memra_gguf_arr_i64(a, 1));
  EXPECT_EQ(11, memra_gguf_arr_i64(a, 2));
  a = arr("t.arr_f64", MEMRA_GGUF_F64, 2);
  EXPECT_EQ(0.1, memra_gguf_arr_f64(a, 0));
  EXPECT_EQ(-1e300, memra_gguf_arr_f64(a, 1));
  a = arr("t.arr_bool", MEMRA_GGUF_BOOL, 4);
  const int64_t bools[] = {1, 0, 1, 1};
  for (int j = 0; j < 4; ++j)
    EXPECT_EQ(bools[j], memra_gguf_arr_i64(a, j));
  a = arr("t.arr_str", MEMRA_GGUF_STRING, 4);
  const char *strs[] = {"alpha", "", "\xce\xb3\xce\xac\xce\xbc\xce\xbc\xce\xb1", "tab\there"};
  for (int j = 0; j < 4; ++j) {
    memra_str s = memra_gguf_arr_str(g, a, j);
    EXPECT_EQ(std::string(strs[j]), std::string(s.ptr, s.len));
  }
  a = arr("tokenizer.ggml.tokens", MEMRA_GGUF_STRING, 1000);
  for (int j = 999; j >= 0; j -= 37) {
    memra_str s = memra_gguf_arr_str(g, a, j);
    EXPECT_EQ("tok" + std::to_string(j), std::string(s.ptr, s.len));
  }
}

TEST_F(PyRef, TensorsHoldTheScriptsValues) {
  ASSERT_EQ(5u, memra_gguf_n_tensors(g));
  EXPECT_EQ(15232u, memra_gguf_data_offset(g));
  const char *names[] = {"f32.weight", "f16.weight", "i32.vec", "q8.weight", "f32.cube"};
  const uint64_t offsets[] = {0, 448, 544, 608, 768};
  for (int i = 0; i < 5; ++i) {
    const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
    EXPECT_TRUE(memra_str_eq(t->name, names[i])) << i;
    EXPECT_EQ(offsets[i], t->offset) << names[i];
  }
  const memra_gguf_tensor *t = memra_gguf_tensor_find(g, "f32.weight");
  ASSERT_NE(nullptr, t);
  EXPECT_EQ(MEMRA_TYPE_F32, t->type);
  EXPECT_EQ(2, t->n_dims);
  EXPECT_EQ(37, t->ne[0]);
  EXPECT_EQ(3, t->ne[1]);
  EXPECT_EQ(1, t->ne[2]);
  EXPECT_EQ(444u, t->nbytes);
  for (int i = 0; i < 111; ++i) {
    float f;
    memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
    ASSERT_EQ((float)pattern(i, 7919, 1000, 64, 7), f) << i;
  }
  t = memra_gguf_tensor_find(g, "f16.weight");
  ASSERT_NE(nullptr, t);
  EXPECT_EQ(MEMRA_TYPE_F16, t->type);
  EXPECT_EQ(9, t->ne[0]);
  EXPECT_EQ(5, t->ne[1]);
  for (int i = 0; i < 45; ++i) {
    uint16_t h;
    memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
    ASSERT_EQ((float)pattern(i, 31, 2048, 128, 8), half_to_float(h)) << i;
  }
  t = memra_gguf_tensor_find(g, "i32.vec");
  ASSERT_NE(nullptr, t);
  EXPECT_EQ(MEMRA_TYPE_I32, t->type);
  EXPECT_EQ(1, t->n_dims);
  EXPECT_EQ(13, t->ne[0]);
  for (int i = 0; i < 13; ++i) {
    int32_t v;
    memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
    ASSERT_EQ(i * -3 + 5, v);
  }
  t = memra_gguf_tensor_find(g, "q8.weight");
  ASSERT_NE(nullptr, t);
  EXPECT_EQ(MEMRA_TYPE_Q8_0, t->type);
  EXPECT_EQ(64, t->ne[0]);
  EXPECT_EQ(2, t->ne[1]);
  EXPECT_EQ(136u, t->nbytes);
  for (int i = 0; i < 136; ++i)
    ASSERT_EQ(i * 37 % 251, ((const uint8_t *)t->data)[i]) << i;
  t = memra_gguf_tensor_find(g, "f32.cube");
  ASSERT_NE(nullptr, t);
  EXPECT_EQ(3, t->n_dims);
  EXPECT_EQ(5, t->ne[0]);
  EXPECT_EQ(3, t->ne[1]);
  EXPECT_EQ(2, t->ne[2]);
  for (int i = 0; i < 30; ++i) {
    float f;
    memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
    ASSERT_EQ((float)pattern(i, 11, 97, 4, 3), f) << i;
  }
}

TEST(PyRefAlign, CustomAlignment64) {
  memra_gguf *g = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_open(kAlign64, &g, &err)) << err.msg;
  EXPECT_EQ(64u, memra_gguf_alignment(g));
  EXPECT_EQ(256u, memra_gguf_data_offset(g));
  uint32_t u = 0;
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_u32(g, "t.u32", &u, &err));
  EXPECT_EQ(123456u, u);
  const memra_gguf_tensor *a = memra_gguf_tensor_find(g, "a"), *b = memra_gguf_tensor_find(g, "b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(0u, a->offset);
  EXPECT_EQ(128u, b->offset);
  EXPECT_EQ(17, a->ne[0]);
  for (int i = 0; i < 17; ++i) {
    float f;
    memcpy(&f, (const uint8_t *)a->data + 4 * i, 4);
    ASSERT_EQ((float)pattern(i, 5, 61, 8, 2), f);
  }
  for (int i = 0; i < 12; ++i) {
    float f;
    memcpy(&f, (const uint8_t *)b->data + 4 * i, 4);
    ASSERT_EQ((float)pattern(i, 3, 29, 2, 1), f);
  }
  memra_gguf_close(g);
}

// Truncating a real file anywhere before the end of its last tensor is an error.
TEST(PyRefAlign, EveryTruncationOfTheRealFileFails) {
  std::vector<uint8_t> bytes = read_file(kAll);
  ASSERT_EQ(16128u, bytes.size());
  const uint64_t end = 15232 + 768 + 120; // data offset + last tensor's offset + bytes
  for (size_t len = 0; len < end; ++len) {
    memra_gguf *g = nullptr;
    memra_err err = {};
    ASSERT_EQ(MEMRA_E_FORMAT, gguf_open_exact(bytes, len, &g, &err)) << "length " << len;
    ASSERT_NE(0, err.msg[0]);
  }
  memra_gguf *g = nullptr;
  memra_err err = {};
  EXPECT_EQ(MEMRA_OK, gguf_open_exact(bytes, end, &g, &err)) << err.msg;
}
