// Gemma 3 270M Q4_K_M (tools/fetch_gemma3.sh; path in MEMRA_GEMMA3) against HF transformers
// loading the same GGUF in float32 (fixtures by tools/gen_family_fixtures.py): the last-
// position logits after prefill and the greedy tokens after it, for three short prompts
// (one in the chat format) and one of over 512 tokens, where the local layers' sliding
// window cuts in.
#include "tests/e2e/engine_fixture.h"

extern "C" {
#include "core/text/tokenizer.h"
}

#include <cstdlib>

static std::string model_path() {
  const char *p = getenv("MEMRA_GEMMA3");
  return p ? p : "";
}

class Gemma3 : public ::testing::TestWithParam<int> {
protected:
  void SetUp() override {
    if (model_path().empty())
      GTEST_SKIP() << "MEMRA_GEMMA3 is not set (tools/fetch_gemma3.sh prints the path)";
  }
  std::string fixture() {
    return "tests/families/fixtures/gemma3_case" + std::to_string(GetParam());
  }
};

TEST_P(Gemma3, LogitsAndGreedyTokensMatchTransformers) {
  std::vector<int32_t> prompt = read_ids(fixture() + ".txt", "prompt");
  std::vector<int32_t> want = read_ids(fixture() + ".txt", "greedy_hf");
  std::vector<float> ref = read_f32(fixture() + ".logits.f32");
  ASSERT_FALSE(prompt.empty());
  ASSERT_FALSE(want.empty());
  for (int32_t kv : {MEMRA_TYPE_F32, MEMRA_TYPE_F16}) {
    Engine e;
    // ubatch 61: the >512-token prompt in few chunks, still crossing chunk boundaries
    ASSERT_TRUE(e.open(model_path(), kv, 1024, 61, 16)) << e.err.msg;
    ASSERT_EQ(MEMRA_ARCH_GEMMA3, e.m->hp.arch);
    const size_t nv = (size_t)e.m->hp.n_vocab;
    ASSERT_EQ(nv, ref.size());
    std::vector<float> lg(nv);
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, prompt.data(), (int32_t)prompt.size(), 0, false,
                                       lg.data(), &e.err))
        << e.err.msg;
    const double err = rel_l2(lg.data(), ref.data(), nv);
    printf("gemma3 case %d (%zu prompt tokens) kv %s: last-position logits rel L2 %.3g\n",
           GetParam(), prompt.size(), kv == MEMRA_TYPE_F32 ? "f32" : "f16", err);
    EXPECT_LT(err, kv == MEMRA_TYPE_F32 ? 2e-5 : 3e-3) << "kv " << kv;
    std::vector<int32_t> got;
    ASSERT_NO_FATAL_FAILURE(greedy_continue(e, (int32_t)prompt.size(), want.size(), &got));
    EXPECT_EQ(want, got) << "greedy ids differ from transformers, kv "
                         << (kv == MEMRA_TYPE_F32 ? "f32" : "f16");
  }
}

// The SPM vocabulary of the GGUF: BOS added, <start_of_turn>/<end_of_turn> parsed.
TEST_P(Gemma3, PromptTokenizationMatchesTransformers) {
  std::string text = read_prompt_text(fixture() + ".txt");
  ASSERT_FALSE(text.empty());
  std::vector<int32_t> got;
  ASSERT_NO_FATAL_FAILURE(tokenize_with_gguf(model_path(), text, true, &got));
  EXPECT_EQ(read_ids(fixture() + ".txt", "prompt"), got);
}

INSTANTIATE_TEST_SUITE_P(Cases, Gemma3, ::testing::Values(0, 1, 2, 3));
