// The core's use of ABI 1.4 rope_kv_store: a decode-only step calls it once per layer
// instead of rope q, rope k and kv_store; a prompt step keeps the three calls; and the
// logits are bit-identical to an engine whose plugin lacks the slot (llama: NORM rope;
// qwen3: NEOX rope after per-head q/k norms). The same for ABI 1.10 rope_kv_attend (those
// and attention in one call) on decode rows of distinct sequences, and not otherwise; and the
// batch flags attention gets (ABI 1.13): PROMPT for prompt rows, DISTINCT for decode rows of
// distinct sequences, neither for decode rows sharing a sequence.
#include "tests/e2e/route_record.h"

namespace {
memra_status rec_rope_kv(memra_backend *be, const memra_tensor *q, const memra_tensor *k,
                         const memra_tensor *v, const memra_tensor *kc, const memra_tensor *vc,
                         const memra_batch *b, const memra_rope_params *p) {
  g_log.push_back("rope_kv_store " + std::to_string(b->n_rows));
  return g_real->rope_kv_store(be, q, k, v, kc, vc, b, p);
}
memra_status rec_attention(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                           const memra_tensor *kc, const memra_tensor *vc, const memra_batch *b,
                           const memra_attn_params *p) {
  g_log.push_back(std::string("attention") + (b->flags == MEMRA_BATCH_PROMPT     ? " prompt"
                                              : b->flags == MEMRA_BATCH_DISTINCT ? " distinct"
                                              : b->flags == 0
                                                  ? ""
                                                  : " flags " + std::to_string(b->flags)));
  return g_real->attention(be, out, q, kc, vc, b, p);
}
memra_status rec_rope_kv_attend(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k, const memra_tensor *v,
                                const memra_tensor *kc, const memra_tensor *vc,
                                const memra_batch *b, const memra_rope_params *rp,
                                const memra_attn_params *ap) {
  g_log.push_back("rope_kv_attend " + std::to_string(b->n_rows));
  return g_real->rope_kv_attend(be, out, q, k, v, kc, vc, b, rp, ap);
}

} // namespace

class RopeKvRoute : public ::testing::TestWithParam<const char *> {
protected:
  // The pair on the fixture with an F16 KV cache, rope and kv_store recorded in both engines.
  void SetUp() override {
    memra_ctx_params p = route_params();
    p.kv_type = MEMRA_TYPE_F16;
    ASSERT_TRUE(r.open(GetParam(), p)) << r.with.err.msg << r.without.err.msg;
    r.vt_with.rope = r.vt_without.rope = rec_rope;
    r.vt_with.kv_store = r.vt_without.kv_store = rec_kv_store;
    /* qwen3's norms with rope in one call (ABI 1.19): qk_rope_route_test's slot */
    r.vt_with.rmsnorm_qk_rope_kv = r.vt_without.rmsnorm_qk_rope_kv = nullptr;
  }
  RoutePair r;
};

TEST_P(RopeKvRoute, DecodeStepsTakeTheFusedSlotWithTheSameBits) {
  ASSERT_NE(nullptr, r.with.bh.vt->rope_kv_store) << "the CPU plugin lost its rope_kv_store";
  const int32_t layers = r.with.m->hp.n_layer;

  r.vt_with.rope_kv_store = rec_rope_kv;
  r.vt_without.rope_kv_store = nullptr; // an older plugin: the three calls
  r.vt_with.rope_kv_attend = r.vt_without.rope_kv_attend = nullptr; // ABI 1.4's form
  std::vector<std::string> log_with[2], log_without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(log_with, log_without));
  // prompt step: the three calls per layer either way
  EXPECT_EQ(2u * layers, count_calls(log_with[0], "rope"));
  EXPECT_EQ((size_t)layers, count_calls(log_with[0], "kv_store"));
  EXPECT_EQ(0u, count_calls(log_with[0], "rope_kv_store 8"));
  // decode step: one fused call per layer, none of the three
  EXPECT_EQ((size_t)layers, count_calls(log_with[1], "rope_kv_store 2"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rope") + count_calls(log_with[1], "kv_store"));
  EXPECT_EQ(2u * layers, count_calls(log_without[1], "rope"));
  EXPECT_EQ((size_t)layers, count_calls(log_without[1], "kv_store"));
}

TEST_P(RopeKvRoute, DecodeRowsOfDistinctSequencesTakeRopeKvAttendWithTheSameBits) {
  ASSERT_NE(nullptr, r.with.bh.vt->rope_kv_attend) << "the CPU plugin lost its rope_kv_attend";
  const int32_t layers = r.with.m->hp.n_layer;

  r.vt_with.rope_kv_store = r.vt_without.rope_kv_store = rec_rope_kv;
  r.vt_with.attention = r.vt_without.attention = rec_attention;
  r.vt_with.rope_kv_attend = rec_rope_kv_attend;
  r.vt_without.rope_kv_attend = nullptr; // an ABI 1.9 plugin: rope_kv_store, then attention
  std::vector<std::string> log_with[2], log_without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(log_with, log_without));

  // two decode rows of ONE sequence, flagged as decode rows by a caller: rows that read a
  // position another row writes, so the two calls (the slot's precondition fails)
  Engine &with = r.with;
  const int32_t t3[2] = {4, 6}, p3[2] = {5, 6}, s3[2] = {0, 0}, o3[2] = {0, 1};
  g_log.clear();
  ASSERT_EQ(MEMRA_OK, memra_ctx_set_rows(with.c, 2, t3, p3, s3, 2, o3, &with.err)) << with.err.msg;
  EXPECT_EQ(1, with.c->n_distinct);
  with.c->n_decode = 2;
  ASSERT_EQ(MEMRA_OK, memra_ctx_forward(with.c, &with.err)) << with.err.msg;
  const std::vector<std::string> log_same = g_log;

  // prompt step: no fused call
  EXPECT_EQ(0u, count_calls(log_with[0], "rope_kv_attend 8"));
  EXPECT_EQ((size_t)layers, count_calls(log_with[0], "attention prompt"));
  // decode step: one call per layer, none of the four it replaces
  EXPECT_EQ((size_t)layers, count_calls(log_with[1], "rope_kv_attend 2"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rope") + count_calls(log_with[1], "kv_store") +
                    count_calls(log_with[1], "rope_kv_store 2") +
                    count_calls(log_with[1], "attention distinct"));
  EXPECT_EQ((size_t)layers, count_calls(log_without[1], "rope_kv_store 2"));
  EXPECT_EQ((size_t)layers, count_calls(log_without[1], "attention distinct"));
  EXPECT_EQ(0u, count_calls(log_same, "rope_kv_attend 2"));
  EXPECT_EQ((size_t)layers, count_calls(log_same, "rope_kv_store 2"));
  EXPECT_EQ((size_t)layers, count_calls(log_same, "attention")); // a shared sequence: no DISTINCT
}

INSTANTIATE_TEST_SUITE_P(Families, RopeKvRoute, ::testing::Values("tiny-llama", "tiny-qwen3"));
