// memra_gguf_dump on the gguf-py fixture: exact lines for header, scalars, escaped strings,
// abbreviated and full arrays, and the tensor table.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "tests/gguf/gguf_test_util.h"

extern "C" {
#include "core/gguf/gguf_dump.h"
}

namespace {
std::string dump(bool full) {
  memra_gguf *g = nullptr;
  memra_err err = {};
  EXPECT_EQ(MEMRA_OK, memra_gguf_open("tests/gguf/fixtures/py_all_types.gguf", &g, &err))
      << err.msg;
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  EXPECT_EQ(MEMRA_OK, memra_gguf_dump(g, f, full));
  fclose(f);
  std::string s(buf, len);
  free(buf);
  memra_gguf_close(g);
  return s;
}

bool has_line(const std::string &out, const std::string &line) {
  return ("\n" + out).find("\n" + line + "\n") != std::string::npos;
}
} // namespace

TEST(Dump, ListsHeaderKeysAndTensors) {
  std::string out = dump(false);
  const char *lines[] = {
      "* GGUF version 3, 16128 bytes, alignment 32, tensor data at byte 15232",
      "* 27 key/value pairs",
      "      1: string    |        1 | general.architecture = \"memratest\"",
      "      2: u8        |        1 | t.u8 = 200",
      "      9: u64       |        1 | t.u64 = 9223372036854775813",
      "     11: f64       |        1 | t.f64 = -0.33333333333333331",
      "     12: bool      |        1 | t.bool = true",
      "     14: string    |        1 | t.str = \"h\xc3\xa9llo, GGUF\\n\\\"quoted\\\"\"",
      "     20: [i32]     |       31 | t.arr_i32 = [-50, -43, -36, -29, -22, -15, -8, -1, ...] (31 "
      "items)",
      "     21: [f32]     |        3 | t.arr_f32 = [0.5, -2.75, 0.00100000005]",
      "     26: [string]  |        4 | t.arr_str = [\"alpha\", \"\", "
      "\"\xce\xb3\xce\xac\xce\xbc\xce\xbc\xce\xb1\", \"tab\\there\"]",
      "     27: [string]  |     1000 | tokenizer.ggml.tokens = [\"tok0\", \"tok1\", \"tok2\", "
      "\"tok3\", "
      "\"tok4\", \"tok5\", \"tok6\", \"tok7\", ...] (1000 items)",
      "* 5 tensors",
      "      0  F32    [37, 3]                                   0            444  f32.weight",
      "      3  Q8_0   [64, 2]                                 608            136  q8.weight",
      "      4  F32    [5, 3, 2]                               768            120  f32.cube",
  };
  for (const char *l : lines)
    EXPECT_TRUE(has_line(out, l)) << "missing line:\n" << l << "\nin:\n" << out;
  EXPECT_EQ(2 + 27 + 2 + 5, std::count(out.begin(), out.end(), '\n'));
}

TEST(Dump, FullArrays) {
  std::string out = dump(true);
  std::string want = "t.arr_i32 = [-50";
  for (int i = 1; i < 31; ++i)
    want += ", " + std::to_string(i * 7 - 50);
  want += "]\n";
  EXPECT_NE(std::string::npos, out.find(want)) << out;
  EXPECT_NE(std::string::npos, out.find("\"tok998\", \"tok999\"]\n"));
  EXPECT_EQ(std::string::npos, out.find("items)"));
}
