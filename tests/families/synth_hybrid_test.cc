// memra-synth's MoE and hybrid presets write files the loader takes with the shapes they
// asked for (recurrent layers, experts, shared expert), and the models they make run on the
// CPU plugin: finite, non-constant logits, prefill in odd chunks equal to token-by-token
// decode. The GPU machine synthesizes the real-shape presets (qwen3next-80b-a3b,
// qwen3-30b-a3b) for the graph gate and benchmarks; this keeps the writer honest in CI.
#include <cstdlib>
#include <cstring>

#include "tests/e2e/engine_fixture.h"

static std::string synth(const std::string &preset, const std::string &types,
                         const std::string &name) {
  const char *tmp = getenv("TEST_TMPDIR");
  std::string out = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::string cmd = "tools/synth/memra-synth --preset " + preset + " --types " + types +
                    " --seed 7 -o " + out + " 2>" + out + ".err";
  return system(cmd.c_str()) == 0 ? out : "";
}

// Prompt logits of 23 seeded ids in odd chunks (e's context) equal token-by-token decode in
// a fresh context; every position's logits are finite and not constant.
static void prefill_equals_decode(Engine &e, const std::string &path, const char *types) {
  const memra_hparams &hp = e.m->hp;
  std::vector<int32_t> ids;
  uint32_t s = 12345;
  for (int i = 0; i < 23; ++i)
    ids.push_back((int32_t)((s = s * 1103515245u + 12345u) >> 16) % 300);
  const size_t n = ids.size(), nv = (size_t)hp.n_vocab;
  std::vector<float> pre(n * nv), dec(n * nv);
  ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, ids.data(), (int32_t)n, 0, true, pre.data(), &e.err))
      << e.err.msg;
  Engine d;
  ASSERT_TRUE(d.open(path, MEMRA_TYPE_F32, 64)) << d.err.msg;
  for (size_t p = 0; p < n; ++p)
    ASSERT_EQ(MEMRA_OK,
              memra_ctx_eval(d.c, 0, &ids[p], 1, (int32_t)p, true, dec.data() + p * nv, &d.err))
        << d.err.msg;
  for (size_t p = 0; p < n; ++p) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < nv; ++i) {
      ASSERT_TRUE(std::isfinite(pre[p * nv + i])) << types << " position " << p;
      mean += pre[p * nv + i] / nv;
    }
    for (size_t i = 0; i < nv; ++i)
      var += (pre[p * nv + i] - mean) * (pre[p * nv + i] - mean) / nv;
    EXPECT_GT(var, 1e-8) << types << " position " << p << ": constant logits";
    EXPECT_LT(rel_l2(dec.data() + p * nv, pre.data() + p * nv, nv), 1e-5)
        << types << " position " << p;
  }
}

TEST(SynthHybrid, TinyQwen3NextLoadsAndPrefillEqualsDecode) {
  for (const char *types : {"f32", "q8_0"}) {
    const std::string path = synth("tiny-qwen3next", types, std::string("tq3n-") + types + ".gguf");
    ASSERT_FALSE(path.empty()) << types;
    Engine e;
    ASSERT_TRUE(e.open(path, MEMRA_TYPE_F32, 64)) << e.err.msg;
    const memra_hparams &hp = e.m->hp;
    EXPECT_EQ(MEMRA_ARCH_QWEN3NEXT, hp.arch);
    EXPECT_EQ(300, hp.n_vocab);
    EXPECT_EQ(4, hp.n_layer);
    EXPECT_EQ(7, hp.n_expert);
    EXPECT_EQ(2, hp.n_expert_used);
    EXPECT_EQ(64, hp.n_ff_exp);
    EXPECT_EQ(64, hp.n_ff_shexp);
    EXPECT_EQ(2, hp.ssm_k_heads);
    EXPECT_EQ(4, hp.ssm_v_heads);
    EXPECT_EQ(32, hp.ssm_head_dim);
    EXPECT_EQ(8, hp.n_rot);
    for (int il = 0; il < 4; ++il)
      EXPECT_EQ(il != 3, memra_hparams_layer_recurrent(&hp, il)) << "layer " << il;

    ASSERT_NO_FATAL_FAILURE(prefill_equals_decode(e, path, types));
  }
}

