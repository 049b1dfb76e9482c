// A model opened on the CPU plugin through the loader, the way the CLI opens it.
#pragma once
extern "C" {
#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/models/context.h"
#include "core/plugin/loader.h"
#include "core/text/tokenizer.h"
}
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <set>
#include <vector>

struct Engine {
  memra_backend_handle bh = {};
  memra_gguf *g = nullptr;
  memra_model *m = nullptr;
  memra_ctx *c = nullptr;
  memra_err err = {};

  // Opens path on the CPU plugin built beside the test (runfiles path) with a context of
  // params p.
  bool open_with(const std::string &path, const memra_ctx_params &p) {
    memra_open_params op = {sizeof op, 2, 0};
    if (memra_backend_open("plugins/cpu/libmemra_cpu.so", nullptr, &op, &bh, &err)) return false;
    if (memra_gguf_open(path.c_str(), &g, &err)) return false;
    if (memra_model_load(g, bh.vt, bh.be, nullptr, nullptr, &m, &err)) return false;
    return memra_ctx_new(m, &p, &c, &err) == MEMRA_OK;
  }
  // Odd ubatch and page size by default: prefill crosses chunk and page boundaries.
  bool open(const std::string &path, int32_t kv_type, int32_t n_ctx = 256, int32_t n_ubatch = 7,
            int32_t block_size = 5) {
    memra_ctx_params p = memra_ctx_defaults();
    p.n_ctx = n_ctx;
    p.n_ubatch = n_ubatch;
    p.block_size = block_size;
    p.kv_type = kv_type;
    return open_with(path, p);
  }
  ~Engine() {
    memra_ctx_free(c);
    memra_model_free(m);
    memra_backend_close(&bh);
    memra_gguf_close(g);
  }
};

inline std::vector<float> read_f32(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  if (!v.empty()) memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Lines "name id id id ..." from a fixture file.
inline std::vector<int32_t> read_ids(const std::string &path, const std::string &name) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string key;
    is >> key;
    if (key != name) continue;
    std::vector<int32_t> ids;
    int32_t v;
    while (is >> v)
      ids.push_back(v);
    return ids;
  }
  return {};
}

// The "prompt_text" line of a fixture file, its \n and \\ escapes undone.
inline std::string read_prompt_text(const std::string &path) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("prompt_text ", 0) != 0) continue;
    std::string text;
    for (size_t i = 12; i < line.size(); ++i) {
      const bool esc =
          line[i] == '\\' && i + 1 < line.size() && (line[i + 1] == 'n' || line[i + 1] == '\\');
      text += esc ? (line[++i] == 'n' ? '\n' : '\\') : line[i];
    }
    return text;
  }
  return "";
}

// Greedy decoding after a prompt of pos tokens in sequence 0: count argmax ids, each fed
// back, appended to *got. Call it in ASSERT_NO_FATAL_FAILURE.
inline void greedy_continue(Engine &e, int32_t pos, size_t count, std::vector<int32_t> *got) {
  for (size_t i = 0; i < count; ++i) {
    int32_t id;
    ASSERT_EQ(MEMRA_OK, memra_ctx_argmax(e.c, &id, &e.err)) << e.err.msg;
    got->push_back(id);
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, &id, 1, pos++, false, nullptr, &e.err)) << e.err.msg;
  }
}

// The ids the GGUF's own tokenizer gives text (BOS as the vocabulary asks).
inline void tokenize_with_gguf(const std::string &model, const std::string &text,
                               bool parse_special, std::vector<int32_t> *out) {
  memra_gguf *g = nullptr;
  memra_tokenizer *t = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_open(model.c_str(), &g, &err)) << err.msg;
  memra_status st = memra_tokenizer_from_gguf(g, &t, &err);
  int32_t *ids = nullptr;
  size_t n = 0;
  if (st == MEMRA_OK)
    st = memra_tokenize(t, text.data(), text.size(), true, parse_special, &ids, &n, &err);
  if (st == MEMRA_OK) out->assign(ids, ids + n);
  memra_free(ids);
  memra_tokenizer_free(t);
  memra_gguf_close(g);
  ASSERT_EQ(MEMRA_OK, st) << err.msg;
}

inline double rel_l2(const float *a, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = (double)a[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// The route tests' context: 2 sequences of up to 64 positions, pages of 3 (position 4 lies in
// each sequence's second page), prompt steps of up to 8 rows.
inline memra_ctx_params route_params() {
  memra_ctx_params p = memra_ctx_defaults();
  p.n_ctx = 64;
  p.n_ubatch = 8;
  p.n_seq_max = 2;
  p.block_size = 3;
  return p;
}

// How many entries of a recorded call log are what.
inline size_t count_calls(const std::vector<std::string> &log, const std::string &what) {
  size_t n = 0;
  for (const std::string &s : log)
    n += s == what;
  return n;
}

// Two steps on two sequences: a prompt step (4 rows each, positions 0..3), then a decode step
// (one row each at position 4). log[step] gets what the recorder wrote into rec during that step
// (rec is cleared before each); returns the decode step's logits of both rows.
inline std::vector<float> two_step_logits(Engine &e, std::vector<std::string> &rec,
                                          std::vector<std::string> log[2]) {
  const int32_t tok[8] = {11, 23, 5, 17, 29, 3, 8, 2}, pos[8] = {0, 1, 2, 3, 0, 1, 2, 3},
                seq[8] = {0, 0, 0, 0, 1, 1, 1, 1}, out[2] = {0, 1};
  for (int32_t s = 0; s < 2; ++s)
    EXPECT_EQ(MEMRA_OK, memra_kv_pages_reserve(&e.c->pages, s, 8, &e.err)) << e.err.msg;
  for (int step = 0; step < 2; ++step) {
    rec.clear();
    if (step == 0) {
      EXPECT_EQ(MEMRA_OK, memra_ctx_set_rows(e.c, 8, tok, pos, seq, 0, out, &e.err)) << e.err.msg;
    } else {
      const int32_t t2[2] = {7, 9}, p2[2] = {4, 4}, s2[2] = {0, 1};
      EXPECT_EQ(MEMRA_OK, memra_ctx_set_rows(e.c, 2, t2, p2, s2, 2, out, &e.err)) << e.err.msg;
      EXPECT_EQ(2, e.c->n_decode);
    }
    EXPECT_EQ(MEMRA_OK, memra_ctx_forward(e.c, &e.err)) << e.err.msg;
    log[step] = rec;
  }
  std::vector<float> logits(2 * (size_t)e.m->hp.n_vocab);
  EXPECT_EQ(MEMRA_OK, memra_ctx_get_logits(e.c, logits.data(), &e.err)) << e.err.msg;
  return logits;
}
