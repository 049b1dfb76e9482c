// memra_ctx_step_bytes (the bytes behind memra bench's decode floor) against the same
// quantities recomputed here from the GGUF's tensor table and the hyperparameters: a dense
// llama, a Qwen3-MoE (routed experts count their n_expert_used / n_expert share) and a
// Qwen3-Next hybrid (recurrent layers: state in and out, no KV), F16 and F32 caches.
#include "tests/e2e/engine_fixture.h"

extern "C" {
#include "core/models/traffic.h"
}

static bool ends_with(memra_str s, const char *suf) {
  const size_t n = strlen(suf);
  return s.len >= n && !memcmp(s.ptr + s.len - n, suf, n);
}

// Weights: every tensor's bytes, the token embedding one row when output.weight exists.
static double weights_expected(const memra_gguf *g, const memra_hparams &hp) {
  const bool tied = !memra_gguf_tensor_find(g, "output.weight");
  double b = 0;
  for (uint64_t i = 0; i < memra_gguf_n_tensors(g); ++i) {
    const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
    if (memra_str_eq(t->name, "token_embd.weight") && !tied)
      b += (double)memra_type_row_bytes(t->type, t->ne[0]);
    else if (hp.n_expert > 0 && ends_with(t->name, "_exps.weight"))
      b += (double)t->nbytes * hp.n_expert_used / hp.n_expert;
    else
      b += (double)t->nbytes;
  }
  return b;
}

static void check(const char *file, int32_t kv_type) {
  Engine e;
  ASSERT_TRUE(e.open(file, kv_type, 64)) << e.err.msg;
  const memra_hparams &hp = e.m->hp;
  const double w = weights_expected(e.g, hp);
  EXPECT_NEAR((double)e.m->step_weight_bytes, w, 1.0) << file;
  EXPECT_LT(e.m->step_weight_bytes, e.m->weights_bytes) << file;
  const uint64_t esz = kv_type == MEMRA_TYPE_F32 ? 4 : 2;
  uint64_t kv = 0, state = 0;
  int n_rec = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (memra_hparams_layer_recurrent(&hp, il)) {
      const uint64_t d = hp.ssm_head_dim,
                     C = 2 * (uint64_t)hp.ssm_k_heads * d + (uint64_t)hp.ssm_v_heads * d;
      state += 2 * 4 * ((uint64_t)(hp.ssm_conv - 1) * C + (uint64_t)hp.ssm_v_heads * d * d);
      ++n_rec;
    } else {
      kv += 2 * esz * (uint64_t)hp.n_head_kv * hp.head_dim;
    }
  }
  for (int64_t n : {1, 7, 33}) {
    const double got = (double)memra_ctx_step_bytes(e.c, n);
    EXPECT_NEAR(got, w + (double)state + (double)kv * (double)n, 1.0)
        << file << " attending to " << n << " positions";
  }
  printf("%s kv %s: weights %.0f B of %llu loaded, KV %llu B a position, state %llu B (%d "
         "recurrent layers)\n",
         file, kv_type == MEMRA_TYPE_F32 ? "f32" : "f16", w, (unsigned long long)e.m->weights_bytes,
         (unsigned long long)kv, (unsigned long long)state, n_rec);
}

TEST(Traffic, DenseLlama) {
  check("tests/e2e/fixtures/tiny-llama.gguf", MEMRA_TYPE_F16);
  check("tests/e2e/fixtures/tiny-llama.gguf", MEMRA_TYPE_F32);
}

TEST(Traffic, MoeCountsTheRoutedShare) {
  check("tests/families/fixtures/qwen3moe.gguf", MEMRA_TYPE_F16);
  Engine e;
  ASSERT_TRUE(e.open("tests/families/fixtures/qwen3moe.gguf", MEMRA_TYPE_F16, 64)) << e.err.msg;
  ASSERT_GT(e.m->hp.n_expert, e.m->hp.n_expert_used);
  // the experts' full bytes are loaded but only their share is read per token
  EXPECT_LT((double)e.m->step_weight_bytes, 0.9 * (double)e.m->weights_bytes);
}

TEST(Traffic, HybridCountsStateNotKv) {
  check("tests/families/fixtures/qwen3next.gguf", MEMRA_TYPE_F16);
  check("tests/families/fixtures/qwen3next.gguf", MEMRA_TYPE_F32);
}
