// The core's use of ABI 1.15 matmul_rmsnorm: in a decode-only step of the llama family (llama;
// qwen2; qwen3) attention's o projection and the FFN's down projection wait for the norm that
// adds them (the next layer's attention norm, the FFN norm, the output norm) and go to the plugin
// in one call with it; prompt steps keep matmul then rmsnorm; the logits are bit-identical to an
// engine whose plugin lacks the slot (an ABI 1.14 plugin). The plugin here has no ffn_glu and no
// ABI 1.14 norm slots, as the GPU plugins by default, so the down projection is a call of its own.
#include "tests/e2e/route_record.h"

namespace {
memra_status rec_mm_norm(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                         const memra_tensor *w, const memra_tensor *xn, const memra_tensor *x,
                         const memra_tensor *wn, float eps) {
  g_log.push_back("matmul_rmsnorm");
  return g_real->matmul_rmsnorm(be, y, a, w, xn, x, wn, eps);
}

} // namespace

class ProjRoute : public ::testing::TestWithParam<const char *> {};

TEST_P(ProjRoute, DecodeStepsTakeOAndDownWithTheirNormsWithTheSameBits) {
  RoutePair r;
  ASSERT_TRUE(r.open(GetParam(), route_params())) << r.with.err.msg << r.without.err.msg;
  ASSERT_NE(nullptr, r.with.bh.vt->matmul_rmsnorm) << "the CPU plugin lost its matmul_rmsnorm";
  const size_t L = (size_t)r.with.m->hp.n_layer;

  for (memra_backend_vt *v : {&r.vt_with, &r.vt_without}) {
    v->rmsnorm = rec_rmsnorm_res;
    v->matmul = rec_matmul;
    v->ffn_glu = nullptr; // the GPU plugins' default: gate/up, glu, down as calls
    v->rmsnorm_matmul_n = nullptr;
    v->rmsnorm_ffn_glu = nullptr;
  }
  r.vt_with.matmul_rmsnorm = rec_mm_norm;
  r.vt_without.matmul_rmsnorm = nullptr; // an ABI 1.14 plugin
  std::vector<std::string> log_with[2], log_without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(log_with, log_without));
  // prompt step: no matmul_rmsnorm; the norms add what the projections wrote
  EXPECT_EQ(0u, count_calls(log_with[0], "matmul_rmsnorm"));
  EXPECT_EQ(log_without[0], log_with[0]);
  // decode step: every layer's o (into the FFN norm) and down (into the next attention norm, the
  // last into the output norm) with its norm; only the first attention norm is an rmsnorm call,
  // with nothing to add
  EXPECT_EQ(2 * L, count_calls(log_with[1], "matmul_rmsnorm"));
  EXPECT_EQ(1u, count_calls(log_with[1], "rmsnorm"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rmsnorm res"));
  EXPECT_EQ(2 * L, count_calls(log_without[1], "rmsnorm res"));
  EXPECT_EQ(count_calls(log_without[1], "matmul"), count_calls(log_with[1], "matmul") + 2 * L);
}

INSTANTIATE_TEST_SUITE_P(Families, ProjRoute,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));
