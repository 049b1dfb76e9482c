// Writer -> reader round trips: every value type, arrays of every type with odd counts,
// seeded random values, v2 and v3, several alignments; getters and their messages; the
// atomic file write.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/gguf/gguf_test_util.h"

extern "C" {
#include "plugins/include/memra_types.h"
}

namespace {

struct Owned {
  uint8_t *bytes = nullptr;
  uint64_t size = 0;
  memra_gguf *g = nullptr;
  ~Owned() {
    memra_gguf_close(g);
    memra_free(bytes);
  }
};

// Serializes w to memory and opens it; fails the test on any error.
void write_and_open(memra_gguf_writer *w, Owned *o) {
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(w, &o->bytes, &o->size, &err)) << err.msg;
  ASSERT_EQ(MEMRA_OK, memra_gguf_open_memory(o->bytes, o->size, "rt.gguf", &o->g, &err)) << err.msg;
}

int elem_size(int t) {
  switch (t) {
  case MEMRA_GGUF_U8:
  case MEMRA_GGUF_I8:
  case MEMRA_GGUF_BOOL: return 1;
  case MEMRA_GGUF_U16:
  case MEMRA_GGUF_I16: return 2;
  case MEMRA_GGUF_U32:
  case MEMRA_GGUF_I32:
  case MEMRA_GGUF_F32: return 4;
  default: return 8;
  }
}

const int kNumeric[] = {MEMRA_GGUF_U8,  MEMRA_GGUF_I8,  MEMRA_GGUF_U16, MEMRA_GGUF_I16,
                        MEMRA_GGUF_U32, MEMRA_GGUF_I32, MEMRA_GGUF_F32, MEMRA_GGUF_BOOL,
                        MEMRA_GGUF_U64, MEMRA_GGUF_I64, MEMRA_GGUF_F64};

// Random bytes for one element of type t (floats finite and not all zero; bools 0/1).
std::vector<uint8_t> random_elem(std::mt19937_64 &rng, int t) {
  std::vector<uint8_t> v(elem_size(t));
  uint64_t r = rng() | 1; // never all zero
  if (t == MEMRA_GGUF_F32) {
    float f = std::ldexp((float)(int32_t)(r >> 40) + 0.5f, (int)(r % 40) - 20);
    memcpy(v.data(), &f, 4);
  } else if (t == MEMRA_GGUF_F64) {
    double d = std::ldexp((double)(int64_t)r + 0.25, (int)(r % 200) - 100);
    memcpy(v.data(), &d, 8);
  } else if (t == MEMRA_GGUF_BOOL) {
    v[0] = (r >> 7) & 1;
  } else {
    memcpy(v.data(), &r, v.size());
  }
  return v;
}

// Widens p the way the format defines (independent of the reader's code).
void widen_check(memra_gguf_kv *kv, int t, const uint8_t *p) {
  kv->type = t;
  uint64_t u = 0;
  memcpy(&u, p, elem_size(t));
  switch (t) {
  case MEMRA_GGUF_I8: kv->v.i64 = (int8_t)u; break;
  case MEMRA_GGUF_I16: kv->v.i64 = (int16_t)u; break;
  case MEMRA_GGUF_I32: kv->v.i64 = (int32_t)u; break;
  case MEMRA_GGUF_I64: kv->v.i64 = (int64_t)u; break;
  default: kv->v.u64 = u;
  }
}

