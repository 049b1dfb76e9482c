// tc4i_emu.cc — a host emulation of matmul_tc4i.cuh's data mapping (MEMRA_TC_Q4I) for one warp,
// one Q4_K super-block and 16 rows, mirroring the .cuh as written: x split into three signed byte
// digits per element as its tc_split_put does (es, the two-step scaling, the 1.5 2^23 FFMA, the
// byte trick, the __byte_perm packing, tc4i_chunk's swizzle, the zero chunks, xs = (u, X, u16, 0)
// with X summed in the quad's order), each thread's registers as tcq<Q4_K> builds them (tc_raw's
// loads, tc4i_load_x's offsets into the emulated shared memory, tc4i_scales' FFMA), the m16n8k32
// u8 x s8 MMA by the PTX ISA's fragment layout (A rows g / g + 8 at k 4t.. and 16 + 4t..; B k 4t..
// / 16 + 4t.. of column g; C columns 2t, 2t + 1), two MMAs a chain, the epilogue and tc_quad_sum,
// against ggml's Q4_K dequantization in double (relative L2 over the 16 rows, 400 trials, x at
// three magnitude mixes and one with a single large outlier). Also checks, per lane and MMA, that
// the B pair it loads holds the digits of the x elements its k rows' A bytes weigh (the mapping
// traced through the loads), zeros for a zero column, and that no int32 sum overflows.
// Not built by Bazel:
//   g++ -O2 -std=c++17 -Wall -Wextra -I. -o /tmp/tc4i_emu tools/device/tc4i_emu.cc && /tmp/tc4i_emu
//   (exit 0: every trial below 1e-5 relative L2, the mapping checks clean)
// It checks the mapping under that reading of the PTX layout, not the GPU: opcheck does.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/device/emu_util.h"

// ---- host forms of the CUDA intrinsics the .cuh uses ----
static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
// __byte_perm(x, y, s): result byte k = byte ((s >> 4k) & 7) of the 8 bytes {x bytes 0-3, y 4-7}
static uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t v = (uint64_t)x | (uint64_t)y << 32;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t sel = (s >> (4 * k)) & 7;
    r |= (uint32_t)((v >> (8 * sel)) & 0xFF) << (8 * k);
  }
  return r;
}
static float tc_pow2(int e) { return u2f((uint32_t)(127 + e) << 23); } // matmul_tc.cuh
static float tc6i_pow2neg(int e) {                                     // matmul_tc6i.cuh
  return e <= 126 ? u2f((uint32_t)(127 - e) << 23) : u2f(1u << (149 - e));
}

struct U4 {
  uint32_t x, y, z, w;
};
struct U2 {
  uint32_t x, y;
};
struct F2 {
  float x, y;
};
static U4 ld4(const uint8_t *p) {
  U4 r;
  memcpy(&r, p, 16);
  return r;
}
static U2 ld2(const uint8_t *p) {
  U2 r;
  memcpy(&r, p, 8);
  return r;
}
static F2 ldf2(const uint8_t *p) {
  F2 r;
  memcpy(&r, p, 8);
  return r;
}

// ---- matmul_tc4i.cuh, line for line ----
static const int XS_BYTES = 16; // sizeof(tc4i_xs): u, X, u16, zero

static int tc4i_chunk(int64_t grp, int L) { return L ^ (int)((grp >> 1) & 1); }

