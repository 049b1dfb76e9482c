// The sampling chain with fixed seeds: greedy, determinism, top-k / top-p / min-p cutoffs,
// the empirical distribution against softmax(logits / T), penalties, stop strings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

extern "C" {
#include "core/text/sampler.h"
}

namespace {

std::vector<float> RandLogits(int n, uint32_t seed, float lo = -4, float hi = 4) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

memra_sampler_params Plain(float t) {
  memra_sampler_params p = memra_sampler_defaults();
  p.temperature = t;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.repeat_penalty = 1;
  p.seed = 1234;
  return p;
}

struct S {
  memra_sampler *s = nullptr;
  S(const memra_sampler_params &p, int n) {
    memra_err err = {};
    EXPECT_EQ(MEMRA_OK, memra_sampler_new(&p, n, &s, &err)) << err.msg;
  }
  ~S() { memra_sampler_free(s); }
  int32_t Draw(const std::vector<float> &l) {
    std::vector<float> c = l;
    return memra_sampler_sample(s, c.data());
  }
};

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  std::vector<float> l = RandLogits(4097, 1);
  S s(Plain(0), 4097);
  int32_t best = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  EXPECT_EQ(best, s.Draw(l));
  l[17] = l[4001] = 100.0f;
  EXPECT_EQ(17, s.Draw(l));
}

TEST(Sampler, SameSeedSameTokensOtherSeedOthers) {
  std::vector<float> l = RandLogits(1031, 2, -1, 1);
  memra_sampler_params p = memra_sampler_defaults();
  p.seed = 99;
  S a(p, 1031), b(p, 1031);
  p.seed = 100;
  S c(p, 1031);
  int differ = 0;
  for (int i = 0; i < 300; i++) {
    int32_t x = a.Draw(l), y = b.Draw(l), z = c.Draw(l);
    EXPECT_EQ(x, y) << i;
    differ += x != z;
  }
  EXPECT_GT(differ, 50);
  memra_sampler_reset(a.s); // reset restarts the stream
  S d(p, 1031);
  p.seed = 99;
  S e(p, 1031);
  EXPECT_EQ(e.Draw(l), a.Draw(l));
}

TEST(Sampler, TopKNeverLeavesTheKBest) {
  const int V = 4097, K = 7;
  std::vector<float> l = RandLogits(V, 3, -1, 1); // flat: the tail would be drawn often
  std::vector<int> order(V);
  for (int i = 0; i < V; i++)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  std::set<int> best(order.begin(), order.begin() + K), seen;
  memra_sampler_params p = Plain(1.5f);
  p.top_k = K;
  S s(p, V);
  for (int i = 0; i < 5000; i++) {
    int32_t t = s.Draw(l);
    ASSERT_TRUE(best.count(t)) << "drew " << t << " outside the top " << K;
    seen.insert(t);
  }
  EXPECT_EQ(size_t(K), seen.size());
}

TEST(Sampler, TopPAndMinPCutoffs) {
  // Probabilities 0.5, 0.3, 0.15, 0.04, 0.01 (at T = 1) on shuffled ids.
  std::vector<float> l(5);
  const double pr[5] = {0.15, 0.5, 0.01, 0.3, 0.04};
  for (int i = 0; i < 5; i++)
    l[i] = float(std::log(pr[i]));
  {
    memra_sampler_params p = Plain(1);
    p.top_p = 0.75f; // 0.5 + 0.3 reaches it: ids 1 and 3 only
    S s(p, 5);
    std::set<int> seen;
    for (int i = 0; i < 3000; i++)
      seen.insert(s.Draw(l));
    EXPECT_EQ(std::set<int>({1, 3}), seen);
  }
  {
    memra_sampler_params p = Plain(2.0f); // temperature flattens, the cutoff stays
    p.min_p = 0.25f;                      // keeps p >= 0.125: 0.5, 0.3, 0.15
    S s(p, 5);
    std::set<int> seen;
    for (int i = 0; i < 3000; i++)
      seen.insert(s.Draw(l));
    EXPECT_EQ(std::set<int>({0, 1, 3}), seen);
  }
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmaxAtT) {
  const int V = 31, N = 200000;
  const float T = 0.7f;
  std::vector<float> l = RandLogits(V, 4, -2, 2);
  std::vector<double> ref(V);
  double z = 0;
  for (int i = 0; i < V; i++)
    z += ref[i] = std::exp(double(l[i]) / T);
  for (double &r : ref)
    r /= z;
  S s(Plain(T), V);
  std::vector<int> cnt(V);
  for (int i = 0; i < N; i++)
    cnt[s.Draw(l)]++;
  double tv = 0;
  for (int i = 0; i < V; i++) {
    double f = double(cnt[i]) / N, sd = std::sqrt(ref[i] * (1 - ref[i]) / N);
    // Bound: 5 binomial standard deviations per token (+1e-4 for tiny p).
    EXPECT_LE(std::fabs(f - ref[i]), 5 * sd + 1e-4) << "token " << i;
    tv += std::fabs(f - ref[i]) / 2;
  }
  EXPECT_LT(tv, 0.01); // total variation distance
}