// What the reader should widen the element at p to, as (u64|i64|f64 bits).
void expect_scalar(const memra_gguf_kv *kv, int t, const uint8_t *p) {
  ASSERT_EQ(t, kv->type);
  switch (t) {
  case MEMRA_GGUF_U8: EXPECT_EQ(p[0], kv->v.u64); break;
  case MEMRA_GGUF_BOOL: EXPECT_EQ(p[0], kv->v.u64); break;
  case MEMRA_GGUF_I8: EXPECT_EQ((int8_t)p[0], kv->v.i64); break;
  case MEMRA_GGUF_U16: {
    uint16_t x;
    memcpy(&x, p, 2);
    EXPECT_EQ(x, kv->v.u64);
  } break;
  case MEMRA_GGUF_I16: {
    int16_t x;
    memcpy(&x, p, 2);
    EXPECT_EQ(x, kv->v.i64);
  } break;
  case MEMRA_GGUF_U32: {
    uint32_t x;
    memcpy(&x, p, 4);
    EXPECT_EQ(x, kv->v.u64);
  } break;
  case MEMRA_GGUF_I32: {
    int32_t x;
    memcpy(&x, p, 4);
    EXPECT_EQ(x, kv->v.i64);
  } break;
  case MEMRA_GGUF_F32: {
    float x;
    memcpy(&x, p, 4);
    EXPECT_EQ((double)x, kv->v.f64);
  } break;
  case MEMRA_GGUF_U64: {
    uint64_t x;
    memcpy(&x, p, 8);
    EXPECT_EQ(x, kv->v.u64);
  } break;
  case MEMRA_GGUF_I64: {
    int64_t x;
    memcpy(&x, p, 8);
    EXPECT_EQ(x, kv->v.i64);
  } break;
  case MEMRA_GGUF_F64: {
    double x;
    memcpy(&x, p, 8);
    EXPECT_EQ(x, kv->v.f64);
  } break;
  }
}

// The element widened the way arr_i64 / arr_f64 document.
void expect_elem(const memra_gguf_kv *kv, uint64_t i, int t, const uint8_t *p) {
  switch (t) {
  case MEMRA_GGUF_F32: {
    float x;
    memcpy(&x, p, 4);
    EXPECT_EQ((double)x, memra_gguf_arr_f64(kv, i));
  } break;
  case MEMRA_GGUF_F64: {
    double x;
    memcpy(&x, p, 8);
    EXPECT_EQ(x, memra_gguf_arr_f64(kv, i));
  } break;
  default: {
    memra_gguf_kv one = {};
    widen_check(&one, t, p);
    if (t == MEMRA_GGUF_U64 || t == MEMRA_GGUF_U8 || t == MEMRA_GGUF_U16 || t == MEMRA_GGUF_U32 ||
        t == MEMRA_GGUF_BOOL)
      EXPECT_EQ(one.v.u64, (uint64_t)memra_gguf_arr_i64(kv, i)) << "elem " << i;
    else
      EXPECT_EQ(one.v.i64, memra_gguf_arr_i64(kv, i)) << "elem " << i;
  }
  }
}

} // namespace
class RoundTrip : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t>> {};

