// The core's use of ABI 1.14 rmsnorm_matmul_n / rmsnorm_ffn_glu: in a decode-only step of the
// llama family (llama; qwen2 with its q/k/v biases; qwen3) each layer's two norms go with the
// projections that read them (q, k, v in one rmsnorm_matmul_n; the dense FFN in one
// rmsnorm_ffn_glu), only the output norm stays an rmsnorm call; prompt steps keep rmsnorm; and
// the logits are bit-identical to an engine whose plugin lacks the slots (an ABI 1.13 plugin).
#include <cstdlib>

#include "tests/e2e/route_record.h"

class NormRoute : public ::testing::TestWithParam<const char *> {};

TEST_P(NormRoute, DecodeStepsTakeTheNormsWithTheProjectionsWithTheSameBits) {
  RoutePair r;
  ASSERT_TRUE(r.open(GetParam(), route_params())) << r.with.err.msg << r.without.err.msg;
  ASSERT_NE(nullptr, r.with.bh.vt->rmsnorm_matmul_n) << "the CPU plugin lost its rmsnorm_matmul_n";
  ASSERT_NE(nullptr, r.with.bh.vt->rmsnorm_ffn_glu) << "the CPU plugin lost its rmsnorm_ffn_glu";
  const size_t L = (size_t)r.with.m->hp.n_layer;

  r.vt_with.rmsnorm = r.vt_without.rmsnorm = rec_rmsnorm;
  r.vt_with.rmsnorm_matmul_n = rec_norm_mm;
  r.vt_with.rmsnorm_ffn_glu = rec_norm_ffn;
  r.vt_without.rmsnorm_matmul_n = nullptr; // an ABI 1.13 plugin
  r.vt_without.rmsnorm_ffn_glu = nullptr;
  r.vt_without.matmul_rmsnorm = nullptr;
  r.vt_with.matmul_acc = r.vt_without.matmul_acc = nullptr; // the norms with their residuals
  std::vector<std::string> log_with[2], log_without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(log_with, log_without));
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

// ABI 1.23 rmsnorm_matmul_mixed: in a Q4_K_M file's layers whose attn_v is Q6_K (memra-synth's mix:
// the last of three layers here) a decode step's attention norm goes with q, k and v in one
// call; the other layers keep rmsnorm_matmul_n of three; a plugin without the slot gets q and k
// with the norm and v on its own; the logits are bit-identical either way.
TEST(NormRouteMixed, AQ6KvLayerTakesTheNormWithAllThreeProjections) {
  const char *tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/tiny-llama-k-q4_k_m.gguf";
  const std::string cmd = "tools/synth/memra-synth --preset tiny-llama-k --types q4_k_m --seed 5 "
                          "-o " +
                          path + " 2>/dev/null";
  ASSERT_EQ(0, system(cmd.c_str())) << cmd;
  RoutePair r;
  ASSERT_TRUE(r.open_path(path, route_params())) << r.with.err.msg << r.without.err.msg;
  ASSERT_NE(nullptr, r.with.bh.vt->rmsnorm_matmul_mixed) << "the CPU plugin lost the ABI 1.23 slot";
  ASSERT_EQ(3, r.with.m->hp.n_layer);
  ASSERT_EQ(MEMRA_TYPE_Q4_K, r.with.m->layers[2].wq.type);
  ASSERT_EQ(MEMRA_TYPE_Q6_K, r.with.m->layers[2].wv.type);
  ASSERT_EQ(MEMRA_TYPE_Q4_K, r.with.m->layers[1].wv.type);
  r.vt_with.rmsnorm_matmul_n = r.vt_without.rmsnorm_matmul_n = rec_norm_mm;
  r.vt_with.rmsnorm_matmul_mixed = rec_norm_mixed;
  r.vt_without.rmsnorm_matmul_mixed = nullptr; // an ABI 1.22 plugin
  std::vector<std::string> log_with[2], log_without[2];
  ASSERT_NO_FATAL_FAILURE(r.two_steps(log_with, log_without));
  EXPECT_EQ(0u, count_calls(log_with[0], "rmsnorm_matmul_mixed 3")); // prompt steps: no
  EXPECT_EQ(1u, count_calls(log_with[1], "rmsnorm_matmul_mixed 3"));
  EXPECT_EQ(2u, count_calls(log_with[1], "rmsnorm_matmul_n 3"));
  EXPECT_EQ(2u, count_calls(log_without[1], "rmsnorm_matmul_n 3"));
  // gate and up with the FFN norm in every layer (matmul_acc), q and k in the Q6_K-v layer
  EXPECT_EQ(3u, count_calls(log_with[1], "rmsnorm_matmul_n 2"));
  EXPECT_EQ(4u, count_calls(log_without[1], "rmsnorm_matmul_n 2"));
}
