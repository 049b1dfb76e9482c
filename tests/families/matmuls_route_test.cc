// The core's grouped projections (memra_blk_matmuls) in the hybrid and MoE families: in a
// decode step the projections that read one x go to the plugin as one matmul_n per group of
// same-type weights (GDN: qkv, z, beta, alpha; gated attention: q+gate, k, v; MoE: the router
// with the shared expert's gate, up and gate logit), the logits bit-identical to an engine
// whose plugin lacks matmul_n (one matmul each), and every output computed exactly once.
#include <functional>

#include "tests/e2e/route_record.h"

extern "C" {
#include "core/models/model.h"
}

namespace {
memra_status rec_matmul_id(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *ids, int32_t n_expert) {
  g_log.push_back("matmul_id " + std::to_string(y->ne0));
  return g_real->matmul_id(be, y, x, w, ids, n_expert);
}

memra_status rec_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                         const memra_tensor *w) {
  g_log.push_back("moe_combine");
  return g_real->moe_combine(be, y, x, w);
}
memra_status rec_combine_norm(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                              const memra_tensor *wn, float eps, const memra_tensor *y,
                              const memra_tensor *d, const memra_tensor *w, const memra_tensor *g) {
  g_log.push_back(g ? "moe_combine_rmsnorm shexp" : "moe_combine_rmsnorm");
  return g_real->moe_combine_rmsnorm(be, xn, x, wn, eps, y, d, w, g);
}
memra_status rec_qk_rope(memra_backend *be, const memra_tensor *q, const memra_tensor *qi,
                         const memra_tensor *wq, const memra_tensor *k, const memra_tensor *wk,
                         float eps, const memra_tensor *v, const memra_tensor *kc,
                         const memra_tensor *vc, const memra_batch *b, const memra_rope_params *p) {
  g_log.push_back(qi ? "rmsnorm_qk_rope_kv q_in" : "rmsnorm_qk_rope_kv");
  return g_real->rmsnorm_qk_rope_kv(be, q, qi, wq, k, wk, eps, v, kc, vc, b, p);
}
memra_status rec_combine_gated(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *sh,
                               const memra_tensor *g) {
  g_log.push_back("moe_combine_gated");
  return g_real->moe_combine_gated(be, y, x, w, sh, g);
}

memra_status rec_matmul_id_combine(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                   const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                                   const memra_tensor *wt, const memra_tensor *g) {
  g_log.push_back(g ? "matmul_id_combine shexp" : "matmul_id_combine");
  return g_real->matmul_id_combine(be, y, x, w, ids, n_expert, wt, g);
}

memra_status rec_matmul_id_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                               int32_t act) {
  g_log.push_back("matmul_id_glu");
  return g_real->matmul_id_glu(be, y, x, w, ids, n_expert, act);
}
memra_status rec_route(memra_backend *be, const memra_tensor *ids, const memra_tensor *w,
                       const memra_tensor *logits, int32_t normalize) {
  g_log.push_back("moe_route");
  return g_real->moe_route(be, ids, w, logits, normalize);
}
memra_status rec_route_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                           int32_t act, const memra_tensor *wt, const memra_tensor *logits,
                           int32_t normalize) {
  g_log.push_back("moe_route_glu " + std::to_string(ids->ne0 - wt->ne0));
  return g_real->moe_route_glu(be, y, x, w, ids, n_expert, act, wt, logits, normalize);
}
memra_status rec_matmul_n_route(memra_backend *be, int32_t n, const memra_tensor *y,
                                const memra_tensor *x, const memra_tensor *w, const memra_tensor *b,
                                const memra_tensor *ids, const memra_tensor *wt,
                                int32_t normalize) {
  g_log.push_back("matmul_n_route " + std::to_string(n));
  return g_real->matmul_n_route(be, n, y, x, w, b, ids, wt, normalize);
}
memra_status rec_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *g,
                     const memra_tensor *u, int32_t act) {
  g_log.push_back("glu");
  return g_real->glu(be, y, g, u, act);
}

memra_status rec_ffn_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *h,
                         const memra_tensor *u, const memra_tensor *x, const memra_tensor *wg,
                         const memra_tensor *wu, const memra_tensor *wd, int32_t act) {
  g_log.push_back("ffn_glu");
  return g_real->ffn_glu(be, y, h, u, x, wg, wu, wd, act);
}

memra_status rec_rmsnorm_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *w, const memra_tensor *z, float eps,
                              int32_t act) {
  g_log.push_back("rmsnorm_gate");
  return g_real->rmsnorm_gate(be, y, x, w, z, eps, act);
}

memra_status rec_matmul_n_conv(memra_backend *be, int32_t n, const memra_tensor *y,
                               const memra_tensor *x, const memra_tensor *w, const memra_tensor *cw,
                               const memra_tensor *st, const memra_batch *b) {
  g_log.push_back("matmul_n_conv " + std::to_string(n));
  return g_real->matmul_n_conv(be, n, y, x, w, cw, st, b);
}
memra_status rec_ssm_conv(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                          const memra_tensor *w, const memra_tensor *st, const memra_batch *b) {
  g_log.push_back("ssm_conv");
  return g_real->ssm_conv(be, y, x, w, st, b);
}
memra_status rec_attention_gate(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *kc, const memra_tensor *vc,
                                const memra_batch *b, const memra_attn_params *p,
                                const memra_tensor *g) {
  g_log.push_back("attention_gate");
  return g_real->attention_gate(be, out, q, kc, vc, b, p, g);
}
memra_status rec_sigmoid_gate(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *g) {
  g_log.push_back("sigmoid_gate");
  return g_real->sigmoid_gate(be, y, x, g);
}
memra_status rec_gdr_norm(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                          const memra_tensor *k, const memra_tensor *v, const memra_tensor *a,
                          const memra_tensor *b, const memra_tensor *al, const memra_tensor *dt,
                          const memra_tensor *st, const memra_batch *bt, const memra_gdn_params *p,
                          const memra_tensor *nw, const memra_tensor *z, float eps, int32_t act) {
  g_log.push_back("gated_delta_rule_norm");
  return g_real->gated_delta_rule_norm(be, out, q, k, v, a, b, al, dt, st, bt, p, nw, z, eps, act);
}