TEST_P(RoundTrip, EveryTypeArraysAndTensors) {
  uint32_t version = std::get<0>(GetParam()), align = std::get<1>(GetParam());
  std::mt19937_64 rng(1000 * version + align);
  memra_gguf_writer *w = memra_gguf_writer_new(align);
  ASSERT_NE(nullptr, w);
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_version(w, version));

  // Scalars of every type, then arrays of every numeric type with odd counts.
  std::vector<std::vector<uint8_t>> scalars;
  for (int t : kNumeric) {
    scalars.push_back(random_elem(rng, t));
    std::string key = std::string("s.") + memra_gguf_vtype_name(t);
    ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_val(w, key.c_str(), t, scalars.back().data()))
        << memra_gguf_writer_error(w);
  }
  const uint64_t counts[] = {1, 31, 257, 0, 3, 4097, 7, 2, 5, 33, 1};
  std::vector<std::vector<uint8_t>> arrays;
  for (size_t k = 0; k < std::size(kNumeric); ++k) {
    int t = kNumeric[k];
    std::vector<uint8_t> a;
    for (uint64_t i = 0; i < counts[k]; ++i) {
      auto e = random_elem(rng, t);
      a.insert(a.end(), e.begin(), e.end());
    }
    arrays.push_back(a);
    std::string key = std::string("a.") + memra_gguf_vtype_name(t);
    ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_arr(w, key.c_str(), t, a.data(), counts[k]));
  }
  // Strings: random non-NUL bytes (UTF-8 or not), odd lengths, an empty one; a binary
  // string with NULs through set_strn.
  std::vector<std::string> strs;
  for (int i = 0; i < 301; ++i) {
    std::string s(rng() % 40, 'x');
    for (char &c : s)
      c = (char)(1 + rng() % 255);
    strs.push_back(i == 17 ? std::string() : s);
  }
  std::vector<const char *> cstrs;
  for (auto &s : strs)
    cstrs.push_back(s.c_str());
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_arr_str(w, "tokens", cstrs.data(), cstrs.size()));
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_arr(w, "few", MEMRA_GGUF_STRING, cstrs.data(), 3));
  const char bin[] = {'a', 0, 'b', '\n', (char)0xff};
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_strn(w, "bin", bin, sizeof bin));
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_str(w, "general.name", "round trip"));

  // Tensors: several block types, odd row counts, random bytes.
  struct T {
    const char *name;
    int type, n_dims;
    int64_t ne[4];
    std::vector<uint8_t> data;
  };
  std::vector<T> ts = {{"f32", MEMRA_TYPE_F32, 2, {31, 3, 1, 1}, {}},
                       {"f16", MEMRA_TYPE_F16, 1, {4097, 1, 1, 1}, {}},
                       {"q8_0", MEMRA_TYPE_Q8_0, 2, {96, 7, 1, 1}, {}},
                       {"q4_k", MEMRA_TYPE_Q4_K, 3, {256, 3, 1, 1}, {}},
                       {"bf16.4d", MEMRA_TYPE_BF16, 4, {3, 5, 1, 2}, {}},
                       {"empty", MEMRA_TYPE_F32, 2, {0, 9, 1, 1}, {}},
                       {"i8", MEMRA_TYPE_I8, 1, {1, 1, 1, 1}, {}}};
  for (auto &t : ts) {
    uint64_t nb = memra_type_row_bytes(t.type, t.ne[0]) * t.ne[1] * t.ne[2] * t.ne[3];
    t.data.resize(nb);
    for (auto &b : t.data)
      b = (uint8_t)rng();
    ASSERT_EQ(MEMRA_OK,
              memra_gguf_writer_add_tensor(w, t.name, t.type, t.n_dims, t.ne, t.data.data(), nb))
        << memra_gguf_writer_error(w);
  }

  Owned o;
  write_and_open(w, &o);
  memra_gguf_writer_free(w);
  if (HasFatalFailure()) return;
  memra_gguf *g = o.g;
  EXPECT_EQ(version, memra_gguf_version(g));
  EXPECT_EQ(align ? align : 32u, memra_gguf_alignment(g));
  EXPECT_EQ(0u, memra_gguf_data_offset(g) % memra_gguf_alignment(g));
  uint64_t extra = (align && align != 32) ? 1 : 0; // general.alignment, written first
  ASSERT_EQ(2 * std::size(kNumeric) + 4 + extra, memra_gguf_n_kv(g));
  if (extra) {
    const memra_gguf_kv *kv = memra_gguf_kv_at(g, 0);
    EXPECT_TRUE(memra_str_eq(kv->key, "general.alignment"));
    EXPECT_EQ(MEMRA_GGUF_U32, kv->type);
  }

  for (size_t k = 0; k < std::size(kNumeric); ++k) {
    int t = kNumeric[k];
    std::string key = std::string("s.") + memra_gguf_vtype_name(t);
    const memra_gguf_kv *kv = memra_gguf_kv_find(g, key.c_str());
    ASSERT_NE(nullptr, kv) << key;
    EXPECT_EQ(kv, memra_gguf_kv_at(g, k + extra)) << "file order kept";
    expect_scalar(kv, t, scalars[k].data());

    key = std::string("a.") + memra_gguf_vtype_name(t);
    uint64_t n = 0;
    const memra_gguf_kv *akv = nullptr;
    memra_err err = {};
    ASSERT_EQ(MEMRA_OK, memra_gguf_get_arr(g, key.c_str(), t, &n, &akv, &err)) << err.msg;
    ASSERT_EQ(counts[k], n) << key;
    for (uint64_t i = 0; i < n; ++i)
      expect_elem(akv, i, t, &arrays[k][i * elem_size(t)]);
    EXPECT_EQ(0, memra_gguf_arr_i64(akv, n)) << "past the end";
  }

  uint64_t n = 0;
  const memra_gguf_kv *tok = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_get_arr(g, "tokens", MEMRA_GGUF_STRING, &n, &tok, &err));
  ASSERT_EQ(strs.size(), n);
  for (uint64_t i = n; i-- > 0;) { // any order: the index is random access
    memra_str s = memra_gguf_arr_str(g, tok, i);
    ASSERT_EQ(strs[i], std::string(s.ptr, s.len)) << "string " << i;
  }
  EXPECT_EQ(0u, memra_gguf_arr_str(g, tok, n).len);
  EXPECT_TRUE(std::isnan(memra_gguf_arr_f64(tok, 0)));
  const memra_gguf_kv *few = memra_gguf_kv_find(g, "few");
  ASSERT_NE(nullptr, few);
  EXPECT_EQ(strs[2],
            std::string(memra_gguf_arr_str(g, few, 2).ptr, memra_gguf_arr_str(g, few, 2).len));
  memra_str b = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_get_str(g, "bin", &b, &err));
  EXPECT_EQ(std::string(bin, sizeof bin), std::string(b.ptr, b.len));

  ASSERT_EQ(ts.size(), memra_gguf_n_tensors(g));
  for (size_t i = 0; i < ts.size(); ++i) {
    const memra_gguf_tensor *t = memra_gguf_tensor_find(g, ts[i].name);
    ASSERT_NE(nullptr, t) << ts[i].name;
    EXPECT_EQ(t, memra_gguf_tensor_at(g, i));
    EXPECT_EQ(ts[i].type, t->type);
    EXPECT_EQ(ts[i].n_dims, t->n_dims);
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(ts[i].ne[d], t->ne[d]) << ts[i].name << " dim " << d;
    EXPECT_EQ(ts[i].data.size(), t->nbytes);
    EXPECT_EQ(0u, t->offset % memra_gguf_alignment(g));
    EXPECT_EQ((const uint8_t *)memra_gguf_base(g) + memra_gguf_data_offset(g) + t->offset, t->data);
    if (t->nbytes) {
      EXPECT_EQ(0, memcmp(ts[i].data.data(), t->data, t->nbytes)) << ts[i].name;
    }
  }
  EXPECT_EQ(nullptr, memra_gguf_tensor_find(g, "f3"));
  EXPECT_EQ(nullptr, memra_gguf_tensor_at(g, ts.size()));
  EXPECT_EQ(nullptr, memra_gguf_kv_find(g, "s.u"));
}

INSTANTIATE_TEST_SUITE_P(VersionsAlignments, RoundTrip,
                         ::testing::Combine(::testing::Values(2u, 3u),
                                            ::testing::Values(0u, 32u, 1u, 64u, 4096u)));

TEST(Writer, EmptyFileRoundTrips) {
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  Owned o;
  write_and_open(w, &o);
  memra_gguf_writer_free(w);
  ASSERT_NE(nullptr, o.g);
  EXPECT_EQ(24u, o.size);
  EXPECT_EQ(0u, memra_gguf_n_kv(o.g));
  EXPECT_EQ(0u, memra_gguf_n_tensors(o.g));
}

TEST(Writer, RejectsBadInputWithMessages) {
  EXPECT_EQ(nullptr, memra_gguf_writer_new(48));
  memra_gguf_writer *w = memra_gguf_writer_new(64);
  ASSERT_NE(nullptr, w);
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_set_u32(w, "general.alignment", 64));
  EXPECT_STREQ("gguf writer: duplicate key 'general.alignment'", memra_gguf_writer_error(w));
  EXPECT_EQ(MEMRA_OK, memra_gguf_writer_set_i32(w, "a", -5));
  EXPECT_STREQ("", memra_gguf_writer_error(w));
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_set_f32(w, "a", 1.0f));
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_set_version(w, 1));
  EXPECT_STREQ("gguf writer: version 1 cannot be written (2 or 3)", memra_gguf_writer_error(w));
  int32_t x = 1;
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_set_arr(w, "nested", MEMRA_GGUF_ARRAY, &x, 1));
  EXPECT_STREQ("gguf writer: key 'nested': arrays of array cannot be written",
               memra_gguf_writer_error(w));
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_set_val(w, "s", MEMRA_GGUF_STRING, "x"));
  std::vector<float> f(35);
  int64_t ne[4] = {5, 7, 1, 1};
  EXPECT_EQ(MEMRA_E_INVALID,
            memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 2, ne, f.data(), 100));
  EXPECT_STREQ("gguf writer: tensor 't': 100 bytes given, F32 [5, 7, 1, 1] needs 140",
               memra_gguf_writer_error(w));
  EXPECT_EQ(MEMRA_OK, memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 2, ne, f.data(), 140));
  EXPECT_EQ(MEMRA_E_INVALID,
            memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 2, ne, f.data(), 140));
  EXPECT_STREQ("gguf writer: duplicate tensor name 't'", memra_gguf_writer_error(w));
  int64_t q[4] = {33, 1, 1, 1};
  EXPECT_EQ(MEMRA_E_INVALID,
            memra_gguf_writer_add_tensor(w, "q", MEMRA_TYPE_Q4_0, 1, q, f.data(), 18));
  EXPECT_STREQ("gguf writer: tensor 'q': row length 33 is not a multiple of the Q4_0 block size 32",
               memra_gguf_writer_error(w));
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_add_tensor(w, "u", 4, 1, ne, f.data(), 20));
  EXPECT_STREQ("gguf writer: tensor 'u': unknown type 4", memra_gguf_writer_error(w));
  EXPECT_EQ(MEMRA_E_INVALID,
            memra_gguf_writer_add_tensor(w, "d", MEMRA_TYPE_F32, 5, ne, f.data(), 20));
  memra_gguf_writer_free(w);
}

