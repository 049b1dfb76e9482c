// A step mixing generated-token rows and a prompt chunk: the decode rows go to matmul and
// the decode attention, the prompt rows to gemm and the prompt-flagged attention, and
// the logits equal those of the unsplit step. The CPU plugin has no gemm, so the test
// lends it one that records its calls and forwards to matmul (bit-identical on the CPU);
// with gemm present the prompt rows of q,k,v and gate,up take gemm_n (ABI 1.5), recorded too
// (the CPU's gemm_n is matmul per output).
#include "tests/e2e/engine_fixture.h"

namespace {
const memra_backend_vt *g_real;
std::vector<std::string> g_log;

memra_status rec_matmul(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                        const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back("matmul " + std::to_string(x->ne1));
  return g_real->matmul(be, y, x, w, b);
}
memra_status rec_gemm(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                      const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back("gemm " + std::to_string(x->ne1));
  return g_real->matmul(be, y, x, w, b);
}
memra_status rec_gemm_n(memra_backend *be, int32_t n, const memra_tensor *y, const memra_tensor *x,
                        const memra_tensor *w, const memra_tensor *b) {
  g_log.push_back("gemm_n " + std::to_string(n) + " " + std::to_string(x->ne1));
  return g_real->gemm_n(be, n, y, x, w, b);
}
memra_status rec_attention(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                           const memra_tensor *k, const memra_tensor *v, const memra_batch *b,
                           const memra_attn_params *p) {
  g_log.push_back("attention " + std::to_string(b->n_rows) + " flags " + std::to_string(b->flags));
  return g_real->attention(be, out, q, k, v, b, p);
}

// Logits of one step: seqs 0 and 1 decode one token each at position 6, seq 2 feeds a
// 4-token prompt chunk from position 0 (pages for all of them reserved first).
std::vector<float> mixed_step(Engine &e, int32_t *n_decode) {
  const int32_t tok[6] = {11, 23, 5, 17, 29, 3}, pos[6] = {6, 6, 0, 1, 2, 3},
                seq[6] = {0, 1, 2, 2, 2, 2}, out[3] = {0, 1, 5};
  for (int32_t s = 0; s < 3; ++s)
    EXPECT_EQ(MEMRA_OK, memra_kv_pages_reserve(&e.c->pages, s, 8, &e.err)) << e.err.msg;
  EXPECT_EQ(MEMRA_OK, memra_ctx_set_rows(e.c, 6, tok, pos, seq, 3, out, &e.err)) << e.err.msg;
  *n_decode = e.c->n_decode;
  EXPECT_EQ(MEMRA_OK, memra_ctx_forward(e.c, &e.err)) << e.err.msg;
  std::vector<float> logits(3 * (size_t)e.m->hp.n_vocab);
  EXPECT_EQ(MEMRA_OK, memra_ctx_get_logits(e.c, logits.data(), &e.err)) << e.err.msg;
  return logits;
}
} // namespace

TEST(RowSplit, DecodeRowsKeepMatmulPromptRowsTakeGemm) {
  memra_ctx_params p = memra_ctx_defaults();
  p.n_ctx = 64;
  p.n_ubatch = 8;
  p.n_seq_max = 3;
  p.block_size = 5;
  p.kv_type = MEMRA_TYPE_F32;
  Engine plain, lent;
  ASSERT_TRUE(plain.open_with("tests/e2e/fixtures/tiny-llama.gguf", p)) << plain.err.msg;
  ASSERT_TRUE(lent.open_with("tests/e2e/fixtures/tiny-llama.gguf", p)) << lent.err.msg;
  ASSERT_EQ(nullptr, plain.bh.vt->gemm) << "the CPU plugin grew a gemm: lend it no more";
  int32_t nd_plain = -1, nd_lent = -1;
  std::vector<float> want = mixed_step(plain, &nd_plain);

  memra_backend_vt vt = *lent.bh.vt;
  g_real = lent.bh.vt;
  vt.matmul = rec_matmul;
  vt.gemm = rec_gemm;
  vt.gemm_n = rec_gemm_n;
  vt.attention = rec_attention;
  lent.m->vt = &vt;
  g_log.clear();
  std::vector<float> got = mixed_step(lent, &nd_lent);
  lent.m->vt = g_real;

  EXPECT_EQ(2, nd_plain);
  EXPECT_EQ(2, nd_lent);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_EQ(0, memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  // Per layer: q, k, v, o, gate, up, down each split 2 + 4 (the 4 prompt rows of q,k,v
  // and of gate,up in one gemm_n call each); attention split likewise; the logits of a step
  // with decode rows stay on matmul.
  const int n_layer = lent.m->hp.n_layer;
  int mm2 = 0, gemm4 = 0, gemm_n3 = 0, gemm_n2 = 0, att_dec = 0, att_prompt = 0, other = 0;
  for (const std::string &s : g_log) {
    if (s == "matmul 2")
      ++mm2;
    else if (s == "gemm 4")
      ++gemm4;
    else if (s == "gemm_n 3 4")
      ++gemm_n3;
    else if (s == "gemm_n 2 4")
      ++gemm_n2;
    else if (s == "attention 2 flags 0")
      ++att_dec;
    else if (s == "attention 4 flags 1")
      ++att_prompt;
    else if (s != "matmul 3")
      ++other, ADD_FAILURE() << "unexpected call: " << s;
  }
  EXPECT_EQ(7 * n_layer, mm2);
  EXPECT_EQ(2 * n_layer, gemm4);
  EXPECT_EQ(n_layer, gemm_n3);
  EXPECT_EQ(n_layer, gemm_n2);
  EXPECT_EQ(n_layer, att_dec);
  EXPECT_EQ(n_layer, att_prompt);
  EXPECT_EQ(0, other);
}

// A prompt evaluated in chunks is all prompt rows, even a last chunk of one row.
TEST(RowSplit, EvalChunksArePromptRows) {
  Engine e;
  ASSERT_TRUE(e.open("tests/e2e/fixtures/tiny-llama.gguf", MEMRA_TYPE_F32, 64, 4)) << e.err.msg;
  memra_backend_vt vt = *e.bh.vt;
  g_real = e.bh.vt;
  vt.matmul = rec_matmul;
  vt.gemm = rec_gemm;
  vt.gemm_n = rec_gemm_n;
  e.m->vt = &vt;
  g_log.clear();
  const int32_t ids[5] = {3, 14, 15, 9, 26};
  std::vector<float> logits((size_t)e.m->hp.n_vocab);
  EXPECT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, ids, 5, 0, false, logits.data(), &e.err)) << e.err.msg;
  e.m->vt = g_real;
  int mm = 0, gemm1 = 0, gemm_n1 = 0;
  for (const std::string &s : g_log) {
    if (s.rfind("matmul", 0) == 0) ++mm;
    if (s == "gemm 1") ++gemm1;
    if (s == "gemm_n 3 1" || s == "gemm_n 2 1") ++gemm_n1;
  }
  EXPECT_EQ(0, mm) << "a prompt row went to matmul";
  EXPECT_GT(gemm1, 0) << "the one-row last chunk did not take gemm";
  EXPECT_GT(gemm_n1, 0) << "the one-row last chunk did not take gemm_n";
}
