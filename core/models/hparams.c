#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/models/model.h"

static const struct {
  const char *name;
  memra_arch arch;
  int32_t rope_mode;
} ARCHS[] = {
    {"llama", MEMRA_ARCH_LLAMA, MEMRA_ROPE_NORM},
    {"qwen2", MEMRA_ARCH_QWEN2, MEMRA_ROPE_NEOX},
    {"qwen3", MEMRA_ARCH_QWEN3, MEMRA_ROPE_NEOX},
    {"gemma3", MEMRA_ARCH_GEMMA3, MEMRA_ROPE_NEOX},
    {"qwen3moe", MEMRA_ARCH_QWEN3MOE, MEMRA_ROPE_NEOX},
    {"qwen3next", MEMRA_ARCH_QWEN3NEXT, MEMRA_ROPE_NEOX},
    /* IMROPE in llama.cpp; for text every section sees the same position: NEOX */
    {"qwen35", MEMRA_ARCH_QWEN35, MEMRA_ROPE_NEOX},
    {"qwen35moe", MEMRA_ARCH_QWEN35MOE, MEMRA_ROPE_NEOX},
};

/* "<arch>.<suffix>" */
static const char *key(const memra_hparams *hp, const char *suffix, char *buf, size_t cap) {
  snprintf(buf, cap, "%s.%s", hp->arch_name, suffix);
  return buf;
}

static memra_status get_i32(const memra_gguf *g, const memra_hparams *hp, const char *suffix,
                            int32_t *out, int64_t dflt, int64_t lo, int64_t hi, memra_err *err) {
  char k[128];
  int64_t v;
  memra_status st = memra_gguf_get_i64(g, key(hp, suffix, k, sizeof k), &v, err);
  if (st == MEMRA_E_NOT_FOUND && dflt >= 0)
    v = dflt;
  else if (st == MEMRA_E_NOT_FOUND)
    return memra_errf(err, MEMRA_E_FORMAT, "missing key %s", k);
  else if (st != MEMRA_OK)
    return st;
  if (v < lo || v > hi)
    return memra_errf(err, MEMRA_E_FORMAT, "%s = %lld, expected %lld..%lld", k, (long long)v,
                      (long long)lo, (long long)hi);
  *out = (int32_t)v;
  return MEMRA_OK;
}

static memra_status get_f32(const memra_gguf *g, const memra_hparams *hp, const char *suffix,
                            float *out, float dflt, memra_err *err) {
  char k[128];
  memra_status st = memra_gguf_get_f32(g, key(hp, suffix, k, sizeof k), out, err);
  if (st == MEMRA_E_NOT_FOUND) {
    *out = dflt;
    return MEMRA_OK;
  }
  if (st == MEMRA_OK && !(*out == *out)) return memra_errf(err, MEMRA_E_FORMAT, "%s is NaN", k);
  return st;
}

/* Gemma 3 (llama.cpp src/llama-model.cpp, LLM_ARCH_GEMMA3): every 6th layer is global,
 * the others see a sliding window and use theta 10000 without position scaling;
 * embeddings are scaled by sqrt(n_embd); scores by 1/sqrt(head_dim), except the 27B (62
 * layers), whose query_pre_attn_scalar is n_embd / n_head. */
static memra_status gemma3_read(const memra_gguf *g, memra_hparams *hp, memra_err *err) {
  memra_status st = get_i32(g, hp, "attention.sliding_window", &hp->n_swa, 512, 1, 1 << 30, err);
  if (st) return st;
  hp->swa_pattern = 6;
  hp->rope_base_swa = 10000.0f;
  hp->embd_scale = sqrtf((float)hp->n_embd);
  hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                     : 1.0f / sqrtf((float)hp->head_dim);
  return MEMRA_OK;
}

/* Routed experts: count, top-k and per-expert FFN width. Softmax routing with top-k
 * renormalization is implied by the arch (llama.cpp writes no gating key for qwen). */
static memra_status moe_read(const memra_gguf *g, memra_hparams *hp, memra_err *err) {
  memra_status st;
  if ((st = get_i32(g, hp, "expert_count", &hp->n_expert, -1, 1, 4096, err)) ||
      (st = get_i32(g, hp, "expert_used_count", &hp->n_expert_used, -1, 1, hp->n_expert, err)) ||
      (st = get_i32(g, hp, "expert_feed_forward_length", &hp->n_ff_exp, -1, 1, 1 << 24, err)) ||
      (st = get_i32(g, hp, "expert_shared_feed_forward_length", &hp->n_ff_shexp, 0, 0, 1 << 24,
                    err)))
    return st;
  return MEMRA_OK;
}

