// The core's use of ABI 1.17 matmul_acc: in a decode-only step of the llama family (llama; qwen2;
// qwen3) attention's o projection and the FFN's down projection wait for the norm after them and
// go to the plugin as matmul_acc (x += the projection), so every later norm takes no residual and
// goes with the projections that read it (rmsnorm_matmul_n: q, k, v; gate and up); the FFN's down
// is a projection of its own (glu before it); only the output norm stays an rmsnorm call; prompt
// steps keep matmul then rmsnorm; the logits are bit-identical to an engine whose plugin lacks the
// slots (an ABI 1.13 plugin).
#include "tests/e2e/route_record.h"

namespace {
memra_status rec_acc(memra_backend *be, const memra_tensor *y, const memra_tensor *t,
                     const memra_tensor *x, const memra_tensor *w) {
  g_log.push_back("matmul_acc");
  return g_real->matmul_acc(be, y, t, x, w);
}

} // namespace

class AccRoute : public ::testing::TestWithParam<const char *> {};

TEST_P(AccRoute, DecodeStepsAddOAndDownIntoXAndTheNormsGoWithoutResiduals) {
  RoutePair r;
  ASSERT_TRUE(r.open(GetParam(), route_params())) << r.with.err.msg << r.without.err.msg;
  ASSERT_NE(nullptr, r.with.bh.vt->matmul_acc) << "the CPU plugin lost its matmul_acc";
  const size_t L = (size_t)r.with.m->hp.n_layer;

  for (memra_backend_vt *v : {&r.vt_with, &r.vt_without}) {
    v->rmsnorm = rec_rmsnorm_res;
    v->matmul = rec_matmul;
  }
  r.vt_with.rmsnorm_matmul_n = rec_norm_mm;
  r.vt_with.rmsnorm_ffn_glu = rec_norm_ffn;
  r.vt_with.matmul_acc = rec_acc;
  r.vt_without.rmsnorm_matmul_n = nullptr; // an ABI 1.13 plugin
  r.vt_without.rmsnorm_ffn_glu = nullptr;
  r.vt_without.matmul_rmsnorm = nullptr;
  r.vt_without.matmul_acc = nullptr;
  std::vector<std::string> log_with[2], log_without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(log_with, log_without));
  // prompt step: no matmul_acc; the norms add what the projections wrote
  EXPECT_EQ(0u, count_calls(log_with[0], "matmul_acc"));
  EXPECT_EQ(log_without[0], log_with[0]);
  // decode step: o and down of every layer by matmul_acc; the first attention norm has nothing
  // to add, every later one and every FFN norm had theirs added by matmul_acc
  EXPECT_EQ(2 * L, count_calls(log_with[1], "matmul_acc"));
  EXPECT_EQ(L, count_calls(log_with[1], "rmsnorm_matmul_n 3"));
  EXPECT_EQ(L, count_calls(log_with[1], "rmsnorm_matmul_n 2"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rmsnorm_matmul_n 3 res"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rmsnorm_matmul_n 2 res"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rmsnorm_ffn_glu"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rmsnorm_ffn_glu res"));
  EXPECT_EQ(1u, count_calls(log_with[1], "rmsnorm"));
  EXPECT_EQ(0u, count_calls(log_with[1], "rmsnorm res"));
  EXPECT_EQ(2 * L, count_calls(log_without[1], "rmsnorm res"));
  EXPECT_EQ(1u, count_calls(log_with[1], "matmul")) << "the output projection alone";
  EXPECT_EQ(L + 1, count_calls(log_without[1], "matmul")) << "o a layer (ffn_glu) and the output";
}

INSTANTIATE_TEST_SUITE_P(Families, AccRoute,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));
