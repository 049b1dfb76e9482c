// Tiny seeded random HF models of each non-dense family, converted by llama.cpp's own
// convert_hf_to_gguf.py (fixtures by tools/gen_family_fixtures.py), against HF
// transformers float32 logits of every position of a fixed token sequence: prefill (the
// whole sequence in odd-sized chunks) and token-by-token decode are checked separately,
// each against HF's own prefill and cached decode.
#include "tests/e2e/engine_fixture.h"

extern "C" {
#include "core/decode/decoder.h"
}

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
  printf("%s %s: worst position logits rel L2 %.3g over %zu positions\n", name.c_str(), what, worst,
         n_pos);
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
      ASSERT_EQ(MEMRA_OK,
                memra_ctx_eval(d.c, 0, &ids[p], 1, (int32_t)p, true, lg.data() + p * nv, &d.err))
          << d.err.msg;
    check_positions("decode", tag, lg.data(), dec, n, nv, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Tiny,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// Lookahead (ABI 1.18): the decoder queueing each step before the last token is read gives the
// same greedy tokens on every family, and it is offered to a sequence that goes on afterwards
// only where no recurrent state takes in the step run past the last token (qwen3moe alone).
TEST_P(Tiny, LookaheadDecodeMatchesAndRecurrentStateDeclines) {
  const std::string name = GetParam();
  std::vector<int32_t> ids = read_ids(fx(name + ".txt"), "ids");
  ASSERT_GT(ids.size(), 3u);
  const int32_t P = (int32_t)ids.size() - 1, N = 20;
  std::vector<int32_t> runs[2];
  for (int la = 0; la < 2; ++la) {
    Engine e;
    ASSERT_TRUE(e.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << e.err.msg;
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, ids.data(), P, 0, false, nullptr, &e.err));
    memra_decoder d;
    int32_t pos = P;
    ASSERT_EQ(MEMRA_OK, memra_decoder_init(&d, e.c, 1, &ids[P], &pos, true, &e.err)) << e.err.msg;
    EXPECT_EQ(name == "qwen3moe", memra_decoder_can_look_ahead(&d)) << name;
    for (int32_t i = 0; i < N; ++i) {
      d.lookahead = la == 1 && i + 1 < N;
      int32_t id;
      ASSERT_EQ(MEMRA_OK, memra_decoder_step(&d, &id, &e.err)) << e.err.msg;
      runs[la].push_back(id);
    }
    EXPECT_EQ(la == 1 ? N - 1 : 0, d.n_ahead);
    EXPECT_EQ(0, d.in_flight); // none past the last step asked for
    memra_decoder_free(&d);
  }
  EXPECT_EQ(runs[0], runs[1]) << name;
}

// Serving shape: two sequences decoded in one context, their rows interleaved in each
// step (per-sequence recurrent state and KV), then sequence 0 evaluated again from
// position 0 over its used slot (the state must restart from zero).
TEST_P(Tiny, InterleavedSequencesAndSlotReuse) {
  const std::string name = GetParam();
  std::vector<int32_t> ids = read_ids(fx(name + ".txt"), "ids");
  std::vector<float> pre = read_f32(fx(name + ".prefill.f32")),
                     dec = read_f32(fx(name + ".decode.f32"));
  const size_t n = ids.size();
  Engine e;
  memra_ctx_params p = memra_ctx_defaults();
  p.n_ctx = 64;
  p.n_seq_max = 2;
  p.n_ubatch = 8;
  p.block_size = 3;
  p.kv_type = MEMRA_TYPE_F32;
  ASSERT_TRUE(e.open_with(fx(name + ".gguf"), p)) << e.err.msg;
  const size_t nv = (size_t)e.m->hp.n_vocab;
  ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&e.c->pages, 0, (int32_t)n, &e.err));
  ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&e.c->pages, 1, (int32_t)n, &e.err));
  std::vector<float> lg(2 * nv);
  double worst = 0;
  for (size_t t = 0; t < n; ++t) {
    // sequence 1 first in the step, then sequence 0
    int32_t tok[2] = {ids[t], ids[t]}, pos[2] = {(int32_t)t, (int32_t)t}, seq[2] = {1, 0},
            out[2] = {0, 1};
    ASSERT_EQ(MEMRA_OK, memra_ctx_set_rows(e.c, 2, tok, pos, seq, 2, out, &e.err)) << e.err.msg;
    ASSERT_EQ(MEMRA_OK, memra_ctx_forward(e.c, &e.err)) << e.err.msg;
    ASSERT_EQ(MEMRA_OK, memra_ctx_get_logits(e.c, lg.data(), &e.err));
    for (int r = 0; r < 2; ++r) {
      double err = rel_l2(lg.data() + r * nv, dec.data() + t * nv, nv);
      worst = err > worst ? err : worst;
      EXPECT_LT(err, 1e-4) << name << " position " << t << " row " << r;
    }
  }
  printf("%s interleaved decode of 2 sequences: worst rel L2 %.3g\n", name.c_str(), worst);
  std::vector<float> all(n * nv);
  ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, ids.data(), (int32_t)n, 0, true, all.data(), &e.err))
      << e.err.msg;
  for (size_t t = 0; t < n; ++t)
    EXPECT_LT(rel_l2(all.data() + t * nv, pre.data() + t * nv, nv), 1e-4)
        << name << " re-prefill over a used slot, position " << t;
}

// A backend without the newer ops (an older plugin, or one without these kernels yet) is
// refused at load with one line naming the backend and the op.
TEST(TinyLoad, BackendWithoutNewOpsIsRefused) {
  Engine e;
  memra_open_params op = {sizeof op, 1, 0};
  ASSERT_EQ(MEMRA_OK,
            memra_backend_open("plugins/cpu/libmemra_cpu.so", nullptr, &op, &e.bh, &e.err));
  struct Case {
    const char *model, *want;
    void (*strip)(memra_backend_vt *);
  } cases[] = {
      {"qwen3moe", "backend cpu has no matmul_id op, which qwen3moe models need",
       [](memra_backend_vt *v) { v->matmul_id = nullptr; }},
      {"qwen35", "backend cpu has no gated_delta_rule op, which qwen35 models need",
       [](memra_backend_vt *v) { v->gated_delta_rule = nullptr; }},
      {"qwen3next", "backend cpu has no moe_route op, which qwen3next models need",
       [](memra_backend_vt *v) { v->moe_route = nullptr; }},
  };
  for (const Case &k : cases) {
    memra_backend_vt vt = *e.bh.vt;
    k.strip(&vt);
    memra_gguf *g = nullptr;
    ASSERT_EQ(MEMRA_OK, memra_gguf_open(fx(std::string(k.model) + ".gguf").c_str(), &g, &e.err));
    memra_model *m = nullptr;
    EXPECT_EQ(MEMRA_E_UNSUPPORTED, memra_model_load(g, &vt, e.bh.be, nullptr, nullptr, &m, &e.err));
    EXPECT_EQ(nullptr, m);
    EXPECT_STREQ(k.want, e.err.msg);
    memra_gguf_close(g);
  }
}
