// Decode attention v6's register layouts (plugins/cuda/attention_v6_layout.h) on the CPU: one
// warp's step of 32 positions built lane by lane with the layout functions the kernel uses
// (its 16-byte loads of K and V, q and P split into f16 hi + rest), the m16n8k16 MMAs emulated
// by the PTX ISA's fragment layout, against softmax(q K^T) V in double. What it checks is the
// mapping under that reading of the PTX layout; tools/device/opcheck.c checks the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>

extern "C" {
#include "plugins/cuda/attention_v6_layout.h"
#include "plugins/quant/fp8.h"
#include "plugins/quant/quant.h"
}

namespace {

constexpr int kD = AT6_D, kP = AT6_STEP, kG = 8;

float h2f(uint32_t h) { return memra_fp16_to_f32((uint16_t)(h & 0xffffu)); }

// The PTX layout of mma.m16n8k16 .row.col, f16 inputs, f32 accumulators, over a warp's lanes.
struct Frag {
  uint32_t a[32][4], b[32][2];
  float c[32][4];
};
void mma(Frag *f) {
  double A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 2; ++i) {
      const int sh = 16 * i;
      A[g][2 * t + i] = h2f(f->a[lane][0] >> sh);
      A[g + 8][2 * t + i] = h2f(f->a[lane][1] >> sh);
      A[g][8 + 2 * t + i] = h2f(f->a[lane][2] >> sh);
      A[g + 8][8 + 2 * t + i] = h2f(f->a[lane][3] >> sh);
      B[2 * t + i][g] = h2f(f->b[lane][0] >> sh);
      B[8 + 2 * t + i][g] = h2f(f->b[lane][1] >> sh);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int k = 0; k < 4; ++k) {
      const int row = g + 8 * (k >> 1), col = 2 * t + (k & 1);
      double s = f->c[lane][k];
      for (int kk = 0; kk < 16; ++kk)
        s += A[row][kk] * B[kk][col];
      f->c[lane][k] = (float)s;
    }
  }
}

// x = hi + rest, each a pair of f16 in one word (the first in the low half).
void split2(float x0, float x1, uint32_t *hi, uint32_t *rest) {
  const uint16_t h0 = memra_f32_to_fp16(x0), h1 = memra_f32_to_fp16(x1);
  *hi = h0 | (uint32_t)h1 << 16;
  *rest = memra_f32_to_fp16(x0 - memra_fp16_to_f32(h0)) |
          (uint32_t)memra_f32_to_fp16(x1 - memra_fp16_to_f32(h1)) << 16;
}

// A cache of 32 rows x 128 elements in f16 (es 2) or e4m3 (es 1), and a 16-byte load of it
// widened to words of two halves as att6_row16::words does.
struct Cache {
  int es;
  std::vector<uint8_t> bytes;
  float at(int p, int d) const {
    if (es == 1) return memra_fp8_e4m3_to_f32(bytes[(size_t)p * kD + d]);
    uint16_t h;
    memcpy(&h, &bytes[((size_t)p * kD + d) * 2], 2);
    return memra_fp16_to_f32(h);
  }
  void words(int p, int d0, uint32_t *w) const { // E = 16 / es elements from dim d0
    const int E = 16 / es;
    for (int i = 0; i < E / 2; ++i) {
      uint16_t lo, hi;
      if (es == 1) {
        lo = memra_f32_to_fp16(memra_fp8_e4m3_to_f32(bytes[(size_t)p * kD + d0 + 2 * i]));
        hi = memra_f32_to_fp16(memra_fp8_e4m3_to_f32(bytes[(size_t)p * kD + d0 + 2 * i + 1]));
      } else {
        memcpy(&lo, &bytes[((size_t)p * kD + d0 + 2 * i) * 2], 2);
        memcpy(&hi, &bytes[((size_t)p * kD + d0 + 2 * i + 1) * 2], 2);
      }
      w[i] = lo | (uint32_t)hi << 16;
    }
  }
};
Cache random_cache(int es, std::mt19937 *rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Cache c{es, std::vector<uint8_t>((size_t)kP * kD * es)};
  for (int i = 0; i < kP * kD; ++i) {
    const float v = u(*rng);
    if (es == 1) {
      c.bytes[i] = memra_f32_to_fp8_e4m3(v);
    } else {
      const uint16_t h = memra_f32_to_fp16(v);
      memcpy(&c.bytes[(size_t)i * 2], &h, 2);
    }
  }
  return c;
}

