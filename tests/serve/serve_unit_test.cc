// Unit tests of the serving core: stop strings against a brute-force reference, logprobs
// against a double-precision reference, the Prometheus text and request validation.
extern "C" {
#include "core/base/alloc.h"
#include "core/serve/logprob.h"
#include "core/serve/metrics.h"
#include "core/serve/stop.h"
#include "tools/serve/parse.h"
}
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// What the client must see: after each chunk, if any stop string occurs in the text so
// far, the text up to the earliest such occurrence, and nothing more ever.
std::string reference_visible(const std::vector<std::string> &chunks,
                              const std::vector<std::string> &stops, bool *hit) {
  std::string text;
  *hit = false;
  for (const auto &c : chunks) {
    text += c;
    size_t first = std::string::npos;
    for (const auto &s : stops)
      first = std::min(first, text.find(s));
    if (first != std::string::npos) {
      *hit = true;
      return text.substr(0, first);
    }
  }
  return text;
}

TEST(Stop, RandomChunksMatchReference) {
  std::mt19937 rng(20261129);
  const char alpha[] = "abc";
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops;
    char stop_buf[4][256] = {};
    int n_stop = 1 + (int)(rng() % 4);
    for (int s = 0; s < n_stop; ++s) {
      int L = 1 + (int)(rng() % 4);
      std::string st;
      for (int k = 0; k < L; ++k)
        st += alpha[rng() % 3];
      stops.push_back(st);
      memcpy(stop_buf[s], st.c_str(), st.size() + 1);
    }
    std::vector<std::string> chunks;
    int n_chunks = 1 + (int)(rng() % 9);
    for (int c = 0; c < n_chunks; ++c) {
      std::string ch;
      int L = (int)(rng() % 3); // empty chunks too: a token can complete no text
      for (int k = 0; k < L; ++k)
        ch += alpha[rng() % 3];
      chunks.push_back(ch);
    }
    bool want_hit;
    std::string want = reference_visible(chunks, stops, &want_hit);
    std::string text, shown;
    size_t released = 0;
    bool hit = false;
    for (size_t c = 0; c < chunks.size() && !hit; ++c) {
      text += chunks[c];
      bool last = c + 1 == chunks.size();
      size_t upto =
          memra_serve_stop_scan(text.data(), text.size(), released, stop_buf, n_stop, &hit);
      if (last && !hit) upto = text.size();
      ASSERT_GE(upto, released) << "iteration " << iter;
      shown += text.substr(released, upto - released);
      released = upto;
      ASSERT_EQ(0u, want.find(shown)) << "released text not a prefix of the answer, iter " << iter;
    }
    EXPECT_EQ(want_hit, hit) << "iteration " << iter;
    EXPECT_EQ(want, shown) << "iteration " << iter;
  }
}

TEST(Stop, HoldsBackOnlyPossiblePrefixes) {
  char stops[2][256] = {"</end>", "STOP"};
  bool hit;
  const char *t = "hello </e";
  EXPECT_EQ(6u, memra_serve_stop_scan(t, strlen(t), 0, stops, 2, &hit));
  EXPECT_FALSE(hit);
  t = "hello ST";
  EXPECT_EQ(6u, memra_serve_stop_scan(t, strlen(t), 0, stops, 2, &hit));
  t = "a STOP b </end>";
  EXPECT_EQ(2u, memra_serve_stop_scan(t, strlen(t), 0, stops, 2, &hit));
  EXPECT_TRUE(hit);
  t = "no stops here";
  EXPECT_EQ(strlen(t), memra_serve_stop_scan(t, strlen(t), 3, stops, 2, &hit));
  EXPECT_EQ(strlen(t), memra_serve_stop_scan(t, strlen(t), 0, stops, 0, &hit));
}

TEST(Logprob, MatchesDoubleReference) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int n_vocab : {1, 7, 31, 1001, 49152}) {
    std::vector<float> lg(n_vocab);
    for (auto &v : lg)
      v = nd(rng);
    if (n_vocab > 10) lg[3] = lg[9] = 50.f; // a tie at the top: lower id first
    double mx = *std::max_element(lg.begin(), lg.end()), sum = 0;
    for (float v : lg)
      sum += std::exp((double)v - mx);
    double lse = mx + std::log(sum);
    for (int n_top : {0, 1, 5, 20}) {
      memra_tok_rec rec = {};
      rec.id = n_vocab / 2;
      memra_logprobs_fill(lg.data(), n_vocab, n_top, &rec);
      EXPECT_NEAR(lg[rec.id] - lse, rec.logprob, 1e-5) << n_vocab;
      std::vector<int> order(n_vocab);
      for (int i = 0; i < n_vocab; ++i)
        order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return lg[a] > lg[b]; });
      int want_n = std::min(n_top, n_vocab);
      ASSERT_EQ(want_n, rec.n_top);
      for (int j = 0; j < want_n; ++j) {
        EXPECT_EQ(order[j], rec.top_id[j]) << "n_vocab " << n_vocab << " rank " << j;
        EXPECT_NEAR(lg[order[j]] - lse, rec.top_lp[j], 1e-5);
      }
    }
  }
}

TEST(Metrics, PrometheusText) {
  memra_metrics m;
  memra_metrics_init(&m);
  memra_metrics_request(&m, 200);
  memra_metrics_request(&m, 200);
  memra_metrics_request(&m, 400);
  memra_metrics_request(&m, 429);
  memra_metrics_request(&m, 503);
  memra_metrics_request(&m, 500);
  m.kv_blocks_in_use = 17;
  memra_hist_add(&m.ttft, 0.003);
  memra_hist_add(&m.ttft, 0.2);
  memra_hist_add(&m.ttft, 99);
  size_t need = memra_metrics_render(&m, nullptr, 0);
  std::string buf(need + 1, '\0');
  ASSERT_EQ(need, memra_metrics_render(&m, &buf[0], buf.size()));
  buf.resize(need);
  for (const char *line :
       {"memra_requests_total{outcome=\"ok\"} 2\n",
        "memra_requests_total{outcome=\"rejected\"} 2\n",
        "memra_requests_total{outcome=\"client_error\"} 1\n",
        "memra_requests_total{outcome=\"server_error\"} 1\n", "memra_kv_blocks_in_use 17\n",
        "memra_time_to_first_token_seconds_bucket{le=\"0.0025\"} 0\n",
        "memra_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n",
        "memra_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n",
        "memra_time_to_first_token_seconds_bucket{le=\"30\"} 2\n",
        "memra_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n",
        "memra_time_to_first_token_seconds_count 3\n", "# TYPE memra_queue_depth gauge\n"})
    EXPECT_NE(std::string::npos, buf.find(line)) << line;
  memra_metrics_destroy(&m);
}

TEST(Parse, FieldsAndErrors) {
  memra_api_req r;
  memra_err err = {};
  const char *ok =
      "{\"prompt\":[5,17,4000],\"max_tokens\":9,\"temperature\":0.25,\"top_k\":3,\"top_p\":0.5,"
      "\"seed\":-3,\"stop\":[\"x\",\"yz\"],\"logprobs\":2,\"stream\":true,\"n\":1}";
  ASSERT_EQ(MEMRA_OK, memra_api_parse(MEMRA_API_COMPLETION, ok, strlen(ok), 4001, &r, &err))
      << err.msg;
  EXPECT_EQ(3, r.n_prompt_ids);
  EXPECT_EQ(4000, r.prompt_ids[2]);
  EXPECT_EQ(9, r.gp.max_tokens);
  EXPECT_FLOAT_EQ(0.25f, r.gp.sp.temperature);
  EXPECT_EQ(3, r.gp.sp.top_k);
  EXPECT_EQ((uint64_t)(int64_t)-3, r.gp.sp.seed);
  EXPECT_EQ(2, r.gp.n_stop);
  EXPECT_STREQ("yz", r.gp.stop[1]);
  EXPECT_EQ(2, r.gp.n_logprobs);
  EXPECT_TRUE(r.stream);
  memra_api_req_free(&r);
  struct {
    memra_api_kind kind;
    const char *body, *msg;
  } bad[] = {
      {MEMRA_API_COMPLETION, "{\"prompt\":[4001]}",
       "'prompt'[0]: token id 4001 out of range 0..4000"},
      {MEMRA_API_COMPLETION, "{\"prompt\":\"a\",\"n\":3}", "'n': only n=1 is supported"},
      {MEMRA_API_COMPLETION, "{\"prompt\":\"a\",\"max_tokens\":1e300}",
       "'max_tokens' must be between 1"},
      {MEMRA_API_CHAT, "{\"messages\":[{\"role\":\"user\"}]}",
       "'messages'[0].content must be a string"},
      {MEMRA_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}",
       "unknown field 'echo'"},
      {MEMRA_API_COMPLETION, "{\"prompt\":\"a\"", "invalid JSON at byte"},
      /* names from the body shown as one line of ASCII (the fuzzer's second finding) */
      {MEMRA_API_COMPLETION, "{\"prompt\":\"a\",\"a\\nb\":1}", "unknown field 'a\\x0ab'"},
      {MEMRA_API_CHAT, "{\"messages\":[{\"role\":\"us\\u00e9r\",\"content\":\"x\"}]}",
       "'messages'[0].role 'us\\xc3\\xa9r': expected"},
  };
  for (const auto &b : bad) {
    EXPECT_EQ(MEMRA_E_INVALID, memra_api_parse(b.kind, b.body, strlen(b.body), 4001, &r, &err))
        << b.body;
    EXPECT_NE(nullptr, strstr(err.msg, b.msg)) << b.body << " -> " << err.msg;
    EXPECT_EQ(nullptr, strchr(err.msg, '\n')) << b.body;
    /* a rejected body leaves nothing to free (the fuzzer's first finding: the JSON tree) */
    EXPECT_EQ(nullptr, r.root) << b.body;
    EXPECT_EQ(nullptr, r.prompt_ids) << b.body;
    EXPECT_EQ(nullptr, r.msgs) << b.body;
    memra_api_req_free(&r); /* and freeing the zeroed request is harmless */
  }
}

} // namespace
