// tc6i_emu.cc — a host emulation of matmul_tc6i.cuh's data mapping for
// one warp, one Q6_K super-block and 16 rows: x split into biased byte digits as tc_split_put does,
// each thread's A / B registers as tcq<Q6_K> builds them, the m16n8k32 MMA by the PTX ISA's
// fragment layout (A rows g / g + 8 at k 4t.. and 16 + 4t..; B k 4t.. / 16 + 4t.. of column g; C
// columns 2t, 2t + 1), the epilogue and the quad sum, against ggml's dequantization in double
// (relative L2 over the 16 rows, 200 trials, x at three magnitude mixes). Not built by Bazel:
//   g++ -O2 -I. -o /tmp/tc6i_emu tools/device/tc6i_emu.cc && /tmp/tc6i_emu     (exit 0: all below
//   1e-4)
// It checks the mapping under that reading of the PTX layout, not the GPU: opcheck does.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/device/emu_util.h"

static float pow2(int e) { return ldexpf(1.f, e); }
int main() {
  int fails = 0;
  for (int trial = 0; trial < 200; ++trial) {
    uint8_t sb[16][210];
    for (int r = 0; r < 16; ++r) {
      for (int i = 0; i < 208; ++i)
        sb[r][i] = (uint8_t)rnd();
      uint16_t d = (uint16_t)((rnd() % 20 + 5) << 10 | (rnd() & 1023)); // positive normal f16
      memcpy(&sb[r][208], &d, 2);
    }
    float x[256];
    int mag = trial % 3;
    for (int i = 0; i < 256; ++i)
      x[i] = ldexpf(frand(), mag == 0 ? 0 : mag == 1 ? (int)(rnd() % 40) - 20 : -120);
    // reference (ggml dequantization)
    double ref[16];
    for (int r = 0; r < 16; ++r) {
      const uint8_t *ql = sb[r], *qh = sb[r] + 128;
      const int8_t *sc = (const int8_t *)(sb[r] + 192);
      uint16_t dh;
      memcpy(&dh, sb[r] + 208, 2);
      float d = h2f(dh);
      double s = 0;
      for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
          int is = l / 16;
          int q1 = (ql[64 * n + l] & 0xF) | (((qh[32 * n + l] >> 0) & 3) << 4);
          int q2 = (ql[64 * n + l + 32] & 0xF) | (((qh[32 * n + l] >> 2) & 3) << 4);
          int q3 = (ql[64 * n + l] >> 4) | (((qh[32 * n + l] >> 4) & 3) << 4);
          int q4 = (ql[64 * n + l + 32] >> 4) | (((qh[32 * n + l] >> 6) & 3) << 4);
          s += (double)d * sc[8 * n + is + 0] * (q1 - 32) * x[128 * n + l];
          s += (double)d * sc[8 * n + is + 2] * (q2 - 32) * x[128 * n + l + 32];
          s += (double)d * sc[8 * n + is + 4] * (q3 - 32) * x[128 * n + l + 64];
          s += (double)d * sc[8 * n + is + 6] * (q4 - 32) * x[128 * n + l + 96];
        }
      ref[r] = s;
    }
    // split (tc_split_put for tc6i_xs), per group of 32: lanes q = 0..3 of 8 elements
    uint8_t xq[8 * 96];
    float xsu[8], xs0[8], xs1[8];
    for (int G = 0; G < 8; ++G) {
      uint32_t mx = 0;
      for (int i = 0; i < 32; ++i) {
        uint32_t b;
        memcpy(&b, &x[32 * G + i], 4);
        b &= 0x7FFFFFFF;
        if (b > mx) mx = b;
      }
      int E = mx >> 23;
      int es = E == 255 ? 0 : 147 - (E == 0 ? 1 : E);
      int ea = es / 2, eb = es - ea;
      float sa = pow2(ea), sbb = pow2(eb);
      float Xl[4];
      for (int q = 0; q < 4; ++q) {
        const float *v = &x[32 * G + 8 * q];
        for (int i = 0; i < 8; ++i) {
          float r = fmaf(v[i] * sa, sbb, 12582912.f);
          uint32_t u;
          memcpy(&u, &r, 4);
          if ((u >> 23) != 150) {
            printf("u out of range\n");
            return 1;
          }
          xq[G * 96 + 0 + 8 * q + i] = (uint8_t)(u & 0xFF);
          xq[G * 96 + 32 + 8 * q + i] = (uint8_t)(u >> 8 & 0xFF);
          xq[G * 96 + 64 + 8 * q + i] = (uint8_t)(u >> 16 & 0xFF);
        }
        float p4[4];
        for (int i = 0; i < 4; ++i)
          p4[i] = v[2 * i] + v[2 * i + 1];
        Xl[q] = (p4[0] + p4[1]) + (p4[2] + p4[3]);
      }
      xs0[G] = Xl[0] + Xl[1];
      xs1[G] = Xl[2] + Xl[3];
      xsu[G] = pow2(-es);
    }
    // threads
    float acc[32][2] = {};
    for (int c = 0; c < 8; ++c) {
      int n = c >> 2, k = c & 3, rr = 2 * n + (k & 1);
      uint32_t a[32][4], b[32][2];
      float dsc[32][2];
      for (int lane = 0; lane < 32; ++lane) {
        int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 2; ++i) {
          const uint8_t *bb = sb[g + 8 * i];
          auto W = [&](int off) {
            uint32_t w;
            memcpy(&w, bb + off, 4);
            return w;
          };
          auto Q = [&](uint32_t ql, uint32_t qh) {
            return ((ql >> (4 * (k >> 1))) & 0x0F0F0F0Fu) | (((qh >> (2 * k)) & 0x03030303u) << 4);
          };
          uint32_t ql0 = W(16 * (2 * rr) + 4 * t), ql1 = W(16 * (2 * rr + 1) + 4 * t);
          uint32_t qh0 = W(128 + 16 * (2 * n) + 4 * t), qh1 = W(128 + 16 * (2 * n + 1) + 4 * t);
          a[lane][i] = Q(ql0, qh0);
          a[lane][2 + i] = Q(ql1, qh1);
          int st = t >> 1, si = 8 * n + 2 * k + st;
          uint32_t scw = W(192 + 4 * (si >> 2));
          int8_t s8 = (int8_t)((scw >> (8 * (si & 3))) & 0xFF);
          uint16_t dh;
          memcpy(&dh, bb + 208, 2);
          dsc[lane][i] = h2f(dh) * (float)s8;
        }
        int s = g >> 2, p = g & 3;
        int Gi = c; // sb 0
        uint32_t w = 0x01010101u;
        if (p < 3) memcpy(&w, &xq[Gi * 96 + 32 * p + 16 * s + 4 * t], 4);
        b[lane][0] = s == 0 ? w : 0;
        b[lane][1] = s == 1 ? w : 0;
      }
      // MMA per PTX fragment layouts
      int A[16][32], B[32][8], C[16][8];
      for (int lane = 0; lane < 32; ++lane) {
        int g = lane >> 2, t = lane & 3;
        for (int j = 0; j < 4; ++j) {
          A[g][4 * t + j] = (a[lane][0] >> (8 * j)) & 0xFF;
          A[g + 8][4 * t + j] = (a[lane][1] >> (8 * j)) & 0xFF;
          A[g][16 + 4 * t + j] = (a[lane][2] >> (8 * j)) & 0xFF;
          A[g + 8][16 + 4 * t + j] = (a[lane][3] >> (8 * j)) & 0xFF;
          B[4 * t + j][g] = (int)((b[lane][0] >> (8 * j)) & 0xFF);
          B[16 + 4 * t + j][g] = (int)((b[lane][1] >> (8 * j)) & 0xFF);
        }
      }
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
          int s = 0;
          for (int kk = 0; kk < 32; ++kk)
            s += A[i][kk] * B[kk][j];
          C[i][j] = s;
        }
      for (int lane = 0; lane < 32; ++lane) {
        int g = lane >> 2, t = lane & 3;
        bool lo = (t & 1) == 0;
        int cc[4] = {C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1]};
        float u = xsu[c], X = (t >> 1) ? xs1[c] : xs0[c];
        for (int i = 0; i < 2; ++i) {
          float v = lo ? (float)(cc[2 * i] + 256 * cc[2 * i + 1])
                       : (float)(cc[2 * i] - 64 * cc[2 * i + 1]) * 65536.f;
          acc[lane][i] = fmaf(dsc[lane][i], u * v, acc[lane][i]);
          if (lo) acc[lane][i] = fmaf(-32.f * dsc[lane][i], X, acc[lane][i]);
        }
      }
    }
    double worst = 0, e2 = 0, r2 = 0;
    for (int g = 0; g < 8; ++g)
      for (int i = 0; i < 2; ++i) {
        float q0 = acc[4 * g][i], q1 = acc[4 * g + 1][i], q2 = acc[4 * g + 2][i],
              q3 = acc[4 * g + 3][i];
        float sum = (q0 + q1) + (q2 + q3);
        double r = ref[g + 8 * i];
        e2 += (sum - r) * (sum - r);
        r2 += r * r;
      }
    worst = sqrt(e2 / r2);
    if (worst > 1e-4) {
      printf("trial %d mag %d rel L2 %.3e\n", trial, mag, worst);
      ++fails;
    }
    if (trial < 6) printf("trial %d mag %d rel L2 %.3e\n", trial, mag, worst);
  }
  printf("fails %d\n", fails);
  return fails != 0;
}
