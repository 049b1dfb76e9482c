// Each pre-tokenizer (tokenizer.ggml.pre) splits the corpus exactly as HF's pre-tokenizer
// for that vocabulary does (fixtures: tools/text/gen_tokenizer_fixtures.py), PCRE2 against
// HF's Oniguruma/fancy-regex on the same Unicode-class regexes.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cjson/cJSON.h>

extern "C" {
#include "core/base/alloc.h"
#include "core/text/tok_internal.h"
}

namespace {

std::vector<std::string> Lines(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::vector<std::string> out;
  std::string l;
  while (std::getline(f, l))
    out.push_back(l);
  return out;
}

class Pretok : public ::testing::TestWithParam<const char *> {};

TEST_P(Pretok, SplitsLikeHf) {
  std::vector<std::string> corpus;
  for (const std::string &l : Lines("tests/text/data/corpus.jsonl")) {
    cJSON *j = cJSON_ParseWithLength(l.data(), l.size());
    corpus.push_back(j && j->valuestring ? j->valuestring : "");
    cJSON_Delete(j);
  }
  std::vector<std::string> exp = Lines(std::string("tests/text/data/pretok_") + GetParam());
  ASSERT_GE(corpus.size(), 2000u);
  ASSERT_EQ(corpus.size(), exp.size());
  memra_tokenizer *t = (memra_tokenizer *)memra_calloc(1, sizeof(memra_tokenizer));
  t->kind = MEMRA_TOK_BPE;
  snprintf(t->pre_name, sizeof t->pre_name, "%s", GetParam());
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_pretok_init(t, &err)) << err.msg;
  size_t bad = 0, pieces = 0;
  for (size_t i = 0; i < corpus.size(); i++) {
    size_t *offs = nullptr, n = 0;
    ASSERT_EQ(MEMRA_OK, memra_pretok_split(t, corpus[i].data(), corpus[i].size(), &offs, &n, &err))
        << err.msg;
    std::ostringstream got;
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
      EXPECT_EQ(at, offs[2 * k]); // pieces tile the text in order
      at = offs[2 * k] + offs[2 * k + 1];
      got << (k ? " " : "") << offs[2 * k + 1];
    }
    pieces += n;
    memra_free(offs);
    if (got.str() != exp[i] && ++bad <= 5)
      ADD_FAILURE() << GetParam() << " line " << i << ": got [" << got.str() << "] want [" << exp[i]
                    << "] for " << corpus[i].substr(0, 60);
  }
  EXPECT_EQ(0u, bad);
  EXPECT_GT(pieces, corpus.size() * 5);
  memra_pretok_free(t);
  memra_free(t);
}

INSTANTIATE_TEST_SUITE_P(AllPre, Pretok,
                         ::testing::Values("gpt2", "smollm", "llama-bpe", "qwen2", "deepseek-v3"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           std::string s = i.param;
                           for (char &c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

} // namespace
