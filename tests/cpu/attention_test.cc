// attention_test.cc — kv_store into paged caches and attention over them, against a
// double reference over the logical (sequence, position) K/V: several sequences in one
// batch at different positions, shuffled page ids, block sizes 16 and 7, head_dim 64
// and 80, GQA 4:1 and 1:1, sliding windows, softcap, F32 and F16 caches.
// Tolerances (relative L2): F32 caches 1e-5; F16 caches 2e-3 (the reference keeps the
// unrounded K/V, so this bounds the fp16 storage error too). kv_store: exact.
#include "tests/cpu/cpu_test_util.h"

#include <algorithm>
#include <memory>

using namespace cputest;

namespace {

struct Case {
  int n_head, n_kv_head, hd, block_size, window;
  int32_t kv_type;
  float softcap;
};

// A batch of cached sequences: lengths, a shuffled page table, logical K and V.
struct Paged {
  int n_seqs, bs, max_blocks, n_pages;
  std::vector<int> len;
  std::vector<int32_t> table;           // [n_seqs, max_blocks]
  std::vector<std::vector<float>> k, v; // per sequence [len, kvw]
  int64_t slot(int s, int p) const { return (int64_t)table[s * max_blocks + p / bs] * bs + p % bs; }
};

Paged make_paged(std::mt19937 &g, std::vector<int> len, int bs, int kvw) {
  Paged pg;
  pg.n_seqs = (int)len.size();
  pg.bs = bs;
  pg.len = len;
  pg.max_blocks = 0;
  int used = 0;
  for (int l : len) {
    pg.max_blocks = std::max(pg.max_blocks, (l + bs - 1) / bs);
    used += (l + bs - 1) / bs;
  }
  pg.max_blocks += 1;    // a spare column, like a real table
  pg.n_pages = used + 3; // and pages nobody owns
  std::vector<int32_t> ids(pg.n_pages);
  for (int i = 0; i < pg.n_pages; ++i)
    ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), g);
  pg.table.assign(pg.n_seqs * pg.max_blocks, -1); // unused entries are -1 on purpose
  int next = 0;
  for (int s = 0; s < pg.n_seqs; ++s)
    for (int b = 0; b < (len[s] + bs - 1) / bs; ++b)
      pg.table[s * pg.max_blocks + b] = ids[next++];
  for (int s = 0; s < pg.n_seqs; ++s) {
    pg.k.push_back(randf(g, (size_t)len[s] * kvw));
    pg.v.push_back(randf(g, (size_t)len[s] * kvw));
  }
  return pg;
}

// Device copies of a batch's pos, seq and block table.
struct DevBatch {
  std::unique_ptr<Dev> pos, seq, table;
  memra_batch b{};
  DevBatch(Cpu &c, const Paged &pg, const std::vector<int32_t> &pos_v,
           const std::vector<int32_t> &seq_v, int kv_bucket) {
    int n = (int)pos_v.size();
    pos.reset(new Dev(c, MEMRA_TYPE_I32, n, 1));
    seq.reset(new Dev(c, MEMRA_TYPE_I32, n, 1));
    table.reset(new Dev(c, MEMRA_TYPE_I32, pg.max_blocks, pg.n_seqs));
    pos->put(pos_v);
    seq->put(seq_v);
    table->put(pg.table);
    b.n_rows = n;
    b.n_seqs = pg.n_seqs;
    b.block_size = pg.bs;
    b.max_blocks = pg.max_blocks;
    b.kv_bucket = kv_bucket;
    b.pos = pos->t;
    b.seq = seq->t;
    b.block_table = table->t;
  }
};

// out for one row (sequence s at position p), all heads, in double.
void ref_attention(const Paged &pg, const Case &k, float scale, const float *q, int s, int p,
                   double *out) {
  int group = k.n_head / k.n_kv_head, kvw = k.n_kv_head * k.hd;
  int lo = k.window > 0 ? std::max(0, p - k.window + 1) : 0;
  for (int h = 0; h < k.n_head; ++h) {
    int gh = h / group;
    std::vector<double> sc;
    double mx = -INFINITY;
    for (int j = lo; j <= p; ++j) {
      double d = 0;
      for (int i = 0; i < k.hd; ++i)
        d += (double)q[h * k.hd + i] * pg.k[s][(size_t)j * kvw + gh * k.hd + i];
      d *= scale;
      if (k.softcap > 0) d = k.softcap * std::tanh(d / k.softcap);
      sc.push_back(d);
      mx = std::max(mx, d);
    }
    double sum = 0;
    for (double &x : sc)
      sum += (x = std::exp(x - mx));
    for (int i = 0; i < k.hd; ++i) {
      double o = 0;
      for (int j = lo; j <= p; ++j)
        o += sc[j - lo] * pg.v[s][(size_t)j * kvw + gh * k.hd + i];
      out[h * k.hd + i] = o / sum;
    }
  }
}

