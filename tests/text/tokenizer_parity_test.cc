// Token ids identical to HF tokenizers on a 2000+ string corpus, for four vocabularies,
// and decode(encode(s)) == s wherever the reference round-trips
// (fixtures: tools/text/gen_tokenizer_fixtures.py).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cjson/cJSON.h>

extern "C" {
#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/text/hf_import.h"
#include "core/text/tokenizer.h"
}

namespace {

std::vector<std::string> ReadLines(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line))
    out.push_back(line);
  return out;
}

std::vector<std::string> Corpus() {
  std::vector<std::string> out;
  for (const std::string &l : ReadLines("tests/text/data/corpus.jsonl")) {
    cJSON *j = cJSON_ParseWithLength(l.data(), l.size());
    EXPECT_TRUE(cJSON_IsString(j)) << l;
    out.push_back(j && j->valuestring ? j->valuestring : "");
    cJSON_Delete(j);
  }
  return out;
}

struct Expected {
  bool roundtrips;
  std::vector<int32_t> ids;
};

std::vector<Expected> ReadIds(const std::string &name) {
  std::vector<Expected> out;
  for (const std::string &l : ReadLines("tests/text/data/" + name + ".ids")) {
    std::istringstream in(l);
    Expected e;
    int rt;
    in >> rt;
    e.roundtrips = rt == 1;
    int32_t id;
    while (in >> id)
      e.ids.push_back(id);
    out.push_back(e);
  }
  return out;
}

std::string Decode(const memra_tokenizer *t, const int32_t *ids, size_t n) {
  memra_detok d;
  memra_detok_init(&d);
  std::string s;
  char buf[512];
  for (size_t i = 0; i < n; i++) {
    size_t k = memra_detok_push(&d, t, ids[i], buf, sizeof buf);
    s.append(buf, k);
  }
  size_t k = memra_detok_flush(&d, buf, sizeof buf);
  s.append(buf, k);
  return s;
}

void CheckParity(const memra_tokenizer *t, const std::string &name, bool parse_special = true) {
  std::vector<std::string> corpus = Corpus();
  std::vector<Expected> exp = ReadIds(name);
  ASSERT_GE(corpus.size(), 2000u);
  ASSERT_EQ(corpus.size(), exp.size());
  size_t mismatches = 0, roundtrips = 0;
  for (size_t i = 0; i < corpus.size(); i++) {
    const std::string &s = corpus[i];
    int32_t *ids = nullptr;
    size_t n = 0;
    memra_err err = {};
    ASSERT_EQ(MEMRA_OK, memra_tokenize(t, s.data(), s.size(), true, parse_special, &ids, &n, &err))
        << name << " line " << i << ": " << err.msg;
    std::vector<int32_t> got(ids, ids + n);
    memra_free(ids);
    if (got != exp[i].ids && ++mismatches <= 5)
      ADD_FAILURE() << name << " line " << i << " (" << s.substr(0, 60) << "): ids differ";
    if (!exp[i].roundtrips) continue;
    ASSERT_EQ(MEMRA_OK,
              memra_tokenize(t, s.data(), s.size(), false, parse_special, &ids, &n, &err));
    std::string back = Decode(t, ids, n);
    memra_free(ids);
    EXPECT_EQ(s, back) << name << " line " << i;
    roundtrips++;
  }
  EXPECT_EQ(0u, mismatches) << name;
  // The reference round-trips most strings (Qwen's NFC changes the decomposed ones);
  // a fixture that checks none would be a defect.
  EXPECT_GE(roundtrips, corpus.size() * 7 / 10) << name;
}

// Random id sequences, many cutting UTF-8 sequences apart: the streamed decode equals HF's
// decode (ByteLevel decoder: from_utf8_lossy over the whole byte string).
void CheckDecode(const memra_tokenizer *t, const std::string &name) {
  std::vector<std::string> lines = ReadLines("tests/text/data/" + name + ".decode");
  ASSERT_GE(lines.size(), 400u);
  size_t replaced = 0;
  for (size_t i = 0; i < lines.size(); i++) {
    size_t tab = lines[i].find('\t');
    ASSERT_NE(std::string::npos, tab);
    std::istringstream in(lines[i].substr(0, tab));
    std::vector<int32_t> ids;
    int32_t id;
    while (in >> id)
      ids.push_back(id);
    std::string js = lines[i].substr(tab + 1);
    cJSON *j = cJSON_ParseWithLength(js.data(), js.size());
    ASSERT_TRUE(cJSON_IsString(j)) << name << " line " << i;
    std::string want = j->valuestring;
    cJSON_Delete(j);
    EXPECT_EQ(want, Decode(t, ids.data(), ids.size())) << name << " line " << i;
    replaced += want.find("\xEF\xBF\xBD") != std::string::npos;
  }
  EXPECT_GT(replaced, lines.size() / 4) << "the fixture should break many sequences";
}

void CheckHf(const std::string &name) {
  memra_tokenizer *t = nullptr;
  memra_err err = {};
  std::string path = "tests/text/data/" + name + "/tokenizer.json";
  char *tmpl = nullptr;
  ASSERT_EQ(MEMRA_OK, memra_tokenizer_from_hf_files(path.c_str(), nullptr, &t, &tmpl, &err))
      << err.msg;
  // The chat template travels from tokenizer_config.json (llama2's has none).
  if (name == "llama2") {
    EXPECT_EQ(nullptr, tmpl);
  } else {
    ASSERT_NE(nullptr, tmpl);
    EXPECT_NE(nullptr, strstr(tmpl, name == "qwen3" ? "<|im_start|>" : "<|start_header_id|>"));
  }
  memra_free(tmpl);
  CheckParity(t, name);
  if (name != "llama2") CheckDecode(t, name);
  memra_tokenizer_free(t);
}

