// Tokenizer behaviour beyond corpus parity: byte fallback, stream-safe detokenizing,
// special tokens, hostile vocabularies and text, NFC, allocation failures.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/text/hf_import.h"
#include "core/text/tok_internal.h"
#include "core/text/tokenizer.h"
#include "core/text/utf8.h"
}

namespace {

struct Tok {
  memra_tokenizer *t = nullptr;
  ~Tok() { memra_tokenizer_free(t); }
};

void LoadSmol(Tok *k) {
  memra_gguf *g = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_open("tests/text/data/smollm2_vocab.gguf", &g, &err)) << err.msg;
  ASSERT_EQ(MEMRA_OK, memra_tokenizer_from_gguf(g, &k->t, &err)) << err.msg;
  memra_gguf_close(g);
}

void LoadLlama2(Tok *k) {
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_tokenizer_from_hf_files("tests/text/data/llama2/tokenizer.json",
                                                    nullptr, &k->t, nullptr, &err))
      << err.msg;
}

std::vector<int32_t> Encode(const memra_tokenizer *t, const std::string &s, bool bos,
                            bool special) {
  int32_t *ids = nullptr;
  size_t n = 0;
  memra_err err = {};
  EXPECT_EQ(MEMRA_OK, memra_tokenize(t, s.data(), s.size(), bos, special, &ids, &n, &err))
      << err.msg;
  std::vector<int32_t> v(ids, ids + n);
  memra_free(ids);
  return v;
}

TEST(Tokenizer, SmolSpecialsAndPieces) {
  Tok k;
  LoadSmol(&k);
  const memra_tokenizer *t = k.t;
  EXPECT_EQ(1, memra_tokenizer_bos(t));
  EXPECT_EQ(2, memra_tokenizer_eos(t));
  EXPECT_FALSE(memra_tokenizer_add_bos(t));
  EXPECT_TRUE(memra_tokenizer_is_eog(t, 2));  // <|im_end|>
  EXPECT_TRUE(memra_tokenizer_is_eog(t, 0));  // <|endoftext|>
  EXPECT_FALSE(memra_tokenizer_is_eog(t, 1)); // <|im_start|>
  EXPECT_FALSE(memra_tokenizer_is_eog(t, 49151));
  EXPECT_FALSE(memra_tokenizer_is_eog(t, -1));
  EXPECT_EQ(std::vector<int32_t>({1, 4093}), Encode(t, "<|im_start|>user", true, true));
  // Without parse_special the text is ordinary characters.
  std::vector<int32_t> plain = Encode(t, "<|im_start|>user", true, false);
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(plain.end(), std::find(plain.begin(), plain.end(), 1));
  size_t len = 0;
  const char *p = memra_token_piece(t, 1, &len);
  EXPECT_EQ("<|im_start|>", std::string(p, len));
  std::vector<int32_t> hw = Encode(t, "Hello world", false, true);
  ASSERT_EQ(2u, hw.size());
  p = memra_token_piece(t, hw[1], &len);
  EXPECT_EQ(" world", std::string(p, len)); // "Ġworld" through the byte map
  EXPECT_EQ(nullptr, memra_token_piece(t, 49152, &len));
  EXPECT_EQ(2, memra_tokenizer_find(t, "<|im_end|>", 10));
  EXPECT_EQ(hw[1], memra_tokenizer_find(t, "\xC4\xA0world", 7)); // vocabulary spelling
  EXPECT_EQ(-1, memra_tokenizer_find(t, " world", 6));
  EXPECT_TRUE(memra_token_is_special(t, 2));
  EXPECT_FALSE(memra_token_is_special(t, hw[1]));
  EXPECT_FALSE(memra_token_is_special(t, 49152));
  EXPECT_EQ(nullptr, memra_token_piece(t, -5, &len));
}

