// sample_test.cc — the CPU `sample` op (ABI minor 2) against an independent reference
// written here from the header's definition: canonical splitmix64, a stable sort of the
// tokens, the three prefix cuts and the inverse CDF. Asserts: the same token for every
// (row, step) over many settings and odd vocabularies; the generator state advanced in
// device memory by exactly one golden-ratio step per sampled row; top-k never leaves the
// k best; top-p and min-p keep exactly the expected sets; the empirical distribution of
// 120000 draws within 5 standard errors of the filtered softmax for every token;
// temperature 0 = argmax; hostile arguments give one-line errors.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "tests/sampling/util.h"

using namespace samptest;

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Canonical splitmix64 (Vigna): state += golden; mix the new state.
uint64_t splitmix64_next(uint64_t &s) {
  uint64_t z = (s += kGolden);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Filtered probabilities of the definition, in (p desc, id asc) order: ids and p.
struct Filtered {
  std::vector<int32_t> ids;
  std::vector<float> p;
};

Filtered filter(const float *x, int n, const memra_sample_params &sp) {
  std::vector<float> z(n), p(n);
  float m = -INFINITY;
  for (int i = 0; i < n; ++i) {
    z[i] = std::isnan(x[i]) ? -INFINITY : x[i] / sp.temperature;
    m = std::max(m, z[i]);
  }
  for (int i = 0; i < n; ++i)
    p[i] = z[i] == m ? 1.0f : std::exp(z[i] - m);
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  size_t k = sp.top_k > 0 && sp.top_k < n ? (size_t)sp.top_k : (size_t)n;
  size_t kp = k, km = k;
  if (sp.top_p < 1.0f) {
    double mass = 0;
    for (size_t j = 0; j < k; ++j)
      mass += p[order[j]];
    double cum = 0;
    for (kp = 0; kp < k;) {
      cum += p[order[kp++]];
      if (cum >= (double)sp.top_p * mass) break;
    }
  }
  if (sp.min_p > 0.0f)
    for (km = 1; km < k && p[order[km]] >= sp.min_p * p[order[0]]; ++km) {
    }
  size_t keep = std::max<size_t>(1, std::min({k, kp, km}));
  Filtered f;
  for (size_t j = 0; j < keep; ++j) {
    f.ids.push_back(order[j]);
    f.p.push_back(p[order[j]]);
  }
  return f;
}

int32_t ref_sample(const float *x, int n, const memra_sample_params &sp, uint64_t &state) {
  if (!(sp.temperature > 0)) {
    int best = 0;
    for (int i = 1; i < n; ++i)
      if (x[i] > x[best] || (std::isnan(x[best]) && !std::isnan(x[i]))) best = i;
    return best;
  }
  double u = (double)(splitmix64_next(state) >> 11) / 9007199254740992.0;
  Filtered f = filter(x, n, sp);
  double mass = 0, cum = 0;
  for (float v : f.p)
    mass += v;
  for (size_t j = 0; j < f.p.size(); ++j) {
    cum += f.p[j];
    if (cum > u * mass) return f.ids[j];
  }
  return f.ids.back();
}

struct Sampler {
  Cpu &c;
  int n_vocab, n_rows;
  Dev logits, ids, rng;
  Sampler(Cpu &cpu, int nv, int nr)
      : c(cpu), n_vocab(nv), n_rows(nr), logits(cpu, MEMRA_TYPE_F32, nv, nr),
        ids(cpu, MEMRA_TYPE_I32, nr, 1), rng(cpu, MEMRA_TYPE_I64, nr, 1) {}
  memra_status run(const memra_sample_params &sp) {
    return c.vt->sample(c.be, &ids.t, &logits.t, &rng.t, &sp);
  }
};

std::vector<float> random_logits(std::mt19937 &g, int n_rows, int nv, float spread) {
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> v((size_t)n_rows * nv);
  for (auto &x : v)
    x = d(g);
  return v;
}

TEST(Sample, SlotIsFilledAtAbiMinor2) {
  Cpu c;
  ASSERT_GE(c.vt->abi_minor, 2u);
  ASSERT_GE(c.vt->struct_size, offsetof(memra_backend_vt, sample) + sizeof(void *));
  ASSERT_NE(c.vt->sample, nullptr);
}

TEST(Sample, SameTokenAsReferenceEveryStep) {
  Cpu c;
  std::mt19937 g(1234);
  const memra_sample_params settings[] = {
      {1.0f, 0, 1.0f, 0.0f},       {0.7f, 40, 0.95f, 0.05f}, {1.3f, 7, 1.0f, 0.0f},
      {0.9f, 0, 0.5f, 0.0f},       {1.0f, 0, 1.0f, 0.2f},    {2.0f, 1, 0.9f, 0.0f},
      {0.5f, 1000000, 0.0f, 0.0f}, {1.1f, 3, 0.3f, 0.9f},
  };
  for (int nv : {1, 2, 97, 1003}) {
    const int n_rows = 5, steps = 30;
    Sampler s(c, nv, n_rows);
    std::vector<float> x = random_logits(g, n_rows, nv, 2.5f);
    s.logits.put(x);
    for (const auto &sp : settings) {
      std::vector<uint64_t> seed(n_rows), state(n_rows);
      for (int r = 0; r < n_rows; ++r)
        seed[r] = state[r] = ((uint64_t)g() << 32) ^ g();
      s.rng.put(seed);
      for (int step = 0; step < steps; ++step) {
        ASSERT_EQ(MEMRA_OK, s.run(sp)) << c.err();
        std::vector<int32_t> got = s.ids.get<int32_t>();
        for (int r = 0; r < n_rows; ++r)
          ASSERT_EQ(got[r], ref_sample(&x[(size_t)r * nv], nv, sp, state[r]))
              << "nv " << nv << " row " << r << " step " << step << " T " << sp.temperature << " k "
              << sp.top_k << " p " << sp.top_p << " min_p " << sp.min_p;
      }
      std::vector<uint64_t> st = s.rng.get<uint64_t>();
      for (int r = 0; r < n_rows; ++r) {
        ASSERT_EQ(st[r], state[r]);
        ASSERT_EQ(st[r], seed[r] + (uint64_t)steps * kGolden); // advanced in device memory
      }
    }
  }
}

TEST(Sample, TopKNeverLeavesTheKBest) {
  Cpu c;
  std::mt19937 g(77);
  const int nv = 513, n_rows = 9, k = 6;
  Sampler s(c, nv, n_rows);
  // Distinct logits: a random permutation of a fine grid, so the k best are unambiguous.
  std::vector<float> x((size_t)n_rows * nv);
  for (int r = 0; r < n_rows; ++r) {
    std::vector<int> perm(nv);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    for (int i = 0; i < nv; ++i)
      x[(size_t)r * nv + i] = 0.01f * (float)perm[i];
  }
  s.logits.put(x);
  s.rng.put(std::vector<uint64_t>(n_rows, 42));
  std::vector<std::set<int32_t>> seen(n_rows);
  for (int step = 0; step < 600; ++step) {
    ASSERT_EQ(MEMRA_OK, s.run({3.0f, k, 1.0f, 0.0f})) << c.err();
    std::vector<int32_t> got = s.ids.get<int32_t>();
    for (int r = 0; r < n_rows; ++r) {
      ASSERT_GE(x[(size_t)r * nv + got[r]], 0.01f * (float)(nv - k) - 1e-4f);
      seen[r].insert(got[r]);
    }
  }
  for (int r = 0; r < n_rows; ++r)
    EXPECT_EQ(seen[r].size(), (size_t)k); // and each of the k is reachable
}

// Known probabilities: q = {.30 .25 .20 .10 .08 .04 .02 .01} then 0.
std::vector<float> known_row(int nv) {
  const double q[] = {.30, .25, .20, .10, .08, .04, .02, .01};
  std::vector<float> x(nv, -1e30f);
  // Scatter them over the row so sorting is exercised (ids 11, 3, 20, ...).
  const int at[] = {11, 3, 20, 0, 7, 15, 1, 18};
  for (int j = 0; j < 8; ++j)
    x[at[j]] = (float)std::log(q[j]);
  return x;
}

std::set<int32_t> drawn_set(Cpu &c, const memra_sample_params &sp, int draws) {
  const int nv = 23, n_rows = 8;
  Sampler s(c, nv, n_rows);
  std::vector<float> x;
  for (int r = 0; r < n_rows; ++r) {
    std::vector<float> row = known_row(nv);
    x.insert(x.end(), row.begin(), row.end());
  }
  s.logits.put(x);
  std::vector<uint64_t> seed(n_rows);
  for (int r = 0; r < n_rows; ++r)
    seed[r] = 1000003ull * (uint64_t)(r + 1);
  s.rng.put(seed);
  std::set<int32_t> out;
  for (int i = 0; i < draws / n_rows; ++i) {
    EXPECT_EQ(MEMRA_OK, s.run(sp)) << c.err();
    for (int32_t id : s.ids.get<int32_t>())
      out.insert(id);
  }
  return out;
}

TEST(Sample, TopPKeepsTheShortestPrefixExactly) {
  Cpu c;
  // Cumulative .30 .55 .75 .85: top_p .8 keeps 4 tokens, .75 keeps 3 (>= is inclusive,
  // but .75 is not exact in floats, so use .74), .3 keeps 1.
  EXPECT_EQ(drawn_set(c, {1.0f, 0, 0.80f, 0.0f}, 4000), (std::set<int32_t>{11, 3, 20, 0}));
  EXPECT_EQ(drawn_set(c, {1.0f, 0, 0.74f, 0.0f}, 4000), (std::set<int32_t>{11, 3, 20}));
  EXPECT_EQ(drawn_set(c, {1.0f, 0, 0.29f, 0.0f}, 400), (std::set<int32_t>{11}));
  // top_p is relative to the top-k mass: k 2 holds .55, .6 of it is .33 > .30: 2 kept.
  EXPECT_EQ(drawn_set(c, {1.0f, 2, 0.6f, 0.0f}, 2000), (std::set<int32_t>{11, 3}));
}

TEST(Sample, MinPKeepsExactlyThoseAboveTheFloor) {
  Cpu c;
  // p / p_max: 1 .833 .667 .333 .267 .133 .067 .033.
  EXPECT_EQ(drawn_set(c, {1.0f, 0, 1.0f, 0.3f}, 6000), (std::set<int32_t>{11, 3, 20, 0}));
  EXPECT_EQ(drawn_set(c, {1.0f, 0, 1.0f, 0.1f}, 8000), (std::set<int32_t>{11, 3, 20, 0, 7, 15}));
  EXPECT_EQ(drawn_set(c, {1.0f, 0, 1.0f, 0.9f}, 400), (std::set<int32_t>{11}));
  EXPECT_EQ(drawn_set(c, {1.0f, 0, 1.0f, 5.0f}, 400), (std::set<int32_t>{11})); // never empty
}

TEST(Sample, EmpiricalDistributionMatchesFilteredSoftmax) {
  Cpu c;
  std::mt19937 g(99);
  const int nv = 61, n_rows = 12, calls = 10000; // 120000 draws of one distribution
  const memra_sample_params sp = {0.8f, 10, 0.9f, 0.02f};
  std::vector<float> row = random_logits(g, 1, nv, 1.5f), x;
  for (int r = 0; r < n_rows; ++r)
    x.insert(x.end(), row.begin(), row.end());
  Sampler s(c, nv, n_rows);
  s.logits.put(x);
  std::vector<uint64_t> seed(n_rows);
  for (int r = 0; r < n_rows; ++r)
    seed[r] = ((uint64_t)g() << 32) | g();
  s.rng.put(seed);
  std::map<int32_t, double> count;
  for (int i = 0; i < calls; ++i) {
    ASSERT_EQ(MEMRA_OK, s.run(sp)) << c.err();
    for (int32_t id : s.ids.get<int32_t>())
      count[id] += 1;
  }
  Filtered f = filter(row.data(), nv, sp);
  ASSERT_GE(f.ids.size(), 3u); // a real distribution, not a point mass
  double mass = 0;
  for (float v : f.p)
    mass += v;
  const double N = (double)calls * n_rows;
  double total = 0;
  for (size_t j = 0; j < f.ids.size(); ++j) {
    double p = f.p[j] / mass, got = count[f.ids[j]] / N;
    total += count[f.ids[j]];
    EXPECT_LE(std::fabs(got - p), 5.0 * std::sqrt(p * (1 - p) / N) + 1e-12)
        << "token " << f.ids[j] << " p " << p << " freq " << got;
  }
  EXPECT_EQ(total, N); // nothing outside the filtered set
}

TEST(Sample, GeneratorStateLivesInDeviceMemory) {
  Cpu c;
  std::mt19937 g(5);
  const int nv = 4001, n_rows = 16;
  Sampler s(c, nv, n_rows);
  s.logits.put(random_logits(g, n_rows, nv, 0.1f)); // near uniform: draws differ
  std::vector<uint64_t> seed(n_rows);
  for (int r = 0; r < n_rows; ++r)
    seed[r] = 0xC0FFEEull + (uint64_t)r;
  s.rng.put(seed);
  const memra_sample_params sp = {1.0f, 0, 1.0f, 0.0f};
  ASSERT_EQ(MEMRA_OK, s.run(sp));
  std::vector<int32_t> a = s.ids.get<int32_t>();
  ASSERT_EQ(MEMRA_OK, s.run(sp));
  std::vector<int32_t> b = s.ids.get<int32_t>();
  EXPECT_NE(a, b); // two calls, fresh draws (equal by chance: ~(1/4001)^16)
  s.rng.put(seed); // reseeding reproduces the first call
  ASSERT_EQ(MEMRA_OK, s.run(sp));
  EXPECT_EQ(s.ids.get<int32_t>(), a);
  // Different seeds per row: the 16 rows do not all draw the same token.
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 1u);
}