TEST(Sampler, PenaltiesChangeExactlyThePenalizedTokens) {
  const int V = 101;
  std::vector<float> l = RandLogits(V, 5);
  l[3] = 2.5f, l[7] = -1.5f, l[50] = 0.75f;
  memra_sampler_params p = Plain(0);
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.penalty_last_n = -1;
  S s(p, V);
  for (int id : {3, 3, 7, 50, 3})
    memra_sampler_accept(s.s, id);
  std::vector<float> got = l;
  memra_sampler_sample(s.s, got.data());
  for (int i = 0; i < V; i++) {
    float want = l[i];
    int c = i == 3 ? 3 : (i == 7 || i == 50) ? 1 : 0;
    if (c) {
      want = want > 0 ? want / 1.3f : want * 1.3f;
      want -= float(c) * 0.5f + 0.25f;
    }
    EXPECT_EQ(want, got[i]) << "token " << i;
  }
  // A window of 2 sees only the last two tokens (50, 3).
  p.penalty_last_n = 2;
  S w(p, V);
  for (int id : {3, 3, 7, 50, 3})
    memra_sampler_accept(w.s, id);
  got = l;
  memra_sampler_sample(w.s, got.data());
  EXPECT_EQ(l[7], got[7]);
  EXPECT_NE(l[50], got[50]);
  EXPECT_EQ(2.5f / 1.3f - (0.5f + 0.25f), got[3]);
}

TEST(Sampler, NonFiniteLogits) {
  std::vector<float> l = RandLogits(64, 6);
  l[5] = NAN, l[9] = -INFINITY;
  S s(Plain(1.0f), 64);
  for (int i = 0; i < 500; i++) {
    int32_t t = s.Draw(l);
    ASSERT_NE(5, t);
    ASSERT_NE(9, t);
  }
  l[40] = l[33] = INFINITY;
  EXPECT_EQ(33, s.Draw(l));
}

TEST(Sampler, BadParametersAreRefused) {
  memra_sampler *s = nullptr;
  memra_err err = {};
  memra_sampler_params p = memra_sampler_defaults();
  p.top_p = 0;
  EXPECT_EQ(MEMRA_E_INVALID, memra_sampler_new(&p, 10, &s, &err));
  EXPECT_NE(nullptr, strstr(err.msg, "0 < top_p <= 1"));
  p = memra_sampler_defaults();
  p.temperature = NAN;
  EXPECT_EQ(MEMRA_E_INVALID, memra_sampler_new(&p, 10, &s, &err));
  p = memra_sampler_defaults();
  EXPECT_EQ(MEMRA_E_INVALID, memra_sampler_new(&p, 0, &s, &err));
  EXPECT_EQ(nullptr, s);
}

TEST(StopStrings, HoldsPossiblePrefixesAndFindsTheFirstStop) {
  const char *stops[] = {"<|im_end|>", "\nUser:"};
  bool stopped;
  std::string t = "Hello <|im_";
  EXPECT_EQ(6u, memra_stop_scan(t.data(), t.size(), stops, 2, &stopped));
  EXPECT_FALSE(stopped);
  t = "Hello\nUs";
  EXPECT_EQ(5u, memra_stop_scan(t.data(), t.size(), stops, 2, &stopped));
  t = "Hi\nUser: x <|im_end|>";
  EXPECT_EQ(2u, memra_stop_scan(t.data(), t.size(), stops, 2, &stopped));
  EXPECT_TRUE(stopped);
  t = "plain text";
  EXPECT_EQ(t.size(), memra_stop_scan(t.data(), t.size(), stops, 2, &stopped));
  EXPECT_FALSE(stopped);
}

} // namespace
