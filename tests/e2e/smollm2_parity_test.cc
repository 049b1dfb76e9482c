// The default model (SmolLM2-135M-Instruct Q4_1) against HF transformers loading the same
// GGUF in float32 (fixtures by tools/gen_e2e_fixtures.py): prompt tokenization, last-
// position logits and 32 greedy tokens for each fixed prompt.
#include "tests/e2e/engine_fixture.h"

extern "C" {
#include "core/text/tokenizer.h"
}

#include <cstdlib>

static std::string model_path() {
  const char *p = getenv("MEMRA_MODEL");
  return p ? p : "";
}

class SmolLM2 : public ::testing::TestWithParam<int> {
protected:
  void SetUp() override {
    ASSERT_FALSE(model_path().empty())
        << "MEMRA_MODEL is not set: run through tools/test.sh, which fetches the default model";
  }
  std::string fixture() { return "tests/e2e/fixtures/smollm2_case" + std::to_string(GetParam()); }
};

TEST_P(SmolLM2, LogitsAndGreedyTokensMatchTransformers) {
  for (int32_t kv : {MEMRA_TYPE_F32, MEMRA_TYPE_F16}) {
    Engine e;
    ASSERT_TRUE(e.open(model_path(), kv, 128)) << e.err.msg;
    std::vector<int32_t> prompt = read_ids(fixture() + ".txt", "prompt");
    std::vector<int32_t> want = read_ids(fixture() + ".txt", "greedy_hf");
    std::vector<float> ref = read_f32(fixture() + ".logits.f32");
    const size_t nv = (size_t)e.m->hp.n_vocab;
    ASSERT_EQ(nv, ref.size());
    ASSERT_EQ(32u, want.size());
    std::vector<float> lg(nv);
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, prompt.data(), (int32_t)prompt.size(), 0, false,
                                       lg.data(), &e.err))
        << e.err.msg;
    const double err = rel_l2(lg.data(), ref.data(), nv);
    printf("case %d kv %s: last-position logits rel L2 %.3g\n", GetParam(),
           kv == MEMRA_TYPE_F32 ? "f32" : "f16", err);
    // F32 cache: the same float32 math as the reference; F16: the cache rounds k and v.
    EXPECT_LT(err, kv == MEMRA_TYPE_F32 ? 1e-5 : 3e-3) << "kv " << kv;
    std::vector<int32_t> got;
    greedy_continue(e, (int32_t)prompt.size(), 32, &got);
    EXPECT_EQ(want, got) << "greedy ids differ from transformers, kv "
                         << (kv == MEMRA_TYPE_F32 ? "f32" : "f16");
  }
}

TEST_P(SmolLM2, PromptTokenizationMatchesTransformers) {
  std::string text = read_prompt_text(fixture() + ".txt");
  ASSERT_FALSE(text.empty());
  std::vector<int32_t> got;
  ASSERT_NO_FATAL_FAILURE(tokenize_with_gguf(model_path(), text, false, &got));
  EXPECT_EQ(read_ids(fixture() + ".txt", "prompt"), got);
}

INSTANTIATE_TEST_SUITE_P(Prompts, SmolLM2, ::testing::Values(0, 1, 2));