// Stores every position of every sequence with one kv_store call (rows shuffled).
void store_all(Cpu &c, const Paged &pg, int kvw, Dev &kc, Dev &vc) {
  std::vector<int32_t> pos, seq;
  std::vector<float> k, v;
  std::vector<std::pair<int, int>> rows;
  for (int s = 0; s < pg.n_seqs; ++s)
    for (int p = 0; p < pg.len[s]; ++p)
      rows.push_back({s, p});
  std::mt19937 g(99);
  std::shuffle(rows.begin(), rows.end(), g);
  for (auto [s, p] : rows) {
    seq.push_back(s);
    pos.push_back(p);
    k.insert(k.end(), pg.k[s].begin() + (size_t)p * kvw, pg.k[s].begin() + (size_t)(p + 1) * kvw);
    v.insert(v.end(), pg.v[s].begin() + (size_t)p * kvw, pg.v[s].begin() + (size_t)(p + 1) * kvw);
  }
  int bucket = *std::max_element(pg.len.begin(), pg.len.end());
  DevBatch db(c, pg, pos, seq, bucket);
  Dev dk(c, MEMRA_TYPE_F32, kvw, (int64_t)rows.size()),
      dv(c, MEMRA_TYPE_F32, kvw, (int64_t)rows.size());
  dk.put(k);
  dv.put(v);
  ASSERT_EQ(MEMRA_OK, c.vt->kv_store(c.be, &kc.t, &vc.t, &dk.t, &dv.t, &db.b)) << c.err();
}

const Case kCases[] = {
    {8, 2, 64, 16, 0, MEMRA_TYPE_F32, 0.0f},  // GQA 4:1
    {3, 3, 80, 7, 0, MEMRA_TYPE_F16, 0.0f},   // 1:1, odd block size, F16 cache
    {8, 2, 64, 7, 5, MEMRA_TYPE_F32, 2.0f},   // window inside a page, softcap
    {4, 4, 80, 16, 17, MEMRA_TYPE_F16, 0.0f}, // window across pages
    {4, 1, 64, 16, 0, MEMRA_TYPE_F16, 0.0f},  // MQA
};

} // namespace

TEST(CpuKvStore, WritesEachRowToItsPagedSlotOnly) {
  Cpu c;
  std::mt19937 g(51);
  for (const Case &k : kCases) {
    SCOPED_TRACE(testing::Message()
                 << "bs=" << k.block_size << " kv=" << memra_type_info(k.kv_type).name);
    int kvw = k.n_kv_head * k.hd;
    Paged pg = make_paged(g, {1, 37, 100}, k.block_size, kvw);
    int64_t slots = (int64_t)pg.n_pages * pg.bs;
    Dev kc(c, k.kv_type, kvw, slots), vc(c, k.kv_type, kvw, slots);
    store_all(c, pg, kvw, kc, vc);
    std::vector<uint8_t> kb = kc.all(), vb = vc.all();
    size_t es = k.kv_type == MEMRA_TYPE_F32 ? 4 : 2;
    std::vector<bool> written(slots, false);
    for (int s = 0; s < pg.n_seqs; ++s)
      for (int p = 0; p < pg.len[s]; ++p) {
        int64_t sl = pg.slot(s, p);
        written[sl] = true;
        for (int i = 0; i < kvw; ++i) {
          float kw = pg.k[s][(size_t)p * kvw + i], vw = pg.v[s][(size_t)p * kvw + i];
          size_t at = kc.t.offset + sl * kc.t.nb1 + i * es;
          if (es == 4) {
            ASSERT_EQ(0, memcmp(&kb[at], &kw, 4)) << s << "," << p << "," << i;
            ASSERT_EQ(0, memcmp(&vb[at], &vw, 4));
          } else {
            uint16_t hk = memra_f32_to_fp16(kw), hv = memra_f32_to_fp16(vw);
            ASSERT_EQ(0, memcmp(&kb[at], &hk, 2)) << s << "," << p << "," << i;
            ASSERT_EQ(0, memcmp(&vb[at], &hv, 2));
          }
        }
      }
    for (int64_t sl = 0; sl < slots; ++sl) // slots of no (sequence, position) untouched
      if (!written[sl]) {
        for (size_t b = 0; b < kvw * es; ++b)
          ASSERT_EQ(kGuard, kb[kc.t.offset + sl * kc.t.nb1 + b]);
      }
    EXPECT_TRUE(kc.guards_ok());
    EXPECT_TRUE(vc.guards_ok());
  }
}

TEST(CpuAttention, MixedBatchMatchesDouble) {
  Cpu c;
  std::mt19937 g(52);
  for (const Case &k : kCases) {
    SCOPED_TRACE(testing::Message() << "heads " << k.n_head << ":" << k.n_kv_head << " hd=" << k.hd
                                    << " bs=" << k.block_size << " window=" << k.window
                                    << " kv=" << memra_type_info(k.kv_type).name);
    int kvw = k.n_kv_head * k.hd, qw = k.n_head * k.hd;
    Paged pg = make_paged(g, {1, 37, 100, 16}, k.block_size, kvw);
    int64_t slots = (int64_t)pg.n_pages * pg.bs;
    Dev kc(c, k.kv_type, kvw, slots), vc(c, k.kv_type, kvw, slots);
    store_all(c, pg, kvw, kc, vc);
    // Rows: the last 9 positions of sequence 2 (a prefill chunk), sequence 1 decoding at
    // 36, sequence 0 at 0, sequence 3 at 7 (mid-sequence), shuffled together.
    std::vector<std::pair<int, int>> rows = {{1, 36}, {0, 0}, {3, 7}};
    for (int p = 91; p < 100; ++p)
      rows.push_back({2, p});
    std::shuffle(rows.begin(), rows.end(), g);
    std::vector<int32_t> pos, seq;
    for (auto [s, p] : rows) {
      seq.push_back(s);
      pos.push_back(p);
    }
    int n = (int)rows.size();
    DevBatch db(c, pg, pos, seq, 128);
    auto q = randf(g, (size_t)n * qw, -2, 2);
    Dev dq(c, MEMRA_TYPE_F32, qw, n), dout(c, MEMRA_TYPE_F32, qw, n, 16);
    dq.put(q);
    float scale = 1.0f / std::sqrt((float)k.hd) * (k.softcap > 0 ? 4.0f : 1.0f);
    memra_attn_params p = {k.n_head, k.n_kv_head, k.hd, k.window, scale, k.softcap};
    ASSERT_EQ(MEMRA_OK, c.vt->attention(c.be, &dout.t, &dq.t, &kc.t, &vc.t, &db.b, &p)) << c.err();
    std::vector<double> want((size_t)n * qw);
    for (int r = 0; r < n; ++r)
      ref_attention(pg, k, scale, &q[(size_t)r * qw], seq[r], pos[r], &want[(size_t)r * qw]);
    std::vector<float> got = dout.get<float>();
    EXPECT_LE(rel_l2(got, want), k.kv_type == MEMRA_TYPE_F32 ? 1e-5 : 2e-3);
    EXPECT_TRUE(dout.guards_ok());

    // Batch invariance: each row alone gives the bits it gave in the batch.
    for (int r : {0, n / 2, n - 1}) {
      DevBatch one(c, pg, {pos[r]}, {seq[r]}, 128);
      memra_tensor q1 = dq.t;
      q1.offset += (uint64_t)r * q1.nb1;
      q1.ne1 = 1;
      Dev o1(c, MEMRA_TYPE_F32, qw, 1);
      ASSERT_EQ(MEMRA_OK, c.vt->attention(c.be, &o1.t, &q1, &kc.t, &vc.t, &one.b, &p)) << c.err();
      std::vector<float> alone = o1.get<float>();
      EXPECT_TRUE(bits_equal(alone, std::vector<float>(got.begin() + (size_t)r * qw,
                                                       got.begin() + (size_t)(r + 1) * qw)))
          << "row " << r;
    }
  }
}

