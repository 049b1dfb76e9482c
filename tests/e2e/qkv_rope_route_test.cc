// The core's use of ABI 1.16 matmul_n_rope_kv: in a decode-only step of llama and qwen2 (no q/k
// norm between projection and rope) each layer's q, k, v projections (with qwen2's biases), their
// rope and the KV store are one call; when v's weight type differs from q's and k's, v is
// projected first (a matmul of its own) and the slot takes q and k (n = 2). Prompt steps, qwen3
// (q/k norms), k of another type than q, steps that rope_kv_attend takes and steps whose norm
// waits for the projections (ABI 1.14) keep their calls. The logits are bit-identical to an
// engine whose plugin lacks the slot (an ABI 1.15 plugin). The plugin is shaped as the GPU
// plugins are by default: no rope_kv_attend, no ABI 1.14 norm slots, no ffn_glu.
#include <vector>

#include "tests/e2e/route_record.h"

extern "C" {
#include "plugins/quant/quant.h"
}

namespace {
memra_status rec_rope_kv_attend(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k, const memra_tensor *v,
                                const memra_tensor *kc, const memra_tensor *vc,
                                const memra_batch *b, const memra_rope_params *rp,
                                const memra_attn_params *ap) {
  g_log.push_back("rope_kv_attend");
  return g_real->rope_kv_attend(be, out, q, k, v, kc, vc, b, rp, ap);
}
memra_status rec_mn_rope_kv(memra_backend *be, int32_t n, const memra_tensor *y,
                            const memra_tensor *x, const memra_tensor *w, const memra_tensor *bias,
                            const memra_tensor *kc, const memra_tensor *vc, const memra_batch *b,
                            const memra_rope_params *p) {
  g_log.push_back("matmul_n_rope_kv " + std::to_string(n) + (bias && bias[0].buf ? " +bias" : ""));
  return g_real->matmul_n_rope_kv(be, n, y, x, w, bias, kc, vc, b, p);
}

// Entries of log that begin with prefix.
size_t count_prefix(const std::vector<std::string> &log, const std::string &prefix) {
  size_t n = 0;
  for (const std::string &s : log)
    n += s.rfind(prefix, 0) == 0;
  return n;
}

// Replaces every layer's weight `which` (an F32 [rows, K] view) by a Q8_0 copy of it in a buffer
// of its own (appended to *bufs): a layer whose projections are of two types, as Q4_K_M's q, k
// (Q4_K) and v (Q6_K) are. The same bytes in every engine it is called on.
void requant_q8(Engine &e, memra_tensor memra_layer::*which, std::vector<memra_buf *> *bufs) {
  const memra_backend_vt *vt = e.bh.vt;
  for (int il = 0; il < e.m->hp.n_layer; ++il) {
    memra_tensor &w = e.m->layers[il].*which;
    ASSERT_EQ(MEMRA_TYPE_F32, w.type);
    std::vector<float> row((size_t)w.ne0);
    const uint64_t rb = memra_type_row_bytes(MEMRA_TYPE_Q8_0, w.ne0);
    std::vector<uint8_t> q(rb * (uint64_t)w.ne1);
    for (int64_t r = 0; r < w.ne1; ++r) {
      ASSERT_EQ(MEMRA_OK, vt->buf_download(e.bh.be, w.buf, w.offset + (uint64_t)r * w.nb1,
                                           row.data(), row.size() * sizeof(float)));
      ASSERT_TRUE(memra_quantize_row(MEMRA_TYPE_Q8_0, row.data(), &q[rb * (uint64_t)r], w.ne0));
    }
    memra_buf *b = nullptr;
    ASSERT_EQ(MEMRA_OK, vt->buf_alloc(e.bh.be, q.size(), &b));
    bufs->push_back(b);
    ASSERT_EQ(MEMRA_OK, vt->buf_upload(e.bh.be, b, 0, q.data(), q.size()));
    const memra_tensor q8 = {b, 0, MEMRA_TYPE_Q8_0, 0, w.ne0, w.ne1, rb};
    w = q8;
  }
}

// Buffers of an engine's backend, freed before the engine (declared after it).
struct OwnBufs {
  Engine &e;
  std::vector<memra_buf *> v;
  ~OwnBufs() {
    for (memra_buf *b : v)
      e.bh.vt->buf_free(e.bh.be, b);
  }
};

// What a case changes from the default: the weight re-typed as Q8_0 (nullptr: none), and the
// vtable edit made to both engines after the defaults (nullptr: none).
struct Variant {
  memra_tensor memra_layer::*requant;
  void (*tweak)(memra_backend_vt &);
};

// two_step_logits on fixture name with the slot recorded (log_with) and with it NULL
// (log_without); the logits of the two must be bit-identical. Call it in ASSERT_NO_FATAL_FAILURE.
void paired_steps(const std::string &name, const Variant &var, std::vector<std::string> log_with[2],
                  std::vector<std::string> log_without[2], size_t *n_layer) {
  memra_ctx_params p = route_params();
  p.kv_type = MEMRA_TYPE_F16;
  RoutePair r;
  ASSERT_TRUE(r.open(name, p)) << r.with.err.msg << r.without.err.msg;
  ASSERT_NE(nullptr, r.with.bh.vt->matmul_n_rope_kv) << "the CPU plugin lost its matmul_n_rope_kv";
  *n_layer = (size_t)r.with.m->hp.n_layer;
  OwnBufs bufs[2] = {{r.with, {}}, {r.without, {}}};
  if (var.requant) {
    ASSERT_NO_FATAL_FAILURE(requant_q8(r.with, var.requant, &bufs[0].v));
    ASSERT_NO_FATAL_FAILURE(requant_q8(r.without, var.requant, &bufs[1].v));
  }
  for (memra_backend_vt *v : {&r.vt_with, &r.vt_without}) {
    v->matmul = rec_matmul;
    v->matmul_n = rec_matmul_n;
    v->rope = rec_rope;
    v->kv_store = rec_kv_store;
    v->rope_kv_store = rec_rope_kv_store;
    v->rope_kv_attend = nullptr;   // the GPU plugins' default (MEMRA_ROPE_ATT=1 opts in)
    v->rmsnorm_matmul_n = nullptr; // likewise the ABI 1.14 norm slots (MEMRA_NORM_MM=1)
    v->rmsnorm_ffn_glu = nullptr;
    v->ffn_glu = nullptr;            // and ffn_glu (MEMRA_FFN_GLU): gate and up through matmul_n
    v->rmsnorm_qk_rope_kv = nullptr; // qwen3's norms with rope: qk_rope_route_test's slot
    if (var.tweak) var.tweak(*v);
  }
  r.vt_with.matmul_n_rope_kv = rec_mn_rope_kv;
  r.vt_without.matmul_n_rope_kv = nullptr; // an ABI 1.15 plugin
  ASSERT_NO_FATAL_FAILURE(r.two_steps(log_with, log_without));
}

// How the recorder notes the biases of a fixture's slot calls: qwen2's q, k (and v) biases.
std::string bias_note(const std::string &name) { return name == "tiny-qwen2" ? " +bias" : ""; }

void rope_kv_attend_on(memra_backend_vt &v) { v.rope_kv_attend = rec_rope_kv_attend; }
void norm_slots_on(memra_backend_vt &v) {
  v.rmsnorm_matmul_n = g_real->rmsnorm_matmul_n;
  v.rmsnorm_ffn_glu = g_real->rmsnorm_ffn_glu;
}

} // namespace

