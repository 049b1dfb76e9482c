// emu_util.h — what the host emulators of the tensor-core forms (tc6i_emu.cc, tc4i_emu.cc) share:
// a fixed-seed xorshift source and the exact f16 -> f32 conversion of __half2float.
#ifndef MEMRA_TOOLS_DEVICE_EMU_UTIL_H
#define MEMRA_TOOLS_DEVICE_EMU_UTIL_H
#include <cmath>
#include <cstdint>

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd() {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (uint32_t)rs;
}
static float frand() { return (rnd() & 0xFFFFFF) / 16777216.0f * 2 - 1; } // [-1, 1)
static float h2f(uint16_t h) {                                            // __half2float (exact)
  uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v;
  if (e == 0)
    v = ldexpf((float)m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = ldexpf((float)(m | 1024), (int)e - 25);
  return s ? -v : v;
}
#endif
