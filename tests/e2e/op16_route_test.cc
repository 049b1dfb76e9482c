// ABI 1.6: with a plugin that reports a 16-bit gemm operand type (gemm_x_type), steps of
// prompt rows only have rmsnorm and glu write the projections' x in that type, and gemm
// takes it as is; the logits must be bit-identical to the same plugin converting F32 x
// itself (the contract: a gemm rounds x by the memra_op16 rule either way). Steps with
// decode rows keep F32 x. The CPU plugin has no gemm: the test lends it one that rounds x
// to f16 (or widens a 16-bit x) and forwards to matmul, and records every x type it sees.
#include "tests/e2e/route_record.h"

extern "C" {
#include "plugins/quant/quant.h"
}

namespace {
uint16_t op16(float v) { // the memra_op16 rule for F16
  if (v > 65504.0f) v = 65504.0f;
  if (v < -65504.0f) v = -65504.0f;
  return memra_f32_to_fp16(v);
}

// x as the f32 matrix a gemm computes with: F32 rounded to f16 and widened, F16 widened.
memra_status operand(memra_backend *be, const memra_tensor *x, memra_buf **buf, memra_tensor *out) {
  const int64_t K = x->ne0, M = x->ne1;
  std::vector<float> a((size_t)(K * M));
  for (int64_t r = 0; r < M; ++r) {
    const uint64_t off = x->offset + (uint64_t)r * x->nb1;
    if (x->type == MEMRA_TYPE_F32) {
      memra_status st = g_real->buf_download(be, x->buf, off, &a[(size_t)(r * K)], 4u * K);
      if (st) return st;
      for (int64_t i = 0; i < K; ++i)
        a[(size_t)(r * K + i)] = memra_fp16_to_f32(op16(a[(size_t)(r * K + i)]));
    } else {
      std::vector<uint16_t> h((size_t)K);
      memra_status st = g_real->buf_download(be, x->buf, off, h.data(), 2u * K);
      if (st) return st;
      for (int64_t i = 0; i < K; ++i)
        a[(size_t)(r * K + i)] = memra_fp16_to_f32(h[(size_t)i]);
    }
  }
  memra_status st = g_real->buf_alloc(be, a.size() * 4 + 4, buf);
  if (st) return st;
  if ((st = g_real->buf_upload(be, *buf, 0, a.data(), a.size() * 4))) return st;
  *out = memra_tensor{};
  out->buf = *buf;
  out->type = MEMRA_TYPE_F32;
  out->ne0 = K;
  out->ne1 = M;
  out->nb1 = 4u * (uint64_t)K;
  return MEMRA_OK;
}

const char *tname(int32_t t) { return memra_type_info(t).name; }

memra_status lent_gemm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                       const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back(std::string("gemm x ") + tname(x->type));
  memra_buf *buf = nullptr;
  memra_tensor a;
  memra_status st = operand(be, x, &buf, &a);
  if (!st) st = g_real->matmul(be, y, &a, w, b);
  if (buf) g_real->buf_free(be, buf);
  return st;
}
memra_status lent_gemm_n(memra_backend *be, int32_t n, const memra_tensor *y, const memra_tensor *x,
                         const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back(std::string("gemm_n x ") + tname(x->type));
  memra_buf *buf = nullptr;
  memra_tensor a;
  memra_status st = operand(be, x, &buf, &a);
  if (!st) st = g_real->gemm_n(be, n, y, &a, w, b);
  if (buf) g_real->buf_free(be, buf);
  return st;
}
// gemm_glu as its contract composes it: the two gemms (x rounded as above), then glu.
memra_status lent_gemm_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *wg, const memra_tensor *wu, int32_t act) {
  g_log.push_back(std::string("gemm_glu x ") + tname(x->type) + " y " + tname(y->type));
  memra_buf *buf = nullptr, *gu = nullptr;
  memra_tensor a;
  memra_status st = operand(be, x, &buf, &a);
  const int64_t N = wg->ne1, M = x->ne1;
  if (!st) st = g_real->buf_alloc(be, 8u * (uint64_t)(N * M) + 8, &gu);
  memra_tensor g = {}, u;
  g.buf = gu;
  g.type = MEMRA_TYPE_F32;
  g.ne0 = N;
  g.ne1 = M;
  g.nb1 = 4u * (uint64_t)N;
  u = g;
  u.offset = 4u * (uint64_t)(N * M);
  const memra_tensor none = {};
  if (!st) st = g_real->matmul(be, &g, &a, wg, &none);
  if (!st) st = g_real->matmul(be, &u, &a, wu, &none);
  if (!st) st = g_real->glu(be, y, &g, &u, act);
  if (buf) g_real->buf_free(be, buf);
  if (gu) g_real->buf_free(be, gu);
  return st;
}
int32_t lent_x_type(memra_backend *, int32_t) { return MEMRA_TYPE_F16; }
memra_status rec_rmsnorm_y(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *res, const memra_tensor *w, float eps) {
  g_log.push_back(std::string("rmsnorm y ") + tname(y->type));
  return g_real->rmsnorm(be, y, x, res, w, eps);
}
memra_status rec_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *g,
                     const memra_tensor *u, int32_t act) {
  g_log.push_back(std::string("glu y ") + tname(y->type));
  return g_real->glu(be, y, g, u, act);
}
memra_status rec_ffn_glu(memra_backend *be, const memra_tensor *y, const memra_tensor *h,
                         const memra_tensor *u, const memra_tensor *x, const memra_tensor *wg,
                         const memra_tensor *wu, const memra_tensor *wd, int32_t act) {
  g_log.push_back(std::string("ffn_glu x ") + tname(x->type) + " h " + tname(h->type));
  return g_real->ffn_glu(be, y, h, u, x, wg, wu, wd, act);
}

memra_status rec_norm_mm_xn(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                            const memra_tensor *res, const memra_tensor *wn, float eps, int32_t n,
                            const memra_tensor *y, const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back(std::string("rmsnorm_matmul_n xn ") + tname(xn->type));
  return g_real->rmsnorm_matmul_n(be, xn, x, res, wn, eps, n, y, w, b);
}
memra_status rec_norm_ffn_xn(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                             const memra_tensor *res, const memra_tensor *wn, float eps,
                             const memra_tensor *y, const memra_tensor *h, const memra_tensor *u,
                             const memra_tensor *wg, const memra_tensor *wu, const memra_tensor *wd,
                             int32_t act) {
  g_log.push_back(std::string("rmsnorm_ffn_glu xn ") + tname(xn->type) + " h " + tname(h->type));
  return g_real->rmsnorm_ffn_glu(be, xn, x, res, wn, eps, y, h, u, wg, wu, wd, act);
}

struct Lent {
  Engine e;
  memra_backend_vt vt = {};
  // Opens tiny-llama with the lent gemm; with_x_type lends gemm_x_type too. The context is
  // made after the lending, as a real plugin's would be (it sizes the operand buffer).
  bool open(bool with_x_type, bool with_glu = false) {
    if (!e.open("tests/e2e/fixtures/tiny-llama.gguf", MEMRA_TYPE_F32, 64, 7)) return false;
    g_real = e.bh.vt;
    vt = *e.bh.vt;
    vt.gemm = lent_gemm;
    vt.gemm_n = lent_gemm_n;
    vt.gemm_x_type = with_x_type ? lent_x_type : nullptr;
    vt.gemm_glu = with_glu ? lent_gemm_glu : nullptr;
    vt.rmsnorm = rec_rmsnorm_y;
    vt.glu = rec_glu;
    vt.ffn_glu = rec_ffn_glu;
    vt.rmsnorm_matmul_n = rec_norm_mm_xn;
    vt.rmsnorm_ffn_glu = rec_norm_ffn_xn;
    vt.matmul_acc = nullptr; // the norms with their residuals (norm_route_test's route)
    e.m->vt = &vt;
    memra_ctx_params p = e.c->p;
    memra_ctx_free(e.c);
    e.c = nullptr;
    return memra_ctx_new(e.m, &p, &e.c, &e.err) == MEMRA_OK;
  }
  ~Lent() {
    if (e.m) e.m->vt = e.bh.vt; // Engine frees through the real plugin
  }
};

int count(const std::string &what) { return (int)count_calls(g_log, what); }
} // namespace

TEST(Op16Route, PromptRowsTakeSixteenBitOperandsWithTheSameBits) {
  const int32_t ids[13] = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3, 2}; // chunks of 7 and 6
  Lent ref, got;
  ASSERT_TRUE(ref.open(false)) << ref.e.err.msg;
  ASSERT_TRUE(got.open(true)) << got.e.err.msg;
  ASSERT_EQ(nullptr, ref.e.c->op16.buf) << "no gemm_x_type: no operand buffer";
  ASSERT_NE(nullptr, got.e.c->op16.buf);
  const size_t nv = (size_t)ref.e.m->hp.n_vocab;
  std::vector<float> want(13 * nv), have(13 * nv);

  g_real = ref.e.bh.vt;
  g_log.clear();
  ASSERT_EQ(MEMRA_OK, memra_ctx_eval(ref.e.c, 0, ids, 13, 0, true, want.data(), &ref.e.err))
      << ref.e.err.msg;
  EXPECT_EQ(0, count("rmsnorm y F16") + count("glu y F16") + count("gemm x F16") +
                   count("gemm_n x F16"));

  g_real = got.e.bh.vt;
  g_log.clear();
  ASSERT_EQ(MEMRA_OK, memra_ctx_eval(got.e.c, 0, ids, 13, 0, true, have.data(), &got.e.err))
      << got.e.err.msg;
  EXPECT_EQ(0, memcmp(want.data(), have.data(), want.size() * sizeof(float)))
      << "16-bit operands made by rmsnorm/glu changed the logits";
  // Per layer and chunk: the two norms and glu write F16; q,k,v and gate,up take gemm_n on
  // F16 x, down takes gemm on F16 x; o (attention output) and the logits stay F32.
  const int L = got.e.m->hp.n_layer, chunks = 2;
  EXPECT_EQ(2 * L * chunks, count("rmsnorm y F16"));
  EXPECT_EQ(L * chunks, count("glu y F16"));
  EXPECT_EQ(0, count("glu y F32"));
  EXPECT_EQ(2 * L * chunks, count("gemm_n x F16"));
  EXPECT_EQ(0, count("gemm_n x F32"));
  EXPECT_EQ(L * chunks, count("gemm x F16"));
  EXPECT_EQ(L * chunks + chunks, count("gemm x F32")); // o per layer, logits per chunk
}

TEST(Op16Route, StepsWithDecodeRowsKeepF32) {
  Lent got;
  ASSERT_TRUE(got.open(true)) << got.e.err.msg;
  g_real = got.e.bh.vt;
  const int32_t prompt[4] = {11, 23, 5, 17};
  std::vector<float> logits((size_t)got.e.m->hp.n_vocab);
  ASSERT_EQ(MEMRA_OK, memra_ctx_eval(got.e.c, 0, prompt, 4, 0, false, logits.data(), &got.e.err))
      << got.e.err.msg;
  g_log.clear();
  // one generated token: a decode-only step (matmul, no gemm), every operand F32
  const int32_t tok = 29, pos = 4, seq = 0, out = 0;
  ASSERT_EQ(MEMRA_OK, memra_kv_pages_reserve(&got.e.c->pages, 0, 5, &got.e.err)) << got.e.err.msg;
  ASSERT_EQ(MEMRA_OK, memra_ctx_set_rows(got.e.c, 1, &tok, &pos, &seq, 1, &out, &got.e.err));
  ASSERT_EQ(1, got.e.c->n_decode);
  ASSERT_EQ(MEMRA_OK, memra_ctx_forward(got.e.c, &got.e.err)) << got.e.err.msg;
  EXPECT_EQ(0, count("rmsnorm y F16") + count("glu y F16"));
  EXPECT_EQ(1, count("rmsnorm y F32")); // the output norm; the layers' go with their projections
  // each layer's norms with q, k, v and with the FFN's one call (ABI 1.14), on F32 operands
  EXPECT_EQ(got.e.m->hp.n_layer, count("rmsnorm_matmul_n xn F32"));
  EXPECT_EQ(got.e.m->hp.n_layer, count("rmsnorm_ffn_glu xn F32 h F32"));
  EXPECT_EQ(0, count("glu y F32"));
}

// With gemm_glu lent as well, the prompt rows' gate, up and glu are one call taking the
// norm's F16 operand and writing down's; the logits keep their bits.
TEST(Op16Route, GemmGluTakesGateUpAndGluWithTheSameBits) {
  const int32_t ids[13] = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3, 2};
  Lent ref, got;
  ASSERT_TRUE(ref.open(false)) << ref.e.err.msg;
  ASSERT_TRUE(got.open(true, true)) << got.e.err.msg;
  const size_t nv = (size_t)ref.e.m->hp.n_vocab;
  std::vector<float> want(13 * nv), have(13 * nv);
  g_real = ref.e.bh.vt;
  ASSERT_EQ(MEMRA_OK, memra_ctx_eval(ref.e.c, 0, ids, 13, 0, true, want.data(), &ref.e.err))
      << ref.e.err.msg;
  g_real = got.e.bh.vt;
  g_log.clear();
  ASSERT_EQ(MEMRA_OK, memra_ctx_eval(got.e.c, 0, ids, 13, 0, true, have.data(), &got.e.err))
      << got.e.err.msg;
  EXPECT_EQ(0, memcmp(want.data(), have.data(), want.size() * sizeof(float)))
      << "gemm_glu changed the logits";
  const int L = got.e.m->hp.n_layer, chunks = 2;
  EXPECT_EQ(L * chunks, count("gemm_glu x F16 y F16"));
  EXPECT_EQ(0, count("glu y F16") + count("glu y F32")) << "glu ran beside gemm_glu";
  EXPECT_EQ(L * chunks, count("gemm_n x F16")); // q, k, v only
  EXPECT_EQ(L * chunks, count("gemm x F16"));   // down
}
