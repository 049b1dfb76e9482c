// Decode with the step state in device memory (argmax into the ids, positions advanced by
// add_i32) gives exactly the tokens of the host-driven loop, across KV buckets and pages.
#include "tests/e2e/engine_fixture.h"

#include <cstring>

extern "C" {
#include "core/decode/decoder.h"
}

class Decoder : public ::testing::TestWithParam<const char *> {};

// P token ids below 300 from a seeded LCG (fresh, not zeros; the fixtures' vocabularies hold 300).
static std::vector<int32_t> lcg_prompt(int32_t P, uint32_t s) {
  std::vector<int32_t> prompt(P);
  for (auto &t : prompt)
    t = (int32_t)((s = s * 1664525u + 1013904223u) >> 8) % 300;
  return prompt;
}

TEST_P(Decoder, DeviceStateStepsMatchHostLoop) {
  const std::string path = std::string("tests/e2e/fixtures/") + GetParam() + ".gguf";
  const int32_t P = 251, N = 12; // positions 250..262 cross the 256 bucket
  const std::vector<int32_t> prompt = lcg_prompt(P, 12345);

  std::vector<int32_t> host, device;
  {
    Engine e;
    ASSERT_TRUE(e.open(path, MEMRA_TYPE_F16, 512)) << e.err.msg;
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, prompt.data(), P, 0, false, nullptr, &e.err));
    for (int32_t i = 0; i < N; ++i) {
      int32_t id;
      ASSERT_EQ(MEMRA_OK, memra_ctx_argmax(e.c, &id, &e.err)) << e.err.msg;
      host.push_back(id);
      ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, &id, 1, P + i, false, nullptr, &e.err));
    }
  }
  {
    Engine e;
    ASSERT_TRUE(e.open(path, MEMRA_TYPE_F16, 512)) << e.err.msg;
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, prompt.data(), P - 1, 0, false, nullptr, &e.err));
    memra_decoder d;
    int32_t pos = P - 1;
    ASSERT_EQ(MEMRA_OK, memra_decoder_init(&d, e.c, 1, &prompt[P - 1], &pos, true, &e.err))
        << e.err.msg;
    for (int32_t i = 0; i < N; ++i) {
      int32_t id;
      ASSERT_EQ(MEMRA_OK, memra_decoder_step(&d, &id, &e.err)) << e.err.msg;
      device.push_back(id);
    }
    EXPECT_EQ(0x3u, d.buckets_seen); // buckets 256 and 512
    memra_decoder_free(&d);
  }
  EXPECT_EQ(host, device);
  // Greedy decoding of a random untied model is not stuck on one token, so the comparison
  // can fail; tiny-qwen2 ties its embeddings, and a random tied model echoes its input.
  if (std::string(GetParam()) != "tiny-qwen2") {
    EXPECT_GT(std::set<int32_t>(host.begin(), host.end()).size(), 2u);
  }
}

// Sampling inside the decode step (the plugin's sample op, state in device memory) draws
// exactly what the same op draws when the host runs each step itself.
TEST_P(Decoder, SampledStepsMatchHostLoop) {
  const std::string path = std::string("tests/e2e/fixtures/") + GetParam() + ".gguf";
  const int32_t P = 9, N = 40;
  const int32_t prompt[P] = {5, 100, 258, 37, 200, 299, 3, 77, 150};
  const memra_sample_params sp = {1.3f, 50, 0.95f, 0.01f};
  const uint64_t seed = 0x1234567;
  std::vector<int32_t> host, device;
  {
    Engine e;
    ASSERT_TRUE(e.open(path, MEMRA_TYPE_F32, 128)) << e.err.msg;
    const memra_backend_vt *vt = e.bh.vt;
    memra_buf *buf;
    ASSERT_EQ(MEMRA_OK, vt->buf_alloc(e.bh.be, 16, &buf));
    ASSERT_EQ(MEMRA_OK, vt->buf_upload(e.bh.be, buf, 8, &seed, 8));
    memra_tensor ids = {buf, 0, MEMRA_TYPE_I32, 0, 1, 1, 4},
                 rng = {buf, 8, MEMRA_TYPE_I64, 0, 1, 1, 8};
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, prompt, P - 1, 0, false, nullptr, &e.err));
    int32_t tok = prompt[P - 1];
    for (int32_t i = 0; i < N; ++i) {
      ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, &tok, 1, P - 1 + i, false, nullptr, &e.err));
      memra_tensor lg = e.c->logits;
      lg.ne1 = 1;
      ASSERT_EQ(MEMRA_OK, vt->sample(e.bh.be, &ids, &lg, &rng, &sp)) << vt->last_error(e.bh.be);
      ASSERT_EQ(MEMRA_OK, vt->buf_download(e.bh.be, buf, 0, &tok, 4));
      host.push_back(tok);
    }
    vt->buf_free(e.bh.be, buf);
  }
  {
    Engine e;
    ASSERT_TRUE(e.open(path, MEMRA_TYPE_F32, 128)) << e.err.msg;
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, prompt, P - 1, 0, false, nullptr, &e.err));
    memra_decoder d;
    int32_t pos = P - 1;
    ASSERT_EQ(MEMRA_OK, memra_decoder_init(&d, e.c, 1, &prompt[P - 1], &pos, true, &e.err));
    ASSERT_EQ(MEMRA_OK, memra_decoder_set_sampling(&d, &sp, seed, &e.err)) << e.err.msg;
    for (int32_t i = 0; i < N; ++i) {
      int32_t id;
      ASSERT_EQ(MEMRA_OK, memra_decoder_step(&d, &id, &e.err)) << e.err.msg;
      device.push_back(id);
    }
    memra_decoder_free(&d);
  }
  EXPECT_EQ(host, device);
  EXPECT_GT(std::set<int32_t>(host.begin(), host.end()).size(), 5u); // really sampled
}

