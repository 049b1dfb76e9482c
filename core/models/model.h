/* model.h — a model loaded onto a backend: hyperparameters and weights.
 *
 * Families supported by this file set: llama (Llama 2/3/3.1 with rope_freqs, Mistral,
 * SmolLM), qwen2 (q/k/v bias) and qwen3 (per-head q/k RMSNorm) share one forward pass
 * (llama.c); what differs is read from the file as flags. gemma3 has its own (gemma3.c).
 * memra_ctx_forward dispatches by arch. */
#ifndef MEMRA_MODEL_H
#define MEMRA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/err.h"
#include "core/gguf/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum memra_arch {
  MEMRA_ARCH_LLAMA = 0,
  MEMRA_ARCH_QWEN2 = 1,
  MEMRA_ARCH_QWEN3 = 2,
  MEMRA_ARCH_GEMMA3 = 3,   /* gemma3.c: sliding-window layers, extra norms, GeGLU */
  MEMRA_ARCH_QWEN3MOE = 4, /* qwen3moe.c: qwen3 attention, routed experts (moe_ffn.c) */
  /* qwen3next.c: Gated DeltaNet + gated attention hybrids */
  MEMRA_ARCH_QWEN3NEXT = 5, /* routed + shared experts, grouped q/k -> v heads */
  MEMRA_ARCH_QWEN35 = 6,    /* dense FFN, tiled heads */
  MEMRA_ARCH_QWEN35MOE = 7, /* routed + shared experts, tiled heads */
} memra_arch;

#define MEMRA_SUPPORTED_ARCHS "llama, qwen2, qwen3, gemma3, qwen3moe, qwen3next, qwen35, qwen35moe"

typedef struct memra_hparams {
  memra_arch arch;
  char arch_name[32];
  int32_t n_vocab;
  int32_t n_ctx_train;
  int32_t n_embd;
  int32_t n_layer;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t n_ff;
  int32_t n_rot;     /* rotated dims per head */
  int32_t rope_mode; /* memra_rope_mode */
  float rope_base;
  float rope_scale; /* linear position scale: 1 / scaling.factor */
  float eps;
  /* gemma3 */
  int32_t n_swa;       /* sliding window of local layers in positions (0 = none) */
  int32_t swa_pattern; /* layer il is local iff il % swa_pattern < swa_pattern - 1 */
  float rope_base_swa; /* theta of local layers (no position scaling there) */
  float attn_scale;    /* score scale; 1/sqrt(head_dim) for the llama family */
  float embd_scale;    /* embeddings are multiplied by it (1 = none) */
  /* mixture of experts (0 experts: dense FFN) */
  int32_t n_expert;      /* routed experts per layer */
  int32_t n_expert_used; /* experts per token (top-k) */
  int32_t n_ff_exp;      /* FFN width of one expert */
  int32_t n_ff_shexp;    /* shared expert FFN width (0 = none) */
  /* hybrid (Gated DeltaNet) layers */
  int32_t ssm_conv;       /* K, conv width */
  int32_t ssm_head_dim;   /* d = d_k = d_v */
  int32_t ssm_k_heads;    /* H_k */
  int32_t ssm_v_heads;    /* H_v */
  uint64_t recurrent[64]; /* bit il: layer il is a GDN layer (block_count <= 4096) */
} memra_hparams;

/* Whether layer il is a recurrent (Gated DeltaNet) layer. */
static inline bool memra_hparams_layer_recurrent(const memra_hparams *hp, int il) {
  return (hp->recurrent[il / 64] >> (il % 64)) & 1u;
}
static inline bool memra_hparams_hybrid(const memra_hparams *hp) {
  return hp->arch == MEMRA_ARCH_QWEN3NEXT || hp->arch == MEMRA_ARCH_QWEN35 ||
         hp->arch == MEMRA_ARCH_QWEN35MOE;
}

/* Whether layer il of a gemma3 model attends through the sliding window. */
bool memra_hparams_layer_swa(const memra_hparams *hp, int il);

/* Reads and checks the hyperparameters of general.architecture. */
memra_status memra_hparams_read(const memra_gguf *g, memra_hparams *hp, memra_err *err);