TEST(Tokenizer, StreamingHoldsIncompleteUtf8) {
  Tok k;
  LoadLlama2(&k);
  const memra_tokenizer *t = k.t;
  // 🫠 (U+1FAE0) is not in the Llama 2 vocabulary: four byte-fallback tokens <0xNN> = 3+NN.
  std::vector<int32_t> ids = Encode(t, "\xF0\x9F\xAB\xA0", false, true);
  ASSERT_EQ(std::vector<int32_t>({28705, 3 + 0xF0, 3 + 0x9F, 3 + 0xAB, 3 + 0xA0}), ids);
  memra_detok d;
  memra_detok_init(&d);
  char buf[64];
  EXPECT_EQ(0u, memra_detok_push(&d, t, ids[0], buf, sizeof buf)); // the leading ▁ goes
  for (int i = 1; i < 4; i++) {
    EXPECT_EQ(0u, memra_detok_push(&d, t, ids[i], buf, sizeof buf)) << i;
    EXPECT_STREQ("", buf);
  }
  EXPECT_EQ(4u, memra_detok_push(&d, t, ids[4], buf, sizeof buf));
  EXPECT_STREQ("\xF0\x9F\xAB\xA0", buf);
  EXPECT_EQ(0u, memra_detok_flush(&d, buf, sizeof buf));
  // SPM, as sentencepiece: a stray continuation byte is one U+FFFD at once; an
  // interrupted sequence is one U+FFFD per byte, then the interrupting text; an unfinished
  // one at the end is one U+FFFD per byte at flush.
  memra_detok_init(&d);
  EXPECT_EQ(3u, memra_detok_push(&d, t, 3 + 0x80, buf, sizeof buf));
  EXPECT_STREQ("\xEF\xBF\xBD", buf);
  EXPECT_EQ(0u, memra_detok_push(&d, t, 3 + 0xE2, buf, sizeof buf));
  EXPECT_EQ(0u, memra_detok_push(&d, t, 3 + 0x82, buf, sizeof buf));
  EXPECT_EQ(7u, memra_detok_push(&d, t, 3 + 'A', buf, sizeof buf));
  EXPECT_EQ(std::string("\xEF\xBF\xBD\xEF\xBF\xBD") + "A", buf);
  EXPECT_EQ(0u, memra_detok_push(&d, t, 3 + 0xE2, buf, sizeof buf));
  EXPECT_EQ(0u, memra_detok_push(&d, t, 3 + 0x82, buf, sizeof buf));
  EXPECT_EQ(6u, memra_detok_flush(&d, buf, sizeof buf));
  EXPECT_STREQ("\xEF\xBF\xBD\xEF\xBF\xBD", buf);
  // A small out buffer truncates, never overflows.
  memra_detok_init(&d);
  std::vector<int32_t> w = Encode(t, "internationalization", false, true);
  char tiny[4];
  size_t got = memra_detok_push(&d, t, w[0], tiny, sizeof tiny);
  EXPECT_LE(got, 3u);
  EXPECT_EQ('\0', tiny[got]);
}

// Byte-level vocabularies: one U+FFFD per maximal invalid subpart (from_utf8_lossy).
TEST(Tokenizer, ByteLevelStreamingIsLossyPerSubpart) {
  Tok k;
  LoadSmol(&k);
  auto byte_tok = [&](uint8_t b) {
    char u[4];
    size_t n = memra_utf8_encode(memra_byte_to_cp(b), u);
    return memra_tokenizer_find(k.t, u, n);
  };
  memra_detok d;
  memra_detok_init(&d);
  char buf[64];
  EXPECT_EQ(0u, memra_detok_push(&d, k.t, byte_tok(0xE2), buf, sizeof buf));
  EXPECT_EQ(0u, memra_detok_push(&d, k.t, byte_tok(0x82), buf, sizeof buf));
  EXPECT_EQ(4u, memra_detok_push(&d, k.t, byte_tok('A'), buf, sizeof buf));
  EXPECT_EQ(std::string("\xEF\xBF\xBD") + "A", buf);
  EXPECT_EQ(0u, memra_detok_push(&d, k.t, byte_tok(0xF0), buf, sizeof buf));
  EXPECT_EQ(0u, memra_detok_push(&d, k.t, byte_tok(0x9F), buf, sizeof buf));
  EXPECT_EQ(3u, memra_detok_flush(&d, buf, sizeof buf));
  EXPECT_STREQ("\xEF\xBF\xBD", buf);
}