/* Gated DeltaNet layers (llama.cpp src/models/qwen3next.cpp, qwen35.cpp): conv width,
 * head counts and dims, and which layers are recurrent (recurrent_layers, else every
 * layer but each full_attention_interval-th). MTP blocks (nextn) are not run. */
static memra_status hybrid_read(const memra_gguf *g, memra_hparams *hp, memra_err *err) {
  memra_status st;
  int32_t inner, nextn;
  if ((st = get_i32(g, hp, "ssm.conv_kernel", &hp->ssm_conv, -1, 1, 64, err)) ||
      (st = get_i32(g, hp, "ssm.state_size", &hp->ssm_head_dim, -1, 1, 512, err)) ||
      (st = get_i32(g, hp, "ssm.group_count", &hp->ssm_k_heads, -1, 1, 4096, err)) ||
      (st = get_i32(g, hp, "ssm.time_step_rank", &hp->ssm_v_heads, -1, 1, 4096, err)) ||
      (st = get_i32(g, hp, "ssm.inner_size", &inner, -1, 1, 1 << 24, err)) ||
      (st = get_i32(g, hp, "nextn_predict_layers", &nextn, 0, 0, hp->n_layer - 1, err)))
    return st;
  if (hp->ssm_v_heads % hp->ssm_k_heads || inner != hp->ssm_v_heads * hp->ssm_head_dim)
    return memra_errf(err, MEMRA_E_UNSUPPORTED,
                      "%s: ssm heads H_k %d, H_v %d, d %d, inner %d (need H_v a multiple of "
                      "H_k and inner = H_v * d)",
                      hp->arch_name, hp->ssm_k_heads, hp->ssm_v_heads, hp->ssm_head_dim, inner);
  hp->n_layer -= nextn;
  char k[128];
  uint64_t n = 0;
  const memra_gguf_kv *kv = NULL;
  st = memra_gguf_get_arr(g, key(hp, "attention.recurrent_layers", k, sizeof k), MEMRA_GGUF_BOOL,
                          &n, &kv, err);
  if (st == MEMRA_OK) {
    if (n < (uint64_t)hp->n_layer)
      return memra_errf(err, MEMRA_E_FORMAT, "%s has %llu entries for %d layers", k,
                        (unsigned long long)n, hp->n_layer);
    for (int il = 0; il < hp->n_layer; ++il)
      if (memra_gguf_arr_i64(kv, (uint64_t)il)) hp->recurrent[il / 64] |= 1ull << (il % 64);
    return MEMRA_OK;
  }
  if (st != MEMRA_E_NOT_FOUND) return st;
  int32_t interval;
  if ((st = get_i32(g, hp, "full_attention_interval", &interval, 4, 1, 4096, err))) return st;
  for (int il = 0; il < hp->n_layer; ++il)
    if ((il + 1) % interval != 0) hp->recurrent[il / 64] |= 1ull << (il % 64);
  return MEMRA_OK;
}

