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
#include <vector>

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
Cache random_cache(int es, std::mt19937 *rng, float mag) {
  std::uniform_real_distribution<float> u(-mag, mag);
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

// One unit of attention_v6_kernel, lane by lane: its softmax state (each lane: head g's running
// max m and its positions' share of the sum l) and its output fragments, a step at a time.
struct Unit {
  float m[32], l[32];
  Frag o[2][8]; // [chunk][tile]: C rows are head dims, columns heads 2t, 2t + 1
};
void unit_init(Unit *u) {
  memset(u, 0, sizeof *u);
  for (int lane = 0; lane < 32; ++lane)
    u->m[lane] = -INFINITY;
}

// A step of 32 positions (K, V) as the kernel runs it: scores, the quad's max, the rescale of the
// running state (the output columns' factors from att6_head_lane), P's hi and rest into the output.
// ok[p]: position p has a slot; a K row without one holds garbage (NaN here), a V row zeros, and
// the lane's mask (att6_v_bit / att6_s_bit) sets its scores to -inf.
void unit_step(Unit *u, const Cache &K, const Cache &V, const float q[kG][kD], int G, float scale,
               const bool *ok) {
  const int E = 16 / K.es, KC = kD / (4 * E), KS = E / 4, VC = kD / (8 * E), VT = E / 2;
  Frag sc[4]; // scores: tile j's C fragments, accumulated over the k-steps (c, s2)
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
          if (!ok[att6_k_pos(j, g)])
            for (int i = 0; i < 8; ++i)
              w[i] = 0x7e007e00u; /* f16 NaN: what an unloaded register may hold */
          sc[j].b[lane][0] = w[2 * s2];
          sc[j].b[lane][1] = w[2 * s2 + 1];
        }
        mma(&sc[j]);
      }
  float p[32][4][2], mt[32], al[32];
  for (int lane = 0; lane < 32; ++lane) {
    const int t = lane % 4;
    uint32_t valid = 0;
    for (int kk = 0; kk < 2; ++kk)
      for (int q4 = 0; q4 < 4; ++q4)
        if (ok[att6_v_pos(kk, t, q4)]) valid |= 1u << att6_v_bit(kk, q4);
    mt[lane] = -INFINITY;
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        const float v = (sc[j].c[lane][h] + sc[j].c[lane][2 + h]) * scale;
        p[lane][j][h] = valid >> att6_s_bit(j, h) & 1u ? v : -INFINITY;
        mt[lane] = fmaxf(mt[lane], p[lane][j][h]);
      }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int q0 = lane & ~3; // the quad's max (the two xor shuffles)
    const float mq = fmaxf(fmaxf(mt[q0], mt[q0 + 1]), fmaxf(mt[q0 + 2], mt[q0 + 3]));
    const float mn = fmaxf(u->m[lane], mq);
    al[lane] = u->m[lane] == -INFINITY ? 0.f : expf(u->m[lane] - mn);
    float ls = 0.f;
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        p[lane][j][h] = p[lane][j][h] == -INFINITY ? 0.f : expf(p[lane][j][h] - mn);
        ls += p[lane][j][h];
      }
    u->l[lane] = fmaf(u->l[lane], al[lane], ls);
    u->m[lane] = mn;
  }
  for (int c = 0; c < VC; ++c)
    for (int i = 0; i < VT; ++i)
      for (int lane = 0; lane < 32; ++lane) {
        const int t = lane % 4;
        const float al0 = al[att6_head_lane(2 * t)], al1 = al[att6_head_lane(2 * t + 1)];
        u->o[c][i].c[lane][0] *= al0;
        u->o[c][i].c[lane][1] *= al1;
        u->o[c][i].c[lane][2] *= al0;
        u->o[c][i].c[lane][3] *= al1;
      }
  for (int kk = 0; kk < 2; ++kk)
    for (int part = 0; part < 2; ++part) // P's hi, then its rest
      for (int c = 0; c < VC; ++c)
        for (int i = 0; i < VT; ++i) {
          Frag *f = &u->o[c][i];
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, t = lane % 4;
            uint32_t rows[4][8];
            for (int q4 = 0; q4 < 4; ++q4) {
              V.words(att6_v_pos(kk, t, q4), att6_v_dim(E, c, g, 0, 0), rows[q4]);
              if (!ok[att6_v_pos(kk, t, q4)]) memset(rows[q4], 0, sizeof rows[q4]);
            }
            att6_v_frag(rows[0], rows[1], rows[2], rows[3], i, f->a[lane]);
            uint32_t h0, r0, h1, r1;
            split2(p[lane][2 * kk][0], p[lane][2 * kk][1], &h0, &r0);
            split2(p[lane][2 * kk + 1][0], p[lane][2 * kk + 1][1], &h1, &r1);
            f->b[lane][0] = part ? r0 : h0;
            f->b[lane][1] = part ? r1 : h1;
          }
          mma(f);
        }
}

// The unit's pushed values: each head's max and sum (the quad's), its unnormalized output.
struct UnitOut {
  float m[kG], l[kG], out[kG][kD];
};
UnitOut unit_out(const Unit &u, int es, int G) {
  const int E = 16 / es, VC = kD / (8 * E), VT = E / 2;
  UnitOut r;
  memset(&r, 0, sizeof r);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    if (g < G && t == 0) {
      r.m[g] = u.m[lane];
      r.l[g] = u.l[lane] + u.l[lane + 1] + u.l[lane + 2] + u.l[lane + 3];
    }
    for (int c = 0; c < VC; ++c)
      for (int i = 0; i < VT; ++i)
        for (int k = 0; k < 4; ++k) {
          const int h = 2 * t + (k & 1), d = att6_v_dim(E, c, g, i, k >> 1);
          if (h < G) r.out[h][d] = u.o[c][i].c[lane][k];
        }
  }
  return r;
}