TEST(Tokenizer, SpmLeadingSpaceAndBos) {
  Tok k;
  LoadLlama2(&k);
  const memra_tokenizer *t = k.t;
  EXPECT_TRUE(memra_tokenizer_add_bos(t));
  // "▁Hello" (22557) "▁world" (1526), as HF: the space prefix, then BOS only when asked.
  EXPECT_EQ(std::vector<int32_t>({1, 22557, 1526}), Encode(t, "Hello world", true, true));
  EXPECT_EQ(std::vector<int32_t>({22557, 1526}), Encode(t, "Hello world", false, true));
  // After a special token the prefix space comes again.
  EXPECT_EQ(std::vector<int32_t>({22557, 2, 22557}), Encode(t, "Hello</s>Hello", false, true));
  // Invalid UTF-8 is carried by byte tokens, not rejected.
  std::vector<int32_t> b = Encode(t, "a\xFF", false, true);
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(3 + 0xFF, b.back());
}

TEST(Tokenizer, BpeRejectsInvalidUtf8WithOneLine) {
  Tok k;
  LoadSmol(&k);
  int32_t *ids = nullptr;
  size_t n = 0;
  memra_err err = {};
  const char bad[] = "ok \xC3\x28 no";
  EXPECT_EQ(MEMRA_E_INVALID, memra_tokenize(k.t, bad, sizeof bad - 1, false, true, &ids, &n, &err));
  EXPECT_STREQ("tokenizer: text is not valid UTF-8 at byte 3", err.msg);
  EXPECT_EQ(nullptr, ids);
  // Embedded NUL is ordinary text: it has a byte-level token.
  const char nul[] = "a\0b";
  ASSERT_EQ(MEMRA_OK, memra_tokenize(k.t, nul, 3, false, true, &ids, &n, &err)) << err.msg;
  EXPECT_GE(n, 2u);
  memra_free(ids);
}

TEST(Tokenizer, LongWordIsNotQuadratic) {
  Tok k;
  LoadSmol(&k);
  std::string s(200001, 'x');
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = Encode(k.t, s, false, true);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(sec, 5.0); // O(n^2) would take minutes
  std::string back;
  for (int32_t id : ids) {
    size_t l;
    const char *p = memra_token_piece(k.t, id, &l);
    back.append(p, l);
  }
  EXPECT_EQ(s, back);
}

// A minimal vocabulary written with the GGUF writer.
struct Vocab {
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  uint8_t *mem = nullptr;
  memra_gguf *g = nullptr;
  ~Vocab() {
    memra_gguf_close(g);
    memra_free(mem);
    memra_gguf_writer_free(w);
  }
  memra_status Load(memra_tokenizer **t, memra_err *err) {
    uint64_t sz = 0;
    EXPECT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(w, &mem, &sz, err)) << err->msg;
    EXPECT_EQ(MEMRA_OK, memra_gguf_open_memory(mem, sz, "vocab", &g, err)) << err->msg;
    return memra_tokenizer_from_gguf(g, t, err);
  }
};

void AddByteLevel(Vocab *v, const char *pre) {
  // The 256 byte tokens (as GPT-2 code points) and one merge "h e".
  std::vector<std::string> toks;
  for (int b = 0; b < 256; b++) {
    uint32_t cp = memra_byte_to_cp((uint8_t)b);
    char u[4];
    toks.emplace_back(u, memra_utf8_encode(cp, u));
  }
  toks.push_back("he");
  std::vector<const char *> p;
  for (auto &s : toks)
    p.push_back(s.c_str());
  const char *merges[] = {"h e"};
  memra_gguf_writer_set_str(v->w, "tokenizer.ggml.model", "gpt2");
  if (pre) memra_gguf_writer_set_str(v->w, "tokenizer.ggml.pre", pre);
  memra_gguf_writer_set_arr_str(v->w, "tokenizer.ggml.tokens", p.data(), p.size());
  memra_gguf_writer_set_arr_str(v->w, "tokenizer.ggml.merges", merges, 1);
}

