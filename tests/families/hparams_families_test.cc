// Hyperparameters of the non-dense families read from metadata-only GGUFs our writer
// makes: gemma3's window pattern and scales, the MoE keys, the hybrid ssm keys and which
// layers are recurrent (explicit list or interval fallback, MTP blocks dropped), and the
// one-line errors of inconsistent files.
extern "C" {
#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/models/model.h"
}
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

namespace {

struct Built {
  uint8_t *bytes = nullptr;
  uint64_t size = 0;
  memra_gguf *g = nullptr;
  ~Built() {
    memra_gguf_close(g);
    memra_free(bytes);
  }
};

using Extra = std::function<void(memra_gguf_writer *, const std::string &)>;

void build(Built &b, const char *arch, const Extra &extra, bool ffn = true) {
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  std::string a = arch;
  memra_gguf_writer_set_str(w, "general.architecture", arch);
  memra_gguf_writer_set_u32(w, (a + ".embedding_length").c_str(), 640);
  memra_gguf_writer_set_u32(w, (a + ".block_count").c_str(), 18);
  if (ffn) memra_gguf_writer_set_u32(w, (a + ".feed_forward_length").c_str(), 2048);
  memra_gguf_writer_set_u32(w, (a + ".attention.head_count").c_str(), 4);
  memra_gguf_writer_set_u32(w, (a + ".attention.head_count_kv").c_str(), 1);
  memra_gguf_writer_set_u32(w, (a + ".attention.key_length").c_str(), 256);
  extra(w, a);
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(w, &b.bytes, &b.size, &err)) << err.msg;
  memra_gguf_writer_free(w);
  ASSERT_EQ(MEMRA_OK, memra_gguf_open_memory(b.bytes, b.size, "t.gguf", &b.g, &err)) << err.msg;
}

void moe_keys(memra_gguf_writer *w, const std::string &a) {
  memra_gguf_writer_set_u32(w, (a + ".expert_count").c_str(), 64);
  memra_gguf_writer_set_u32(w, (a + ".expert_used_count").c_str(), 6);
  memra_gguf_writer_set_u32(w, (a + ".expert_feed_forward_length").c_str(), 96);
}

void ssm_keys(memra_gguf_writer *w, const std::string &a, uint32_t hv) {
  memra_gguf_writer_set_u32(w, (a + ".ssm.conv_kernel").c_str(), 4);
  memra_gguf_writer_set_u32(w, (a + ".ssm.state_size").c_str(), 32);
  memra_gguf_writer_set_u32(w, (a + ".ssm.group_count").c_str(), 2);
  memra_gguf_writer_set_u32(w, (a + ".ssm.time_step_rank").c_str(), hv);
  memra_gguf_writer_set_u32(w, (a + ".ssm.inner_size").c_str(), 32 * hv);
}

TEST(FamilyHparams, Gemma3WindowPatternAndScales) {
  Built b;
  build(b, "gemma3", [](memra_gguf_writer *w, const std::string &a) {
    memra_gguf_writer_set_u32(w, (a + ".attention.sliding_window").c_str(), 512);
  });
  memra_hparams hp;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_hparams_read(b.g, &hp, &err)) << err.msg;
  EXPECT_EQ(MEMRA_ARCH_GEMMA3, hp.arch);
  EXPECT_EQ(512, hp.n_swa);
  for (int il = 0; il < 18; ++il)
    EXPECT_EQ(il % 6 != 5, memra_hparams_layer_swa(&hp, il)) << "layer " << il;
  EXPECT_FLOAT_EQ(1.0f / 16, hp.attn_scale);
  EXPECT_FLOAT_EQ(std::sqrt(640.0f), hp.embd_scale);
  EXPECT_FLOAT_EQ(10000.0f, hp.rope_base_swa);
}