typedef struct memra_layer {
  memra_tensor attn_norm;      /* F32 [n_embd] */
  memra_tensor wq, wk, wv, wo; /* wq [n_embd -> n_head*head_dim], GGUF block layout */
  memra_tensor bq, bk, bv;     /* qwen2: F32 biases; absent (buf NULL) otherwise */
  memra_tensor q_norm, k_norm; /* qwen3: F32 [head_dim]; absent otherwise */
  memra_tensor ffn_norm;       /* F32 [n_embd] */
  memra_tensor w_gate, w_up;   /* [n_embd -> n_ff] */
  memra_tensor w_down;         /* [n_ff -> n_embd] */
  /* gemma3: RMSNorm of the attention and FFN outputs before their residual adds */
  memra_tensor post_attn_norm, post_ffn_norm; /* F32 [n_embd]; absent otherwise */
  /* MoE: router [n_embd -> n_expert]; experts stacked [n_expert * n_ff_exp rows of n_embd]
   * (gate, up) and [n_expert * n_embd rows of n_ff_exp] (down), GGUF block layout */
  memra_tensor ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps;
  /* gate and up interleaved per expert at load ([n_expert * 2 n_ff_exp rows]: expert e's gate
   * rows, then its up rows), so one matmul_id computes both (model.c fuse_gate_up); buf NULL
   * when not fused, and when fused ffn_gate_exps / ffn_up_exps are absent (their bytes moved) */
  memra_tensor ffn_gate_up_exps;
  /* shared expert: gate logit [n_embd -> 1]; SwiGLU [n_embd -> n_ff_shexp -> n_embd] */
  memra_tensor ffn_gate_inp_shexp, ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
  /* the shared expert is expert n_expert of the gate, up and down stacks (model.c
   * stack_shexp): every token picks it as its (k+1)-th id, so the routed expert launches
   * compute it (with ABI 1.9 moe_combine_shexp); its own tensors above stay views of its rows */
  bool shexp_stacked;
  /* Gated DeltaNet: qkv [n_embd -> 2 H_k d + H_v d], z gate [n_embd -> H_v d];
   * beta/alpha [n_embd -> H_v] each (qwen3next's fused ssm_ba is split at load, v-head
   * order); conv F32 [C rows of K]; a_log, dt_bias F32 [H_v]; norm F32 [d]; out [H_v d ->
   * n_embd]. Gated attention layers use wq [n_embd -> 2 n_head head_dim] (q, gate per
   * head) and the usual wk, wv, wo, q_norm, k_norm. */
  memra_tensor ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_conv1d, ssm_a, ssm_dt, ssm_norm, ssm_out;
} memra_layer;

typedef struct memra_model {
  memra_hparams hp;
  const memra_backend_vt *vt; /* the backend the weights live on (not owned) */
  memra_backend *be;
  memra_buf *weights; /* one allocation holding every tensor */
  uint64_t weights_bytes;
  /* Weights one decode token reads: every matrix once, the token embedding one row (all of
   * it when it is also the output matrix), routed experts n_expert_used / n_expert of
   * theirs (uniform routing); the GGUF sizes, without the device alignment padding. */
  uint64_t step_weight_bytes;
  memra_tensor tok_embd;    /* [n_vocab rows of n_embd] */
  memra_tensor output_norm; /* F32 [n_embd] */
  memra_tensor output;      /* [n_vocab rows of n_embd]; tok_embd when tied */
  memra_tensor rope_freqs;  /* F32 [n_rot/2] (Llama 3.1); absent otherwise */
  memra_layer *layers;      /* [n_layer] */
} memra_model;

/* Called while weights upload: done and total bytes. */
typedef void (*memra_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Builds the model from an open GGUF and uploads its weights to the backend. */
memra_status memra_model_load(const memra_gguf *g, const memra_backend_vt *vt, memra_backend *be,
                              memra_progress_fn progress, void *user, memra_model **out,
                              memra_err *err);
void memra_model_free(memra_model *m);

#ifdef __cplusplus
}
#endif
#endif