// One step of one unit for G heads, lane by lane as attention_v6_kernel computes it: the
// output of heads (G-local) and dims, unnormalized, with each head's max and sum.
struct StepOut {
  double out[kG][kD];
  float m[kG], l[kG];
};
StepOut v6_step(const Cache &K, const Cache &V, const float q[kG][kD], int G, float scale) {
  const int E = 16 / K.es, W = E / 2, KC = kD / (4 * E), KS = E / 4, VC = kD / (8 * E), VT = E / 2;
  // scores: tile j's C fragments, accumulated over the k-steps (c, s2)
  Frag sc[4];
  memset(sc, 0, sizeof sc);
  for (int c = 0; c < KC; ++c)
    for (int s2 = 0; s2 < KS; ++s2)
      for (int j = 0; j < 4; ++j) {
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          float x[4];
          for (int i = 0; i < 4; ++i)
            x[i] = g < G ? q[g][att6_k_dim(E, c, t, s2, i)] : 0.f;
          split2(x[0], x[1], &sc[j].a[lane][0], &sc[j].a[lane][1]);
          split2(x[2], x[3], &sc[j].a[lane][2], &sc[j].a[lane][3]);
          uint32_t w[8];
          K.words(att6_k_pos(j, g), att6_k_dim(E, c, t, 0, 0), w);
          sc[j].b[lane][0] = w[2 * s2];
          sc[j].b[lane][1] = w[2 * s2 + 1];
        }
        mma(&sc[j]);
      }
  // softmax of each lane's head g over its quad, P's B words, then the output MMAs
  float p[32][4][2], mq[32], lq[32];
  for (int lane = 0; lane < 32; ++lane) {
    float mt = -INFINITY;
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        p[lane][j][h] = (sc[j].c[lane][h] + sc[j].c[lane][2 + h]) * scale;
        mt = fmaxf(mt, p[lane][j][h]);
      }
    mq[lane] = mt;
  }
  for (int lane = 0; lane < 32; ++lane) { // the quad's max (the two xor shuffles)
    const int q0 = lane & ~3;
    float m = mq[q0];
    for (int k = 1; k < 4; ++k)
      m = fmaxf(m, mq[q0 + k]);
    float ls = 0.f;
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        p[lane][j][h] = expf(p[lane][j][h] - m);
        ls += p[lane][j][h];
      }
    lq[lane] = ls;
  }
  Frag o[2][8]; // [chunk][tile]
  memset(o, 0, sizeof o);
  for (int kk = 0; kk < 2; ++kk)
    for (int part = 0; part < 2; ++part) // P's hi, then its rest
      for (int c = 0; c < VC; ++c)
        for (int i = 0; i < VT; ++i) {
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, t = lane % 4;
            uint32_t rows[4][8];
            for (int q4 = 0; q4 < 4; ++q4)
              V.words(att6_v_pos(kk, t, q4), att6_v_dim(E, c, g, 0, 0), rows[q4]);
            att6_v_frag(rows[0], rows[1], rows[2], rows[3], i, o[c][i].a[lane]);
            uint32_t h0, r0, h1, r1;
            split2(p[lane][2 * kk][0], p[lane][2 * kk][1], &h0, &r0);
            split2(p[lane][2 * kk + 1][0], p[lane][2 * kk + 1][1], &h1, &r1);
            o[c][i].b[lane][0] = part ? r0 : h0;
            o[c][i].b[lane][1] = part ? r1 : h1;
          }
          mma(&o[c][i]);
        }
  (void)W;
  StepOut r;
  memset(&r, 0, sizeof r);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    if (g < G) {
      r.m[g] = mq[lane & ~3];
      for (int k = 1; k < 4; ++k)
        r.m[g] = fmaxf(r.m[g], mq[(lane & ~3) + k]);
      if (t == 0) r.l[g] = lq[lane] + lq[lane + 1] + lq[lane + 2] + lq[lane + 3];
    }
    for (int c = 0; c < VC; ++c)
      for (int i = 0; i < VT; ++i)
        for (int k = 0; k < 4; ++k) {
          const int h = 2 * t + (k & 1), d = att6_v_dim(E, c, g, i, k >> 1);
          if (h < G) r.out[h][d] = o[c][i].c[lane][k];
        }
  }
  return r;
}