class QkvRopeRoute : public ::testing::TestWithParam<const char *> {};

// wq, wk, wv of one type: one call with n = 3 per layer in the decode step.
TEST_P(QkvRopeRoute, DecodeStepsTakeQkvRopeAndStoreInOneCallWithTheSameBits) {
  std::vector<std::string> with[2], without[2];
  size_t L = 0;
  ASSERT_NO_FATAL_FAILURE(paired_steps(GetParam(), {nullptr, nullptr}, with, without, &L));
  // prompt step: no slot call, the same calls as without it
  EXPECT_EQ(0u, count_prefix(with[0], "matmul_n_rope_kv"));
  EXPECT_EQ(without[0], with[0]);
  // decode step: a call per layer (qwen2's biases with it), one rope_kv_store fewer per layer,
  // and no q, k, v matmul_n
  EXPECT_EQ(L, count_calls(with[1], "matmul_n_rope_kv 3" + bias_note(GetParam())));
  EXPECT_EQ(L, count_prefix(with[1], "matmul_n_rope_kv"));
  EXPECT_EQ(L, count_calls(without[1], "rope_kv_store"));
  EXPECT_EQ(count_calls(without[1], "rope_kv_store") - L, count_calls(with[1], "rope_kv_store"));
  EXPECT_EQ(L, count_calls(without[1], "matmul_n 3"));
  EXPECT_EQ(0u, count_calls(with[1], "matmul_n 3"));
  EXPECT_EQ(count_calls(without[1], "matmul"), count_calls(with[1], "matmul"));
  EXPECT_EQ(0u, count_calls(with[1], "rope") + count_calls(with[1], "kv_store"));
}