TEST(Writer, AlignmentKeyDrivesTheLayout) {
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_set_u32(w, "general.alignment", 48));
  EXPECT_STREQ("gguf writer: general.alignment must be a u32 power of two",
               memra_gguf_writer_error(w));
  EXPECT_EQ(MEMRA_E_INVALID, memra_gguf_writer_set_u64(w, "general.alignment", 64));
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_set_u32(w, "general.alignment", 256));
  float f[3] = {1.5f, -2, 7};
  int64_t ne[4] = {3, 1, 1, 1};
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_add_tensor(w, "a", MEMRA_TYPE_F32, 1, ne, f, 12));
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_add_tensor(w, "b", MEMRA_TYPE_F32, 1, ne, f, 12));
  Owned o;
  write_and_open(w, &o);
  memra_gguf_writer_free(w);
  ASSERT_NE(nullptr, o.g);
  EXPECT_EQ(256u, memra_gguf_alignment(o.g));
  EXPECT_EQ(256u, memra_gguf_data_offset(o.g));
  EXPECT_EQ(256u, memra_gguf_tensor_find(o.g, "b")->offset);
  EXPECT_EQ(256u + 256 + 12, o.size);
}

TEST(Getters, ConvertWhenValueFitsAndNameBothTypesOtherwise) {
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  uint8_t u8 = 250;
  int64_t big = -7;
  uint64_t huge = UINT64_MAX - 1;
  double d = 0.125;
  memra_gguf_writer_set_val(w, "u8", MEMRA_GGUF_U8, &u8);
  memra_gguf_writer_set_val(w, "neg", MEMRA_GGUF_I64, &big);
  memra_gguf_writer_set_u64(w, "huge", huge);
  memra_gguf_writer_set_val(w, "f64", MEMRA_GGUF_F64, &d);
  memra_gguf_writer_set_bool(w, "flag", true);
  memra_gguf_writer_set_str(w, "name", "x");
  int32_t arr[3] = {4, -5, 6};
  memra_gguf_writer_set_arr(w, "arr", MEMRA_GGUF_I32, arr, 3);
  Owned o;
  write_and_open(w, &o);
  memra_gguf_writer_free(w);
  memra_gguf *g = o.g;
  ASSERT_NE(nullptr, g);
  memra_err err = {};
  uint32_t u32 = 0;
  int64_t i64 = 0;
  float f = 0;
  bool b = false;
  memra_str s = {};
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_u32(g, "u8", &u32, &err));
  EXPECT_EQ(250u, u32);
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_i64(g, "u8", &i64, &err));
  EXPECT_EQ(250, i64);
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_i64(g, "neg", &i64, &err));
  EXPECT_EQ(-7, i64);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_u32(g, "neg", &u32, &err));
  EXPECT_STREQ("rt.gguf: key 'neg' (i64) is -7, does not fit u32", err.msg);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_u32(g, "huge", &u32, &err));
  EXPECT_STREQ("rt.gguf: key 'huge' (u64) is 18446744073709551614, does not fit u32", err.msg);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_i64(g, "huge", &i64, &err));
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_f32(g, "f64", &f, &err));
  EXPECT_EQ(0.125f, f);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_f32(g, "name", &f, &err));
  EXPECT_STREQ("rt.gguf: key 'name' has type string, expected f32", err.msg);
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_bool(g, "flag", &b, &err));
  EXPECT_TRUE(b);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_bool(g, "u8", &b, &err));
  EXPECT_STREQ("rt.gguf: key 'u8' has type u8, expected bool", err.msg);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_str(g, "arr", &s, &err));
  EXPECT_STREQ("rt.gguf: key 'arr' is an array of i32, expected string", err.msg);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_u32(g, "flag", &u32, &err));
  EXPECT_STREQ("rt.gguf: key 'flag' has type bool, expected u32", err.msg);
  uint64_t n = 0;
  const memra_gguf_kv *kv = nullptr;
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_arr(g, "arr", MEMRA_GGUF_STRING, &n, &kv, &err));
  EXPECT_STREQ("rt.gguf: key 'arr' is an array of i32, expected an array of string", err.msg);
  EXPECT_EQ(MEMRA_E_FORMAT, memra_gguf_get_arr(g, "name", -1, &n, &kv, &err));
  EXPECT_STREQ("rt.gguf: key 'name' has type string, expected an array of any type", err.msg);
  EXPECT_EQ(MEMRA_OK, memra_gguf_get_arr(g, "arr", -1, &n, &kv, &err));
  EXPECT_EQ(3u, n);
  EXPECT_EQ(-5, memra_gguf_arr_i64(kv, 1));
  EXPECT_EQ(6.0, memra_gguf_arr_f64(kv, 2));
  EXPECT_EQ(0u, memra_gguf_arr_str(g, kv, 0).len) << "not a string array";
  memra_gguf_kv foreign = *kv;
  EXPECT_EQ(0u, memra_gguf_arr_str(g, &foreign, 0).len) << "not one of this handle's kvs";
  EXPECT_EQ(MEMRA_E_NOT_FOUND, memra_gguf_get_u32(g, "missing", &u32, &err));
  EXPECT_STREQ("rt.gguf: no key 'missing'", err.msg);
}