// Lookahead (ABI 1.18 download_start / download_wait): each step queued before the previous
// step's token is read gives exactly the tokens of the plain loop, across the 256 bucket and page
// boundaries (the CPU plugin runs the steps eagerly; the GPU's graph gate covers replay and the
// wait at a new bucket's capture); the step queued past the last returned token leaves the KV
// cache as the next eval of that token would.
TEST_P(Decoder, LookaheadStepsMatchPlainSteps) {
  const std::string path = std::string("tests/e2e/fixtures/") + GetParam() + ".gguf";
  const int32_t P = 237, N = 41; // positions 236..277 cross the 256 bucket
  const std::vector<int32_t> prompt = lcg_prompt(P, 777);
  std::vector<int32_t> runs[2];
  std::vector<float> after[2]; // logits of one more eval after the decoder stopped
  for (int la = 0; la < 2; ++la) {
    Engine e;
    ASSERT_TRUE(e.open(path, MEMRA_TYPE_F16, 512)) << e.err.msg;
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, prompt.data(), P - 1, 0, false, nullptr, &e.err));
    memra_decoder d;
    int32_t pos = P - 1;
    ASSERT_EQ(MEMRA_OK, memra_decoder_init(&d, e.c, 1, &prompt[P - 1], &pos, true, &e.err));
    EXPECT_TRUE(memra_decoder_can_look_ahead(&d)); // no recurrent state, ABI 1.18 slots
    for (int32_t i = 0; i < N; ++i) {
      d.lookahead = la == 1; // on for every step: one step runs past the last
      int32_t id;
      ASSERT_EQ(MEMRA_OK, memra_decoder_step(&d, &id, &e.err)) << e.err.msg;
      runs[la].push_back(id);
      EXPECT_EQ(la, d.in_flight) << "step " << i; // the next step already queued
    }
    EXPECT_EQ(la == 1 ? N : 0, d.n_ahead);
    memra_decoder_free(&d);
    // the sequence goes on from the last returned token at its position
    std::vector<float> lg(e.m->hp.n_vocab);
    const int32_t last = runs[la].back(), at = P - 1 + N;
    ASSERT_EQ(MEMRA_OK, memra_ctx_eval(e.c, 0, &last, 1, at, false, lg.data(), &e.err));
    after[la] = lg;
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(0, memcmp(after[0].data(), after[1].data(), after[0].size() * sizeof(float)));
  if (std::string(GetParam()) != "tiny-qwen2") {
    EXPECT_GT(std::set<int32_t>(runs[0].begin(), runs[0].end()).size(), 2u);
  }
}

// The staging slots refuse what they cannot hold, by message, and hand over exactly the bytes.
TEST(DownloadSlots, CpuStartWaitAndRefusals) {
  Engine e;
  ASSERT_TRUE(e.open("tests/e2e/fixtures/tiny-llama.gguf", MEMRA_TYPE_F32, 64)) << e.err.msg;
  const memra_backend_vt *vt = e.bh.vt;
  memra_backend *be = e.bh.be;
  ASSERT_NE(nullptr, vt->download_start);
  memra_buf *buf;
  ASSERT_EQ(MEMRA_OK, vt->buf_alloc(be, 300, &buf));
  std::vector<uint8_t> src(300);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = (uint8_t)(i * 37 + 11);
  ASSERT_EQ(MEMRA_OK, vt->buf_upload(be, buf, 0, src.data(), src.size()));
  ASSERT_EQ(MEMRA_OK, vt->download_start(be, buf, 7, 13, 1));
  const uint8_t later[2] = {1, 2};
  ASSERT_EQ(MEMRA_OK, vt->buf_upload(be, buf, 7, later, 2)); // queued after the copy
  EXPECT_EQ(MEMRA_E_INVALID, vt->download_start(be, buf, 0, 4, 1));
  EXPECT_STREQ("download_start: slot 1 still holds a copy", vt->last_error(be));
  EXPECT_EQ(MEMRA_E_INVALID, vt->download_start(be, buf, 0, 4, MEMRA_STAGE_SLOTS));
  EXPECT_EQ(MEMRA_E_INVALID, vt->download_start(be, buf, 0, MEMRA_STAGE_BYTES + 1, 0));
  EXPECT_EQ(MEMRA_E_INVALID, vt->download_start(be, buf, 290, 13, 0));
  EXPECT_EQ(MEMRA_E_INVALID, vt->download_wait(be, 0, src.data(), 4));
  EXPECT_STREQ("download_wait: slot 0 holds no copy", vt->last_error(be));
  uint8_t out[13];
  EXPECT_EQ(MEMRA_E_INVALID, vt->download_wait(be, 1, out, 12));
  ASSERT_EQ(MEMRA_OK, vt->download_wait(be, 1, out, 13));
  EXPECT_EQ(0, memcmp(out, src.data() + 7, 13));
  EXPECT_EQ(MEMRA_E_INVALID, vt->download_wait(be, 1, out, 13)); // the slot is free again
  vt->buf_free(be, buf);
}

INSTANTIATE_TEST_SUITE_P(Archs, Decoder,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));