// Outputs computed by a step's calls: a matmul gives one, a matmul_n n.
size_t outputs(const std::vector<std::string> &log) {
  size_t n = 0;
  for (const std::string &s : log)
    n += s == "matmul" ? 1 : s.rfind("matmul_n ", 0) == 0 ? std::stoul(s.substr(9)) : 0;
  return n;
}

std::string fx(const std::string &name) { return "tests/families/fixtures/" + name; }

// The step that ends at position p of ids on sequence 0: the prompt rows 0..n_pre-1 when
// p == n_pre - 1, else one decode row (n_decode 1); its last row's logits into out, the
// recorded calls into *log.
void run_step(Engine &en, const std::vector<int32_t> &ids, size_t p, size_t n_pre, float *out,
              std::vector<std::string> *log) {
  const bool prompt = p == n_pre - 1;
  const int32_t n = prompt ? (int32_t)n_pre : 1, p0 = prompt ? 0 : (int32_t)p, last = n - 1;
  std::vector<int32_t> pos(n), seq(n, 0);
  for (int32_t i = 0; i < n; ++i)
    pos[i] = p0 + i;
  g_log.clear();
  ASSERT_EQ(MEMRA_OK,
            memra_ctx_set_rows(en.c, n, &ids[p0], pos.data(), seq.data(), 1, &last, &en.err))
      << en.err.msg;
  ASSERT_EQ(prompt ? 0 : 1, en.c->n_decode);
  ASSERT_EQ(MEMRA_OK, memra_ctx_forward(en.c, &en.err)) << en.err.msg;
  ASSERT_EQ(MEMRA_OK, memra_ctx_get_logits(en.c, out, &en.err)) << en.err.msg;
  *log = g_log;
}
} // namespace

class MatmulsRoute : public ::testing::TestWithParam<const char *> {};

TEST_P(MatmulsRoute, DecodeGroupsProjectionsWithTheSameBits) {
  const std::string name = GetParam();
  const std::vector<int32_t> ids = read_ids(fx(name + ".txt"), "ids");
  ASSERT_GE(ids.size(), 5u);
  Engine with, without;
  ASSERT_TRUE(with.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << with.err.msg;
  ASSERT_TRUE(without.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << without.err.msg;
  ASSERT_NE(nullptr, with.bh.vt->matmul_n) << "the CPU plugin lost its matmul_n";
  const memra_hparams *hp = &with.m->hp;
  g_real = with.bh.vt;
  memra_backend_vt vt_with = *with.bh.vt, vt_without = *without.bh.vt;
  vt_with.matmul = vt_without.matmul = rec_matmul;
  vt_with.matmul_n = rec_matmul_n;
  vt_without.matmul_n = nullptr; // an older plugin: one matmul per projection
  vt_with.matmul_n_conv = vt_without.matmul_n_conv = nullptr; // the GDN qkv through matmul_n
  vt_with.ffn_glu = vt_without.ffn_glu = nullptr; // the dense FFN's gate, up through matmul_n
  vt_with.matmul_n_route = vt_without.matmul_n_route = nullptr; // the router through matmul_n
  // the norms as calls of their own (MoeNormRoute takes them with the projections)
  vt_with.rmsnorm_matmul_n = vt_without.rmsnorm_matmul_n = nullptr;
  vt_with.rmsnorm_ffn_glu = vt_without.rmsnorm_ffn_glu = nullptr;
  with.m->vt = &vt_with;
  without.m->vt = &vt_without;

  // the fixtures' projections are all F32: every group holds all of a block's projections
  int32_t n_rec = 0;
  for (int il = 0; il < hp->n_layer; ++il)
    n_rec += memra_hparams_layer_recurrent(hp, il);
  const int32_t n_att = hp->n_layer - n_rec;
  const bool moe = hp->n_expert > 0, shexp = moe && with.m->layers[0].ffn_gate_shexp.buf;
  const size_t nv = (size_t)hp->n_vocab, n_pre = 4;
  const std::vector<float> ref = read_f32(fx(name + ".decode.f32")); // HF, cached decode
  ASSERT_EQ(ids.size() * nv, ref.size());
  for (Engine *en : {&with, &without})
    ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&en->c->pages, 0, (int32_t)ids.size(), &en->err));
  std::vector<float> a(nv), b(nv);
  // a prompt step of n_pre rows, then one decode row a step (n_decode = 1: the grouped path)
  for (size_t p = n_pre - 1; p < ids.size(); ++p) {
    const bool prompt = p == n_pre - 1;
    std::vector<std::string> log[2];
    run_step(with, ids, p, n_pre, a.data(), &log[0]);
    run_step(without, ids, p, n_pre, b.data(), &log[1]);
    if (HasFatalFailure()) return;
    ASSERT_EQ(0, memcmp(a.data(), b.data(), nv * sizeof(float))) << name << " position " << p;
    EXPECT_LT(rel_l2(a.data(), ref.data() + p * nv, nv), 1e-4) << name << " position " << p;
    EXPECT_EQ(outputs(log[1]), outputs(log[0])) << name;
    EXPECT_EQ(0u, outputs(log[1]) - count_calls(log[1], "matmul")) << "matmul_n without the slot";
    if (prompt) continue; // prompt rows: gemm when the plugin has it, else one matmul each
    // GDN layers: qkv, z, beta, alpha (plus the shared expert's 4 with MoE); gated attention
    // (qwen3next family): q+gate, k, v; the plain llama attention of qwen3moe: q, k, v
    const size_t n4 = (size_t)n_rec + (shexp ? (size_t)hp->n_layer : 0);
    EXPECT_EQ(n4, count_calls(log[0], "matmul_n 4")) << name;
    EXPECT_EQ((size_t)n_att, count_calls(log[0], "matmul_n 3")) << name;
    if (!moe) { // the dense FFN: gate, up
      EXPECT_EQ((size_t)hp->n_layer, count_calls(log[0], "matmul_n 2")) << name;
    }
  }
  with.m->vt = g_real;
  without.m->vt = without.bh.vt;
}

