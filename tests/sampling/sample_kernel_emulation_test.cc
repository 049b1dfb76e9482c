// sample_kernel_emulation_test.cc — plugins/cuda/sample.cu's kernel compiled as host C++
// with one thread and one warp (MEMRA_SMP_HOST_EMULATION; the CUDA intrinsics shimmed
// below), against the CPU oracle's `sample` op. This checks the kernel's algorithm (the
// bisection cuts for top-k, top-p, the min-p floor, ties, the draw, the generator step)
// here, where no GPU is; the device run (tools/device/opcheck) checks the real kernel.
// Both use glibc expf here, so only the summation order differs: on this fixed seed every
// token must agree, logits with many exact ties included; the generator states too.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/sampling/util.h"

namespace emu {
#define MEMRA_SMP_HOST_EMULATION 1
#define MEMRA_SMP_THREADS 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
struct dim {
  unsigned x;
};
static dim threadIdx = {0}, blockIdx = {0};
// One lane: a sum's partner contributes 0, a max/argmax partner is the lane itself.
static double __shfl_xor_sync(unsigned, double, int) { return 0; }
static float __shfl_xor_sync(unsigned, float v, int) { return v; }
static int64_t __shfl_xor_sync(unsigned, int64_t v, int) { return v; }
static void __syncthreads() {}
static float __uint_as_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
#include "tests/sampling/sample_cu.inc"
} // namespace emu

using namespace samptest;

namespace {

TEST(SampleKernelEmulation, SameTokensAsTheCpuOracle) {
  Cpu c(1);
  std::mt19937 g(7);
  const memra_sample_params settings[] = {
      {1, 0, 1, 0},    {0.7f, 40, 0.95f, 0.05f}, {1.3f, 7, 1, 0},       {0.9f, 0, 0.5f, 0},
      {1, 0, 1, 0.2f}, {2, 1, 0.9f, 0},          {0.5f, 1000000, 0, 0}, {1.1f, 3, 0.3f, 0.9f},
      {0, 0, 1, 0},    {1, 5, 0.9f, 0},          {1, 0, 1, 3.0f},
  };
  long total = 0, same = 0;
  for (int nv : {1, 2, 97, 1003, 5003}) {
    for (int ties = 0; ties < 2; ++ties) { // rounded logits: many exact ties in p
      for (const auto &sp : settings) {
        const int rows = 4, steps = nv > 2000 ? 4 : 12;
        std::normal_distribution<float> d(0, 2.5f);
        std::vector<float> x((size_t)rows * nv);
        for (auto &v : x)
          v = ties ? std::round(d(g)) : d(g);
        std::vector<uint64_t> seed(rows);
        for (auto &s : seed)
          s = ((uint64_t)g() << 32) | g();
        Dev L(c, MEMRA_TYPE_F32, nv, rows), I(c, MEMRA_TYPE_I32, rows, 1),
            R(c, MEMRA_TYPE_I64, rows, 1);
        L.put(x);
        R.put(seed);
        std::vector<uint64_t> st = seed;
        for (int step = 0; step < steps; ++step) {
          ASSERT_EQ(MEMRA_OK, c.vt->sample(c.be, &I.t, &L.t, &R.t, &sp)) << c.err();
          std::vector<int32_t> want = I.get<int32_t>(), got(rows, -1);
          for (int r = 0; r < rows; ++r) {
            emu::blockIdx.x = (unsigned)r;
            emu::sample_v1_kernel(got.data(), st.data(), x.data(), nv, nv, sp);
          }
          for (int r = 0; r < rows; ++r) {
            ++total;
            same += got[r] == want[r];
            EXPECT_EQ(got[r], want[r])
                << "nv " << nv << " ties " << ties << " T " << sp.temperature << " k " << sp.top_k
                << " p " << sp.top_p << " min_p " << sp.min_p << " step " << step << " row " << r;
          }
        }
        EXPECT_EQ(st, R.get<uint64_t>()); // the same generator steps
      }
    }
  }
  RecordProperty("agree", std::to_string(same) + "/" + std::to_string(total));
  EXPECT_EQ(same, total);
}

} // namespace