// softmax(q K^T) V in double over the steps' positions, head h, against the owners' combine of
// the units (M = max, sum_u e^(m_u - M) out_u / sum_u e^(m_u - M) l_u): the worst error.
double combine_error(const std::vector<UnitOut> &units, const std::vector<Cache> &Ks,
                     const std::vector<Cache> &Vs, const float q[kG][kD], int G, float scale,
                     const bool *ok) {
  double worst = 0.0;
  for (int h = 0; h < G; ++h) {
    std::vector<double> s;
    double mx = -INFINITY, den = 0.0;
    for (size_t st = 0; st < Ks.size(); ++st)
      for (int p = 0; p < kP; ++p) {
        double x = 0.0;
        for (int d = 0; d < kD; ++d)
          x += (double)q[h][d] * Ks[st].at(p, d);
        s.push_back(ok[st * kP + p] ? x * scale : -INFINITY); // no slot: no weight
        mx = s.back() > mx ? s.back() : mx;
      }
    for (double x : s)
      den += exp(x - mx);
    float M = -INFINITY;
    for (const UnitOut &u : units)
      M = fmaxf(M, u.m[h]);
    float gden = 0.f;
    for (const UnitOut &u : units)
      gden = fmaf(expf(u.m[h] - M), u.l[h], gden);
    for (int d = 0; d < kD; ++d) {
      double num = 0.0;
      for (size_t i = 0; i < s.size(); ++i)
        num += exp(s[i] - mx) * Vs[i / kP].at((int)(i % kP), d);
      float gnum = 0.f;
      for (const UnitOut &u : units)
        gnum = fmaf(expf(u.m[h] - M), u.out[h][d], gnum);
      const double err = fabs((double)gnum / gden - num / den);
      if (!(err <= worst)) worst = err; // a NaN is the worst
    }
  }
  return worst;
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
  for (int h = 0; h < 8; ++h) // head h's softmax state lives in quad g = h
    EXPECT_EQ(att6_head_lane(h) / 4, h);
  // a lane's scores are at its V rows' positions, and the mask bit of a score is its V row's
  for (int t = 0; t < 4; ++t)
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        const int bit = att6_s_bit(j, h);
        EXPECT_EQ(att6_v_bit(bit / 4, bit % 4), bit);
        EXPECT_EQ(att6_s_pos(j, t, h), att6_v_pos(bit / 4, t, bit % 4)) << "j " << j << " hi " << h;
      }
}

TEST(Att6Layout, PairsTakeTheNamedHalves) {
  EXPECT_EQ(att6_lo_pair(0x11112222u, 0x33334444u), 0x44442222u);
  EXPECT_EQ(att6_hi_pair(0x11112222u, 0x33334444u), 0x33331111u);
}

// The emulated units against softmax(q K^T) V in double: F16 and FP8 caches, groups 8, 5, 1; one
// step alone, then three steps whose scores grow and shrink (the running max moves up, then not:
// the rescale of the state and of the output columns), split into two units and combined; a few
// positions without a slot (NaN in their K registers, masked) and a partial last step.
TEST(Att6Layout, UnitsMatchTheDoubleReference) {
  std::mt19937 rng(20261205u);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const float scale = 1.0f / sqrtf((float)kD);
  static float q[kG][kD];
  for (int es : {2, 1})
    for (int G : {8, 5, 1}) {
      for (int h = 0; h < kG; ++h)
        for (int d = 0; d < kD; ++d)
          q[h][d] = 3.f * u(rng); // scores of a few units: a real softmax, not a flat one
      std::vector<Cache> Ks, Vs;
      for (int st = 0; st < 3; ++st) {
        Ks.push_back(random_cache(es, &rng, st == 1 ? 2.5f : st == 2 ? 0.4f : 1.f));
        Vs.push_back(random_cache(es, &rng, 1.f));
      }
      bool ok[3 * kP]; // every position has a slot but a few of the second step's and the
      for (int i = 0; i < 3 * kP; ++i) // last step's tail (a partial step)
        ok[i] = !(i == kP + 3 || i == kP + 17 || i >= 2 * kP + 21);
      Unit a, b;
      unit_init(&a);
      unit_step(&a, Ks[0], Vs[0], q, G, scale, ok);
      const double one = combine_error({unit_out(a, es, G)}, {Ks[0]}, {Vs[0]}, q, G, scale, ok);
      EXPECT_LT(one, 2e-6) << (es == 2 ? "F16" : "FP8") << " group " << G << ", one step";
      unit_step(&a, Ks[1], Vs[1], q, G, scale, ok + kP);
      unit_init(&b);
      unit_step(&b, Ks[2], Vs[2], q, G, scale, ok + 2 * kP);
      const double two =
          combine_error({unit_out(a, es, G), unit_out(b, es, G)}, Ks, Vs, q, G, scale, ok);
      EXPECT_LT(two, 2e-6) << (es == 2 ? "F16" : "FP8") << " group " << G << ", two units";
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