// tc_split_put for one lane quad (lanes q = 0..3: elements e0 + 8 q .. + 7), the shuffles done
// across the four lanes' values. xb: the row's digit bytes, xs: its tc4i_xs entries (bytes).
static void split_put_quad(const float *x, int64_t e0, uint8_t *xb, uint8_t *xs) {
  uint32_t mx[4];
  for (int q = 0; q < 4; ++q) {
    const float *v = x + e0 + 8 * q;
    mx[q] = 0;
    for (int i = 0; i < 8; ++i) {
      uint32_t a = f2u(v[i]) & 0x7FFFFFFFu;
      mx[q] = mx[q] > a ? mx[q] : a;
    }
  }
  for (int sh = 1; sh <= 2; sh <<= 1) { // __shfl_xor_sync 1, then 2
    uint32_t o[4];
    for (int q = 0; q < 4; ++q)
      o[q] = mx[q ^ sh];
    for (int q = 0; q < 4; ++q)
      mx[q] = mx[q] > o[q] ? mx[q] : o[q];
  }
  float Xl[4];
  int esl[4];
  for (int q = 0; q < 4; ++q) {
    const float *v = x + e0 + 8 * q;
    const int64_t e = e0 + 8 * q;
    const int E = (int)(mx[q] >> 23);
    const int es = E == 255 ? 0 : 148 - (E == 0 ? 1 : E);
    const int ea = es / 2, eb = es - ea;
    const float sa = tc_pow2(ea), sb = tc_pow2(eb);
    uint32_t w[8];
    for (int i = 0; i < 8; ++i) {
      const float s1 = v[i] * sa; // __fmul_rn
      const uint32_t bits = f2u(std::fma(s1, sb, 12582912.f));
      w[i] = bits + (0x8080u - 0x4B400000u); /* v + 0x8080: digits 0, 1 XOR 0x80 */
    }
    const int64_t grp = e >> 5;
    const int qq = (int)(e >> 3) & 3;
    uint8_t *base = xb + grp * 128;
    for (int p = 0; p < 3; ++p) {
      const uint32_t s = (uint32_t)p | (uint32_t)(p + 4) << 4;
      const uint32_t lo = byte_perm(byte_perm(w[0], w[1], s), byte_perm(w[2], w[3], s), 0x5410);
      const uint32_t hi = byte_perm(byte_perm(w[4], w[5], s), byte_perm(w[6], w[7], s), 0x5410);
      const uint32_t fl = p < 2 ? 0x80808080u : 0u;
      const uint32_t pr[2] = {lo ^ fl, hi ^ fl};
      memcpy(base + 8 * tc4i_chunk(grp, 4 * p + qq), pr, 8);
    }
    const uint32_t z[2] = {0u, 0u};
    memcpy(base + 8 * tc4i_chunk(grp, 12 + qq), z, 8);
    float p4[4];
    for (int i = 0; i < 4; ++i)
      p4[i] = v[2 * i] + v[2 * i + 1];
    Xl[q] = (p4[0] + p4[1]) + (p4[2] + p4[3]);
    esl[q] = es;
  }
  for (int sh = 1; sh <= 2; sh <<= 1) { // X = X + shfl_xor(X, 1); X = X + shfl_xor(X, 2)
    float o[4];
    for (int q = 0; q < 4; ++q)
      o[q] = Xl[q ^ sh];
    for (int q = 0; q < 4; ++q)
      Xl[q] = Xl[q] + o[q];
  }
  // (threadIdx.x & 3) == 0: lane 0 of the quad writes
  const int es = esl[0];
  const float g[4] = {tc6i_pow2neg(es), Xl[0], tc6i_pow2neg(es - 16), 0.f};
  memcpy(xs + (e0 >> 5) * XS_BYTES, g, 16);
}

