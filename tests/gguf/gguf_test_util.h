// gguf_test_util.h — a byte-level GGUF builder (to write files our writer refuses to
// write) and small file helpers shared by the GGUF tests.
#ifndef MEMRA_TESTS_GGUF_UTIL_H
#define MEMRA_TESTS_GGUF_UTIL_H

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" {
#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
}

// Appends little-endian fields; every GGUF structure is built from these.
struct GgufBytes {
  std::vector<uint8_t> b;
  GgufBytes &u32(uint32_t v) { return raw(&v, 4); }
  GgufBytes &u64(uint64_t v) { return raw(&v, 8); }
  GgufBytes &raw(const void *p, size_t n) {
    const uint8_t *c = static_cast<const uint8_t *>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  GgufBytes &str(const std::string &s) { return u64(s.size()).raw(s.data(), s.size()); }
  GgufBytes &header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes &kv_u32(const std::string &k, uint32_t v) { return str(k).u32(MEMRA_GGUF_U32).u32(v); }
  GgufBytes &kv_str(const std::string &k, const std::string &v) {
    return str(k).u32(MEMRA_GGUF_STRING).str(v);
  }
  GgufBytes &tensor(const std::string &name, std::vector<uint64_t> ne, uint32_t type,
                    uint64_t offset) {
    str(name).u32((uint32_t)ne.size());
    for (uint64_t e : ne)
      u64(e);
    return u32(type).u64(offset);
  }
  GgufBytes &pad_to(size_t align) {
    while (b.size() % align)
      b.push_back(0);
    return *this;
  }
  GgufBytes &zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
  size_t size() const { return b.size(); }
};

// Opens bytes from a heap buffer of exactly their size, so ASan sees any over-read.
inline memra_status gguf_open_exact(const std::vector<uint8_t> &bytes, size_t len, memra_gguf **g,
                                    memra_err *err) {
  uint8_t *copy = static_cast<uint8_t *>(malloc(len ? len : 1));
  if (len) memcpy(copy, bytes.data(), len);
  memra_status st = memra_gguf_open_memory(len ? copy : nullptr, len, "t.gguf", g, err);
  if (st == MEMRA_OK) {
    // The handle points into copy: the callers only look at status and message here.
    memra_gguf_close(*g);
    *g = nullptr;
  }
  free(copy);
  return st;
}

inline std::vector<uint8_t> read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

inline std::string test_tmp_dir() {
  const char *d = getenv("TEST_TMPDIR");
  return d ? d : "/tmp";
}

#endif
