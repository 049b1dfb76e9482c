// Tiny seeded random HF models of each non-dense family, converted by llama.cpp's own
// convert_hf_to_gguf.py (fixtures by tools/gen_family_fixtures.py), against HF
// transformers float32 logits of every position of a fixed token sequence: prefill (the
// whole sequence in odd-sized chunks) and token-by-token decode are checked separately,
// each against HF's own prefill and cached decode.
#include "tests/families/family_fixture.h"

static std::string fx(const std::string &name) { return "tests/families/fixtures/" + name; }

class Tiny : public ::testing::TestWithParam<const char *> {};

// Acceptance: 1e-3 with a float32 cache (same math as HF; measured about 1e-6). An F16
// cache rounds k and v, which costs up to about 1e-3 on these random weights.
static void check_positions(const char *what, const std::string &name, const float *got,
                            const std::vector<float> &ref, size_t n_pos, size_t nv, double tol) {
  double worst = 0;
  for (size_t p = 0; p < n_pos; ++p) {
    double e = rel_l2(got + p * nv, ref.data() + p * nv, nv);
    worst = e > worst ? e : worst;
    EXPECT_LT(e, tol) << name << " " << what << " position " << p;
  }
  printf("%s %s: worst position logits rel L2 %.3g over %zu positions\n", name.c_str(), what,
         worst, n_pos);
}

TEST_P(Tiny, PrefillAndDecodeLogitsMatchTransformers) {
  const std::string name = GetParam();
  std::vector<int32_t> ids = read_ids(fx(name + ".txt"), "ids");
  std::vector<float> pre = read_f32(fx(name + ".prefill.f32")),
                     dec = read_f32(fx(name + ".decode.f32"));
  ASSERT_FALSE(ids.empty());
  const size_t n = ids.size();
  for (int32_t kv : {MEMRA_TYPE_F32, MEMRA_TYPE_F16}) {
    Engine e;
    ASSERT_TRUE(e.open(fx(name + ".gguf"), kv, 64)) << e.err.msg;
    const size_t nv = (size_t)e.m->hp.n_vocab;
    ASSERT_EQ(n * nv, pre.size());
    ASSERT_EQ(n * nv, dec.size());
    std::vector<float> lg(n * nv);
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, ids.data(), (int32_t)n, 0, true, lg.data(), &e.err))
        << e.err.msg;
    const std::string tag = name + (kv == MEMRA_TYPE_F32 ? " kv f32" : " kv f16");
    const double tol = kv == MEMRA_TYPE_F32 ? 1e-4 : 3e-3;
    check_positions("prefill", tag, lg.data(), pre, n, nv, tol);
    // a fresh context keeps the decode check independent of the prefill one
    Engine d;
    ASSERT_TRUE(d.open(fx(name + ".gguf"), kv, 64)) << d.err.msg;
    for (size_t p = 0; p < n; ++p)
      ASSERT_EQ(MEMRA_OK, memra_ctx_eval(d.c, 0, &ids[p], 1, (int32_t)p, true,
                                         lg.data() + p * nv, &d.err))
          << d.err.msg;
    check_positions("decode", tag, lg.data(), dec, n, nv, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Tiny,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });
