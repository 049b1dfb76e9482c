// rope_kv_test.cc — ABI 1.4 rope_kv_store on the CPU plugin: bit for bit the composition
// rope(q), rope(k), kv_store(k, v) it stands for (NORM and NEOX, partial rotation,
// frequency factors, F32/F16/FP8 caches, odd head counts, shuffled pages), guard bytes
// intact, and one-line refusals that leave q untouched.
#include "tests/cpu/cpu_test_util.h"

#include <algorithm>
#include <memory>

using namespace cputest;

namespace {

struct Case {
  int mode, n_head, n_kv, hd, n_rot;
  bool ff;
  int32_t ctype;
};

// Three rows in two sequences over a shuffled page table of block size 4.
struct Step {
  std::unique_ptr<Dev> pos, seq, table;
  memra_batch b{};
  int64_t slots;
  Step(Cpu &c, std::mt19937 &g) {
    const int bs = 4, max_blocks = 8, n_seqs = 2, pages = n_seqs * max_blocks;
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; ++i)
      ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), g);
    std::vector<int32_t> p = {0, 13, 30}, s = {1, 0, 1}; // 0: rotation by 0 is exact
    pos.reset(new Dev(c, MEMRA_TYPE_I32, 3, 1));
    seq.reset(new Dev(c, MEMRA_TYPE_I32, 3, 1));
    table.reset(new Dev(c, MEMRA_TYPE_I32, max_blocks, n_seqs));
    pos->put(p);
    seq->put(s);
    table->put(ids);
    b.n_rows = 3;
    b.n_seqs = n_seqs;
    b.block_size = bs;
    b.max_blocks = max_blocks;
    b.kv_bucket = 32;
    b.pos = pos->t;
    b.seq = seq->t;
    b.block_table = table->t;
    slots = (int64_t)pages * bs;
  }
};

std::vector<uint8_t> random_cache(std::mt19937 &g, int32_t type, int64_t ne0, int64_t rows) {
  std::vector<uint8_t> b(memra_type_row_bytes(type, ne0) * rows);
  std::uniform_int_distribution<int> d(0, 0x3b); // finite values in every cache type
  for (auto &x : b)
    x = (uint8_t)d(g);
  return b;
}

} // namespace

TEST(CpuRopeKv, EqualsRopeRopeKvStoreBitForBit) {
  const Case cases[] = {
      {MEMRA_ROPE_NORM, 4, 2, 64, 64, false, MEMRA_TYPE_F16},
      {MEMRA_ROPE_NEOX, 5, 1, 48, 16, true, MEMRA_TYPE_F32}, // partial: 32 dims pass through
      {MEMRA_ROPE_NORM, 6, 3, 32, 32, true, MEMRA_TYPE_F8_E4M3},
      {MEMRA_ROPE_NEOX, 8, 8, 128, 128, false, MEMRA_TYPE_F16}, // no GQA
  };
  Cpu c;
  int n = 0;
  for (const Case &k : cases) {
    std::mt19937 g(1000 + n++);
    Step st(c, g);
    const int qw = k.n_head * k.hd, kw = k.n_kv * k.hd;
    std::vector<float> q = randf(g, (size_t)3 * qw), kk = randf(g, (size_t)3 * kw),
                       v = randf(g, (size_t)3 * kw), ff = randf(g, (size_t)k.n_rot / 2, 1, 8);
    std::vector<uint8_t> kc0 = random_cache(g, k.ctype, kw, st.slots),
                         vc0 = random_cache(g, k.ctype, kw, st.slots);
    Dev dff(c, MEMRA_TYPE_F32, k.n_rot / 2, 1);
    dff.put(ff);
    memra_rope_params p = {k.n_head, k.hd, k.n_rot, k.mode, 10000.0f, 0.5f, {}};
    if (k.ff) p.freq_factors = dff.t;
    memra_rope_params pk = p;
    pk.n_head = k.n_kv;
    // [0]: the fused call, [1]: the three separate calls, on identical inputs
    std::unique_ptr<Dev> dq[2], dk[2], dv[2], kc[2], vc[2];
    for (int i = 0; i < 2; ++i) {
      dq[i].reset(new Dev(c, MEMRA_TYPE_F32, qw, 3, 12)); // padded rows: strides honoured
      dk[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
      dv[i].reset(new Dev(c, MEMRA_TYPE_F32, kw, 3));
      kc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      vc[i].reset(new Dev(c, k.ctype, kw, st.slots));
      dq[i]->put(q);
      dk[i]->put(kk);
      dv[i]->put(v);
      kc[i]->put_bytes(kc0.data());
      vc[i]->put_bytes(vc0.data());
    }
    ASSERT_EQ(MEMRA_OK, c.vt->rope_kv_store(c.be, &dq[0]->t, &dk[0]->t, &dv[0]->t, &kc[0]->t,
                                            &vc[0]->t, &st.b, &p))
        << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->rope(c.be, &dq[1]->t, &st.b.pos, &p)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->rope(c.be, &dk[1]->t, &st.b.pos, &pk)) << c.err();
    ASSERT_EQ(MEMRA_OK, c.vt->kv_store(c.be, &kc[1]->t, &vc[1]->t, &dk[1]->t, &dv[1]->t, &st.b))
        << c.err();
    const std::string what = "case " + std::to_string(n - 1);
    EXPECT_TRUE(bits_equal(dq[0]->get<float>(), dq[1]->get<float>())) << what << ": q";
    EXPECT_TRUE(bits_equal(dk[0]->get<float>(), dk[1]->get<float>())) << what << ": k";
    EXPECT_FALSE(bits_equal(dq[0]->get<float>(), q)) << what << ": q was not rotated";
    EXPECT_EQ(kc[0]->all(), kc[1]->all()) << what << ": k cache";
    EXPECT_EQ(vc[0]->all(), vc[1]->all()) << what << ": v cache";
    EXPECT_NE(kc[0]->all(), kc[0]->shadow) << what << ": nothing stored";
    for (int i = 0; i < 2; ++i)
      EXPECT_TRUE(dq[i]->guards_ok() && dk[i]->guards_ok() && dv[i]->guards_ok()) << what;
  }
}

TEST(CpuRopeKv, RefusalsNameTheProblemAndLeaveQAlone) {
  Cpu c;
  std::mt19937 g(7);
  Step st(c, g);
  const int hd = 32, qw = 4 * hd, kw = 2 * hd;
  std::vector<float> q = randf(g, (size_t)3 * qw);
  Dev dq(c, MEMRA_TYPE_F32, qw, 3), dk(c, MEMRA_TYPE_F32, kw, 3), dv(c, MEMRA_TYPE_F32, kw, 3),
      kc(c, MEMRA_TYPE_F16, kw, st.slots), vc(c, MEMRA_TYPE_F16, kw, st.slots),
      dk2(c, MEMRA_TYPE_F32, kw, 2), dodd(c, MEMRA_TYPE_F32, kw + 3, 3);
  dq.put(q);
  dk.put(randf(g, (size_t)3 * kw));
  dv.put(randf(g, (size_t)3 * kw));
  memra_rope_params p = {4, hd, hd, MEMRA_ROPE_NORM, 10000.0f, 1.0f, {}};
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rope_kv_store(c.be, &dq.t, &dodd.t, &dodd.t, &kc.t, &vc.t, &st.b, &p));
  EXPECT_EQ(0u, c.err().find("rope_kv_store: k rows have 67 elements, not a multiple of "
                             "head_dim 32"))
      << c.err();
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rope_kv_store(c.be, &dq.t, &dk2.t, &dv.t, &kc.t, &vc.t, &st.b, &p));
  EXPECT_EQ(0u, c.err().find("rope_kv_store: q, k, v have 3, 2, 3 rows, batch 3")) << c.err();
  memra_rope_params bad = p;
  bad.mode = 1;
  EXPECT_EQ(MEMRA_E_UNSUPPORTED,
            c.vt->rope_kv_store(c.be, &dq.t, &dk.t, &dv.t, &kc.t, &vc.t, &st.b, &bad));
  EXPECT_EQ(0u, c.err().find("rope: mode 1")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID,
            c.vt->rope_kv_store(c.be, &dq.t, &dk.t, &dv.t, &kc.t, &vc.t, nullptr, &p));
  EXPECT_EQ(0u, c.err().find("rope_kv_store: q, k, v, batch and params are required")) << c.err();
  EXPECT_TRUE(bits_equal(dq.get<float>(), q)) << "a refused call rotated q";
  EXPECT_TRUE(dq.guards_ok());
}