INSTANTIATE_TEST_SUITE_P(Families, MatmulsRoute,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// The ABI 1.11 fusions of the hybrid layers, each against an engine whose plugin lacks the slot:
// a prompt step of 4 rows, then one decode row a step; the logits bit-identical at every step and
// near HF's, each step's two call logs handed to check(hp, prompt, n_rec, n_att, logs).
using PairCheck = std::function<void(bool, size_t, size_t, const std::vector<std::string> (&)[2])>;
void paired_steps(
    const std::string &name,
    const std::function<void(memra_backend_vt &with, memra_backend_vt &without)> &patch,
    const PairCheck &check, bool need_gdn = true) {
  const std::vector<int32_t> ids = read_ids(fx(name + ".txt"), "ids");
  ASSERT_GE(ids.size(), 5u);
  Engine with, without;
  ASSERT_TRUE(with.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << with.err.msg;
  ASSERT_TRUE(without.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << without.err.msg;
  const memra_hparams *hp = &with.m->hp;
  g_real = with.bh.vt;
  memra_backend_vt vt_with = *with.bh.vt, vt_without = *without.bh.vt;
  patch(vt_with, vt_without);
  with.m->vt = &vt_with;
  without.m->vt = &vt_without;
  size_t n_rec = 0;
  for (int il = 0; il < hp->n_layer; ++il)
    n_rec += memra_hparams_layer_recurrent(hp, il);
  if (need_gdn) {
    ASSERT_GT(n_rec, 0u);
  }
  const size_t n_att = (size_t)hp->n_layer - n_rec, nv = (size_t)hp->n_vocab, n_pre = 4;
  const std::vector<float> ref = read_f32(fx(name + ".decode.f32"));
  ASSERT_EQ(ids.size() * nv, ref.size());
  for (Engine *en : {&with, &without})
    ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&en->c->pages, 0, (int32_t)ids.size(), &en->err));
  std::vector<float> a(nv), b(nv);
  for (size_t p = n_pre - 1; p < ids.size(); ++p) {
    std::vector<std::string> log[2];
    run_step(with, ids, p, n_pre, a.data(), &log[0]);
    run_step(without, ids, p, n_pre, b.data(), &log[1]);
    if (::testing::Test::HasFatalFailure()) break;
    ASSERT_EQ(0, memcmp(a.data(), b.data(), nv * sizeof(float))) << name << " position " << p;
    EXPECT_LT(rel_l2(a.data(), ref.data() + p * nv, nv), 1e-4) << name << " position " << p;
    SCOPED_TRACE(name + " position " + std::to_string(p));
    check(p == n_pre - 1, n_rec, n_att, log);
  }
  with.m->vt = g_real;
  without.m->vt = without.bh.vt;
}

class HybridFusion : public ::testing::TestWithParam<const char *> {};

// matmul_n_conv: in a decode step each GDN layer's projections (one type group: the fixtures are
// F32) and its conv are one call, no ssm_conv; a prompt step keeps ssm_conv.
TEST_P(HybridFusion, DecodeStepsTakeTheProjectionsWithTheConvWithTheSameBits) {
  paired_steps(
      GetParam(),
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.matmul_n_conv) << "the CPU plugin lost its matmul_n_conv";
        w.matmul_n_conv = rec_matmul_n_conv;
        wo.matmul_n_conv = nullptr; // an ABI 1.10 plugin
        w.ssm_conv = wo.ssm_conv = rec_ssm_conv;
      },
      [](bool prompt, size_t n_rec, size_t, const std::vector<std::string>(&log)[2]) {
        EXPECT_EQ(n_rec, count_calls(log[1], "ssm_conv"));
        EXPECT_EQ(prompt ? 0 : n_rec, count_calls(log[0], "matmul_n_conv 4"));
        EXPECT_EQ(prompt ? n_rec : 0, count_calls(log[0], "ssm_conv"));
      });
}

// attention_gate: each gated attention layer's attention and its output gate are one call in
// prompt and decode steps alike (the GPU plugins' form: rope_kv_store, then attention;
// rope_kv_attend is opt-in there, and with it the gate stays a sigmoid_gate call).
TEST_P(HybridFusion, AttentionLayersTakeTheGateInTheSameCallWithTheSameBits) {
  paired_steps(
      GetParam(),
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.attention_gate) << "the CPU plugin lost its attention_gate";
        w.attention_gate = rec_attention_gate;
        wo.attention_gate = nullptr;
        w.sigmoid_gate = wo.sigmoid_gate = rec_sigmoid_gate;
        w.rope_kv_attend = wo.rope_kv_attend = nullptr;
      },
      [](bool, size_t, size_t n_att, const std::vector<std::string>(&log)[2]) {
        EXPECT_EQ(n_att, count_calls(log[0], "attention_gate"));
        EXPECT_EQ(count_calls(log[1], "sigmoid_gate"), count_calls(log[0], "sigmoid_gate") + n_att);
      });
}