namespace {
bool dir_has_tmp(const std::string &dir) {
  DIR *d = opendir(dir.c_str());
  bool found = false;
  while (struct dirent *e = readdir(d))
    if (strstr(e->d_name, ".tmp.")) found = true;
  closedir(d);
  return found;
}
} // namespace

TEST(WriterFile, WritesAtomicallyAndMatchesMemory) {
  std::string dir = test_tmp_dir() + "/wf";
  mkdir(dir.c_str(), 0755);
  std::string path = dir + "/m.gguf";
  {
    std::ofstream old(path);
    old << "old contents";
  }
  memra_gguf_writer *w = memra_gguf_writer_new(128);
  memra_gguf_writer_set_str(w, "general.name", "file");
  std::vector<uint16_t> h(4097 * 3);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = (uint16_t)(i * 2654435761u >> 7);
  int64_t ne[4] = {4097, 3, 1, 1};
  ASSERT_EQ(MEMRA_OK,
            memra_gguf_writer_add_tensor(w, "h", MEMRA_TYPE_F16, 2, ne, h.data(), h.size() * 2));
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_write(w, path.c_str(), &err)) << err.msg;
  uint8_t *mem = nullptr;
  uint64_t size = 0;
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(w, &mem, &size, &err));
  std::vector<uint8_t> disk = read_file(path);
  ASSERT_EQ(size, disk.size());
  EXPECT_EQ(0, memcmp(mem, disk.data(), size));
  memra_free(mem);
  EXPECT_FALSE(dir_has_tmp(dir));
  memra_gguf *g = nullptr;
  ASSERT_EQ(MEMRA_OK, memra_gguf_open(path.c_str(), &g, &err)) << err.msg;
  EXPECT_EQ(128u, memra_gguf_alignment(g));
  EXPECT_EQ(0, memcmp(h.data(), memra_gguf_tensor_find(g, "h")->data, h.size() * 2));
  memra_gguf_close(g);

  // A path whose directory does not exist; a path that is a directory (rename fails):
  // an I/O error, and no partial or temporary file left anywhere.
  EXPECT_EQ(MEMRA_E_IO, memra_gguf_writer_write(w, (dir + "/no/such/x.gguf").c_str(), &err));
  EXPECT_NE(nullptr, strstr(err.msg, "/no/such/x.gguf: cannot create a temporary file: No such "
                                     "file or directory"))
      << err.msg;
  std::string sub = dir + "/sub";
  mkdir(sub.c_str(), 0755);
  EXPECT_EQ(MEMRA_E_IO, memra_gguf_writer_write(w, sub.c_str(), &err));
  EXPECT_NE(nullptr, strstr(err.msg, "sub: write failed: Is a directory")) << err.msg;
  EXPECT_FALSE(dir_has_tmp(dir));
  memra_gguf_writer_free(w);
}