// Copies every key of g except skip into w (the GGUF a converter without merges writes).
void CopyKvs(const memra_gguf *g, memra_gguf_writer *w, const char *skip) {
  for (uint64_t i = 0; i < memra_gguf_n_kv(g); i++) {
    const memra_gguf_kv *kv = memra_gguf_kv_at(g, i);
    std::string key(kv->key.ptr, kv->key.len);
    if (key == skip) continue;
    switch (kv->type) {
    case MEMRA_GGUF_STRING:
      memra_gguf_writer_set_str(w, key.c_str(), std::string(kv->v.str.ptr, kv->v.str.len).c_str());
      break;
    case MEMRA_GGUF_BOOL: memra_gguf_writer_set_bool(w, key.c_str(), kv->v.u64 != 0); break;
    case MEMRA_GGUF_U32: memra_gguf_writer_set_u32(w, key.c_str(), uint32_t(kv->v.u64)); break;
    case MEMRA_GGUF_ARRAY:
      if (kv->v.arr.elem_type == MEMRA_GGUF_STRING) {
        std::vector<std::string> strs;
        std::vector<const char *> ptrs;
        for (uint64_t k = 0; k < kv->v.arr.n; k++) {
          memra_str s = memra_gguf_arr_str(g, kv, k);
          strs.emplace_back(s.ptr, s.len);
        }
        for (auto &s : strs)
          ptrs.push_back(s.c_str());
        memra_gguf_writer_set_arr_str(w, key.c_str(), ptrs.data(), ptrs.size());
      } else {
        memra_gguf_writer_set_arr(w, key.c_str(), kv->v.arr.elem_type, kv->v.arr.data, kv->v.arr.n);
      }
      break;
    default: ADD_FAILURE() << "unexpected type of " << key;
    }
  }
}

// Llama 2 as llama.cpp's converters ship it: scores, no merges. The SPM encoder then
// merges by score (the imported score of a token is minus the rank of the merge that
// makes it), which must give HF's ids too.
TEST(TokenizerParity, Llama2SpmByScore) {
  memra_tokenizer *t = nullptr;
  memra_err err = {};
  std::ifstream f("tests/text/data/llama2/tokenizer.json", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string js = ss.str();
  memra_gguf_writer *w1 = memra_gguf_writer_new(0), *w2 = memra_gguf_writer_new(0);
  ASSERT_EQ(MEMRA_OK, memra_hf_tokenizer_to_gguf(js.data(), js.size(), nullptr, 0, w1, &err))
      << err.msg;
  uint8_t *m1 = nullptr, *m2 = nullptr;
  uint64_t n1 = 0, n2 = 0;
  memra_gguf *g1 = nullptr, *g2 = nullptr;
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(w1, &m1, &n1, &err)) << err.msg;
  ASSERT_EQ(MEMRA_OK, memra_gguf_open_memory(m1, n1, "llama2", &g1, &err)) << err.msg;
  CopyKvs(g1, w2, "tokenizer.ggml.merges");
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(w2, &m2, &n2, &err)) << err.msg;
  ASSERT_EQ(MEMRA_OK, memra_gguf_open_memory(m2, n2, "llama2-scores", &g2, &err)) << err.msg;
  EXPECT_EQ(nullptr, memra_gguf_kv_find(g2, "tokenizer.ggml.merges"));
  ASSERT_EQ(MEMRA_OK, memra_tokenizer_from_gguf(g2, &t, &err)) << err.msg;
  CheckParity(t, "llama2");
  memra_tokenizer_free(t);
  memra_gguf_close(g1);
  memra_gguf_close(g2);
  memra_free(m1);
  memra_free(m2);
  memra_gguf_writer_free(w1);
  memra_gguf_writer_free(w2);
}

TEST(TokenizerParity, SmolLM2Gguf) {
  memra_gguf *g = nullptr;
  memra_tokenizer *t = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_open("tests/text/data/smollm2_vocab.gguf", &g, &err)) << err.msg;
  ASSERT_EQ(MEMRA_OK, memra_tokenizer_from_gguf(g, &t, &err)) << err.msg;
  memra_gguf_close(g); // the tokenizer keeps its own copy
  EXPECT_EQ(49152, memra_tokenizer_n_vocab(t));
  CheckParity(t, "smollm2");
  CheckDecode(t, "smollm2");
  memra_tokenizer_free(t);
}

// Gemma 3: a real SentencePiece vocabulary with its own scores (262144 tokens), so the
// score-driven SPM path against Google's sentencepiece. sentencepiece never turns
// control-token text into control tokens, hence parse_special = false here.
TEST(TokenizerParity, Gemma3SpmScores) {
  memra_gguf *g = nullptr;
  memra_tokenizer *t = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_open("tests/text/data/gemma3_vocab.gguf", &g, &err)) << err.msg;
  ASSERT_EQ(MEMRA_OK, memra_tokenizer_from_gguf(g, &t, &err)) << err.msg;
  memra_gguf_close(g);
  EXPECT_EQ(262144, memra_tokenizer_n_vocab(t));
  CheckParity(t, "gemma3", false);
  CheckDecode(t, "gemma3"); // against sentencepiece's decode
  memra_tokenizer_free(t);
}

TEST(TokenizerParity, Llama2Spm) { CheckHf("llama2"); }
TEST(TokenizerParity, Llama31) { CheckHf("llama3_1"); }
TEST(TokenizerParity, Qwen3) { CheckHf("qwen3"); }

} // namespace