// gated_delta_rule_norm: in a decode step each GDN layer's recurrence and its gated output norm
// are one call (no rmsnorm_gate), prompt steps keep the two.
TEST_P(HybridFusion, DecodeStepsTakeTheRecurrenceWithItsNormWithTheSameBits) {
  paired_steps(
      GetParam(),
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.gated_delta_rule_norm) << "the CPU plugin lost the slot";
        w.gated_delta_rule_norm = rec_gdr_norm;
        wo.gated_delta_rule_norm = nullptr;
        w.rmsnorm_gate = wo.rmsnorm_gate = rec_rmsnorm_gate;
      },
      [](bool prompt, size_t n_rec, size_t, const std::vector<std::string>(&log)[2]) {
        EXPECT_EQ(n_rec, count_calls(log[1], "rmsnorm_gate"));
        EXPECT_EQ(prompt ? 0 : n_rec, count_calls(log[0], "gated_delta_rule_norm"));
        EXPECT_EQ(prompt ? n_rec : 0, count_calls(log[0], "rmsnorm_gate"));
      });
}

// ABI 1.19 rmsnorm_qk_rope_kv with q_in: in a decode step each gated attention layer's q norm
// (read from its q + gate rows), k norm, rope and KV store are one call instead of two rmsnorm
// calls and rope_kv_store; prompt steps keep their calls.
TEST_P(HybridFusion, DecodeStepsTakeTheAttentionNormsWithRopeWithTheSameBits) {
  paired_steps(
      GetParam(),
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.rmsnorm_qk_rope_kv) << "the CPU plugin lost its rmsnorm_qk_rope_kv";
        w.rmsnorm_qk_rope_kv = rec_qk_rope;
        wo.rmsnorm_qk_rope_kv = nullptr; // an ABI 1.18 plugin
        w.rmsnorm = wo.rmsnorm = rec_rmsnorm;
        w.rope_kv_store = wo.rope_kv_store = rec_rope_kv_store;
        w.rope_kv_attend = wo.rope_kv_attend = nullptr;
      },
      [](bool prompt, size_t, size_t n_att, const std::vector<std::string>(&log)[2]) {
        EXPECT_EQ(prompt ? 0 : n_att, count_calls(log[0], "rmsnorm_qk_rope_kv q_in"));
        EXPECT_EQ(0u, count_calls(log[0], "rope_kv_store"));
        EXPECT_EQ(prompt ? 0 : n_att, count_calls(log[1], "rope_kv_store"));
        EXPECT_EQ(count_calls(log[1], "rmsnorm") - (prompt ? 0 : 2 * n_att),
                  count_calls(log[0], "rmsnorm"));
      });
}

// ffn_glu (ABI 1.12): in a decode step each dense FFN's gate, up, glu and down are one call (no
// glu, no matmul_n 2), prompt steps keep the composition; qwen35's dense FFN is llama's block.
TEST(FfnFusion, DecodeStepsTakeTheDenseFfnInOneCallWithTheSameBits) {
  paired_steps(
      "qwen35",
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.ffn_glu) << "the CPU plugin lost its ffn_glu";
        w.ffn_glu = rec_ffn_glu;
        wo.ffn_glu = nullptr; // an ABI 1.11 plugin
        w.glu = wo.glu = rec_glu;
        // the ffn norm as a call of its own (MoeNormRoute takes it with the FFN)
        w.rmsnorm_matmul_n = wo.rmsnorm_matmul_n = nullptr;
        w.rmsnorm_ffn_glu = wo.rmsnorm_ffn_glu = nullptr;
      },
      [](bool prompt, size_t n_rec, size_t n_att, const std::vector<std::string>(&log)[2]) {
        const size_t L = n_rec + n_att;
        EXPECT_EQ(L, count_calls(log[1], "glu"));
        EXPECT_EQ(prompt ? 0 : L, count_calls(log[0], "ffn_glu"));
        EXPECT_EQ(prompt ? L : 0, count_calls(log[0], "glu"));
      });
}

