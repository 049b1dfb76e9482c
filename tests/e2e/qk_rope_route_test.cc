// The core's use of ABI 1.19 rmsnorm_qk_rope_kv: in a decode-only step of a family with per-head
// q / k norms (qwen3) the norms, rope and the KV store are one call per layer instead of
// rmsnorm_qk and rope_kv_store; a prompt step keeps its calls; rope_kv_attend, where it takes the
// step, keeps it; and the logits are bit-identical to an engine whose plugin lacks the slot.
#include "tests/e2e/route_record.h"

namespace {
memra_status rec_qk_rope_kv(memra_backend *be, const memra_tensor *q, const memra_tensor *qi,
                            const memra_tensor *wq, const memra_tensor *k, const memra_tensor *wk,
                            float eps, const memra_tensor *v, const memra_tensor *kc,
                            const memra_tensor *vc, const memra_batch *b,
                            const memra_rope_params *p) {
  g_log.push_back("rmsnorm_qk_rope_kv " + std::to_string(b->n_rows));
  return g_real->rmsnorm_qk_rope_kv(be, q, qi, wq, k, wk, eps, v, kc, vc, b, p);
}
memra_status rec_rope_kv_attend(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                const memra_tensor *k, const memra_tensor *v,
                                const memra_tensor *kc, const memra_tensor *vc,
                                const memra_batch *b, const memra_rope_params *rp,
                                const memra_attn_params *ap) {
  g_log.push_back("rope_kv_attend");
  return g_real->rope_kv_attend(be, out, q, k, v, kc, vc, b, rp, ap);
}
} // namespace

class QkRopeRoute : public ::testing::TestWithParam<const char *> {
protected:
  // The pair on the fixture (F16 KV cache) with the norms, rope and KV slots recorded in both
  // engines and rope_kv_attend off (the GPU plugins' default); the slot under test in `with`.
  void SetUp() override {
    memra_ctx_params p = route_params();
    p.kv_type = MEMRA_TYPE_F16;
    ASSERT_TRUE(r.open(GetParam(), p)) << r.with.err.msg << r.without.err.msg;
    ASSERT_NE(nullptr, r.with.bh.vt->rmsnorm_qk_rope_kv)
        << "the CPU plugin lost its rmsnorm_qk_rope_kv";
    for (memra_backend_vt *v : {&r.vt_with, &r.vt_without}) {
      v->rmsnorm = rec_rmsnorm;
      v->rmsnorm_qk = rec_rmsnorm_qk;
      v->rope = rec_rope;
      v->kv_store = rec_kv_store;
      v->rope_kv_store = rec_rope_kv_store;
      v->rope_kv_attend = nullptr;
    }
    r.vt_with.rmsnorm_qk_rope_kv = rec_qk_rope_kv;
    r.vt_without.rmsnorm_qk_rope_kv = nullptr; // an ABI 1.18 plugin
  }
  RoutePair r;
};

TEST_P(QkRopeRoute, DecodeStepsTakeTheNormsRopeAndStoreInOneCallWithTheSameBits) {
  const size_t L = (size_t)r.with.m->hp.n_layer;
  std::vector<std::string> with[2], without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(with, without));
  // prompt step: rmsnorm_qk, rope twice and kv_store per layer, with or without the slot
  EXPECT_EQ(without[0], with[0]);
  EXPECT_EQ(L, count_calls(with[0], "rmsnorm_qk"));
  EXPECT_EQ(0u, count_calls(with[0], "rmsnorm_qk_rope_kv 8"));
  // decode step: the slot once per layer for both rows, neither call it stands for
  EXPECT_EQ(L, count_calls(with[1], "rmsnorm_qk_rope_kv 2"));
  EXPECT_EQ(0u, count_calls(with[1], "rmsnorm_qk") + count_calls(with[1], "rope_kv_store"));
  EXPECT_EQ(L, count_calls(without[1], "rmsnorm_qk"));
  EXPECT_EQ(L, count_calls(without[1], "rope_kv_store"));
  EXPECT_EQ(count_calls(without[1], "rmsnorm"), count_calls(with[1], "rmsnorm"));
  EXPECT_EQ(without[1].size() - L, with[1].size()) << "one call a layer fewer";
}

TEST_P(QkRopeRoute, RopeKvAttendKeepsTheStepsItTakes) {
  r.vt_with.rope_kv_attend = r.vt_without.rope_kv_attend = rec_rope_kv_attend;
  const size_t L = (size_t)r.with.m->hp.n_layer;
  std::vector<std::string> with[2], without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(with, without));
  EXPECT_EQ(without[1], with[1]);
  EXPECT_EQ(L, count_calls(with[1], "rope_kv_attend"));
  EXPECT_EQ(L, count_calls(with[1], "rmsnorm_qk"));
}

INSTANTIATE_TEST_SUITE_P(Qwen3, QkRopeRoute, ::testing::Values("tiny-qwen3"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           std::string s = i.param;
                           for (char &ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });
