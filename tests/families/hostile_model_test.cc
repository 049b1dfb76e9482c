// Hostile model files that are valid GGUF: every hyperparameter of each tiny model set to
// values a broken or malicious converter could write, and its weight matrices given shapes over
// the same bytes that do not fit the hyperparameters. Loading such a file, making a context and
// evaluating a prompt and a decode step on the CPU plugin must each succeed or fail with one
// line naming what was wrong, never crash (the sanitizer configuration runs this too), and a
// matrix whose shape does not fit must be refused at load.
#include "tests/e2e/engine_fixture.h"

extern "C" {
#include "tools/fuzz/gguf_touch.h"
}

#include <cfloat>
#include <climits>

namespace {

const char *const kModels[] = {
    "tests/e2e/fixtures/tiny-llama.gguf",     "tests/e2e/fixtures/tiny-qwen2.gguf",
    "tests/e2e/fixtures/tiny-qwen3.gguf",     "tests/families/fixtures/qwen3moe.gguf",
    "tests/families/fixtures/qwen3next.gguf", "tests/families/fixtures/qwen35.gguf",
    "tests/families/fixtures/qwen35moe.gguf",
};

struct Backend {
  memra_backend_handle bh = {};
  memra_err err = {};
  Backend() {
    memra_open_params op = {sizeof op, 2, 0};
    EXPECT_EQ(MEMRA_OK, memra_backend_open("plugins/cpu/libmemra_cpu.so", nullptr, &op, &bh, &err))
        << err.msg;
  }
  ~Backend() { memra_backend_close(&bh); }
};

// A failure's message: present and one line.
void expect_one_line(memra_status st, const memra_err &err, const std::string &what) {
  if (st == MEMRA_OK) return;
  EXPECT_NE('\0', err.msg[0]) << what << ": status " << st << " without a message";
  EXPECT_EQ(nullptr, strchr(err.msg, '\n')) << what << ": " << err.msg;
}

// Loads bytes as a model, and where that works evaluates 3 prompt tokens and one decode step.
// Returns the load's status (the message in *msg).
memra_status load_and_run(Backend &b, const uint8_t *bytes, uint64_t size, const std::string &what,
                          std::string *msg) {
  memra_err err = {};
  memra_gguf *g = nullptr;
  memra_status st = memra_gguf_open_memory(bytes, size, "hostile.gguf", &g, &err);
  EXPECT_EQ(MEMRA_OK, st) << what << ": the copy does not open: " << err.msg;
  if (st != MEMRA_OK) return st;
  memra_model *m = nullptr;
  st = memra_model_load(g, b.bh.vt, b.bh.be, nullptr, nullptr, &m, &err);
  expect_one_line(st, err, what + " (load)");
  *msg = err.msg;
  if (st == MEMRA_OK) {
    memra_ctx_params p = memra_ctx_defaults();
    p.n_ctx = 16;
    p.n_ubatch = 3;
    p.block_size = 4;
    p.kv_type = MEMRA_TYPE_F32;
    memra_ctx *c = nullptr;
    memra_err e2 = {};
    memra_status cs = memra_ctx_new(m, &p, &c, &e2);
    expect_one_line(cs, e2, what + " (context)");
    if (cs == MEMRA_OK) {
      const int32_t nv = m->hp.n_vocab;
      const int32_t ids[4] = {1 % nv, 2 % nv, 3 % nv, 4 % nv};
      cs = memra_ctx_eval(c, 0, ids, 3, 0, false, nullptr, &e2);
      expect_one_line(cs, e2, what + " (prompt)");
      if (cs == MEMRA_OK) {
        std::vector<float> lg((size_t)nv);
        cs = memra_ctx_eval(c, 0, ids + 3, 1, 3, true, lg.data(), &e2);
        expect_one_line(cs, e2, what + " (decode)");
      }
      memra_ctx_free(c);
    }
    memra_model_free(m);
  }
  memra_gguf_close(g);
  return st;
}

std::string key_of(const memra_gguf_kv *kv) { return std::string(kv->key.ptr, kv->key.len); }

// Values of kv's scalar type to try: the edges and a few small and odd counts.
std::vector<memra_gguf_edit> values_for(const memra_gguf_kv *kv, const char *key) {
  std::vector<memra_gguf_edit> out;
  auto add = [&](const void *v, size_t n) {
    memra_gguf_edit e = {};
    e.key = key;
    e.type = kv->type;
    memcpy(e.val, v, n);
    out.push_back(e);
  };
  switch (kv->type) {
  case MEMRA_GGUF_U32:
    for (uint32_t v : {0u, 1u, 3u, 7u, 100003u, UINT32_MAX})
      add(&v, 4);
    break;
  case MEMRA_GGUF_I32:
    for (int32_t v : {0, 1, 3, 7, -1, 100003, INT32_MAX, INT32_MIN})
      add(&v, 4);
    break;
  case MEMRA_GGUF_U64:
    for (uint64_t v : {0ull, 1ull, 3ull, 100003ull, ~0ull})
      add(&v, 8);
    break;
  case MEMRA_GGUF_I64:
    for (int64_t v : {(int64_t)0, (int64_t)1, (int64_t)-1, (int64_t)100003, INT64_MAX})
      add(&v, 8);
    break;
  case MEMRA_GGUF_F32:
    for (float v : {0.0f, -1.0f, 1e-30f, 1e30f, FLT_MAX, NAN, INFINITY})
      add(&v, 4);
    break;
  case MEMRA_GGUF_BOOL:
    for (uint8_t v : {0, 1})
      add(&v, 1);
    break;
  default: break;
  }
  return out;
}

TEST(HostileModel, EveryHyperparameterAtItsEdgesLoadsOrFailsInOneLine) {
  Backend b;
  int runs = 0, refused = 0;
  for (const char *path : kModels) {
    memra_gguf *g = nullptr;
    memra_err err = {};
    ASSERT_EQ(MEMRA_OK, memra_gguf_open(path, &g, &err)) << err.msg;
    memra_str arch = {};
    ASSERT_EQ(MEMRA_OK, memra_gguf_get_str(g, "general.architecture", &arch, &err));
    const std::string prefix = std::string(arch.ptr, arch.len) + ".";
    for (uint64_t i = 0; i < memra_gguf_n_kv(g); ++i) {
      const memra_gguf_kv *kv = memra_gguf_kv_at(g, i);
      const std::string key = key_of(kv);
      if (key.rfind(prefix, 0) != 0) continue; // the architecture's hyperparameters
      for (const memra_gguf_edit &e : values_for(kv, key.c_str())) {
        uint8_t *bytes = nullptr;
        uint64_t size = 0;
        ASSERT_EQ(MEMRA_OK, memra_gguf_copy_edited(g, &e, &bytes, &size, &err)) << err.msg;
        std::string msg;
        const std::string what = std::string(path) + " " + key;
        refused += load_and_run(b, bytes, size, what, &msg) != MEMRA_OK;
        ++runs;
        memra_free(bytes);
      }
    }
    memra_gguf_close(g);
  }
  printf("hyperparameter edits: %d files, %d refused at load\n", runs, refused);
  EXPECT_GT(refused, runs / 4); // most edges are out of range: the checks are there
}

TEST(HostileModel, AMatrixOfTheWrongShapeIsRefusedByName) {
  Backend b;
  int cases = 0;
  for (const char *path : kModels) {
    memra_gguf *g = nullptr;
    memra_err err = {};
    ASSERT_EQ(MEMRA_OK, memra_gguf_open(path, &g, &err)) << err.msg;
    for (uint64_t i = 0; i < memra_gguf_n_tensors(g); ++i) {
      const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
      if (t->n_dims != 2 || t->ne[0] == t->ne[1]) continue;
      const std::string name(t->name.ptr, t->name.len);
      // the same bytes transposed (where rows stay whole blocks), and as one long row (a
      // matrix of more than one row)
      memra_gguf_edit swap = {}, flat = {};
      swap.tensor = flat.tensor = name.c_str();
      swap.n_dims = 2, swap.ne[0] = t->ne[1], swap.ne[1] = t->ne[0];
      flat.n_dims = 1, flat.ne[0] = t->ne[0] * t->ne[1];
      for (const memra_gguf_edit &e : {swap, flat}) {
        if (e.n_dims == 1 && t->ne[1] == 1) continue; // [K, 1] flat is the same [K]
        uint8_t *bytes = nullptr;
        uint64_t size = 0;
        if (memra_gguf_copy_edited(g, &e, &bytes, &size, &err) != MEMRA_OK) continue; // blocks
        std::string msg;
        const std::string what =
            std::string(path) + " " + name + (e.n_dims == 1 ? " flat" : " swap");
        EXPECT_EQ(MEMRA_E_FORMAT, load_and_run(b, bytes, size, what, &msg)) << what;
        EXPECT_NE(std::string::npos, msg.find(name)) << what << ": " << msg;
        ++cases;
        memra_free(bytes);
      }
    }
    memra_gguf_close(g);
  }
  printf("reshaped matrices: %d cases\n", cases);
  EXPECT_GT(cases, 50);
}

} // namespace
