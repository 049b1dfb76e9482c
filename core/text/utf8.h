/* utf8.h — UTF-8 scanning and the GPT-2 byte<->unicode map (internal to core/text). */
#ifndef MEMRA_TEXT_UTF8_H
#define MEMRA_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if s starts an invalid one (an
 * incomplete but so-far-valid prefix at the end of s also gives 0; see utf8_prefix_ok). */
size_t memra_utf8_valid_len(const uint8_t *s, size_t n, uint32_t *cp);
/* True if s[0..n) (n < 4) is a proper, still completable prefix of a valid sequence. */
int memra_utf8_prefix_ok(const uint8_t *s, size_t n);
/* Bytes of the "maximal subpart" of an invalid sequence at s (>= 1): what one U+FFFD
 * replaces, as Rust's from_utf8_lossy and Python's decode('replace') do. */
size_t memra_utf8_invalid_len(const uint8_t *s, size_t n);
/* Lenient length of the character at s (1 for a stray byte): splits text into symbols. */
size_t memra_utf8_char_len(const uint8_t *s, size_t n);
/* Writes cp as UTF-8 into out (4 bytes room); returns the byte count. */
size_t memra_utf8_encode(uint32_t cp, char *out);

/* GPT-2's bytes_to_unicode(): byte b is shown as code point memra_byte_to_cp(b). */
uint32_t memra_byte_to_cp(uint8_t b);
/* Inverse: the byte that code point cp stands for, or -1 if cp is not in the map. */
int memra_cp_to_byte(uint32_t cp);

#endif