TEST(WriterFile, EachAllocFailureIsCleanAndLeavesNoFile) {
  std::string path = test_tmp_dir() + "/oomw.gguf";
  int fails = 0;
  for (long n = 1;; ++n) {
    unlink(path.c_str());
    long live0 = memra_test_live_allocs();
    memra_test_fail_alloc_at(n);
    memra_status st = MEMRA_OK;
    memra_err err = {};
    memra_gguf_writer *w = memra_gguf_writer_new(64);
    const char *strs[] = {"a", "bb", "ccc"};
    float f[5] = {1, 2, 3, 4, 5};
    int64_t ne[4] = {5, 1, 1, 1};
    if (!w) st = MEMRA_E_OOM;
    if (!st) st = memra_gguf_writer_set_str(w, "k", "v");
    if (!st) st = memra_gguf_writer_set_arr_str(w, "s", strs, 3);
    if (!st) st = memra_gguf_writer_add_tensor(w, "t", MEMRA_TYPE_F32, 1, ne, f, sizeof f);
    if (!st) st = memra_gguf_writer_write(w, path.c_str(), &err);
    memra_test_fail_alloc_at(0);
    memra_gguf_writer_free(w);
    EXPECT_EQ(live0, memra_test_live_allocs()) << "leak with allocation " << n << " failing";
    if (st == MEMRA_OK) break;
    ++fails;
    EXPECT_EQ(MEMRA_E_OOM, st) << err.msg;
    EXPECT_NE(0, access(path.c_str(), F_OK)) << "a failed write left " << path;
    ASSERT_LT(n, 1000);
  }
  EXPECT_GE(fails, 5);
  EXPECT_EQ(0, access(path.c_str(), F_OK));
}