TEST(Att6Layout, IndexMapsCoverEachDimAndPositionOnce) {
  for (int E : {8, 16}) {
    std::multiset<int> kd, vd;
    for (int c = 0; c < kD / (4 * E); ++c)
      for (int t = 0; t < 4; ++t)
        for (int s = 0; s < E / 4; ++s)
          for (int i = 0; i < 4; ++i)
            kd.insert(att6_k_dim(E, c, t, s, i));
    for (int c = 0; c < kD / (8 * E); ++c)
      for (int g = 0; g < 8; ++g)
        for (int i = 0; i < E / 2; ++i)
          for (int hi = 0; hi < 2; ++hi)
            vd.insert(att6_v_dim(E, c, g, i, hi));
    ASSERT_EQ(kd.size(), (size_t)kD);
    ASSERT_EQ(vd.size(), (size_t)kD);
    for (int d = 0; d < kD; ++d) {
      EXPECT_EQ(kd.count(d), 1u) << "E " << E << " K dim " << d;
      EXPECT_EQ(vd.count(d), 1u) << "E " << E << " V dim " << d;
    }
  }
  std::multiset<int> kp, vp;
  for (int j = 0; j < 4; ++j)
    for (int g = 0; g < 8; ++g)
      kp.insert(att6_k_pos(j, g));
  for (int kk = 0; kk < 2; ++kk)
    for (int t = 0; t < 4; ++t)
      for (int q = 0; q < 4; ++q)
        vp.insert(att6_v_pos(kk, t, q));
  for (int p = 0; p < kP; ++p) {
    EXPECT_EQ(kp.count(p), 1u) << "K position " << p;
    EXPECT_EQ(vp.count(p), 1u) << "V position " << p;
  }
  // a lane's scores are at its V rows' positions (the kernel masks them by the V slots)
  for (int t = 0; t < 4; ++t)
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h)
        EXPECT_EQ(att6_s_pos(j, t, h), att6_v_pos(j >> 1, t, 2 * (j & 1) + h));
}

TEST(Att6Layout, PairsTakeTheNamedHalves) {
  EXPECT_EQ(att6_lo_pair(0x11112222u, 0x33334444u), 0x44442222u);
  EXPECT_EQ(att6_hi_pair(0x11112222u, 0x33334444u), 0x33331111u);
}

// The emulated step against softmax(q K^T) V in double: F16 and FP8 caches, groups 8, 5, 1.
TEST(Att6Layout, OneStepMatchesTheDoubleReference) {
  std::mt19937 rng(20261205u);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const float scale = 1.0f / sqrtf((float)kD);
  for (int es : {2, 1})
    for (int G : {8, 5, 1}) {
      const Cache K = random_cache(es, &rng), V = random_cache(es, &rng);
      static float q[kG][kD];
      for (int h = 0; h < kG; ++h)
        for (int d = 0; d < kD; ++d)
          q[h][d] = 3.f * u(rng); // scores of a few units: a real softmax, not a flat one
      const StepOut r = v6_step(K, V, q, G, scale);
      double worst = 0.0;
      for (int h = 0; h < G; ++h) {
        double s[kP], mx = -INFINITY, den = 0.0;
        for (int p = 0; p < kP; ++p) {
          s[p] = 0.0;
          for (int d = 0; d < kD; ++d)
            s[p] += (double)q[h][d] * K.at(p, d);
          s[p] *= scale;
          mx = s[p] > mx ? s[p] : mx;
        }
        EXPECT_NEAR(r.m[h], mx, 1e-5 * (1.0 + fabs(mx))) << "head " << h;
        for (int p = 0; p < kP; ++p)
          den += exp(s[p] - mx);
        EXPECT_NEAR(r.l[h], den, 1e-5 * den) << "head " << h;
        for (int d = 0; d < kD; ++d) {
          double num = 0.0;
          for (int p = 0; p < kP; ++p)
            num += exp(s[p] - mx) * V.at(p, d);
          const double got = r.out[h][d] / r.l[h], want = num / den;
          const double err = fabs(got - want);
          worst = err > worst ? err : worst;
        }
      }
      EXPECT_LT(worst, 2e-6) << (es == 2 ? "F16" : "FP8") << " group " << G;
    }
}

// A wrong pairing must show: V's rows swapped in the fragment moves the output off.
TEST(Att6Layout, TheReferenceSeesAWrongPairing) {
  uint32_t r0[4] = {0x3c003c00u, 0, 0, 0}, r1[4] = {0x40004000u, 0, 0, 0}, a[4], b[4];
  att6_v_frag(r0, r1, r0, r1, 0, a);
  att6_v_frag(r1, r0, r1, r0, 0, b);
  EXPECT_NE(a[0], b[0]);
  EXPECT_EQ(a[0], 0x40003c00u); // position 2t (1.0) low, 2t + 1 (2.0) high
}

} // namespace
