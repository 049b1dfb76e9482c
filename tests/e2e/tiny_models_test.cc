// Tiny synthetic models of every supported architecture, written by our GGUF writer
// (tools/synth), against llama.cpp's logits for the same file (tools/gen_e2e_fixtures.py).
#include "tests/e2e/engine_fixture.h"

#include <cstdlib>

static const char *kDir = "tests/e2e/fixtures/";

class TinyModel : public ::testing::TestWithParam<const char *> {};

TEST_P(TinyModel, EveryPositionMatchesLlamaCpp) {
  const std::string name = GetParam();
  for (int32_t kv : {MEMRA_TYPE_F32, MEMRA_TYPE_F16}) {
    Engine e;
    ASSERT_TRUE(e.open(kDir + name + ".gguf", kv)) << e.err.msg;
    std::vector<int32_t> ids = read_ids(kDir + name + ".txt", "ids");
    std::vector<float> ref = read_f32(kDir + name + ".logits.f32");
    const size_t nv = (size_t)e.m->hp.n_vocab;
    ASSERT_EQ(ref.size(), ids.size() * nv);
    std::vector<float> got(ref.size());
    ASSERT_EQ(MEMRA_OK,
              memra_ctx_eval(e.c, 0, ids.data(), (int32_t)ids.size(), 0, true, got.data(), &e.err))
        << e.err.msg;
    // F32 cache: both engines do float32 math; F16: the cache rounds k and v.
    const double bound = kv == MEMRA_TYPE_F32 ? 1e-4 : 2e-3;
    for (size_t p = 0; p < ids.size(); ++p)
      EXPECT_LT(rel_l2(&got[p * nv], &ref[p * nv], nv), bound)
          << name << " position " << p << " kv " << (kv == MEMRA_TYPE_F32 ? "f32" : "f16");
  }
}

// Token by token (decode of a batch of one) gives the same logits as one prefill.
TEST_P(TinyModel, DecodeStepsMatchPrefill) {
  const std::string name = GetParam();
  Engine e;
  ASSERT_TRUE(e.open(kDir + name + ".gguf", MEMRA_TYPE_F32)) << e.err.msg;
  std::vector<int32_t> ids = read_ids(kDir + name + ".txt", "ids");
  std::vector<float> ref = read_f32(kDir + name + ".logits.f32");
  const size_t nv = (size_t)e.m->hp.n_vocab;
  std::vector<float> got(nv);
  for (size_t p = 0; p < ids.size(); ++p) {
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, &ids[p], 1, (int32_t)p, false, got.data(), &e.err))
        << e.err.msg;
    EXPECT_LT(rel_l2(got.data(), &ref[p * nv], nv), 1e-4) << name << " step " << p;
  }
}

// The committed fixture is exactly what our writer produces from the seed.
TEST_P(TinyModel, WriterReproducesTheFixture) {
  const std::string name = GetParam();
  std::string out =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name + ".gguf";
  std::string cmd = "tools/synth/memra-synth --preset " + name + " --types f32 --seed 7 -o " + out;
  ASSERT_EQ(0, system(cmd.c_str()));
  std::ifstream a(out, std::ios::binary), b(kDir + name + ".gguf", std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(a)), {}),
      sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_GT(sb.size(), 100000u);
  EXPECT_TRUE(sa == sb) << "memra-synth output differs from " << name << ".gguf";
}

INSTANTIATE_TEST_SUITE_P(Archs, TinyModel,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));
