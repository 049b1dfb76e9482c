/* context.h — the run state of a model: paged KV cache, activations and the device
 * copies of the step state (token ids, positions, sequences, block tables). */
#ifndef MEMRA_CONTEXT_H
#define MEMRA_CONTEXT_H

#include "core/models/model.h"
#include "core/sched/kv_pages.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct memra_ctx_params {
  int32_t n_ctx;      /* positions per sequence */
  int32_t n_seq_max;  /* sequences held at once */
  int32_t n_ubatch;   /* rows per forward call */
  int32_t block_size; /* KV positions per page */
  int32_t kv_type;    /* MEMRA_TYPE_F16 (default) or MEMRA_TYPE_F32 */
} memra_ctx_params;

memra_ctx_params memra_ctx_defaults(void);

typedef struct memra_ctx {
  memra_model *m;
  memra_ctx_params p;
  memra_kv_pages pages;
  memra_buf *kv_buf;
  memra_tensor *k_cache, *v_cache; /* [n_layer], each [n_pages * block_size, n_kv * d] */
  memra_buf *act_buf;
  /* activations, n_ubatch rows each */
  memra_tensor x, xn, q, k, v, attn, proj, gate, up;
  /* 16-bit gemm operands when the plugin has gemm_x_type (ABI 1.6): prompt-only steps have
   * rmsnorm write the projections' x into op16 [n_ubatch, n_embd] and glu (or gemm_glu) the
   * down projection's x into op16_ff [n_ubatch, FFN width], in the type gemm would round
   * them to (memra_blk_op16_type); buf NULL otherwise */
  memra_tensor op16, op16_ff;
  memra_tensor sel;    /* xn rows whose logits are wanted [n_ubatch, n_embd] */
  memra_tensor logits; /* [n_ubatch, n_vocab] */
  /* step state in device memory (I32) */
  memra_tensor ids, pos, seq, out_rows, block_table, next_ids;
  memra_batch batch; /* the descriptor of the current step */
  int32_t n_rows, n_out;
  /* Rows [0, n_decode) are generated tokens (decode: batch-invariant kernels), the rest
   * prompt rows (gemm and prefill attention when the plugin has them). set_rows counts
   * the leading rows whose sequence has one row; callers that know better overwrite it. */
  int32_t n_decode;
  /* Rows [0, n_distinct) are of pairwise distinct sequences (set_rows): decode rows within
   * them may take rope_kv_attend (ABI 1.10). */
  int32_t n_distinct;
  /* MoE activations (absent for dense models): router logits [n_ubatch, n_expert], the
   * chosen experts I32 and their weights [n_ubatch, k], expert FFN rows [n_ubatch * k, ...] */
  memra_tensor router, moe_ids, moe_w, moe_gate, moe_up, moe_out;
  /* shared expert: gate logit [n_ubatch, 1] and output [n_ubatch, n_embd] */
  memra_tensor sh_logit, sh_out;
  /* hybrids: GDN activations (qkv before/after the conv [n_ubatch, C], z and the mixer
   * output [n_ubatch, H_v d], beta/alpha inputs [n_ubatch, H_v]) and the gated-attention
   * projection [n_ubatch, 2 n_head head_dim] */
  memra_tensor qkv, conv_out, z, gbeta, galpha, gdn_out, qg;
  /* Per-sequence recurrent state, f32, beside the paged KV cache: for each GDN layer one
   * row per sequence slot (slot = sequence id; a row at position 0 starts from zero):
   * conv [n_seq_max, (K-1) C] and delta-rule state [n_seq_max, H_v d d]. Absent rows of
   * other layers have buf NULL. */
  memra_buf *rs_buf;
  memra_tensor *conv_state, *ssm_state; /* [n_layer] */
  /* ABI 1.14: a decode step's norm of x (+= res) into xn with weight w, left for the
   * projections that read xn (rmsnorm_matmul_n, rmsnorm_ffn_glu) by memra_blk_add_norm_proj;
   * on is false when none waits (memra_blk_norm_flush runs it) */
  struct {
    bool on;
    memra_tensor xn, x, res, w;
  } norm_defer;
  /* ABI 1.15: a decode step's projection into the residual branch, y = a w^T (attention's o, the
   * FFN's down), left for the norm that adds y (matmul_rmsnorm) by the family's forward when it
   * sets ok (llama: the next call is that norm); on is false when none waits
   * (memra_blk_proj_flush runs it) */
  struct {
    bool ok, on;
    memra_tensor y, a, w;
  } proj_defer;
  /* ABI 1.20: a decode step's MoE combine into y (logit's buf NULL: no shared expert), left for
   * the norm that adds y (moe_combine_rmsnorm) by memra_blk_moe_combine; on is false when none
   * waits (memra_blk_combine_flush runs it) */
  struct {
    bool on;
    memra_tensor y, down, w, logit;
  } combine_defer;
} memra_ctx;

memra_status memra_ctx_new(memra_model *m, const memra_ctx_params *p, memra_ctx **out,
                           memra_err *err);
void memra_ctx_free(memra_ctx *c);

/* Uploads one step's rows: tokens, positions and sequences (host arrays of n), and the
 * n_out row indices whose logits are wanted. Pages must be reserved already. */
memra_status memra_ctx_set_rows(memra_ctx *c, int32_t n, const int32_t *tokens, const int32_t *pos,
                                const int32_t *seq, int32_t n_out, const int32_t *out_rows,
                                memra_err *err);
/* Runs the model over the rows last set: a fixed sequence of vtable calls that reads
 * only device state, so it can be captured as a graph. Logits land in c->logits. */
memra_status memra_ctx_forward(memra_ctx *c, memra_err *err);
memra_status memra_ctx_get_logits(memra_ctx *c, float *dst, memra_err *err); /* [n_out, n_vocab] */
memra_status memra_ctx_argmax(memra_ctx *c, int32_t *dst, memra_err *err);   /* [n_out] */

/* Runs tokens of one sequence from position pos0 in chunks of n_ubatch. If all_logits,
 * logits of every position are written to logits_out [n, n_vocab]; else the last
 * position's only [n_vocab] (logits_out may be NULL when not wanted). */
memra_status memra_ctx_eval(memra_ctx *c, int32_t seq, const int32_t *tokens, int32_t n,
                            int32_t pos0, bool all_logits, float *logits_out, memra_err *err);

/* The backend's last error, for messages. */
memra_status memra_ctx_fail(memra_ctx *c, memra_status st, const char *what, memra_err *err);

#ifdef __cplusplus
}
#endif
#endif