TEST(FamilyHparams, Qwen3MoeNeedsExpertKeys) {
  Built b;
  build(b, "qwen3moe", [](memra_gguf_writer *, const std::string &) {});
  memra_hparams hp;
  memra_err err = {};
  EXPECT_EQ(MEMRA_E_FORMAT, memra_hparams_read(b.g, &hp, &err));
  EXPECT_STREQ("missing key qwen3moe.expert_count", err.msg);
  Built ok;
  build(ok, "qwen3moe", moe_keys);
  ASSERT_EQ(MEMRA_OK, memra_hparams_read(ok.g, &hp, &err)) << err.msg;
  EXPECT_EQ(64, hp.n_expert);
  EXPECT_EQ(6, hp.n_expert_used);
  EXPECT_EQ(96, hp.n_ff_exp);
  EXPECT_EQ(0, hp.n_ff_shexp);
}

TEST(FamilyHparams, HybridRecurrentLayersFromListOrInterval) {
  Built list;
  build(
      list, "qwen35moe",
      [](memra_gguf_writer *w, const std::string &a) {
        moe_keys(w, a);
        ssm_keys(w, a, 6);
        memra_gguf_writer_set_u32(w, (a + ".expert_shared_feed_forward_length").c_str(), 80);
        memra_gguf_writer_set_u32(w, (a + ".nextn_predict_layers").c_str(), 1);
        bool rec[18];
        for (int i = 0; i < 18; ++i)
          rec[i] = i % 3 != 1;
        memra_gguf_writer_set_arr(w, (a + ".attention.recurrent_layers").c_str(), MEMRA_GGUF_BOOL,
                                  rec, 18);
      },
      /*ffn=*/false);
  memra_hparams hp;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_hparams_read(list.g, &hp, &err)) << err.msg;
  EXPECT_EQ(17, hp.n_layer) << "the MTP block is not part of the trunk";
  EXPECT_EQ(0, hp.n_ff);
  EXPECT_EQ(80, hp.n_ff_shexp);
  EXPECT_EQ(6, hp.ssm_v_heads);
  EXPECT_EQ(32, hp.ssm_head_dim);
  for (int il = 0; il < 17; ++il)
    EXPECT_EQ(il % 3 != 1, memra_hparams_layer_recurrent(&hp, il)) << "layer " << il;

  Built iv;
  build(iv, "qwen35", [](memra_gguf_writer *w, const std::string &a) {
    ssm_keys(w, a, 4);
    memra_gguf_writer_set_u32(w, (a + ".full_attention_interval").c_str(), 4);
  });
  ASSERT_EQ(MEMRA_OK, memra_hparams_read(iv.g, &hp, &err)) << err.msg;
  for (int il = 0; il < 18; ++il)
    EXPECT_EQ((il + 1) % 4 != 0, memra_hparams_layer_recurrent(&hp, il)) << "layer " << il;
}

TEST(FamilyHparams, HybridInconsistentFilesAreRefused) {
  Built heads;
  build(heads, "qwen3next", [](memra_gguf_writer *w, const std::string &a) {
    moe_keys(w, a);
    ssm_keys(w, a, 5);
  });
  memra_hparams hp;
  memra_err err = {};
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, memra_hparams_read(heads.g, &hp, &err));
  EXPECT_STREQ("qwen3next: ssm heads H_k 2, H_v 5, d 32, inner 160 (need H_v a multiple of H_k "
               "and inner = H_v * d)",
               err.msg);
  Built shortlist;
  build(shortlist, "qwen3next", [](memra_gguf_writer *w, const std::string &a) {
    moe_keys(w, a);
    ssm_keys(w, a, 4);
    bool rec[3] = {true, true, false};
    memra_gguf_writer_set_arr(w, (a + ".attention.recurrent_layers").c_str(), MEMRA_GGUF_BOOL, rec,
                              3);
  });
  EXPECT_EQ(MEMRA_E_FORMAT, memra_hparams_read(shortlist.g, &hp, &err));
  EXPECT_STREQ("qwen3next.attention.recurrent_layers has 3 entries for 18 layers", err.msg);
}

} // namespace