TEST(Tokenizer, HostileVocabulariesGiveOneLineErrors) {
  memra_err err = {};
  memra_tokenizer *t = nullptr;
  {
    Vocab v;
    memra_gguf_writer_set_str(v.w, "tokenizer.ggml.model", "wordpiece");
    const char *toks[] = {"a"};
    memra_gguf_writer_set_arr_str(v.w, "tokenizer.ggml.tokens", toks, 1);
    EXPECT_EQ(MEMRA_E_UNSUPPORTED, v.Load(&t, &err));
    EXPECT_NE(nullptr, strstr(err.msg, "'wordpiece'")) << err.msg;
  }
  {
    Vocab v;
    AddByteLevel(&v, "gpt2");
    memra_gguf_writer_set_u32(v.w, "tokenizer.ggml.bos_token_id", 257);
    EXPECT_EQ(MEMRA_E_FORMAT, v.Load(&t, &err));
    EXPECT_STREQ("tokenizer.ggml.bos_token_id = 257 is outside the vocabulary of 257 tokens",
                 err.msg);
  }
  {
    Vocab v;
    const char *toks[] = {"a", "b"};
    memra_gguf_writer_set_str(v.w, "tokenizer.ggml.model", "gpt2");
    memra_gguf_writer_set_arr_str(v.w, "tokenizer.ggml.tokens", toks, 2);
    EXPECT_EQ(MEMRA_E_FORMAT, v.Load(&t, &err));
    EXPECT_STREQ("tokenizer.ggml.merges: required by a gpt2 vocabulary", err.msg);
  }
  {
    Vocab v;
    AddByteLevel(&v, "gpt2");
    int32_t types[3] = {1, 1, 1};
    memra_gguf_writer_set_arr(v.w, "tokenizer.ggml.token_type", MEMRA_GGUF_I32, types, 3);
    EXPECT_EQ(MEMRA_E_FORMAT, v.Load(&t, &err));
    EXPECT_STREQ("tokenizer.ggml.token_type: 3 entries for 257 tokens", err.msg);
  }
  {
    Vocab v;
    AddByteLevel(&v, "gpt2");
    const char *bad[] = {"nospace"};
    memra_gguf_writer_set_arr_str(v.w, "tokenizer.ggml.merges", bad, 1); // replaces
    memra_status st = v.Load(&t, &err);
    if (st == MEMRA_OK) memra_tokenizer_free(t);
    // Either the writer kept the first merges (ok) or the bad one is reported clearly.
    if (st) {
      EXPECT_NE(nullptr, strstr(err.msg, "expected 'left right'")) << err.msg;
    }
  }
  EXPECT_EQ(MEMRA_E_FORMAT, memra_tokenizer_from_hf_files("tests/text/data/smollm2_vocab.gguf",
                                                          nullptr, &t, nullptr, &err));
  EXPECT_STREQ("tokenizer.json: not valid JSON", err.msg);
  EXPECT_EQ(MEMRA_E_IO, memra_tokenizer_from_hf_files("/nonexistent/tokenizer.json", nullptr, &t,
                                                      nullptr, &err));
  EXPECT_STREQ("/nonexistent/tokenizer.json: cannot open", err.msg);
}

TEST(Tokenizer, UnknownPreFallsBackToGpt2Split) {
  memra_err err = {};
  Vocab a, b;
  AddByteLevel(&a, "some-future-pre");
  AddByteLevel(&b, "gpt2");
  Tok ta, tb;
  ASSERT_EQ(MEMRA_OK, a.Load(&ta.t, &err)) << err.msg;
  ASSERT_EQ(MEMRA_OK, b.Load(&tb.t, &err)) << err.msg;
  std::string s = "hello  there 12345 he's";
  std::vector<int32_t> ia = Encode(ta.t, s, false, true), ib = Encode(tb.t, s, false, true);
  EXPECT_EQ(ib, ia);
  // "he" merged (id 256) at the start of "hello" and of "he's"; "the" splits as "t","he".
  EXPECT_EQ(256, ia[0]);
  EXPECT_EQ(3, std::count(ia.begin(), ia.end(), 256));
}