INSTANTIATE_TEST_SUITE_P(Families, HybridFusion,
                         ::testing::Values("qwen3next", "qwen35", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// The MoE layers' gate and up expert stacks interleaved at load (model.c fuse_gate_up): one
// matmul_id of 2 n_ff_exp columns per layer and step instead of two, logits bit-identical to a
// model loaded with MEMRA_MOE_FUSE=0, prompt and decode steps alike.
class GateUpFuse : public ::testing::TestWithParam<const char *> {};

TEST_P(GateUpFuse, OneMatmulIdForGateAndUpWithTheSameBits) {
  const std::string name = GetParam();
  const std::vector<int32_t> ids = read_ids(fx(name + ".txt"), "ids");
  ASSERT_GE(ids.size(), 6u);
  Engine fused, apart;
  ASSERT_TRUE(fused.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << fused.err.msg;
  setenv("MEMRA_MOE_FUSE", "0", 1);
  const bool opened = apart.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64);
  unsetenv("MEMRA_MOE_FUSE");
  ASSERT_TRUE(opened) << apart.err.msg;
  const memra_hparams *hp = &fused.m->hp;
  ASSERT_GT(hp->n_expert, 0);
  for (int il = 0; il < hp->n_layer; ++il) {
    EXPECT_NE(nullptr, fused.m->layers[il].ffn_gate_up_exps.buf) << name << " layer " << il;
    EXPECT_EQ(nullptr, fused.m->layers[il].ffn_gate_exps.buf) << "its bytes moved";
    EXPECT_EQ(nullptr, apart.m->layers[il].ffn_gate_up_exps.buf);
  }
  g_real = fused.bh.vt;
  memra_backend_vt vt = *fused.bh.vt;
  vt.matmul_id = rec_matmul_id;
  vt.matmul_id_glu = nullptr;     /* gate and up as a matmul_id: counted below */
  vt.matmul_id_combine = nullptr; /* the down projection as a matmul_id: counted below */
  fused.m->vt = apart.m->vt = &vt;
  const size_t nv = (size_t)hp->n_vocab, n_pre = 4;
  const std::string F = std::to_string(hp->n_ff_exp), F2 = std::to_string(2 * hp->n_ff_exp);
  for (Engine *en : {&fused, &apart})
    ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&en->c->pages, 0, (int32_t)ids.size(), &en->err));
  std::vector<float> a(nv), b(nv);
  for (size_t p = n_pre - 1; p < ids.size(); ++p) {
    std::vector<std::string> log[2];
    run_step(fused, ids, p, n_pre, a.data(), &log[0]);
    run_step(apart, ids, p, n_pre, b.data(), &log[1]);
    if (HasFatalFailure()) return;
    ASSERT_EQ(0, memcmp(a.data(), b.data(), nv * sizeof(float))) << name << " position " << p;
    const size_t L = (size_t)hp->n_layer;
    EXPECT_EQ(L, count_calls(log[0], "matmul_id " + F2)) << name; // gate and up together
    EXPECT_EQ(0u, count_calls(log[0], "matmul_id " + F)) << name;
    EXPECT_EQ(2 * L, count_calls(log[1], "matmul_id " + F)) << name; // gate, up apart
    EXPECT_EQ(L, count_calls(log[0], "matmul_id " + std::to_string(hp->n_embd))) << name; // down
  }
  fused.m->vt = fused.bh.vt;
  apart.m->vt = apart.bh.vt;
}

INSTANTIATE_TEST_SUITE_P(Families, GateUpFuse,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// ABI 1.7 and 1.8 fusion slots: the fixture's prompt (chunks of 7) on two engines, "with" the
// slot (recorded) and "without" it (NULL: the core makes the calls it replaces); `patch` sets
// both vtables. The logits must be bit-identical; the logs come back for the counts.
struct SlotRun {
  std::vector<std::string> with, without;
  size_t layers = 0, chunks = 0, gdn_layers = 0;
};

void run_slot(const std::string &name, const char *slot, bool (*has)(const memra_backend_vt *),
              const std::function<void(memra_backend_vt *with, memra_backend_vt *without)> &patch,
              SlotRun *out) {
  const std::vector<int32_t> ids = read_ids(fx(name + ".txt"), "ids");
  ASSERT_GE(ids.size(), 6u);
  Engine with, without;
  ASSERT_TRUE(with.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << with.err.msg;
  ASSERT_TRUE(without.open(fx(name + ".gguf"), MEMRA_TYPE_F32, 64)) << without.err.msg;
  ASSERT_TRUE(has(with.bh.vt)) << "the CPU plugin lost its " << slot;
  g_real = with.bh.vt;
  memra_backend_vt vt_with = *with.bh.vt, vt_without = *without.bh.vt;
  patch(&vt_with, &vt_without);
  with.m->vt = &vt_with;
  without.m->vt = &vt_without;
  const size_t nv = (size_t)with.m->hp.n_vocab;
  out->layers = (size_t)with.m->hp.n_layer;
  out->chunks = (ids.size() + 6) / 7;
  for (int il = 0; il < with.m->hp.n_layer; ++il)
    out->gdn_layers += memra_hparams_layer_recurrent(&with.m->hp, il);
  std::vector<float> a(ids.size() * nv), b(ids.size() * nv);
  g_log.clear();
  memra_status st =
      memra_ctx_eval(with.c, 0, ids.data(), (int32_t)ids.size(), 0, true, a.data(), &with.err);
  out->with = g_log;
  g_log.clear();
  if (st == MEMRA_OK)
    st = memra_ctx_eval(without.c, 0, ids.data(), (int32_t)ids.size(), 0, true, b.data(),
                        &without.err);
  out->without = g_log;
  with.m->vt = with.bh.vt;
  without.m->vt = without.bh.vt;
  ASSERT_EQ(MEMRA_OK, st) << with.err.msg << without.err.msg;
  EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name << ": " << slot;
}

// With a shared expert, one moe_combine_gated a layer and chunk instead of moe_combine,
// sigmoid_gate and add.
class CombineGated : public ::testing::TestWithParam<const char *> {};

TEST_P(CombineGated, OneCallForTheSharedExpertWithTheSameBits) {
  SlotRun r;
  run_slot(
      GetParam(), "moe_combine_gated",
      [](const memra_backend_vt *v) { return v->moe_combine_gated != nullptr; },
      [](memra_backend_vt *with, memra_backend_vt *without) {
        with->moe_combine = without->moe_combine = rec_combine;
        with->moe_combine_gated = rec_combine_gated;
        without->moe_combine_gated = nullptr;
      },
      &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.with, "moe_combine_gated")) << "one a layer a chunk";
  EXPECT_EQ(0u, count_calls(r.with, "moe_combine"));
  EXPECT_EQ(0u, count_calls(r.without, "moe_combine_gated"));
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.without, "moe_combine"));
}