TEST(CpuAttention, HostileBatchesAreRefusedWithMessages) {
  Cpu c;
  std::mt19937 g(53);
  const Case k = {4, 2, 64, 16, 0, MEMRA_TYPE_F32, 0.0f};
  int kvw = k.n_kv_head * k.hd, qw = k.n_head * k.hd;
  Paged pg = make_paged(g, {20, 5}, k.block_size, kvw);
  int64_t slots = (int64_t)pg.n_pages * pg.bs;
  Dev kc(c, k.kv_type, kvw, slots), vc(c, k.kv_type, kvw, slots), dq(c, MEMRA_TYPE_F32, qw, 2),
      dout(c, MEMRA_TYPE_F32, qw, 2), dk(c, MEMRA_TYPE_F32, kvw, 2);
  memra_attn_params p = {k.n_head, k.n_kv_head, k.hd, 0, 0.125f, 0.0f};
  auto expect_err = [&](DevBatch &db, const char *msg) {
    EXPECT_EQ(MEMRA_E_INVALID, c.vt->attention(c.be, &dout.t, &dq.t, &kc.t, &vc.t, &db.b, &p));
    EXPECT_EQ(0u, c.err().find(std::string("attention: ") + msg)) << c.err();
    EXPECT_EQ(MEMRA_E_INVALID, c.vt->kv_store(c.be, &kc.t, &vc.t, &dk.t, &dk.t, &db.b));
    EXPECT_EQ(0u, c.err().find(std::string("kv_store: ") + msg)) << c.err();
  };
  {
    DevBatch db(c, pg, {3, 4}, {0, 2}, 32);
    expect_err(db, "row 1 has sequence 2, batch has 2");
  }
  {
    DevBatch db(c, pg, {3, 40}, {0, 1}, 32);
    expect_err(db, "row 1 has position 40, outside [0, kv_bucket 32)");
  }
  {
    DevBatch db(c, pg, {-1, 4}, {0, 1}, 32);
    expect_err(db, "row 0 has position -1");
  }
  {
    Paged bad = pg;
    bad.table[0 * bad.max_blocks + 1] = 1 << 20; // a page far past the cache
    DevBatch db(c, bad, {19, 4}, {0, 1}, 32);
    EXPECT_EQ(MEMRA_E_INVALID, c.vt->attention(c.be, &dout.t, &dq.t, &kc.t, &vc.t, &db.b, &p));
    EXPECT_EQ(0u, c.err().find("attention: row 0 (sequence 0) position 16 maps to slot 16777216"))
        << c.err();
    EXPECT_EQ(MEMRA_E_INVALID, c.vt->kv_store(c.be, &kc.t, &vc.t, &dk.t, &dk.t, &db.b));
    EXPECT_EQ(0u, c.err().find("kv_store: row 0 (sequence 0, position 19) maps to slot"))
        << c.err();
  }
  {
    DevBatch db(c, pg, {100, 4}, {0, 1}, 200); // needs block 6 of a 3-column table
    expect_err(db, "row 0 position 100 needs block 6");
  }
  DevBatch ok(c, pg, {19, 4}, {0, 1}, 32);
  memra_attn_params bad = p;
  bad.n_kv_head = 3;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->attention(c.be, &dout.t, &dq.t, &kc.t, &vc.t, &ok.b, &bad));
  EXPECT_EQ(0u, c.err().find("attention: n_head 4, n_kv_head 3")) << c.err();
  Dev q3(c, MEMRA_TYPE_F32, qw, 3);
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->attention(c.be, &dout.t, &q3.t, &kc.t, &vc.t, &ok.b, &p));
  EXPECT_EQ(0u, c.err().find("attention: q has shape [3, 256], expected [2, 256]")) << c.err();
  Dev kq(c, MEMRA_TYPE_Q8_0, kvw, slots);
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, c.vt->attention(c.be, &dout.t, &dq.t, &kq.t, &vc.t, &ok.b, &p));
  EXPECT_EQ(0u, c.err().find("attention: k_cache has type Q8_0, expected F32 or F16")) << c.err();
  ok.b.block_size = 0;
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->attention(c.be, &dout.t, &dq.t, &kc.t, &vc.t, &ok.b, &p));
  EXPECT_EQ(0u, c.err().find("attention: batch has n_rows 2, n_seqs 2, block_size 0")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->attention(c.be, &dout.t, &dq.t, &kc.t, &vc.t, nullptr, &p));
  EXPECT_EQ(0u, c.err().find("attention: batch is absent")) << c.err();
  EXPECT_TRUE(dout.guards_ok());
  EXPECT_TRUE(kc.guards_ok());
}

// The F16 cache is widened by F16C where the CPU has it: the same floats as
// memra_fp16_to_f32 for every half that is not a NaN (widening is exact).
extern "C" void cpu_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);

TEST(CpuKvStore, F16WideningMatchesQuantLibraryForEveryHalf) {
  std::vector<uint16_t> h(65536);
  for (int i = 0; i < 65536; ++i)
    h[i] = (uint16_t)i;
  std::vector<float> got(65536 + 3);
  cpu_f16_to_f32_row(h.data(), got.data(), 65536);
  cpu_f16_to_f32_row(h.data() + 5, got.data() + 65536, 3); // an unaligned tail
  for (int i = 0; i < 65536; ++i) {
    float want = memra_fp16_to_f32((uint16_t)i);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    ASSERT_EQ(0, memcmp(&want, &got[i], 4)) << "half 0x" << std::hex << i;
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(memra_fp16_to_f32((uint16_t)(5 + i)), got[65536 + i]);
}
