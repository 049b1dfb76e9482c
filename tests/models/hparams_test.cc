// Hyperparameters: each supported family read from a GGUF our writer makes; an unknown
// architecture or a nonsensical value is one clear error.
extern "C" {
#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/models/model.h"
}
#include <gtest/gtest.h>

#include <string>

struct Built {
  uint8_t *bytes = nullptr;
  uint64_t size = 0;
  memra_gguf *g = nullptr;
  ~Built() {
    memra_gguf_close(g);
    memra_free(bytes);
  }
};

// A metadata-only GGUF of architecture arch with n_head_kv (0: key left out).
static void build(Built &b, const char *arch, uint32_t n_head_kv, float eps = 1e-6f) {
  memra_gguf_writer *w = memra_gguf_writer_new(0);
  std::string a = arch;
  memra_gguf_writer_set_str(w, "general.architecture", arch);
  memra_gguf_writer_set_u32(w, (a + ".embedding_length").c_str(), 96);
  memra_gguf_writer_set_u32(w, (a + ".block_count").c_str(), 3);
  memra_gguf_writer_set_u32(w, (a + ".feed_forward_length").c_str(), 160);
  memra_gguf_writer_set_u32(w, (a + ".attention.head_count").c_str(), 6);
  if (n_head_kv) memra_gguf_writer_set_u32(w, (a + ".attention.head_count_kv").c_str(), n_head_kv);
  memra_gguf_writer_set_f32(w, (a + ".attention.layer_norm_rms_epsilon").c_str(), eps);
  memra_gguf_writer_set_f32(w, (a + ".rope.freq_base").c_str(), 5e5f);
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_gguf_writer_to_memory(w, &b.bytes, &b.size, &err)) << err.msg;
  memra_gguf_writer_free(w);
  ASSERT_EQ(MEMRA_OK, memra_gguf_open_memory(b.bytes, b.size, "t.gguf", &b.g, &err)) << err.msg;
}

TEST(Hparams, ReadsEachFamilyWithDefaults) {
  const struct {
    const char *arch;
    int mode;
  } cases[] = {{"llama", MEMRA_ROPE_NORM}, {"qwen2", MEMRA_ROPE_NEOX}, {"qwen3", MEMRA_ROPE_NEOX}};
  for (auto c : cases) {
    Built b;
    build(b, c.arch, 2);
    memra_hparams hp;
    memra_err err = {};
    ASSERT_EQ(MEMRA_OK, memra_hparams_read(b.g, &hp, &err)) << err.msg;
    EXPECT_STREQ(c.arch, hp.arch_name);
    EXPECT_EQ(c.mode, hp.rope_mode);
    EXPECT_EQ(96, hp.n_embd);
    EXPECT_EQ(3, hp.n_layer);
    EXPECT_EQ(6, hp.n_head);
    EXPECT_EQ(2, hp.n_head_kv);
    EXPECT_EQ(16, hp.head_dim); // embedding / heads when key_length is absent
    EXPECT_EQ(16, hp.n_rot);
    EXPECT_FLOAT_EQ(1e-6f, hp.eps);
    EXPECT_FLOAT_EQ(5e5f, hp.rope_base);
    EXPECT_FLOAT_EQ(1.0f, hp.rope_scale);
  }
  Built b;
  build(b, "llama", 0);
  memra_hparams hp;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK, memra_hparams_read(b.g, &hp, &err));
  EXPECT_EQ(6, hp.n_head_kv); // defaults to head_count
}

TEST(Hparams, UnknownArchitectureListsTheSupportedOnes) {
  Built b;
  build(b, "mamba", 2);
  memra_hparams hp;
  memra_err err = {};
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, memra_hparams_read(b.g, &hp, &err));
  EXPECT_STREQ("architecture 'mamba' is not supported (supported: llama, qwen2, qwen3, gemma3, "
               "qwen3moe, qwen3next, qwen35, qwen35moe)",
               err.msg);
}

TEST(Hparams, BadValuesAreNamed) {
  {
    Built b;
    build(b, "qwen3", 4); // 6 heads are not a multiple of 4 KV heads
    memra_hparams hp;
    memra_err err = {};
    EXPECT_EQ(MEMRA_E_FORMAT, memra_hparams_read(b.g, &hp, &err));
    EXPECT_STREQ("qwen3.attention.head_count 6 is not a multiple of head_count_kv 4", err.msg);
  }
  {
    Built b;
    build(b, "llama", 7); // more KV heads than heads
    memra_hparams hp;
    memra_err err = {};
    EXPECT_EQ(MEMRA_E_FORMAT, memra_hparams_read(b.g, &hp, &err));
    EXPECT_STREQ("llama.attention.head_count_kv = 7, expected 1..6", err.msg);
  }
  {
    Built b;
    build(b, "llama", 2, -1.0f);
    memra_hparams hp;
    memra_err err = {};
    EXPECT_EQ(MEMRA_E_FORMAT, memra_hparams_read(b.g, &hp, &err));
    EXPECT_STREQ("llama: rms epsilon and rope freq_base must be > 0", err.msg);
  }
}