struct Xin { // tc4i_xin
  U2 b[2][2][2];
  F2 fx[2][2];
};
struct Offs {
  int b0, b1, xs;
};
static Offs tc4i_offs_of(int g, int t) {
  const int cls = t >> 1, p = g & 3;
  const bool real = (g >> 2) == cls && p < 3;
  Offs o;
  o.b0 = real ? 256 * cls + 8 * ((4 * p + 2 * (t & 1)) ^ cls) : 8 * (12 + 2 * (t & 1));
  o.b1 = real ? 256 * cls + 8 * ((4 * p + 2 * (t & 1) + 1) ^ cls) : 8 * (12 + 2 * (t & 1) + 1);
  o.xs = 32 * cls + 8 * (t & 1);
  return o;
}
static void tc4i_load_x(Xin &r, const uint8_t *xb, const uint8_t *xs, int64_t sb, int g, int t) {
  const Offs o = tc4i_offs_of(g, t);
  const uint8_t *xg = xb + sb * 8 * 128;
  const uint8_t *sg = xs + sb * 8 * XS_BYTES;
  for (int c = 0; c < 2; ++c)
    for (int n = 0; n < 2; ++n) {
      const int g0 = 4 * c + n;
      r.b[c][n][0] = ld2(xg + g0 * 128 + o.b0);
      r.b[c][n][1] = ld2(xg + g0 * 128 + o.b1);
      r.fx[c][n] = ldf2(sg + g0 * XS_BYTES + o.xs);
    }
}

static float tc4i_mag(uint32_t w, int i) {
  return u2f(byte_perm(w, 0x4B000000u, 0x7540u | (uint32_t)i));
}

static void tc4i_scales(float (&dsc)[2][2], float (&mng)[2][2], U4 hd, int cls) {
  const float d = h2f((uint16_t)(hd.x & 0xFFFF));
  const float dm = h2f((uint16_t)(hd.x >> 16));
  const int sh = 16 * cls;
  const uint32_t a0 = hd.y >> sh, a1 = hd.z >> sh, a2 = hd.w >> sh;
  const uint32_t sc[2] = {a0 & 0x3F3Fu, (a2 & 0x0F0Fu) | ((a0 >> 2) & 0x3030u)};
  const uint32_t mn[2] = {a1 & 0x3F3Fu, ((a2 >> 4) & 0x0F0Fu) | ((a1 >> 2) & 0x3030u)};
  const float d16 = d * 0.0625f;
  const float dk[2] = {d, d16}, dko[2] = {d * -8388608.f, d16 * -8388608.f};
  const float dmo = dm * 8388608.f;
  for (int c = 0; c < 2; ++c)
    for (int n = 0; n < 2; ++n) {
      dsc[c][n] = std::fmaf(tc4i_mag(sc[c], n), dk[n], dko[n]);
      mng[c][n] = std::fmaf(tc4i_mag(mn[c], n), -dm, dmo);
    }
}

struct Raw { // tc_raw
  U4 hd0, hd1, q0[2], q1[2];
};
static void tcq_load(Raw &r, const uint8_t *b0, const uint8_t *b1, int t) {
  r.hd0 = ld4(b0);
  r.hd1 = ld4(b1);
  for (int c = 0; c < 2; ++c) {
    r.q0[c] = ld4(b0 + 16 + 64 * c + 16 * t);
    r.q1[c] = ld4(b1 + 16 + 64 * c + 16 * t);
  }
}
// The body's MMA h of chain (c, n): its A words (masked by m: nm[n] in the body) and B pair.
static void body_mma_args(const Raw &cur, const Xin &xm, int c, int n, int h, uint32_t m,
                          uint32_t a[4], U2 &b) {
  const U4 qa = cur.q0[c], qb = cur.q1[c];
  if (h == 0) {
    a[0] = qa.x & m, a[1] = qb.x & m, a[2] = qa.y & m, a[3] = qb.y & m;
  } else {
    a[0] = qa.z & m, a[1] = qb.z & m, a[2] = qa.w & m, a[3] = qb.w & m;
  }
  b = xm.b[c][n][h];
}