INSTANTIATE_TEST_SUITE_P(Families, CombineGated, ::testing::Values("qwen3next", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// The fused gate/up stack's matmul_id with glu in its epilogue: one matmul_id_glu a MoE
// layer and chunk, one glu fewer.
class GateUpGlu : public ::testing::TestWithParam<const char *> {};

TEST_P(GateUpGlu, OneCallForGateUpAndGluWithTheSameBits) {
  SlotRun r;
  run_slot(
      GetParam(), "matmul_id_glu",
      [](const memra_backend_vt *v) { return v->matmul_id_glu != nullptr; },
      [](memra_backend_vt *with, memra_backend_vt *without) {
        with->glu = without->glu = rec_glu;
        with->matmul_id_glu = rec_matmul_id_glu;
        without->matmul_id_glu = nullptr;
        with->moe_route_glu = without->moe_route_glu = nullptr; /* the route apart: ABI 1.20 */
      },
      &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.with, "matmul_id_glu")) << "one a layer a chunk";
  EXPECT_EQ(0u, count_calls(r.without, "matmul_id_glu"));
  EXPECT_EQ(count_calls(r.with, "glu") + r.layers * r.chunks, count_calls(r.without, "glu"))
      << "the experts' glu, one a layer a chunk";
}

INSTANTIATE_TEST_SUITE_P(Families, GateUpGlu,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// A Gated DeltaNet layer's output norm and silu(z) gate in one rmsnorm_gate call a chunk,
// one glu fewer.
class GatedNorm : public ::testing::TestWithParam<const char *> {};

TEST_P(GatedNorm, OneCallForNormAndGateWithTheSameBits) {
  SlotRun r;
  run_slot(
      GetParam(), "rmsnorm_gate",
      [](const memra_backend_vt *v) { return v->rmsnorm_gate != nullptr; },
      [](memra_backend_vt *with, memra_backend_vt *without) {
        with->glu = without->glu = rec_glu;
        with->rmsnorm_gate = rec_rmsnorm_gate;
        without->rmsnorm_gate = nullptr;
      },
      &r);
  if (HasFatalFailure()) return;
  ASSERT_GT(r.gdn_layers, 0u) << GetParam() << " has Gated DeltaNet layers";
  EXPECT_EQ(r.gdn_layers * r.chunks, count_calls(r.with, "rmsnorm_gate"))
      << "one a GDN layer a chunk";
  EXPECT_EQ(0u, count_calls(r.without, "rmsnorm_gate"));
  EXPECT_EQ(count_calls(r.with, "glu") + r.gdn_layers * r.chunks, count_calls(r.without, "glu"))
      << "the z gate, one a GDN layer a chunk";
}

INSTANTIATE_TEST_SUITE_P(Families, GatedNorm, ::testing::Values("qwen3next", "qwen35", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// ABI 1.8: an attention layer's q and k norms in one rmsnorm_qk call a chunk, two rmsnorm
// calls fewer.
class QkNorm : public ::testing::TestWithParam<const char *> {};

TEST_P(QkNorm, OneCallForTheQAndKNormsWithTheSameBits) {
  SlotRun r;
  run_slot(
      GetParam(), "rmsnorm_qk", [](const memra_backend_vt *v) { return v->rmsnorm_qk != nullptr; },
      [](memra_backend_vt *with, memra_backend_vt *without) {
        with->rmsnorm = without->rmsnorm = rec_rmsnorm;
        with->rmsnorm_qk = rec_rmsnorm_qk;
        without->rmsnorm_qk = nullptr;
      },
      &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.with, "rmsnorm_qk")) << "one a layer a chunk";
  EXPECT_EQ(0u, count_calls(r.without, "rmsnorm_qk"));
  EXPECT_EQ(count_calls(r.with, "rmsnorm") + 2 * r.layers * r.chunks,
            count_calls(r.without, "rmsnorm"))
      << "the q and k norms, two a layer a chunk";
}

INSTANTIATE_TEST_SUITE_P(Families, QkNorm, ::testing::Values("qwen3moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// ABI 1.9: a MoE layer without a shared expert (the fixtures' shared experts are narrower
// than their routed ones, so they stay apart too) makes its down projection and combine in one
// matmul_id_combine call a chunk; the engine without the slot makes matmul_id and moe_combine.
class IdCombine : public ::testing::TestWithParam<const char *> {};

TEST_P(IdCombine, OneCallForDownAndCombineWithTheSameBits) {
  SlotRun r;
  run_slot(
      GetParam(), "matmul_id_combine",
      [](const memra_backend_vt *v) { return v->matmul_id_combine != nullptr; },
      [](memra_backend_vt *with, memra_backend_vt *without) {
        with->moe_combine = without->moe_combine = rec_combine;
        with->matmul_id = without->matmul_id = rec_matmul_id;
        with->matmul_id_combine = rec_matmul_id_combine;
        without->matmul_id_combine = nullptr;
      },
      &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.with, "matmul_id_combine")) << "one a layer a chunk";
  EXPECT_EQ(0u, count_calls(r.with, "moe_combine"));
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.without, "moe_combine"));
  const auto ids = [](const std::vector<std::string> &log) {
    size_t n = 0;
    for (const std::string &s : log)
      n += s.rfind("matmul_id ", 0) == 0;
    return n;
  };
  EXPECT_EQ(ids(r.with) + r.layers * r.chunks, ids(r.without))
      << "the down projection's matmul_id, one a layer a chunk";
}

INSTANTIATE_TEST_SUITE_P(Families, IdCombine, ::testing::Values("qwen3moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// ABI 1.20 moe_combine_rmsnorm: in a decode step a MoE layer without a shared expert leaves its
// combine to the norm after it (the next layer's, or the output's): one moe_combine_rmsnorm a
// layer, no moe_combine, a rmsnorm fewer a layer; the logits bit-identical to an engine whose
// plugin lacks the slot. Prompt steps, and layers whose shared expert stays apart (the fixtures'
// are narrower than their routed ones), keep their calls. matmul_id_combine off in both: the GPU
// plugins' default (MEMRA_MMID_COMBINE=1 opts in).
class CombineNorm : public ::testing::TestWithParam<const char *> {};

TEST_P(CombineNorm, DecodeStepsTakeTheCombineWithTheNextNormWithTheSameBits) {
  const bool routed_only = std::string(GetParam()) == "qwen3moe";
  paired_steps(
      GetParam(),
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.moe_combine_rmsnorm) << "the CPU plugin lost its moe_combine_rmsnorm";
        w.moe_combine_rmsnorm = rec_combine_norm;
        wo.moe_combine_rmsnorm = nullptr; // an ABI 1.19 plugin
        w.matmul_id_combine = wo.matmul_id_combine = nullptr;
        w.moe_combine = wo.moe_combine = rec_combine;
        w.moe_combine_gated = wo.moe_combine_gated = rec_combine_gated;
        w.rmsnorm = wo.rmsnorm = rec_rmsnorm;
        // the norms as calls of their own (MoeNormRoute takes them with the projections)
        w.rmsnorm_matmul_n = wo.rmsnorm_matmul_n = nullptr;
        w.rmsnorm_ffn_glu = wo.rmsnorm_ffn_glu = nullptr;
      },
      [routed_only](bool prompt, size_t n_rec, size_t n_att,
                    const std::vector<std::string>(&log)[2]) {
        const size_t L = n_rec + n_att;
        if (prompt || !routed_only) {
          EXPECT_EQ(log[1], log[0]);
          EXPECT_EQ(0u, count_calls(log[0], "moe_combine_rmsnorm"));
          return;
        }
        EXPECT_EQ(L, count_calls(log[0], "moe_combine_rmsnorm"));
        EXPECT_EQ(0u, count_calls(log[0], "moe_combine"));
        EXPECT_EQ(L, count_calls(log[1], "moe_combine"));
        EXPECT_EQ(count_calls(log[1], "rmsnorm") - L, count_calls(log[0], "rmsnorm"));
        EXPECT_EQ(log[1].size() - L, log[0].size()) << "a call a layer fewer";
      },
      false);
}

INSTANTIATE_TEST_SUITE_P(Families, CombineNorm, ::testing::Values("qwen3moe", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// ABI 1.21 moe_route_glu: a MoE layer's route with its experts' gate, up and glu in one call a
// layer, in prompt chunks and decode steps, no moe_route and no matmul_id_glu; the logits
// bit-identical to an engine whose plugin lacks the slot. (The fixtures' shared experts stay apart;
// synth_hybrid_test's stacked one routes through the slot with its preset id column.)
void route_glu_patch(memra_backend_vt *w, memra_backend_vt *wo) {
  w->moe_route = wo->moe_route = rec_route;
  w->matmul_id_glu = wo->matmul_id_glu = rec_matmul_id_glu;
  w->moe_route_glu = rec_route_glu;
  wo->moe_route_glu = nullptr; // an ABI 1.20 plugin
  w->matmul_n_route = wo->matmul_n_route = nullptr;
}

class RouteGlu : public ::testing::TestWithParam<const char *> {};

TEST_P(RouteGlu, PromptChunksTakeTheRouteWithTheExpertsGluWithTheSameBits) {
  SlotRun r;
  run_slot(
      GetParam(), "moe_route_glu",
      [](const memra_backend_vt *v) { return v->moe_route_glu != nullptr; }, route_glu_patch, &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.with, "moe_route_glu 0")) << "one a layer a chunk";
  EXPECT_EQ(0u, count_calls(r.with, "moe_route"));
  EXPECT_EQ(0u, count_calls(r.with, "matmul_id_glu"));
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.without, "moe_route"));
  EXPECT_EQ(r.layers * r.chunks, count_calls(r.without, "matmul_id_glu"));
  EXPECT_EQ(r.with.size() + r.layers * r.chunks, r.without.size()) << "a call a layer fewer";
}

TEST_P(RouteGlu, DecodeStepsTakeTheRouteWithTheExpertsGluWithTheSameBits) {
  paired_steps(
      GetParam(),
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.moe_route_glu) << "the CPU plugin lost its moe_route_glu";
        route_glu_patch(&w, &wo);
      },
      [](bool, size_t n_rec, size_t n_att, const std::vector<std::string>(&log)[2]) {
        const size_t L = n_rec + n_att;
        EXPECT_EQ(L, count_calls(log[0], "moe_route_glu 0"));
        EXPECT_EQ(0u, count_calls(log[0], "moe_route"));
        EXPECT_EQ(L, count_calls(log[1], "moe_route"));
        EXPECT_EQ(L, count_calls(log[1], "matmul_id_glu"));
        EXPECT_EQ(log[1].size() - L, log[0].size()) << "a call a layer fewer";
      },
      false);
}