memra_status memra_hparams_read(const memra_gguf *g, memra_hparams *hp, memra_err *err) {
  memset(hp, 0, sizeof *hp);
  memra_str arch;
  memra_status st = memra_gguf_get_str(g, "general.architecture", &arch, err);
  if (st == MEMRA_E_NOT_FOUND)
    return memra_errf(err, MEMRA_E_FORMAT, "missing key general.architecture");
  if (st != MEMRA_OK) return st;
  size_t i = 0;
  for (; i < sizeof ARCHS / sizeof ARCHS[0]; ++i)
    if (memra_str_eq(arch, ARCHS[i].name)) break;
  if (i == sizeof ARCHS / sizeof ARCHS[0])
    return memra_errf(err, MEMRA_E_UNSUPPORTED,
                      "architecture '%.*s' is not supported (supported: " MEMRA_SUPPORTED_ARCHS ")",
                      (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
  hp->arch = ARCHS[i].arch;
  snprintf(hp->arch_name, sizeof hp->arch_name, "%s", ARCHS[i].name);
  hp->rope_mode = ARCHS[i].rope_mode;

  const int64_t BIG = 1 << 24;
  if ((st = get_i32(g, hp, "embedding_length", &hp->n_embd, -1, 1, BIG, err))) return st;
  if ((st = get_i32(g, hp, "block_count", &hp->n_layer, -1, 1, 4096, err))) return st;
  const bool moe_arch = hp->arch == MEMRA_ARCH_QWEN3MOE || hp->arch == MEMRA_ARCH_QWEN3NEXT ||
                        hp->arch == MEMRA_ARCH_QWEN35MOE;
  if ((st = get_i32(g, hp, "feed_forward_length", &hp->n_ff, moe_arch ? 0 : -1, moe_arch ? 0 : 1,
                    BIG, err)))
    return st;
  if ((st = get_i32(g, hp, "attention.head_count", &hp->n_head, -1, 1, 4096, err))) return st;
  if ((st = get_i32(g, hp, "attention.head_count_kv", &hp->n_head_kv, hp->n_head, 1, hp->n_head,
                    err)))
    return st;
  if (hp->n_head % hp->n_head_kv != 0)
    return memra_errf(err, MEMRA_E_FORMAT,
                      "%s.attention.head_count %d is not a multiple of "
                      "head_count_kv %d",
                      hp->arch_name, hp->n_head, hp->n_head_kv);
  if ((st = get_i32(g, hp, "attention.key_length", &hp->head_dim, hp->n_embd / hp->n_head, 2, 4096,
                    err)))
    return st;
  int32_t v_len;
  if ((st = get_i32(g, hp, "attention.value_length", &v_len, hp->head_dim, 1, 4096, err)))
    return st;
  if (v_len != hp->head_dim)
    return memra_errf(err, MEMRA_E_UNSUPPORTED,
                      "%s.attention.value_length %d differs from "
                      "key_length %d",
                      hp->arch_name, v_len, hp->head_dim);
  if ((st = get_i32(g, hp, "context_length", &hp->n_ctx_train, 4096, 1, 1 << 30, err))) return st;
  if ((st = get_i32(g, hp, "rope.dimension_count", &hp->n_rot, hp->head_dim, 2, hp->head_dim, err)))
    return st;
  if (hp->n_rot % 2)
    return memra_errf(err, MEMRA_E_FORMAT, "rope.dimension_count %d is odd", hp->n_rot);
  if ((st = get_f32(g, hp, "attention.layer_norm_rms_epsilon", &hp->eps, 1e-5f, err))) return st;
  if ((st = get_f32(g, hp, "rope.freq_base", &hp->rope_base, 10000.0f, err))) return st;
  float factor = 1.0f;
  char k[128];
  memra_str stype;
  if (memra_gguf_get_str(g, key(hp, "rope.scaling.type", k, sizeof k), &stype, NULL) == MEMRA_OK &&
      memra_str_eq(stype, "linear")) {
    if ((st = get_f32(g, hp, "rope.scaling.factor", &factor, 1.0f, err))) return st;
    if (!(factor > 0)) return memra_errf(err, MEMRA_E_FORMAT, "rope.scaling.factor must be > 0");
  }
  hp->rope_scale = 1.0f / factor;
  if (!(hp->eps > 0) || !(hp->rope_base > 0))
    return memra_errf(err, MEMRA_E_FORMAT, "%s: rms epsilon and rope freq_base must be > 0",
                      hp->arch_name);
  hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
  hp->embd_scale = 1.0f;
  if (hp->arch == MEMRA_ARCH_GEMMA3 && (st = gemma3_read(g, hp, err))) return st;
  if ((hp->arch == MEMRA_ARCH_QWEN3MOE || hp->arch == MEMRA_ARCH_QWEN3NEXT ||
       hp->arch == MEMRA_ARCH_QWEN35MOE) &&
      (st = moe_read(g, hp, err)))
    return st;
  if (memra_hparams_hybrid(hp) && (st = hybrid_read(g, hp, err))) return st;
  hp->n_vocab = 0; /* from token_embd at load */
  return MEMRA_OK;
}

bool memra_hparams_layer_swa(const memra_hparams *hp, int il) {
  return hp->n_swa > 0 && hp->swa_pattern > 0 && il % hp->swa_pattern < hp->swa_pattern - 1;
}