// ---- the warp's MMA by the PTX fragment layout (m16n8k32, row.col, u8 x s8 -> s32) ----
static bool overflow = false;
static void warp_mma(int32_t cc[32][4], const uint32_t a[32][4], const U2 b[32]) {
  int A[16][32], B[32][8];
  int64_t C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 4; ++j) {
      A[g][4 * t + j] = (a[lane][0] >> (8 * j)) & 0xFF;
      A[g + 8][4 * t + j] = (a[lane][1] >> (8 * j)) & 0xFF;
      A[g][16 + 4 * t + j] = (a[lane][2] >> (8 * j)) & 0xFF;
      A[g + 8][16 + 4 * t + j] = (a[lane][3] >> (8 * j)) & 0xFF;
      B[4 * t + j][g] = (int8_t)((b[lane].x >> (8 * j)) & 0xFF);
      B[16 + 4 * t + j][g] = (int8_t)((b[lane].y >> (8 * j)) & 0xFF);
    }
    C[g][2 * t] = cc[lane][0];
    C[g][2 * t + 1] = cc[lane][1];
    C[g + 8][2 * t] = cc[lane][2];
    C[g + 8][2 * t + 1] = cc[lane][3];
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      int64_t s = C[i][j];
      for (int k = 0; k < 32; ++k)
        s += (int64_t)A[i][k] * B[k][j];
      if (s > INT32_MAX || s < INT32_MIN) {
        printf("int32 overflow in the MMA: C[%d][%d] = %lld\n", i, j, (long long)s);
        overflow = true;
      }
      C[i][j] = s;
    }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    cc[lane][0] = (int32_t)C[g][2 * t];
    cc[lane][1] = (int32_t)C[g][2 * t + 1];
    cc[lane][2] = (int32_t)C[g + 8][2 * t];
    cc[lane][3] = (int32_t)C[g + 8][2 * t + 1];
  }
}

// ---- independent references ----
// x element's signed digit p (0..2) by the design (not the byte trick): es with the group's
// largest |x| 2^es in [2^21, 2^22), v = rint(x 2^es) = d0 + 256 d1 + 65536 d2, d0, d1 in [-128,
// 128).
static int ref_digit(const float *grp32, int i, int p) {
  double mx = 0;
  for (int k = 0; k < 32; ++k)
    mx = fmax(mx, fabs((double)grp32[k]));
  int k2;
  frexp(mx, &k2); // mx in [2^(k2 - 1), 2^k2)
  int es = 22 - k2;
  if (es > 147) es = 147; // the code's subnormal floor (E = 0 as E = 1)
  const long long v = llrint(ldexp((double)grp32[i], es));
  const long long d0 = ((v % 256) + 256 + 128) % 256 - 128;
  const long long v1 = (v - d0) / 256;
  const long long d1 = ((v1 % 256) + 256 + 128) % 256 - 128;
  const long long d2 = (v1 - d1) / 256;
  if (d2 < -64 || d2 > 64) {
    printf("digit 2 out of range: %lld\n", d2);
    exit(1);
  }
  return (int)(p == 0 ? d0 : p == 1 ? d1 : d2);
}