INSTANTIATE_TEST_SUITE_P(Families, RouteGlu, ::testing::Values("qwen3moe", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// ABI 1.22 matmul_n_route: in a decode step a MoE layer's router call (with the projections that
// read its x beside it) routes its logits too, where the route does not go into the experts' call
// (moe_route_glu off in both engines): one matmul_n_route a layer, no moe_route; prompt steps keep
// their calls; the logits bit-identical to an engine whose plugin lacks the slot.
class RouterRoute : public ::testing::TestWithParam<const char *> {};

TEST_P(RouterRoute, DecodeStepsRouteInTheRoutersCallWithTheSameBits) {
  paired_steps(
      GetParam(),
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.matmul_n_route) << "the CPU plugin lost its matmul_n_route";
        w.moe_route_glu = wo.moe_route_glu = nullptr;
        w.moe_route = wo.moe_route = rec_route;
        w.matmul_n_route = rec_matmul_n_route;
        wo.matmul_n_route = nullptr; // an ABI 1.21 plugin
      },
      [](bool prompt, size_t n_rec, size_t n_att, const std::vector<std::string>(&log)[2]) {
        const size_t L = n_rec + n_att;
        size_t routed = 0;
        for (const std::string &s : log[0])
          routed += s.rfind("matmul_n_route ", 0) == 0;
        if (prompt) {
          EXPECT_EQ(log[1], log[0]);
          EXPECT_EQ(0u, routed);
          return;
        }
        EXPECT_EQ(L, routed) << "one a layer";
        EXPECT_EQ(0u, count_calls(log[0], "moe_route"));
        EXPECT_EQ(L, count_calls(log[1], "moe_route"));
        EXPECT_EQ(log[1].size(), log[0].size()) << "moe_route's place taken";
      },
      false);
}