TEST(Sample, TemperatureZeroIsArgmaxAndLeavesTheGenerator) {
  Cpu c;
  const int nv = 9, n_rows = 3;
  Sampler s(c, nv, n_rows);
  std::vector<float> x = {1,   5,  2,  5,     0,   0,  0,  0,  0,  // tie: lowest index (1)
                          NAN, -3, -2, -2.5f, NAN, -9, -8, -7, -6, // NaN never wins (2)
                          -1,  -1, -1, -1,    -1,  -1, -1, -1, 4}; // last (8)
  s.logits.put(x);
  s.rng.put(std::vector<uint64_t>{1, 2, 3});
  ASSERT_EQ(MEMRA_OK, s.run({0.0f, 5, 0.5f, 0.1f})) << c.err();
  EXPECT_EQ(s.ids.get<int32_t>(), (std::vector<int32_t>{1, 2, 8}));
  EXPECT_EQ(s.rng.get<uint64_t>(), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(Sample, InfiniteAndNanLogits) {
  Cpu c;
  const int nv = 5, n_rows = 2;
  Sampler s(c, nv, n_rows);
  s.logits.put(std::vector<float>{0, 3, INFINITY, NAN, 2,  // +inf is certain
                                  NAN, NAN, 1, NAN, NAN}); // the only finite logit
  s.rng.put(std::vector<uint64_t>{7, 8});
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(MEMRA_OK, s.run({1.0f, 0, 1.0f, 0.0f})) << c.err();
    EXPECT_EQ(s.ids.get<int32_t>(), (std::vector<int32_t>{2, 2}));
  }
}

TEST(Sample, HostileArgumentsGiveOneLineErrors) {
  Cpu c;
  Sampler s(c, 10, 3);
  s.logits.put(std::vector<float>(30, 1.0f));
  memra_sample_params bad = {NAN, 0, 1.0f, 0.0f};
  EXPECT_EQ(MEMRA_E_INVALID, s.run(bad));
  EXPECT_NE(c.err().find("sample: temperature nan"), std::string::npos) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->sample(c.be, &s.ids.t, &s.logits.t, &s.rng.t, nullptr));
  EXPECT_EQ(c.err(), "sample: params are absent");
  Dev rng32(c, MEMRA_TYPE_I32, 3, 1); // the generator must be 64-bit
  const memra_sample_params ok = {1.0f, 0, 1.0f, 0.0f};
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->sample(c.be, &s.ids.t, &s.logits.t, &rng32.t, &ok));
  EXPECT_NE(c.err().find("sample: rng has type I32, expected I64"), std::string::npos) << c.err();
  Dev ids2(c, MEMRA_TYPE_I32, 2, 1); // one id per row
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->sample(c.be, &ids2.t, &s.logits.t, &s.rng.t, &ok));
  EXPECT_NE(c.err().find("sample: ids"), std::string::npos) << c.err();
  EXPECT_EQ(c.err().find('\n'), std::string::npos);
}

} // namespace
