#include "core/text/utf8.h"

size_t memra_utf8_valid_len(const uint8_t *s, size_t n, uint32_t *cp) {
  if (n == 0) return 0;
  uint8_t b = s[0];
  if (b < 0x80) {
    if (cp) *cp = b;
    return 1;
  }
  size_t len;
  uint32_t c, min;
  uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte (RFC 3629 table) */
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2, c = b & 0x1F, min = 0x80;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3, c = b & 0x0F, min = 0x800;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F; /* no surrogates */
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4, c = b & 0x07, min = 0x10000;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  c = (c << 6) | (s[1] & 0x3F);
  for (size_t i = 2; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3F);
  }
  (void)min;
  if (cp) *cp = c;
  return len;
}

/* Bytes the sequence led by b needs, 0 for a byte that cannot lead. */
static size_t lead_len(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

/* How many of s[0..n) form a valid (possibly incomplete) prefix of one sequence. */
static size_t valid_prefix(const uint8_t *s, size_t n) {
  size_t len = lead_len(s[0]);
  if (len == 0) return 0;
  if (len == 1) return 1;
  uint8_t lo = 0x80, hi = 0xBF;
  if (s[0] == 0xE0) lo = 0xA0;
  if (s[0] == 0xED) hi = 0x9F;
  if (s[0] == 0xF0) lo = 0x90;
  if (s[0] == 0xF4) hi = 0x8F;
  size_t i = 1;
  if (i < n && i < len) {
    if (s[1] < lo || s[1] > hi) return 1;
    i++;
  }
  while (i < n && i < len && (s[i] & 0xC0) == 0x80)
    i++;
  return i;
}

int memra_utf8_prefix_ok(const uint8_t *s, size_t n) {
  if (n == 0) return 1;
  size_t len = lead_len(s[0]);
  return len > n && valid_prefix(s, n) == n;
}

size_t memra_utf8_invalid_len(const uint8_t *s, size_t n) {
  if (n == 0) return 0;
  size_t p = valid_prefix(s, n);
  return p == 0 ? 1 : p;
}

size_t memra_utf8_char_len(const uint8_t *s, size_t n) {
  size_t l = memra_utf8_valid_len(s, n, 0);
  return l ? l : 1;
}

size_t memra_utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Printable bytes map to themselves; the other 68 to 256, 257, ... in byte order. */
static int printable(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t memra_byte_to_cp(uint8_t b) {
  if (printable(b)) return b;
  uint32_t k = 0;
  for (unsigned i = 0; i < b; i++)
    k += !printable(i);
  return 256 + k;
}

int memra_cp_to_byte(uint32_t cp) {
  if (cp < 256) return printable(cp) ? (int)cp : -1;
  if (cp >= 256 + 68) return -1;
  uint32_t k = cp - 256;
  for (unsigned i = 0; i < 256; i++) {
    if (!printable(i)) {
      if (k == 0) return (int)i;
      k--;
    }
  }
  return -1;
}