// ABI 1.9: a shared expert of the routed experts' width and type is expert n_expert of the
// stacks (model.c stack_shexp) and rides in the routed matmul_id launches of decode rows,
// combined by moe_combine_shexp; prompt rows keep it apart (their GEMMs). On the CPU, whose
// matmul and matmul_id sum in one order, every logit of a prompt (chunks of 7), of decode steps
// and of mixed steps (sequence 0's decode row first, then a 3-row prompt chunk of sequence 1)
// is bit-identical to the engine whose plugin lacks the slot; each decode or mixed step makes
// one moe_combine_shexp a layer, each step with prompt rows one moe_combine_gated a layer.
// ABI 1.20: the stacked engine's plugin also has moe_combine_rmsnorm, so a decode-only step's
// combine goes with the norm after it (one moe_combine_rmsnorm a layer, its shared-expert form);
// a mixed step's decode row still makes its moe_combine_shexp (its norm adds the whole step's
// rows).
namespace {
const memra_backend_vt *g_sx_real;
int g_sx_calls, g_sx_gated, g_sx_norm;
memra_status rec_combine_norm(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                              const memra_tensor *wn, float eps, const memra_tensor *y,
                              const memra_tensor *d, const memra_tensor *w, const memra_tensor *g) {
  g_sx_norm += g != nullptr;
  return g_sx_real->moe_combine_rmsnorm(be, xn, x, wn, eps, y, d, w, g);
}
memra_status rec_shexp(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                       const memra_tensor *w, const memra_tensor *g) {
  ++g_sx_calls;
  return g_sx_real->moe_combine_shexp(be, y, x, w, g);
}
memra_status rec_gated(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                       const memra_tensor *w, const memra_tensor *sh, const memra_tensor *g) {
  ++g_sx_gated;
  return g_sx_real->moe_combine_gated(be, y, x, w, sh, g);
}
int g_sx_route_stacked;
/* ABI 1.21: a stacked layer's decode rows route through moe_route_glu with the shared expert's
 * preset id column past the routed ones */
memra_status rec_route_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                           int32_t act, const memra_tensor *wt, const memra_tensor *logits,
                           int32_t normalize) {
  g_sx_route_stacked += ids->ne0 == wt->ne0 + 1;
  return g_sx_real->moe_route_glu(be, y, x, w, ids, n_expert, act, wt, logits, normalize);
}
} // namespace