TEST(Nfc, ComposesReordersAndKeepsExclusions) {
  struct {
    const char *in, *out;
  } cases[] = {
      {"e\xCC\x81", "\xC3\xA9"},                                // e + acute -> é
      {"\xE2\x84\xAB", "\xC3\x85"},                             // Å (angstrom sign) -> Å
      {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"}, // jamo -> 각
      {"a\xCC\xA3\xCC\x88", "\xE1\xBA\xA1\xCC\x88"},            // ạ + diaeresis (reordered)
      {"a\xCC\x88\xCC\xA3", "\xE1\xBA\xA1\xCC\x88"},            // same after canonical ordering
      {"\xE0\xA4\x95\xE0\xA4\xBC", "\xE0\xA4\x95\xE0\xA4\xBC"}, // excluded: stays
      {"\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"},             // U+0958 decomposes, not recomposed
      {"x\xFFy\xCC\x81", "x\xFF\xC3\xBD"},                      // invalid byte passes through
  };
  for (auto &c : cases) {
    char *out = nullptr;
    size_t n = 0;
    memra_err err = {};
    ASSERT_EQ(MEMRA_OK, memra_nfc(c.in, strlen(c.in), &out, &n, &err));
    EXPECT_EQ(std::string(c.out), std::string(out, n)) << c.in;
    memra_free(out);
  }
}

TEST(Tokenizer, AllocationFailuresAreCleanErrors) {
  Tok k;
  LoadSmol(&k);
  std::string s = "Hello <|im_start|> wörld 12345 \xF0\x9F\x98\x80 " + std::string(700, 'z');
  long live = memra_test_live_allocs();
  int failures = 0;
  for (long at = 1; at < 200; at++) {
    memra_test_fail_alloc_at(at);
    int32_t *ids = nullptr;
    size_t n = 0;
    memra_err err = {};
    memra_status st = memra_tokenize(k.t, s.data(), s.size(), true, true, &ids, &n, &err);
    memra_test_fail_alloc_at(0);
    if (st == MEMRA_OK) {
      memra_free(ids);
      break;
    }
    EXPECT_EQ(MEMRA_E_OOM, st) << err.msg;
    EXPECT_NE(nullptr, strstr(err.msg, "out of memory")) << err.msg;
    failures++;
  }
  EXPECT_GT(failures, 2);
  EXPECT_EQ(live, memra_test_live_allocs());
}

} // namespace

namespace {

// Corrupted vocabularies: every outcome is a clean error or a working tokenizer; never a
// crash, hang or out-of-bounds read (ASan in --config=san).
TEST(Tokenizer, CorruptedVocabulariesNeverCrash) {
  Vocab v;
  AddByteLevel(&v, "qwen2");
  int32_t types[257];
  for (int i = 0; i < 257; i++)
    types[i] = i == 256 ? 3 : 1;
  memra_gguf_writer_set_arr(v.w, "tokenizer.ggml.token_type", MEMRA_GGUF_I32, types, 257);
  memra_gguf_writer_set_u32(v.w, "tokenizer.ggml.eos_token_id", 256);
  uint8_t *mem = nullptr;
  uint64_t sz = 0;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(v.w, &mem, &sz, &err)) << err.msg;
  std::mt19937 rng(7);
  int opened = 0, loaded = 0;
  for (int it = 0; it < 400; it++) {
    std::vector<uint8_t> buf(mem, mem + sz);
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; f++)
      buf[rng() % sz] ^= uint8_t(1u << (rng() % 8));
    memra_gguf *g = nullptr;
    memra_tokenizer *t = nullptr;
    if (memra_gguf_open_memory(buf.data(), buf.size(), "fuzz", &g, &err) != MEMRA_OK) continue;
    opened++;
    if (memra_tokenizer_from_gguf(g, &t, &err) == MEMRA_OK) {
      loaded++;
      std::string s = "he said 'hello' 123 \xC3\xA9\xF0\x9F\x98\x80 he";
      int32_t *ids = nullptr;
      size_t n = 0;
      if (memra_tokenize(t, s.data(), s.size(), true, true, &ids, &n, &err) == MEMRA_OK) {
        memra_detok d;
        memra_detok_init(&d);
        char o[64];
        for (size_t i = 0; i < n; i++)
          memra_detok_push(&d, t, ids[i], o, sizeof o);
        memra_detok_flush(&d, o, sizeof o);
        memra_free(ids);
      }
      memra_tokenizer_free(t);
    } else {
      EXPECT_NE(0, err.msg[0]);
      EXPECT_EQ(nullptr, strchr(err.msg, '\n'));
    }
    memra_gguf_close(g);
  }
  memra_free(mem);
  EXPECT_GT(opened, 10);
  EXPECT_GT(loaded, 5);
}

} // namespace