INSTANTIATE_TEST_SUITE_P(Families, RouterRoute,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

// ABI 1.14 / 1.17 in the MoE and hybrid families: in a decode step each layer's ffn norm goes with
// the FFN's first call (the router's group: rmsnorm_matmul_n; qwen35's dense FFN: rmsnorm_ffn_glu),
// and the mixer's out projection (qwen3moe's o, the hybrids' GDN and attention outputs) adds itself
// into x (matmul_acc), so the ffn norm takes no residual; qwen3moe's attention norm goes with q, k,
// v (with the MoE's output as its residual after the first layer). One rmsnorm call a layer fewer
// (qwen3moe: two); prompt steps keep their calls; the logits bit-identical to an engine whose
// plugin lacks the slots (ABI 1.13).
memra_status rec_acc(memra_backend *be, const memra_tensor *x, const memra_tensor *t,
                     const memra_tensor *a, const memra_tensor *w) {
  g_log.push_back("matmul_acc");
  return g_real->matmul_acc(be, x, t, a, w);
}

class MoeNormRoute : public ::testing::TestWithParam<const char *> {};

TEST_P(MoeNormRoute, DecodeStepsTakeTheFfnNormWithTheFfnsFirstCallWithTheSameBits) {
  const std::string name = GetParam();
  paired_steps(
      name,
      [](memra_backend_vt &w, memra_backend_vt &wo) {
        ASSERT_NE(nullptr, w.rmsnorm_matmul_n) << "the CPU plugin lost its rmsnorm_matmul_n";
        ASSERT_NE(nullptr, w.matmul_acc) << "the CPU plugin lost its matmul_acc";
        w.rmsnorm = wo.rmsnorm = rec_rmsnorm_res;
        w.rmsnorm_matmul_n = rec_norm_mm;
        w.rmsnorm_ffn_glu = rec_norm_ffn;
        w.matmul_acc = rec_acc;
        wo.rmsnorm_matmul_n = nullptr; // an ABI 1.13 plugin
        wo.rmsnorm_ffn_glu = nullptr;
        wo.matmul_acc = nullptr;
        wo.matmul_rmsnorm = nullptr;
        w.moe_combine_rmsnorm = wo.moe_combine_rmsnorm = nullptr; // the norms stay norms
        w.matmul_n_route = wo.matmul_n_route = nullptr;
      },
      [name](bool prompt, size_t n_rec, size_t n_att, const std::vector<std::string>(&log)[2]) {
        const size_t L = n_rec + n_att;
        if (prompt) {
          EXPECT_EQ(log[1], log[0]);
          return;
        }
        const bool qwen3moe = name == "qwen3moe", dense = name == "qwen35";
        // qwen35's dense FFN is the llama family's: the norm with gate / up, down into x too
        const std::string fused = qwen3moe ? "rmsnorm_matmul_n 1"
                                  : dense  ? "rmsnorm_matmul_n 2"
                                           : "rmsnorm_matmul_n 4";
        EXPECT_EQ(L, count_calls(log[0], fused)) << "one a layer, no residual";
        EXPECT_EQ(dense ? 2 * L : L, count_calls(log[0], "matmul_acc"))
            << "the mixer's output into x";
        EXPECT_EQ(0u,
                  count_calls(log[1], "rmsnorm_matmul_n 1") + count_calls(log[1], "matmul_acc"));
        const size_t n0 = count_calls(log[0], "rmsnorm") + count_calls(log[0], "rmsnorm res"),
                     n1 = count_calls(log[1], "rmsnorm") + count_calls(log[1], "rmsnorm res");
        if (qwen3moe) {
          EXPECT_EQ(1u, count_calls(log[0], "rmsnorm_matmul_n 3")) << "the first layer's";
          EXPECT_EQ(L - 1, count_calls(log[0], "rmsnorm_matmul_n 3 res"));
          EXPECT_EQ(n1 - 2 * L, n0) << "both norms' calls gone";
          EXPECT_EQ(1u, count_calls(log[0], "rmsnorm res")) << "the output's";
        } else {
          EXPECT_EQ(n1 - L, n0) << "the ffn norms' calls gone";
          EXPECT_EQ(dense ? 0 : L, count_calls(log[0], "rmsnorm res"))
              << "the attention norms and the output's";
        }
      },
      false);
}

INSTANTIATE_TEST_SUITE_P(Families, MoeNormRoute,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35", "qwen35moe"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });
