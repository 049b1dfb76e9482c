// The core's use of ABI 1.14 rmsnorm_matmul_n / rmsnorm_ffn_glu: in a decode-only step of the
// llama family (llama; qwen2 with its q/k/v biases; qwen3) each layer's two norms go with the
// projections that read them (q, k, v in one rmsnorm_matmul_n; the dense FFN in one
// rmsnorm_ffn_glu), only the output norm stays an rmsnorm call; prompt steps keep rmsnorm; and
// the logits are bit-identical to an engine whose plugin lacks the slots (an ABI 1.13 plugin).
#include "tests/e2e/engine_fixture.h"

namespace {
const memra_backend_vt *g_real;
std::vector<std::string> g_log;

memra_status rec_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                         const memra_tensor *res, const memra_tensor *w, float eps) {
  g_log.push_back("rmsnorm");
  return g_real->rmsnorm(be, y, x, res, w, eps);
}
memra_status rec_norm_mm(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                         const memra_tensor *res, const memra_tensor *wn, float eps, int32_t n,
                         const memra_tensor *y, const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back("rmsnorm_matmul_n " + std::to_string(n) + (res->buf ? " res" : ""));
  return g_real->rmsnorm_matmul_n(be, xn, x, res, wn, eps, n, y, w, b);
}
memra_status rec_norm_ffn(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                          const memra_tensor *res, const memra_tensor *wn, float eps,
                          const memra_tensor *y, const memra_tensor *h, const memra_tensor *u,
                          const memra_tensor *wg, const memra_tensor *wu, const memra_tensor *wd,
                          int32_t act) {
  g_log.push_back(std::string("rmsnorm_ffn_glu") + (res->buf ? " res" : ""));
  return g_real->rmsnorm_ffn_glu(be, xn, x, res, wn, eps, y, h, u, wg, wu, wd, act);
}

} // namespace

class NormRoute : public ::testing::TestWithParam<const char *> {};

TEST_P(NormRoute, DecodeStepsTakeTheNormsWithTheProjectionsWithTheSameBits) {
  memra_ctx_params p = route_params();
  const std::string path = std::string("tests/e2e/fixtures/") + GetParam() + ".gguf";
  Engine with, without;
  ASSERT_TRUE(with.open_with(path, p)) << with.err.msg;
  ASSERT_TRUE(without.open_with(path, p)) << without.err.msg;
  ASSERT_NE(nullptr, with.bh.vt->rmsnorm_matmul_n) << "the CPU plugin lost its rmsnorm_matmul_n";
  ASSERT_NE(nullptr, with.bh.vt->rmsnorm_ffn_glu) << "the CPU plugin lost its rmsnorm_ffn_glu";
  const size_t L = (size_t)with.m->hp.n_layer;

  memra_backend_vt vt_with = *with.bh.vt, vt_without = *without.bh.vt;
  g_real = with.bh.vt;
  vt_with.rmsnorm = vt_without.rmsnorm = rec_rmsnorm;
  vt_with.rmsnorm_matmul_n = rec_norm_mm;
  vt_with.rmsnorm_ffn_glu = rec_norm_ffn;
  vt_without.rmsnorm_matmul_n = nullptr; // an ABI 1.13 plugin
  vt_without.rmsnorm_ffn_glu = nullptr;
  vt_without.matmul_rmsnorm = nullptr;
  with.m->vt = &vt_with;
  without.m->vt = &vt_without;
  std::vector<std::string> log_with[2], log_without[2];
  std::vector<float> a = two_step_logits(with, g_log, log_with),
                     b = two_step_logits(without, g_log, log_without);
  with.m->vt = g_real;
  without.m->vt = without.bh.vt;

  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float))) << GetParam();
  // prompt step: every norm an rmsnorm call (2 a layer and the output norm)
  EXPECT_EQ(2 * L + 1, count_calls(log_with[0], "rmsnorm"));
  EXPECT_EQ(2 * L + 1, log_with[0].size());
  // decode step: the first layer's attention norm has nothing to add yet, every later norm
  // adds the projection before it; only the output norm is an rmsnorm call
  EXPECT_EQ(1u, count_calls(log_with[1], "rmsnorm_matmul_n 3"));
  EXPECT_EQ(L - 1, count_calls(log_with[1], "rmsnorm_matmul_n 3 res"));
  EXPECT_EQ(L, count_calls(log_with[1], "rmsnorm_ffn_glu res"));
  EXPECT_EQ(1u, count_calls(log_with[1], "rmsnorm"));
  EXPECT_EQ(2 * L + 1, count_calls(log_without[1], "rmsnorm"));
}

INSTANTIATE_TEST_SUITE_P(Families, NormRoute,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));