// v of another type (Q8_0) than q and k (F32): v's own matmul first, then the slot with n = 2.
TEST_P(QkvRopeRoute, AVOfAnotherTypeIsProjectedFirstThenTheSlotTakesQAndK) {
  std::vector<std::string> with[2], without[2];
  size_t L = 0;
  ASSERT_NO_FATAL_FAILURE(paired_steps(GetParam(), {&memra_layer::wv, nullptr}, with, without, &L));
  EXPECT_EQ(0u, count_prefix(with[0], "matmul_n_rope_kv"));
  EXPECT_EQ(without[0], with[0]);
  EXPECT_EQ(L, count_calls(with[1], "matmul_n_rope_kv 2" + bias_note(GetParam())));
  EXPECT_EQ(L, count_prefix(with[1], "matmul_n_rope_kv"));
  EXPECT_EQ(count_calls(without[1], "rope_kv_store") - L, count_calls(with[1], "rope_kv_store"));
  EXPECT_EQ(0u, count_calls(with[1], "rope_kv_store"));
  // q, k in one matmul_n without the slot (the FFN's gate, up the other L), v a matmul either way
  EXPECT_EQ(2 * L, count_calls(without[1], "matmul_n 2"));
  EXPECT_EQ(L, count_calls(with[1], "matmul_n 2"));
  EXPECT_EQ(count_calls(without[1], "matmul"), count_calls(with[1], "matmul"));
  for (size_t i = 0; i < with[1].size(); ++i)
    if (with[1][i].rfind("matmul_n_rope_kv", 0) == 0) {
      ASSERT_GT(i, 0u);
      EXPECT_EQ("matmul", with[1][i - 1]) << "v is projected right before the slot";
    }
}

// The slot's preconditions: none of these decode steps takes it, and each keeps its calls.
TEST_P(QkvRopeRoute, OtherDecodeStepsKeepTheirCalls) {
  const struct {
    const char *what;
    Variant var;
  } cases[] = {
      {"k of another type than q", {&memra_layer::wk, nullptr}},
      {"rope_kv_attend takes rows of distinct sequences", {nullptr, rope_kv_attend_on}},
      {"the ABI 1.14 norm waits for the projections", {nullptr, norm_slots_on}},
  };
  for (const auto &cs : cases) {
    SCOPED_TRACE(cs.what);
    std::vector<std::string> with[2], without[2];
    size_t L = 0;
    ASSERT_NO_FATAL_FAILURE(paired_steps(GetParam(), cs.var, with, without, &L));
    EXPECT_EQ(0u, count_prefix(with[0], "matmul_n_rope_kv") +
                      count_prefix(with[1], "matmul_n_rope_kv"));
    EXPECT_EQ(without[0], with[0]);
    EXPECT_EQ(without[1], with[1]);
    if (cs.var.tweak == rope_kv_attend_on) {
      EXPECT_EQ(L, count_calls(with[1], "rope_kv_attend"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, QkvRopeRoute, ::testing::Values("tiny-llama", "tiny-qwen2"));

// qwen3: q and k take their per-head norms between projection and rope: no slot call in either
// step, the calls and logits of a plugin without it.
TEST(QkvRopeRouteQwen3, QkNormsKeepTheProjectionsAndRopeApart) {
  std::vector<std::string> with[2], without[2];
  size_t L = 0;
  ASSERT_NO_FATAL_FAILURE(paired_steps("tiny-qwen3", {nullptr, nullptr}, with, without, &L));
  EXPECT_EQ(0u, count_prefix(with[0], "matmul_n_rope_kv"));
  EXPECT_EQ(0u, count_prefix(with[1], "matmul_n_rope_kv"));
  EXPECT_EQ(without[0], with[0]);
  EXPECT_EQ(without[1], with[1]);
  EXPECT_EQ(L, count_calls(with[1], "rope_kv_store"));
}
