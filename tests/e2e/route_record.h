// The route tests' recorder: shims that stand in for backend vtable slots, note each call the
// core makes in g_log and forward it to the real plugin (g_real); and a pair of engines on one
// fixture, one whose plugin has the slot under test and one whose plugin lacks it.
#pragma once
#include "tests/e2e/engine_fixture.h"

#include <string>
#include <vector>

// The plugin the shims forward to, and the calls they noted.
inline const memra_backend_vt *g_real;
inline std::vector<std::string> g_log;

// Shims that note the slot's name (matmul_n with its n); a test whose notes carry more (a type,
// a residual, a row count) keeps shims of its own.
inline memra_status rec_matmul(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back("matmul");
  return g_real->matmul(be, y, x, w, b);
}
inline memra_status rec_matmul_n(memra_backend *be, int32_t n, const memra_tensor *y,
                                 const memra_tensor *x, const memra_tensor *w,
                                 const memra_tensor *b) {
  g_log.push_back("matmul_n " + std::to_string(n));
  return g_real->matmul_n(be, n, y, x, w, b);
}
inline memra_status rec_rmsnorm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                const memra_tensor *res, const memra_tensor *w, float eps) {
  g_log.push_back("rmsnorm");
  return g_real->rmsnorm(be, y, x, res, w, eps);
}
// rmsnorm and the ABI 1.14 norm slots noted with whether they add a residual (" res").
inline memra_status rec_rmsnorm_res(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *res, const memra_tensor *w, float eps) {
  g_log.push_back(res->buf ? "rmsnorm res" : "rmsnorm");
  return g_real->rmsnorm(be, y, x, res, w, eps);
}
inline memra_status rec_norm_mm(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                const memra_tensor *res, const memra_tensor *wn, float eps,
                                int32_t n, const memra_tensor *y, const memra_tensor *w,
                                const memra_tensor *b) {
  g_log.push_back("rmsnorm_matmul_n " + std::to_string(n) + (res->buf ? " res" : ""));
  return g_real->rmsnorm_matmul_n(be, xn, x, res, wn, eps, n, y, w, b);
}
inline memra_status rec_norm_mixed(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                   const memra_tensor *res, const memra_tensor *wn, float eps,
                                   int32_t n, const memra_tensor *y, const memra_tensor *w,
                                   const memra_tensor *b) {
  g_log.push_back("rmsnorm_matmul_mixed " + std::to_string(n) + (res->buf ? " res" : ""));
  return g_real->rmsnorm_matmul_mixed(be, xn, x, res, wn, eps, n, y, w, b);
}
inline memra_status rec_norm_ffn(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                 const memra_tensor *res, const memra_tensor *wn, float eps,
                                 const memra_tensor *y, const memra_tensor *h,
                                 const memra_tensor *u, const memra_tensor *wg,
                                 const memra_tensor *wu, const memra_tensor *wd, int32_t act) {
  g_log.push_back(std::string("rmsnorm_ffn_glu") + (res->buf ? " res" : ""));
  return g_real->rmsnorm_ffn_glu(be, xn, x, res, wn, eps, y, h, u, wg, wu, wd, act);
}
inline memra_status rec_rope(memra_backend *be, const memra_tensor *x, const memra_tensor *pos,
                             const memra_rope_params *p) {
  g_log.push_back("rope");
  return g_real->rope(be, x, pos, p);
}
inline memra_status rec_rmsnorm_qk(memra_backend *be, const memra_tensor *q, const memra_tensor *wq,
                                   const memra_tensor *k, const memra_tensor *wk, float eps) {
  g_log.push_back("rmsnorm_qk");
  return g_real->rmsnorm_qk(be, q, wq, k, wk, eps);
}
inline memra_status rec_rope_kv_store(memra_backend *be, const memra_tensor *q,
                                      const memra_tensor *k, const memra_tensor *v,
                                      const memra_tensor *kc, const memra_tensor *vc,
                                      const memra_batch *b, const memra_rope_params *p) {
  g_log.push_back("rope_kv_store");
  return g_real->rope_kv_store(be, q, k, v, kc, vc, b, p);
}
inline memra_status rec_kv_store(memra_backend *be, const memra_tensor *kc, const memra_tensor *vc,
                                 const memra_tensor *k, const memra_tensor *v,
                                 const memra_batch *b) {
  g_log.push_back("kv_store");
  return g_real->kv_store(be, kc, vc, k, v, b);
}

// Two engines on one e2e fixture: "with" has the slot under test, "without" lacks it. Each model
// runs on a copy of its plugin's vtable (vt_with, vt_without) for the test to edit; the shims
// forward to with's plugin. The models go back to their plugins' own vtables before the engines
// close.
struct RoutePair {
  std::string name;
  Engine with, without;
  memra_backend_vt vt_with = {}, vt_without = {};

  // Opens both on tests/e2e/fixtures/<fixture>.gguf with a context of params p.
  bool open(const std::string &fixture, const memra_ctx_params &p) {
    return open_path("tests/e2e/fixtures/" + fixture + ".gguf", p);
  }
  // The same on the GGUF at path (e.g. one memra-synth wrote).
  bool open_path(const std::string &path, const memra_ctx_params &p) {
    name = path;
    if (!with.open_with(path, p) || !without.open_with(path, p)) return false;
    vt_with = *with.bh.vt;
    vt_without = *without.bh.vt;
    g_real = with.bh.vt;
    with.m->vt = &vt_with;
    without.m->vt = &vt_without;
    return true;
  }
  // two_step_logits on both engines, their calls into log_with and log_without; the logits of the
  // two must be bit-identical. Call it in ASSERT_NO_FATAL_FAILURE.
  void two_steps(std::vector<std::string> log_with[2], std::vector<std::string> log_without[2]) {
    std::vector<float> a = two_step_logits(with, g_log, log_with),
                       b = two_step_logits(without, g_log, log_without);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name;
  }
  ~RoutePair() {
    if (with.m) with.m->vt = with.bh.vt;
    if (without.m) without.m->vt = without.bh.vt;
  }
};