TEST(SynthHybrid, SharedExpertStackedWithTheSameBits) {
  for (const char *types : {"f32", "q8_0"}) {
    const std::string path =
        synth("tiny-qwen3next", types, std::string("tq3n-sx-") + types + ".gguf");
    ASSERT_FALSE(path.empty()) << types;
    memra_ctx_params p = memra_ctx_defaults();
    p.n_ctx = 64;
    p.n_seq_max = 2;
    p.n_ubatch = 7;
    p.block_size = 5;
    p.kv_type = MEMRA_TYPE_F32;
    Engine with, without;
    ASSERT_TRUE(with.open_with(path, p)) << with.err.msg;
    ASSERT_TRUE(without.open_with(path, p)) << without.err.msg;
    const memra_hparams &hp = with.m->hp;
    for (int il = 0; il < hp.n_layer; ++il)
      ASSERT_TRUE(with.m->layers[il].shexp_stacked) << types << " layer " << il;
    ASSERT_NE(nullptr, with.bh.vt->moe_combine_shexp) << "the CPU plugin lost its slot";
    g_sx_real = with.bh.vt;
    memra_backend_vt vw = *with.bh.vt, vo = *without.bh.vt;
    vw.moe_combine_shexp = vo.moe_combine_shexp = rec_shexp;
    vw.moe_combine_gated = vo.moe_combine_gated = rec_gated;
    vw.matmul_id_combine = vo.matmul_id_combine = nullptr; /* the combine counted apart */
    vo.moe_combine_shexp = nullptr;
    vw.moe_combine_rmsnorm = rec_combine_norm;
    vo.moe_combine_rmsnorm = nullptr;
    ASSERT_NE(nullptr, with.bh.vt->moe_route_glu) << "the CPU plugin lost its moe_route_glu";
    vw.moe_route_glu = vo.moe_route_glu = rec_route_glu;
    with.m->vt = &vw;
    without.m->vt = &vo;
    std::vector<int32_t> ids;
    uint32_t s = 777;
    for (int i = 0; i < 40; ++i)
      ids.push_back((int32_t)((s = s * 1103515245u + 12345u) >> 16) % 300);
    const size_t nv = (size_t)hp.n_vocab;
    std::vector<float> out[2];
    int calls[2] = {0, 0}, gated[2] = {0, 0}, normed[2] = {0, 0}, stacked[2] = {0, 0};
    for (int v = 0; v < 2; ++v) {
      Engine *e = v ? &without : &with;
      std::vector<float> &o = out[v];
      g_sx_calls = g_sx_gated = g_sx_norm = g_sx_route_stacked = 0;
      o.resize(20 * nv);
      // sequence 0's prompt, 20 positions in chunks of 7
      ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e->c, 0, ids.data(), 20, 0, true, o.data(), &e->err))
          << e->err.msg;
      ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&e->c->pages, 0, 40, &e->err));
      ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&e->c->pages, 1, 40, &e->err));
      // 6 decode steps of sequence 0, then 3 mixed steps: its decode row, then 3 prompt rows
      // of sequence 1 (positions 3 i .. 3 i + 2)
      for (int t = 0; t < 9; ++t) {
        const bool mixed = t >= 6;
        const int32_t n = mixed ? 4 : 1, i = t - 6;
        int32_t tok[4], pos[4], seq[4], rows[4] = {0, 1, 2, 3};
        tok[0] = ids[20 + t];
        pos[0] = 20 + t;
        seq[0] = 0;
        for (int j = 1; j < n; ++j) {
          tok[j] = ids[30 + 3 * i + j - 1];
          pos[j] = 3 * i + j - 1;
          seq[j] = 1;
        }
        ASSERT_EQ(MEMRA_OK, memra_ctx_set_rows(e->c, n, tok, pos, seq, n, rows, &e->err))
            << e->err.msg;
        ASSERT_EQ(1, e->c->n_decode) << "one decode row first";
        ASSERT_EQ(MEMRA_OK, memra_ctx_forward(e->c, &e->err)) << e->err.msg;
        const size_t at = o.size();
        o.resize(at + (size_t)n * nv);
        ASSERT_EQ(MEMRA_OK, memra_ctx_get_logits(e->c, o.data() + at, &e->err));
      }
      calls[v] = g_sx_calls;
      gated[v] = g_sx_gated;
      normed[v] = g_sx_norm;
      stacked[v] = g_sx_route_stacked;
    }
    with.m->vt = with.bh.vt;
    without.m->vt = without.bh.vt;
    ASSERT_EQ(out[0].size(), out[1].size());
    EXPECT_EQ(0, memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float))) << types;
    const int L = hp.n_layer, chunks = 3;
    EXPECT_EQ(6 * L, normed[0]) << types << ": decode steps, with the next norm";
    EXPECT_EQ(3 * L, calls[0]) << types << ": mixed steps";
    EXPECT_EQ(0, normed[1]) << types;
    EXPECT_EQ((chunks + 3) * L, gated[0])
        << types << ": prompt chunks and mixed steps' prompt rows";
    EXPECT_EQ(0, calls[1]) << types;
    EXPECT_EQ((chunks + 9) * L, gated[1]) << types;
    EXPECT_EQ(9 * L, stacked[0]) << types << ": decode rows route with the shared expert's id";
    EXPECT_EQ(0, stacked[1]) << types;
  }
}

// The qwen3moe preset (Qwen3-30B-A3B structure at toy size): experts without a shared one.
TEST(SynthHybrid, TinyQwen3MoeLoadsAndPrefillEqualsDecode) {
  const std::string path = synth("tiny-qwen3moe", "q8_0", "tq3m.gguf");
  ASSERT_FALSE(path.empty());
  Engine e;
  ASSERT_TRUE(e.open(path, MEMRA_TYPE_F32, 64)) << e.err.msg;
  const memra_hparams &hp = e.m->hp;
  EXPECT_EQ(MEMRA_ARCH_QWEN3MOE, hp.arch);
  EXPECT_EQ(2, hp.n_layer);
  EXPECT_EQ(7, hp.n_expert);
  EXPECT_EQ(2, hp.n_expert_used);
  EXPECT_EQ(32, hp.n_ff_exp);
  EXPECT_EQ(0, hp.n_ff_shexp);
  EXPECT_FALSE(memra_hparams_layer_recurrent(&hp, 0));
  ASSERT_NO_FATAL_FAILURE(prefill_equals_decode(e, path, "q8_0"));
}

// K-quants need rows of whole 256-element blocks: the toy widths (64) are refused with
// one line naming the tensor, and no file is left half-written as a success.
TEST(SynthHybrid, KQuantOfToyWidthIsRefused) {
  const std::string path = synth("tiny-qwen3next", "q4_k", "tq3n-q4k.gguf");
  EXPECT_TRUE(path.empty());
  const char *tmp = getenv("TEST_TMPDIR");
  std::ifstream f(std::string(tmp ? tmp : "/tmp") + "/tq3n-q4k.gguf.err");
  std::string line;
  std::getline(f, line);
  EXPECT_NE(std::string::npos, line.find("is not a multiple of Q4_K's block of 256")) << line;
}