namespace {

// add_bos_token / add_eos_token from the metadata; memra_tokenize's add_bos switches both.
TEST(Tokenizer, BosEosFollowTheVocabulary) {
  memra_err err = {};
  Vocab v;
  AddByteLevel(&v, "gpt2");
  int32_t types[257];
  for (int i = 0; i < 257; i++)
    types[i] = 1;
  types[0] = types[1] = 3; // bytes 0 and 1 (shown as U+0100, U+0101) become control tokens
  memra_gguf_writer_set_arr(v.w, "tokenizer.ggml.token_type", MEMRA_GGUF_I32, types, 257);
  memra_gguf_writer_set_u32(v.w, "tokenizer.ggml.bos_token_id", 0);
  memra_gguf_writer_set_u32(v.w, "tokenizer.ggml.eos_token_id", 1);
  memra_gguf_writer_set_bool(v.w, "tokenizer.ggml.add_bos_token", true);
  memra_gguf_writer_set_bool(v.w, "tokenizer.ggml.add_eos_token", true);
  Tok t;
  ASSERT_EQ(MEMRA_OK, v.Load(&t.t, &err)) << err.msg;
  EXPECT_TRUE(memra_tokenizer_add_bos(t.t));
  std::vector<int32_t> ids = Encode(t.t, "he", true, false);
  EXPECT_EQ(std::vector<int32_t>({0, 256, 1}), ids);
  EXPECT_EQ(std::vector<int32_t>({256}), Encode(t.t, "he", false, false));
  // Control text becomes the control token only with parse_special.
  EXPECT_EQ(std::vector<int32_t>({256, 0}), Encode(t.t, "he\xC4\x80", false, true));
  std::vector<int32_t> plain = Encode(t.t, "he\xC4\x80", false, false);
  ASSERT_EQ(3u, plain.size()); // "he", then the two bytes of U+0100 as byte tokens
  EXPECT_EQ(256, plain[0]);
  EXPECT_NE(0, plain[1]);
  EXPECT_TRUE(memra_tokenizer_is_eog(t.t, 1));
  EXPECT_FALSE(memra_tokenizer_is_eog(t.t, 0));
  // Empty text: just the added tokens, and a valid (freeable) array.
  EXPECT_EQ(std::vector<int32_t>({0, 1}), Encode(t.t, "", true, true));
}

} // namespace

namespace {

memra_status ImportJson(const std::string &js, memra_err *err) {
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  memra_status st = memra_hf_tokenizer_to_gguf(js.data(), js.size(), nullptr, 0, w, err);
  memra_gguf_writer_free(w);
  return st;
}

TEST(HfImport, HostileTokenizerJsonGivesOneLineErrors) {
  memra_err err = {};
  EXPECT_EQ(MEMRA_E_FORMAT, ImportJson("{\"model\": ", &err));
  EXPECT_STREQ("tokenizer.json: not valid JSON", err.msg);
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, ImportJson("{\"model\": {\"type\": \"Unigram\"}}", &err));
  EXPECT_STREQ("tokenizer.json: model type 'Unigram' (supported: BPE)", err.msg);
  const std::string bl = ", \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
  EXPECT_EQ(MEMRA_E_FORMAT,
            ImportJson("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}" + bl, &err));
  EXPECT_STREQ("tokenizer.json: model.vocab (object) and model.merges (array) required", err.msg);
  EXPECT_EQ(
      MEMRA_E_FORMAT,
      ImportJson("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 15000000}, \"merges\": []}" +
                     bl,
                 &err));
  EXPECT_STREQ("tokenizer.json: ids up to 15000000 for 1 tokens", err.msg);
  EXPECT_EQ(
      MEMRA_E_FORMAT,
      ImportJson("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}" + bl,
                 &err));
  EXPECT_STREQ("tokenizer.json: vocab entry 'a' has a bad id", err.msg);
  EXPECT_EQ(
      MEMRA_E_FORMAT,
      ImportJson("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, "
                 "\"merges\": [7]}" +
                     bl,
                 &err));
  EXPECT_STREQ("tokenizer.json: merges[0] is neither \"a b\" nor [a, b]", err.msg);
  EXPECT_EQ(
      MEMRA_E_UNSUPPORTED,
      ImportJson("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", &err));
  EXPECT_STREQ("tokenizer.json: BPE without ByteLevel or SentencePiece-style spaces", err.msg);
  // A minimal valid byte-level file imports.
  EXPECT_EQ(MEMRA_OK, ImportJson("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, "
                                 "\"ab\": 2}, \"merges\": [[\"a\", \"b\"]]}" +
                                     bl,
                                 &err))
      << err.msg;
}

} // namespace
