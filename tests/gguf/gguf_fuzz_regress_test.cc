// Replays tests/gguf/fuzz_regressions/* (inputs the fuzzer once crashed on, plus seeds)
// through the same checks as tools/fuzz/gguf_fuzz.c: OK with every accessor consistent,
// or MEMRA_E_FORMAT with a one-line message; nothing leaked.
#include <dirent.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/gguf/gguf_test_util.h"

extern "C" {
#include "tools/fuzz/gguf_touch.h"
}

TEST(FuzzRegressions, EveryStoredInputIsHandled) {
  const std::string dir = "tests/gguf/fuzz_regressions";
  DIR *d = opendir(dir.c_str());
  ASSERT_NE(nullptr, d) << dir;
  std::vector<std::string> names;
  while (struct dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n[0] != '.' && n.rfind("README", 0) != 0) names.push_back(n);
  }
  closedir(d);
  ASSERT_GE(names.size(), 3u);
  FILE *devnull = fopen("/dev/null", "w");
  int opened = 0;
  for (const std::string &n : names) {
    std::vector<uint8_t> bytes = read_file(dir + "/" + n);
    std::vector<uint8_t> exact(bytes); // heap buffer of exactly the file's size
    long live0 = memra_test_live_allocs();
    memra_gguf *g = nullptr;
    memra_err err = {};
    memra_status st = memra_gguf_open_memory(exact.empty() ? nullptr : exact.data(), exact.size(),
                                             "r.gguf", &g, &err);
    if (st == MEMRA_OK) {
      ++opened;
      EXPECT_NE(0u, memra_gguf_fuzz_touch(g, devnull)) << n;
      EXPECT_NE(0, memra_gguf_fuzz_rewrite(g)) << n << ": writer round trip differs";
      memra_gguf_close(g);
    } else {
      EXPECT_EQ(MEMRA_E_FORMAT, st) << n << ": " << err.msg;
      EXPECT_EQ(0, strncmp(err.msg, "r.gguf: ", 8)) << n << ": " << err.msg;
      EXPECT_EQ(nullptr, strchr(err.msg, '\n')) << n;
    }
    EXPECT_EQ(live0, memra_test_live_allocs()) << n;
  }
  fclose(devnull);
  RecordProperty("opened", opened);
}

TEST(FuzzRegressions, TouchReadsTheFixtureCompletely) {
  memra_gguf *g = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_open("tests/gguf/fixtures/py_all_types.gguf", &g, &err));
  uint64_t a = memra_gguf_fuzz_touch(g, nullptr), b = memra_gguf_fuzz_touch(g, nullptr);
  EXPECT_NE(0u, a);
  EXPECT_EQ(a, b) << "deterministic";
  EXPECT_EQ(1, memra_gguf_fuzz_rewrite(g)) << "the gguf-py file survives our writer intact";
  memra_gguf_close(g);
}
