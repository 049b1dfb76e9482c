// fp8_attention_test.cc — kv_store and attention with FP8 (e4m3) caches on the CPU
// oracle: two sequences (37 and 20 positions) in shuffled pages of 7, GQA 4:2, head_dim
// 72, every position a row (prefill-shaped, so every prefix length is attended).
// Asserts: the cache bytes are exactly memra_f32_to_fp8_e4m3 of k and v; attention over
// the FP8 caches is bit-identical to attention over F32 caches holding the FP8-rounded
// values (dequantize on read, nothing else changes); and against the F32 cache of the
// unrounded values its relative L2 error is below 0.05 (e4m3 keeps 3 mantissa bits: a
// relative rounding error up to 2^-4 per element, about 2^-4/sqrt(3) = 0.036 RMS for
// uniform inputs before attention averages it down), and above 1e-3 (rounding happened).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "tests/sampling/util.h"

extern "C" {
#include "plugins/quant/fp8.h"
}

using namespace samptest;

namespace {

constexpr int kHead = 4, kKvHead = 2, kHd = 72, kBs = 7;
constexpr int kKvw = kKvHead * kHd, kQw = kHead * kHd;

struct Fixture {
  Cpu c;
  std::mt19937 g{4242};
  std::vector<int> len{37, 20};
  int max_blocks = 7, n_pages = 12, n_rows = 57;
  std::vector<int32_t> table, pos, seq;
  std::vector<float> k, v, q;
  Fixture() {
    std::vector<int32_t> pages(n_pages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), g);
    table.assign(2 * max_blocks, -1);
    int next = 0;
    for (int s = 0; s < 2; ++s)
      for (int b = 0; b < (len[s] + kBs - 1) / kBs; ++b)
        table[s * max_blocks + b] = pages[next++];
    for (int s = 0; s < 2; ++s)
      for (int p = 0; p < len[s]; ++p) {
        pos.push_back(p);
        seq.push_back(s);
      }
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    for (int i = 0; i < n_rows * kKvw; ++i) {
      k.push_back(d(g));
      v.push_back(d(g));
    }
    for (int i = 0; i < n_rows * kQw; ++i)
      q.push_back(d(g));
  }

  // kv_store into caches of `type`, then attention; returns out and the raw caches.
  std::vector<float> run(int32_t type, const std::vector<float> &kin, const std::vector<float> &vin,
                         std::vector<uint8_t> *kbytes = nullptr) {
    const int64_t slots = (int64_t)n_pages * kBs;
    Dev dpos(c, MEMRA_TYPE_I32, n_rows, 1), dseq(c, MEMRA_TYPE_I32, n_rows, 1),
        dtab(c, MEMRA_TYPE_I32, max_blocks, 2), dk(c, MEMRA_TYPE_F32, kKvw, n_rows),
        dv(c, MEMRA_TYPE_F32, kKvw, n_rows), dq(c, MEMRA_TYPE_F32, kQw, n_rows),
        dout(c, MEMRA_TYPE_F32, kQw, n_rows), kc(c, type, kKvw, slots), vc(c, type, kKvw, slots);
    dpos.put(pos);
    dseq.put(seq);
    dtab.put(table);
    dk.put(kin);
    dv.put(vin);
    dq.put(q);
    memra_batch b{};
    b.n_rows = n_rows;
    b.n_seqs = 2;
    b.block_size = kBs;
    b.max_blocks = max_blocks;
    b.kv_bucket = 37;
    b.pos = dpos.t;
    b.seq = dseq.t;
    b.block_table = dtab.t;
    EXPECT_EQ(MEMRA_OK, c.vt->kv_store(c.be, &kc.t, &vc.t, &dk.t, &dv.t, &b)) << c.err();
    memra_attn_params p = {kHead, kKvHead, kHd, 0, 1.0f / std::sqrt((float)kHd), 0.0f};
    EXPECT_EQ(MEMRA_OK, c.vt->attention(c.be, &dout.t, &dq.t, &kc.t, &vc.t, &b, &p)) << c.err();
    if (kbytes) *kbytes = kc.get<uint8_t>();
    return dout.get<float>();
  }
  int64_t slot(int row) const {
    return (int64_t)table[seq[row] * max_blocks + pos[row] / kBs] * kBs + pos[row] % kBs;
  }
};

TEST(Fp8Cache, StoreWritesTheEncodedBytes) {
  Fixture f;
  std::vector<uint8_t> kb;
  f.run(MEMRA_TYPE_F8_E4M3, f.k, f.v, &kb);
  for (int r = 0; r < f.n_rows; ++r)
    for (int i = 0; i < kKvw; ++i)
      ASSERT_EQ(kb[(size_t)f.slot(r) * kKvw + i], memra_f32_to_fp8_e4m3(f.k[(size_t)r * kKvw + i]))
          << "row " << r << " elem " << i;
}

TEST(Fp8Cache, AttentionDequantizesOnReadExactly) {
  Fixture f;
  std::vector<float> kr(f.k), vr(f.v);
  for (auto &x : kr)
    x = memra_fp8_e4m3_to_f32(memra_f32_to_fp8_e4m3(x));
  for (auto &x : vr)
    x = memra_fp8_e4m3_to_f32(memra_f32_to_fp8_e4m3(x));
  std::vector<float> a = f.run(MEMRA_TYPE_F8_E4M3, f.k, f.v), b = f.run(MEMRA_TYPE_F32, kr, vr);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(Fp8Cache, AttentionWithinBoundOfF32Cache) {
  Fixture f;
  std::vector<float> a = f.run(MEMRA_TYPE_F8_E4M3, f.k, f.v), b = f.run(MEMRA_TYPE_F32, f.k, f.v);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i]));
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  double rel = std::sqrt(num / den);
  RecordProperty("rel_l2", std::to_string(rel));
  EXPECT_LT(rel, 0.05);
  EXPECT_GT(rel, 1e-3);
}

TEST(Fp8Cache, OtherCacheTypesStillRefused) {
  Fixture f;
  Dev kc(f.c, MEMRA_TYPE_BF16, kKvw, 8), vc(f.c, MEMRA_TYPE_BF16, kKvw, 8),
      dk(f.c, MEMRA_TYPE_F32, kKvw, 1), dpos(f.c, MEMRA_TYPE_I32, 1, 1),
      dseq(f.c, MEMRA_TYPE_I32, 1, 1), dtab(f.c, MEMRA_TYPE_I32, 1, 1);
  dpos.put(std::vector<int32_t>{0});
  dseq.put(std::vector<int32_t>{0});
  dtab.put(std::vector<int32_t>{0});
  memra_batch b{1, 1, 8, 1, 1, 0, dpos.t, dseq.t, dtab.t};
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, f.c.vt->kv_store(f.c.be, &kc.t, &vc.t, &dk.t, &dk.t, &b));
  EXPECT_NE(f.c.err().find("expected F32 or F16 or F8_E4M3"), std::string::npos) << f.c.err();
}

} // namespace