int main() {
  const int TRIALS = 400, NSB = 2, KX = 256 * NSB; // x rows of two super-blocks: sb = trial & 1
  int fails = 0, mapbad = 0;
  double worst_l2 = 0, worst_row = 0;
  int worst_l2_trial = -1, worst_row_trial = -1, worst_row_r = -1;
  double mix_l2[4] = {0, 0, 0, 0}, mix_row[4] = {0, 0, 0, 0}, mix_bnd[4] = {0, 0, 0, 0};
  static const char *mixname[4] = {"|x|<1", "2^[-20,20)", "2^-120", "outlier"};
  for (int trial = 0; trial < TRIALS; ++trial) {
    uint8_t sbw[16][144];
    for (int r = 0; r < 16; ++r) {
      for (int i = 0; i < 144; ++i)
        sbw[r][i] = (uint8_t)rnd();
      for (int h = 0; h < 2; ++h) { // d, dmin: positive normal f16
        uint16_t v = (uint16_t)((rnd() % 20 + 5) << 10 | (rnd() & 1023));
        memcpy(&sbw[r][2 * h], &v, 2);
      }
    }
    float x[KX];
    const int mix = trial % 4;
    for (int i = 0; i < KX; ++i)
      x[i] = ldexpf(frand(), mix == 1 ? (int)(rnd() % 40) - 20 : mix == 2 ? -120 : 0);
    const int64_t sb = trial & 1;
    if (mix == 3) {
      const int i0 = (int)(256 * sb + rnd() % 256);
      x[i0] = ((rnd() & 1) ? 1.f : -1.f) * ldexpf(1.f + (rnd() & 0xFFFF) / 65536.f, 16);
    }
    const float *xsb = x + 256 * sb;

    // reference: ggml's dequantize_row_q4_K, in double
    double ref[16], absn[16], bnd[16];
    for (int r = 0; r < 16; ++r) {
      const uint8_t *q = sbw[r] + 4; // scales
      const uint8_t *qs = sbw[r] + 16;
      uint16_t dh, mh;
      memcpy(&dh, sbw[r], 2);
      memcpy(&mh, sbw[r] + 2, 2);
      const double d = h2f(dh), dmin = h2f(mh);
      double s = 0, sa = 0, sb8 = 0, sr = 0;
      for (int j = 0; j < 8; ++j) {
        double gmax = 0, wsum = 0;
        for (int l = 0; l < 32; ++l)
          gmax = fmax(gmax, fabs((double)xsb[32 * j + l]));
        int sc, m;
        if (j < 4) {
          sc = q[j] & 63;
          m = q[j + 4] & 63;
        } else {
          sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
          m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
        for (int l = 0; l < 32; ++l) {
          const uint8_t byte = qs[32 * (j / 2) + l];
          const int qv = (j & 1) ? byte >> 4 : byte & 0xF;
          const double w = d * sc * qv - dmin * m;
          s += w * xsb[32 * j + l];
          sa += fabs(w * xsb[32 * j + l]);
          wsum += fabs(w);
          sr += (d * sc * qv + dmin * m) * fabs((double)xsb[32 * j + l]);
        }
        sb8 += gmax * wsum;
      }
      ref[r] = s;
      absn[r] = sa;
      // the design's error bound: x to 2^-22 of its group's largest |x| (rint of max 2^es in
      // [2^21, 2^22)), plus F32 roundings of the epilogue's terms (a generous 2^-20 of them)
      bnd[r] = ldexp(sb8, -22) + ldexp(sr, -20);
    }

    // the prep: the row of x split into shared memory (garbage first: every byte must be written)
    uint8_t xb[KX * 4], xs[KX / 32 * XS_BYTES];
    memset(xb, 0xA5, sizeof xb);
    memset(xs, 0xA5, sizeof xs);
    for (int64_t e0 = 0; e0 < KX; e0 += 32)
      split_put_quad(x, e0, xb, xs);
    for (size_t i = 0; i < sizeof xb; i += 8) {
      uint64_t w;
      memcpy(&w, xb + i, 8);
      if (w == 0xA5A5A5A5A5A5A5A5ull) {
        if (++mapbad <= 20) printf("trial %d: xb chunk at byte %zu never written\n", trial, i);
      }
    }
    for (size_t i = 0; i < sizeof xs; i += 4) {
      uint32_t w;
      memcpy(&w, xs + i, 4);
      if (w == 0xA5A5A5A5u && ++mapbad <= 20)
        printf("trial %d: xs word at byte %zu never written\n", trial, i);
    }

    // each lane's registers
    Raw raw[32], traw[32], rraw[32];
    Xin xin[32];
    uint8_t tag[16][144], rowtag[16][144]; // tracing: byte offsets / row index as the bytes
    for (int r = 0; r < 16; ++r)
      for (int i = 0; i < 144; ++i) {
        tag[r][i] = (uint8_t)i;
        rowtag[r][i] = (uint8_t)r;
      }
    float dsc[32][2][2][2], mng[32][2][2][2]; // [lane][row][c][n]
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane >> 2, t = lane & 3, cls = t >> 1;
      tcq_load(raw[lane], sbw[g], sbw[g + 8], t);
      tcq_load(traw[lane], tag[g], tag[g + 8], t);
      tcq_load(rraw[lane], rowtag[g], rowtag[g + 8], t);
      tc4i_load_x(xin[lane], xb, xs, sb, g, t);
      tc4i_scales(dsc[lane][0], mng[lane][0], raw[lane].hd0, cls);
      tc4i_scales(dsc[lane][1], mng[lane][1], raw[lane].hd1, cls);
    }

    // the body (M = 1) and the mapping checks
    const uint32_t nm[2] = {0x0F0F0F0Fu, 0xF0F0F0F0u};
    float acc[32][2] = {};
    for (int c = 0; c < 2; ++c)
      for (int n = 0; n < 2; ++n) {
        int32_t cc[32][4] = {};
        for (int h = 0; h < 2; ++h) {
          uint32_t a[32][4], ta[32][4], ra[32][4];
          U2 b[32], tb;
          for (int lane = 0; lane < 32; ++lane) {
            body_mma_args(raw[lane], xin[lane], c, n, h, nm[n], a[lane], b[lane]);
            body_mma_args(traw[lane], xin[lane], c, n, h, 0xFFFFFFFFu, ta[lane], tb);
            body_mma_args(rraw[lane], xin[lane], c, n, h, 0xFFFFFFFFu, ra[lane], tb);
          }
          // A's k column -> super-block element, traced (row-independent, from the right row)
          int elemK[32];
          for (int k = 0; k < 32; ++k)
            elemK[k] = -1;
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane >> 2, t = lane & 3;
            for (int reg = 0; reg < 4; ++reg)
              for (int j = 0; j < 4; ++j) {
                const int row = g + 8 * (reg & 1), k = 4 * t + j + 16 * (reg >> 1);
                const int off = (ta[lane][reg] >> (8 * j)) & 0xFF;
                const int srow = (ra[lane][reg] >> (8 * j)) & 0xFF;
                if (srow != row || off < 16 || off >= 144) {
                  if (++mapbad <= 20)
                    printf("trial %d (c %d n %d h %d) lane %d a%d byte %d: from row %d byte %d, "
                           "expected row %d's qs\n",
                           trial, c, n, h, lane, reg, j, srow, off, row);
                  continue;
                }
                const int qsb = off - 16, el = 32 * (2 * (qsb / 32) + n) + qsb % 32;
                if (elemK[k] < 0)
                  elemK[k] = el;
                else if (elemK[k] != el) {
                  if (++mapbad <= 20)
                    printf("trial %d (c %d n %d h %d) k %d: row %d weighs element %d, another row "
                           "%d\n",
                           trial, c, n, h, k, row, el, elemK[k]);
                }
              }
          }
          // every lane's B pair: its k rows' elements' digit p if its column g = 4 s + p is real
          // for them (p < 3, the elements in the chain's sub-block of class s), else zeros
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane >> 2, t = lane & 3, s = g >> 2, p = g & 3;
            for (int r2 = 0; r2 < 2; ++r2)
              for (int j = 0; j < 4; ++j) {
                const int k = 16 * r2 + 4 * t + j, el = elemK[k];
                if (el < 0) continue;
                const bool real = p < 3 && el / 32 == 4 * c + 2 * s + n;
                const int want = real ? ref_digit(xsb + 32 * (el / 32), el % 32, p) : 0;
                const uint32_t reg = r2 ? b[lane].y : b[lane].x;
                const int got = (int8_t)((reg >> (8 * j)) & 0xFF);
                if (got != want) {
                  if (++mapbad <= 20)
                    printf("trial %d (c %d n %d h %d) lane %d (g %d t %d) b%d byte %d: got %d, "
                           "expected %s%d (element %d digit %d)\n",
                           trial, c, n, h, lane, g, t, r2, j, got, real ? "" : "zero column ", want,
                           el, p);
                }
              }
          }
          warp_mma(cc, a, b);
        }
        // epilogue
        for (int lane = 0; lane < 32; ++lane) {
          const F2 fx = xin[lane].fx[c][n];
          for (int i = 0; i < 2; ++i) {
            const int64_t iv = (int64_t)cc[lane][2 * i] + 256 * (int64_t)cc[lane][2 * i + 1];
            if (iv > INT32_MAX || iv < INT32_MIN) {
              printf("int32 overflow in the epilogue's C0 + 256 C1: %lld\n", (long long)iv);
              overflow = true;
            }
            const float v = (float)(int32_t)iv;
            acc[lane][i] = std::fmaf(dsc[lane][i][c][n], v * fx.x, acc[lane][i]);
            acc[lane][i] = std::fmaf(mng[lane][i][c][n], fx.y, acc[lane][i]);
          }
        }
      }
    // tc_quad_sum and the errors
    double e2 = 0, r2 = 0, rowmax = 0, bmax = 0;
    int rowmax_r = 0;
    for (int i = 0; i < 2; ++i) {
      float v[32];
      for (int lane = 0; lane < 32; ++lane)
        v[lane] = acc[lane][i];
      for (int sh = 1; sh <= 2; sh <<= 1) {
        float o[32];
        for (int lane = 0; lane < 32; ++lane)
          o[lane] = v[lane ^ sh];
        for (int lane = 0; lane < 32; ++lane)
          v[lane] = v[lane] + o[lane];
      }
      for (int g = 0; g < 8; ++g) {
        for (int t = 1; t < 4; ++t)
          if (f2u(v[4 * g + t]) != f2u(v[4 * g])) {
            if (++mapbad <= 20) printf("trial %d: quad sum lanes disagree\n", trial);
          }
        const int row = g + 8 * i;
        const double sum = v[4 * g], r = ref[row];
        e2 += (sum - r) * (sum - r);
        r2 += r * r;
        const double re = fabs(sum - r) / (fabs(r) + 1e-7 * absn[row]);
        if (re > rowmax) rowmax = re, rowmax_r = row;
        bmax = fmax(bmax, fabs(sum - r) / bnd[row]);
      }
    }
    const double l2 = sqrt(e2 / r2);
    const bool bad = !(l2 < 1e-5);
    if (bad) ++fails;
    if (bad || trial < 8)
      printf("trial %3d sb %d mix %-10s rel L2 %.3e  max row rel %.3e (row %d)  err/bound %.3f%s\n",
             trial, (int)sb, mixname[mix], l2, rowmax, rowmax_r, bmax, bad ? "  FAIL" : "");
    if (!(l2 <= worst_l2)) worst_l2 = l2, worst_l2_trial = trial;
    if (!(rowmax <= worst_row)) worst_row = rowmax, worst_row_trial = trial, worst_row_r = rowmax_r;
    if (!(l2 <= mix_l2[mix])) mix_l2[mix] = l2;
    if (!(rowmax <= mix_row[mix])) mix_row[mix] = rowmax;
    if (!(bmax <= mix_bnd[mix])) mix_bnd[mix] = bmax;
  }
  for (int m = 0; m < 4; ++m)
    printf("mix %-10s worst rel L2 %.3e  worst row rel %.3e  worst err/bound %.3f\n", mixname[m],
           mix_l2[m], mix_row[m], mix_bnd[m]);
  printf("worst rel L2 %.3e (trial %d), worst row rel %.3e (trial %d row %d)\n", worst_l2,
         worst_l2_trial, worst_row, worst_row_trial, worst_row_r);
  printf("fails %d (of %d, threshold 1e-5), mapping mismatches %d, int32 overflow %s\n", fails,
         TRIALS, mapbad, overflow ? "YES" : "no");
  return fails != 0 || mapbad != 0 || overflow;
}
