/* memra_plugin.h — the plugin ABI: the one header a backend shares with the core.
 *
 * A plugin is a shared object exporting two C symbols:
 *
 *   const memra_plugin_info *memra_plugin_probe(void);
 *       Says whether the plugin can run on this machine (score 0 = cannot) and why.
 *       Must not run architecture-specific code, must not crash without a driver or
 *       GPU, and must be cheap: the loader calls it on every plugin it finds.
 *
 *   const memra_backend_vt *memra_plugin_open(const memra_open_params *params,
 *                                             memra_backend **out,
 *                                             char *err, size_t err_size);
 *       Opens the backend (a device plus a stream); NULL with a one-line message in
 *       err on failure.
 *
 * The first field of memra_plugin_info and of memra_backend_vt is abi_major, at offset 0
 * in every version: the core reads it before anything else and refuses another major.
 * Minor versions only append fields; struct_size tells the core which are present.
 *
 * Two rules shape every op (DESIGN.md):
 *  - Ops are batch-native: each takes rows (tokens); attention takes a memra_batch
 *    descriptor. Decode of one sequence is a batch of one row.
 *  - Step state lives in device memory: positions, block tables and token ids are device
 *    tensors read through pointers, so a captured graph replays step after step. Host
 *    integers in a call (n_rows, kv_bucket) are shape facts a graph is captured per. */
#ifndef MEMRA_PLUGIN_H
#define MEMRA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "memra_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MEMRA_ABI_MAJOR 1u
#define MEMRA_ABI_MINOR 23u

typedef enum memra_status {
  MEMRA_OK = 0,
  MEMRA_E_INVALID = 1,     /* a bad argument, flag or request */
  MEMRA_E_OOM = 2,         /* host or device memory exhausted */
  MEMRA_E_IO = 3,          /* a file could not be opened, read or written */
  MEMRA_E_FORMAT = 4,      /* a file's contents are malformed */
  MEMRA_E_UNSUPPORTED = 5, /* this plugin has no kernel for this op/type/shape */
  MEMRA_E_DEVICE = 6,      /* the driver or runtime failed */
  MEMRA_E_ABI = 7,         /* plugin of another ABI version, or missing symbols */
  MEMRA_E_NOT_FOUND = 8,   /* a named thing (key, tensor, plugin) does not exist */
} memra_status;

typedef struct memra_backend memra_backend; /* plugin-defined: a device and a stream */
typedef struct memra_buf memra_buf;         /* plugin-defined: one device allocation */
typedef struct memra_graph memra_graph;     /* plugin-defined: a captured op sequence */

/* A 2-D view into a buffer: ne1 rows of ne0 elements, rows nb1 bytes apart.
 * Activations are F32 with nb1 = 4 * ne0 unless a view says otherwise; weights keep
 * their GGUF type and block layout (a row is ne0 / block elements, packed).
 * A tensor whose buf is NULL means "absent" for optional arguments. */
typedef struct memra_tensor {
  memra_buf *buf;
  uint64_t offset; /* bytes from the start of buf */
  int32_t type;    /* memra_type */
  int32_t pad_;
  int64_t ne0;  /* elements per row */
  int64_t ne1;  /* rows */
  uint64_t nb1; /* bytes between rows */
} memra_tensor;

/* One forward step's rows. Row r is a token of sequence seq[r] at position pos[r]; it is
 * stored at KV slot block_table[seq[r]][pos[r] / block_size] * block_size + pos[r] %
 * block_size and attends to positions [max(0, pos[r] - window + 1), pos[r]] of its own
 * sequence (window 0: all). Prefill is many rows of one sequence; serving mixes rows of
 * many. kv_bucket is a host bound on pos[r] + 1 over all rows: the plugin may choose the
 * split count of split-KV decode from it, so a graph is captured once per bucket. */
typedef struct memra_batch {
  int32_t n_rows;
  int32_t n_seqs;           /* rows of block_table in use */
  int32_t block_size;       /* KV positions per page */
  int32_t max_blocks;       /* columns of block_table */
  int32_t kv_bucket;        /* host upper bound on pos + 1 of every row */
  int32_t flags;            /* MEMRA_BATCH_* (ABI 1.3; older cores pass 0) */
  memra_tensor pos;         /* I32 [n_rows] */
  memra_tensor seq;         /* I32 [n_rows], values in [0, n_seqs) */
  memra_tensor block_table; /* I32 [n_seqs, max_blocks] page ids */
} memra_batch;

/* Every row of the batch is a prompt row (prefill): kernels may use tensor-core paths
 * whose results differ from the decode kernels' within f16/bf16 precision. Without it
 * (decode rows) a row's result must not depend on the other rows (batch invariance). */
#define MEMRA_BATCH_PROMPT 1
/* Every row is a decode row and no two rows are of one sequence (ABI 1.13; a promise the plugin
 * may ignore): then no K/V a row attends to below its own position is written by this step, so
 * a kernel may read those before the step's earlier ops (rope, kv_store) have completed. */
#define MEMRA_BATCH_DISTINCT 2

typedef enum memra_rope_mode {
  MEMRA_ROPE_NORM = 0, /* rotate adjacent pairs (x[2i], x[2i+1]): llama */
  MEMRA_ROPE_NEOX = 2, /* rotate halves (x[i], x[i + n_rot/2]): qwen, gpt-neox */
} memra_rope_mode;

typedef struct memra_rope_params {
  int32_t n_head; /* heads in each row; row width = n_head * head_dim */
  int32_t head_dim;
  int32_t n_rot;             /* leading dims of each head that rotate (<= head_dim, even) */
  int32_t mode;              /* memra_rope_mode */
  float freq_base;           /* theta */
  float freq_scale;          /* linear position scale (1 = none) */
  memra_tensor freq_factors; /* optional F32 [n_rot / 2]: theta_i is divided by it */
} memra_rope_params;

typedef struct memra_attn_params {
  int32_t n_head;
  int32_t n_kv_head; /* n_head % n_kv_head == 0: grouped-query attention */
  int32_t head_dim;
  int32_t window; /* sliding window in positions, 0 = none */
  float scale;    /* usually 1/sqrt(head_dim) */
  float softcap;  /* tanh soft-capping of scores, 0 = none */
} memra_attn_params;

typedef enum memra_act {
  MEMRA_ACT_SILU = 0,      /* SwiGLU */
  MEMRA_ACT_GELU_TANH = 1, /* GeGLU, tanh approximation (Gemma) */
} memra_act;

/* Gated DeltaNet shapes (ABI minor 1): H_k q/k heads and H_v = r H_k value heads of d
 * dims each (d_k = d_v = d). Value head h reads q/k head h / r (grouped: qwen3next) or
 * h % H_k (tiled: qwen35). */
typedef enum memra_gdn_heads {
  MEMRA_GDN_GROUPED = 0,
  MEMRA_GDN_TILED = 1,
} memra_gdn_heads;

typedef struct memra_gdn_params {
  int32_t n_k_head; /* H_k */
  int32_t n_v_head; /* H_v, a multiple of H_k */
  int32_t head_dim; /* d */
  int32_t heads;    /* memra_gdn_heads */
  float eps;        /* q/k L2 norm: x / sqrt(sum x^2 + eps) */
  int32_t pad_;
} memra_gdn_params;

/* Sampling filters (ABI minor 2), host scalars: a graph is captured per setting. */
typedef struct memra_sample_params {
  float temperature; /* <= 0: argmax (lowest index on ties), the rest is ignored */
  int32_t top_k;     /* keep the k most probable; <= 0 or >= n_vocab: all */
  float top_p;       /* keep the shortest prefix holding >= top_p of the top-k mass; >= 1: all */
  float min_p;       /* keep p >= min_p * p_max; <= 0: all */
} memra_sample_params;

typedef struct memra_device_info {
  char name[128];     /* "NVIDIA H200", "CPU (2 threads)" */
  uint64_t mem_total; /* bytes */
  uint64_t mem_free;
  int32_t n_sms;              /* multiprocessors or threads */
  int32_t cc_major, cc_minor; /* compute capability; 0 on the CPU */
} memra_device_info;

typedef struct memra_open_params {
  uint32_t struct_size; /* sizeof(memra_open_params) of the caller */
  int32_t n_threads;    /* CPU plugin: worker threads (0 = all cores) */
  int32_t device;       /* GPU plugins: device ordinal */
} memra_open_params;

typedef struct memra_plugin_info {
  uint32_t abi_major; /* offset 0 in every version */
  uint32_t abi_minor;
  uint32_t struct_size;
  int32_t score;    /* 0 = cannot run here; auto picks the highest */
  const char *name; /* "cpu", "sm90a", "sm120a" */
  const char *why;  /* one line: what was found, or why the plugin declined */
} memra_plugin_info;

/* ABI 1.18 download_start / download_wait: a plugin's staging slots and their size. */
enum { MEMRA_STAGE_SLOTS = 4, MEMRA_STAGE_BYTES = 256 };

typedef struct memra_backend_vt {
  uint32_t abi_major; /* offset 0 in every version */
  uint32_t abi_minor;
  uint32_t struct_size;
  uint32_t pad_;
  const char *name;

  void (*close)(memra_backend *be);
  /* One line describing the last failure of any call on be (never NULL). */
  const char *(*last_error)(memra_backend *be);
  memra_status (*device_info)(memra_backend *be, memra_device_info *out);

  /* --- buffers: device memory, zero-initialized is NOT promised --- */
  memra_status (*buf_alloc)(memra_backend *be, uint64_t nbytes, memra_buf **out);
  void (*buf_free)(memra_backend *be, memra_buf *buf);
  memra_status (*buf_upload)(memra_backend *be, memra_buf *dst, uint64_t off, const void *src,
                             uint64_t nbytes);
  memra_status (*buf_download)(memra_backend *be, const memra_buf *src, uint64_t off, void *dst,
                               uint64_t nbytes);
  memra_status (*buf_copy)(memra_backend *be, memra_buf *dst, uint64_t dst_off,
                           const memra_buf *src, uint64_t src_off, uint64_t nbytes);
  memra_status (*synchronize)(memra_backend *be); /* waits for all queued work */

  /* --- ops; every activation is F32 unless stated --- */
  /* y[r] = dequant(table row ids[r]). y [n, ne0], ids I32 [n], table any type. */
  memra_status (*get_rows)(memra_backend *be, const memra_tensor *y, const memra_tensor *table,
                           const memra_tensor *ids);
  /* If res is present: x += res (x is written back). Then, per row of width w.ne0,
   * y = x / sqrt(mean(x^2) + eps) * w. x may have more rows than the token count: a
   * per-head norm views [tokens, n_head * d] as [tokens * n_head, d]. y may alias x.
   * ABI 1.6: y may be F16 or BF16 (then it must not overlap x or res): each f32 result
   * rounded as gemm rounds x (memra_op16 rule, see gemm_x_type). */
  memra_status (*rmsnorm)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                          const memra_tensor *res, const memra_tensor *w, float eps);
  /* y [M, N] = x [M, K] . w [N, K]^T (+ bias [N] if present); w in its GGUF layout. */
  memra_status (*matmul)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                         const memra_tensor *w, const memra_tensor *bias);
  /* In place on x [n_rows, n_head * head_dim], row r at position pos[r]. */
  memra_status (*rope)(memra_backend *be, const memra_tensor *x, const memra_tensor *pos,
                       const memra_rope_params *p);
  /* Writes k, v [n_rows, n_kv_head * head_dim] into the paged caches (F32 or F16, one row
   * per slot) at each row's slot (see memra_batch). */
  memra_status (*kv_store)(memra_backend *be, const memra_tensor *k_cache,
                           const memra_tensor *v_cache, const memra_tensor *k,
                           const memra_tensor *v, const memra_batch *batch);
  /* out, q [n_rows, n_head * head_dim]: softmax(scale * q k^T) v over each row's window. */
  memra_status (*attention)(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                            const memra_tensor *k_cache, const memra_tensor *v_cache,
                            const memra_batch *batch, const memra_attn_params *p);
  /* y = act(gate) * up, all [n, ff]; y may alias gate or up. ABI 1.6: y may be F16 or BF16
   * (then it must not overlap gate or up): each f32 result rounded by the memra_op16 rule. */
  memra_status (*glu)(memra_backend *be, const memra_tensor *y, const memra_tensor *gate,
                      const memra_tensor *up, int32_t act);
  /* y = a + b (same shapes; y may alias a or b). */
  memra_status (*add)(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                      const memra_tensor *b);
  /* y = s * x (y may alias x). */
  memra_status (*scale)(memra_backend *be, const memra_tensor *y, const memra_tensor *x, float s);
  /* ids[r] = argmax over logits row r (lowest index wins ties). ids I32 [n_rows]. */
  memra_status (*argmax)(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits);
  /* v[i] += delta for I32 v: the graph advances positions by itself. */
  memra_status (*add_i32)(memra_backend *be, const memra_tensor *v, int32_t delta);

  /* --- graph capture (optional: all NULL = eager only) --- */
  memra_status (*graph_begin)(memra_backend *be);
  memra_status (*graph_end)(memra_backend *be, memra_graph **out);
  memra_status (*graph_launch)(memra_backend *be, memra_graph *g);
  void (*graph_free)(memra_backend *be, memra_graph *g);

  /* Named extras (optional): NULL when unknown. */
  void *(*get_proc)(memra_backend *be, const char *name);

  /* --- ABI minor 1: mixture of experts (optional: NULL = the backend has no kernel; the
   * core then refuses MoE models with a one-line message naming backend and op) --- */
  /* Router. Per row r of logits [n, n_expert]: p = softmax(logits[r]) in f32; the k =
   * ids.ne0 largest p (lowest index first among equals) go to ids[r] (I32 [n, k]) in
   * descending order, and their weights [n, k] (F32) are p / max(sum of the k p, 6.1e-5)
   * when normalize is nonzero, p itself otherwise. */
  memra_status (*moe_route)(memra_backend *be, const memra_tensor *ids, const memra_tensor *weights,
                            const memra_tensor *logits, int32_t normalize);
  /* Expert matmul. w stacks n_expert matrices of N = w.ne1 / n_expert rows each ([n_expert
   * * N, K], GGUF block layout; expert e is rows [e N, (e+1) N)); ids I32 [n, k]. y [n * k,
   * N]: row r k + j = x[r'] . w_e^T with e = ids[r, j], where r' = r when x has n rows (one
   * input shared by the k experts of a token) and r k + j when it has n k. An id outside
   * [0, n_expert) fails. y must not overlap x or w. */
  memra_status (*matmul_id)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                            const memra_tensor *w, const memra_tensor *ids, int32_t n_expert);
  /* Weighted combine: y[r] = sum_j weights[r, j] * x[r k + j], j in order; x [n * k, E],
   * weights F32 [n, k], y [n, E] (must not overlap x). */
  memra_status (*moe_combine)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                              const memra_tensor *weights);

  /* --- ABI minor 1: gates and recurrent (Gated DeltaNet) layers; optional as above ---
   * Recurrent state lives in per-sequence slots: row r of a state tensor is the state of
   * sequence seq[r] (batch->seq), and a row at pos[r] == 0 starts its sequence from a zero
   * state. Rows of one sequence come in position order and are applied in that order. */
  /* y = x * sigmoid(g), same shapes, or g [n, 1] broadcast over each row of x. y may
   * alias x. */
  memra_status (*sigmoid_gate)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *g);
  /* Depthwise causal conv of width K with SiLU: per channel c of x [n, C],
   * y[r, c] = silu(sum_i w[c, i] * u_i) over the K inputs u = (state columns, then x[r, c]),
   * oldest first; w F32 [C, K] (the GGUF ssm_conv1d layout). state F32 [n_seqs, (K-1) * C]
   * holds each sequence's last K-1 inputs (channel-major: c * (K-1) + i, oldest first) and
   * is updated. y [n, C] must not overlap x or state. */
  memra_status (*ssm_conv)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w, const memra_tensor *state,
                           const memra_batch *batch);
  /* The gated delta rule, one token after another. Per row and value head h (p: params):
   *   q, k <- L2-normalised q/k head of h (eps), q <- q / sqrt(d)
   *   beta = sigmoid(b[h]); decay = exp(a_log[h] * softplus(a[h] + dt_bias[h]))
   *   S <- decay S ; S <- S + k (beta (v - S^T k))^T ; out = S^T q
   * q, k [n, H_k d], v and out [n, H_v d], a, b [n, H_v] (views: nb1 may exceed the row),
   * a_log (the GGUF ssm_a, = -exp(A_log)) and dt_bias F32 [H_v]; state F32 [n_seqs,
   * H_v d d], head h's d x d block stored S[j][i] at h d^2 + j d + i (j: value dim, i: key
   * dim), read and written once per token. out must not overlap the inputs. */
  memra_status (*gated_delta_rule)(memra_backend *be, const memra_tensor *out,
                                   const memra_tensor *q, const memra_tensor *k,
                                   const memra_tensor *v, const memra_tensor *a,
                                   const memra_tensor *b, const memra_tensor *a_log,
                                   const memra_tensor *dt_bias, const memra_tensor *state,
                                   const memra_batch *batch, const memra_gdn_params *p);

  /* --- ABI minor 2: sampling on the device (optional: NULL = the core samples on the
   * host). One draw per row r of logits [n, n_vocab] (F32) into ids I32 [n], from the
   * row's generator state rng I64 [n] (u64 bits, device memory, seeded by the host with
   * buf_upload, advanced here: a replayed graph draws fresh numbers every step).
   * Exact definition (plugins/cpu/sample.c is the oracle):
   *   temperature <= 0: ids[r] = argmax, as the argmax op; rng is not advanced.
   *   rng[r] += 0x9E3779B97F4A7C15; u = (splitmix64_mix(rng[r]) >> 11) * 2^-53, in [0, 1).
   *   z_i = logit_i / temperature (f32; NaN counts as -inf); p_i = expf(z_i - max z).
   *   Tokens are ordered by (p desc, id asc); every filter keeps a prefix of that order:
   *   top_k the first k; top_p the shortest prefix whose mass (double sums) is >= top_p
   *   times the mass of the top-k prefix; min_p those with p_i >= min_p (p_max is 1).
   *   The kept set is the shortest of the three; S is its mass; the token is the first
   *   of the order whose inclusive prefix mass exceeds u * S (the last kept one if
   *   rounding leaves none). Float sums may differ in the last bits between plugins, so
   *   a GPU agrees with the CPU except when u * S lies within rounding of a boundary. */
  memra_status (*sample)(memra_backend *be, const memra_tensor *ids, const memra_tensor *logits,
                         const memra_tensor *rng, const memra_sample_params *p);

  /* --- ABI minor 3: prefill on tensor cores and fused decode steps (optional: NULL =
   * the core uses the minor-0 ops) ---
   * gemm: matmul's contract, called for batches that hold prompt rows (some sequence has
   * more than one row). The plugin may compute on tensor cores from f16/bf16 operands
   * with f32 accumulation, so a row may differ from matmul's within that precision; a
   * row's result must not depend on M, on its position in x or on the other rows (no
   * split-K chosen by shape), so chunked prefill equals one-shot prefill bit for bit. */
  memra_status (*gemm)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                       const memra_tensor *w, const memra_tensor *bias);
  /* matmul_n: y[i] = x . w[i]^T (+ bias[i] when bias and bias[i].buf are non-NULL) for
   * i < n, n in 1..4: matmul's contract for each (the q, k, v projections sharing x), in
   * one call. Every w[i] has x's K and w[0]'s type; each y[i] is bit-identical to what
   * matmul gives for it on the same plugin (a fused launch must keep matmul's arithmetic
   * per row). No y[i] may overlap x, a w or another y. The core calls it for decode-only
   * batches. */
  memra_status (*matmul_n)(memra_backend *be, int32_t n, const memra_tensor *y,
                           const memra_tensor *x, const memra_tensor *w, const memra_tensor *bias);

  /* --- ABI minor 4: rope and kv_store of a step in one call (optional: NULL = the core
   * calls rope, rope and kv_store) ---
   * rope_kv_store: rope(q, batch->pos, p); rope(k, batch->pos, p over k->ne0 / head_dim
   * heads); kv_store(k_cache, v_cache, k, v, batch) -- those three calls' contracts and
   * bits on the same plugin (q and k rotated in place, k and v stored at each row's slot;
   * a fused kernel must keep rope's arithmetic per pair and kv_store's conversion). q, k
   * and v have batch->n_rows rows; k's width is a multiple of p->head_dim; q, k and v do
   * not overlap each other or the caches. On failure q and k may already be rotated. */
  memra_status (*rope_kv_store)(memra_backend *be, const memra_tensor *q, const memra_tensor *k,
                                const memra_tensor *v, const memra_tensor *k_cache,
                                const memra_tensor *v_cache, const memra_batch *batch,
                                const memra_rope_params *p);

  /* --- ABI minor 5: prompt-row projections sharing x in one call (optional: NULL = the core
   * calls gemm per output) ---
   * gemm_n: y[i] = x . w[i]^T (+ bias[i] when bias and bias[i].buf are non-NULL) for i < n,
   * n in 1..4 (q, k, v or gate, up of prompt rows): gemm's contract for each, and each y[i]
   * bit-identical to what gemm gives for it on the same plugin (one grouped launch must keep
   * gemm's arithmetic per element). Every w[i] has x's K and w[0]'s type; no y[i] may
   * overlap x, a w or another y. */
  memra_status (*gemm_n)(memra_backend *be, int32_t n, const memra_tensor *y, const memra_tensor *x,
                         const memra_tensor *w, const memra_tensor *bias);

  /* --- ABI minor 6: 16-bit gemm operands made by their producers (optional: NULL = the
   * core hands gemm F32 x) ---
   * gemm_x_type: the type gemm and gemm_n round x to for weights of type w_type --
   * MEMRA_TYPE_F16 or MEMRA_TYPE_BF16 -- or MEMRA_TYPE_F32 when they compute on f32 x.
   * For a 16-bit answer T, gemm and gemm_n also take x of type T (rows 16-byte aligned) and
   * give the bits they give for the F32 x it was rounded from. The rounding (the memra_op16
   * rule): nearest even; for F16 a value beyond +-65504 (an infinity too) becomes +-65504,
   * NaN stays NaN. rmsnorm and glu write T by that rule, so the core can have them produce the
   * operand of the next prompt-row projection and skip a conversion pass. */
  int32_t (*gemm_x_type)(memra_backend *be, int32_t w_type);
  /* gemm_glu (optional: NULL = gemm_n and glu): y = act(x . w_gate^T) * (x . w_up^T) for
   * prompt rows, [M, N]: the bits of gemm_n over (w_gate, w_up) followed by glu on the same
   * plugin, without the two products reaching memory. w_gate and w_up share type and shape
   * (not F32); x as for gemm; y is F32 or a 16-bit type (glu's 16-bit rule) and must not
   * overlap x or the weights. */
  memra_status (*gemm_glu)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                           const memra_tensor *w_gate, const memra_tensor *w_up, int32_t act);

  /* --- ABI minor 7: fewer launches in a MoE layer ---
   * (optional: NULL = the core calls moe_combine, sigmoid_gate and add)
   * moe_combine_gated: y[r] = moe_combine's sum for row r, then + sh[r] * sigmoid(g[r]) with
   * the bits of sigmoid_gate (g F32 [n, 1] broadcast over sh F32 [n, E]) and of add; y must
   * not overlap x, weights, sh or g. */
  memra_status (*moe_combine_gated)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *weights, const memra_tensor *sh,
                                    const memra_tensor *g);
  /* matmul_id_glu (optional: NULL = matmul_id over the 2 N rows, then glu): w's experts each
   * hold N gate rows, then N up rows (the core's fused gate/up stack); y [n k, N] =
   * act(x . gate^T) * (x . up^T), the bits of matmul_id then glu. act: a plugin may refuse
   * any but MEMRA_ACT_SILU (MEMRA_E_UNSUPPORTED). */
  memra_status (*matmul_id_glu)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                                int32_t act);
  /* rmsnorm_gate (optional: NULL = rmsnorm, then glu): y = act(z) * rmsnorm(x) w, the bits of
   * rmsnorm (no res) then glu(y, z, y); x, y, z F32 of one shape (per-head views as rmsnorm
   * takes them), y may alias x but not z: the Gated DeltaNet output norm in one pass. */
  memra_status (*rmsnorm_gate)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                               const memra_tensor *w, const memra_tensor *z, float eps,
                               int32_t act);
  /* ABI 1.8. rmsnorm_qk (optional: NULL = two rmsnorm calls): the per-head RMS norms of an
   * attention's q and k in place, q = rmsnorm(q) wq, then k = rmsnorm(k) wk (no res), the bits
   * of those two calls: Qwen3's and Gemma 3's q / k norms in one launch. q, k: F32 per-head
   * views as rmsnorm takes them ([rows x heads, head_dim]), not overlapping; wq [q->ne0],
   * wk [k->ne0] F32. */
  memra_status (*rmsnorm_qk)(memra_backend *be, const memra_tensor *q, const memra_tensor *wq,
                             const memra_tensor *k, const memra_tensor *wk, float eps);
  /* ABI 1.9. moe_combine_shexp (optional: NULL = the core computes the shared expert apart:
   * its glu, its down projection, moe_combine_gated): the combine of a layer whose shared expert is
   * expert n_expert of its stacks, picked by every token as its (k+1)-th id, so one matmul_id
   * computes it with the routed ones. x [n (k+1), E]: token r's routed rows r (k+1) + j (j < k,
   * weights[r, j]), then its shared row r (k+1) + k; y[r] = moe_combine_gated's result for the
   * routed rows and sh = the shared row, with its bits. weights F32 [n, k], g F32 [n, 1], y [n, E]
   * not overlapping the inputs. */
  memra_status (*moe_combine_shexp)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *weights, const memra_tensor *g);
  /* ABI 1.9. matmul_id_combine (optional: NULL = matmul_id, then the combine): the experts'
   * down projection and each token's combine in one call, with the bits of matmul_id into
   * [n ke, N] followed by moe_combine (g NULL: ke = k = ids.ne0 = weights.ne0) or
   * moe_combine_shexp (g F32 [n, 1]: ke = k + 1, the last id the shared expert). x [n ke, K]
   * (a row per token and expert), w and n_expert as matmul_id, y F32 [n, N] not overlapping
   * the inputs. */
  memra_status (*matmul_id_combine)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                    const memra_tensor *w, const memra_tensor *ids,
                                    int32_t n_expert, const memra_tensor *weights,
                                    const memra_tensor *g);
  /* ABI 1.10. rope_kv_attend (optional: NULL = rope_kv_store, then attention): rope_kv_store(q,
   * k, v, k_cache, v_cache, batch, rope), then attention(out, q, k_cache, v_cache, batch, attn),
   * with those two calls' bits on the same plugin (out and the caches; q and k are left
   * unspecified). For decode rows only: the core calls it when every row is a decode row
   * (batch->flags without MEMRA_BATCH_PROMPT) of its own sequence, so no row reads a position
   * another row of the call writes; a plugin may read the rows' earlier positions before the
   * projections that produce q, k and v have finished. */
  memra_status (*rope_kv_attend)(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                 const memra_tensor *k, const memra_tensor *v,
                                 const memra_tensor *k_cache, const memra_tensor *v_cache,
                                 const memra_batch *batch, const memra_rope_params *rope,
                                 const memra_attn_params *attn);
  /* ABI 1.11. matmul_n_conv (optional: NULL = matmul_n, then ssm_conv): a Gated DeltaNet layer's
   * projections with its causal conv: matmul_n(n, y, x, w, NULL), then ssm_conv of y[0] into
   * y[0] (conv_w, state and batch as ssm_conv takes them), with those calls' bits: y[0] receives
   * silu(conv(x w[0]^T)) and the state advances; y[1..n-1] are matmul_n's. */
  memra_status (*matmul_n_conv)(memra_backend *be, int32_t n, const memra_tensor *y,
                                const memra_tensor *x, const memra_tensor *w,
                                const memra_tensor *conv_w, const memra_tensor *state,
                                const memra_batch *batch);
  /* ABI 1.11. attention_gate (optional: NULL = attention, then sigmoid_gate): attention(out, q,
   * k_cache, v_cache, batch, p), then sigmoid_gate(oh, oh, gate) with oh out's per-head view
   * [n_rows * n_head, head_dim], with those calls' bits: the output gate of Qwen3-Next's attention
   * layers. out's rows packed (nb1 = 4 n_head head_dim); gate F32 [n_rows * n_head, head_dim],
   * rows nb1 apart (a per-head view), not overlapping out. */
  memra_status (*attention_gate)(memra_backend *be, const memra_tensor *out, const memra_tensor *q,
                                 const memra_tensor *k_cache, const memra_tensor *v_cache,
                                 const memra_batch *batch, const memra_attn_params *p,
                                 const memra_tensor *gate);
  /* ABI 1.11. gated_delta_rule_norm (optional: NULL = gated_delta_rule, then rmsnorm_gate):
   * gated_delta_rule(out, q, k, v, a, b, a_log, dt_bias, state, batch, p), then rmsnorm_gate(oh,
   * oh, norm_w, zh, eps, act) over the per-head views oh of out and zh of z ([rows x H_v,
   * head_dim]), with those calls' bits: a Gated DeltaNet layer's recurrence and its gated output
   * norm. z F32 [rows, H_v head_dim], not overlapping out; norm_w F32 [head_dim]. */
  memra_status (*gated_delta_rule_norm)(memra_backend *be, const memra_tensor *out,
                                        const memra_tensor *q, const memra_tensor *k,
                                        const memra_tensor *v, const memra_tensor *a,
                                        const memra_tensor *b, const memra_tensor *a_log,
                                        const memra_tensor *dt_bias, const memra_tensor *state,
                                        const memra_batch *batch, const memra_gdn_params *p,
                                        const memra_tensor *norm_w, const memra_tensor *z,
                                        float eps, int32_t act);
  /* ABI 1.12. ffn_glu (optional: NULL = matmul_n, glu, matmul): a dense gated FFN,
   * matmul_n(2, {h, u}, x, {w_gate, w_up}, NULL), then glu(h, h, u, act), then matmul(y, h,
   * w_down, NULL), with those calls' bits in y and h; u is scratch (left unspecified). x, h, u,
   * y F32 ([n, K], [n, F], [n, F], [n, N]); w_gate and w_up share type and shape; y and u overlap
   * nothing else. */
  memra_status (*ffn_glu)(memra_backend *be, const memra_tensor *y, const memra_tensor *h,
                          const memra_tensor *u, const memra_tensor *x, const memra_tensor *w_gate,
                          const memra_tensor *w_up, const memra_tensor *w_down, int32_t act);
  /* ABI 1.14. rmsnorm_matmul_n (optional: NULL = rmsnorm, then matmul_n): rmsnorm(xn, x, res,
   * w_norm, eps), then matmul_n(n, y, xn, w, bias), with those calls' bits in x (x += res when
   * res is present), xn and every y[i]: a decode step's norm inside the projections that read
   * it. The core calls it for decode-only batches; xn is F32, rmsnorm's and matmul_n's contracts
   * hold otherwise (no y[i] overlaps x, res or xn). */
  memra_status (*rmsnorm_matmul_n)(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                   const memra_tensor *res, const memra_tensor *w_norm, float eps,
                                   int32_t n, const memra_tensor *y, const memra_tensor *w,
                                   const memra_tensor *bias);
  /* ABI 1.14. rmsnorm_ffn_glu (optional: NULL = rmsnorm, then ffn_glu): rmsnorm(xn, x, res,
   * w_norm, eps), then ffn_glu(y, h, u, xn, w_gate, w_up, w_down, act), with those calls' bits
   * in x, xn, h and y (u scratch); decode-only batches, xn F32; h and u overlap none of x, res
   * and xn, y neither x nor xn (y may be res: the residual branch the norm adds, then the FFN's
   * output). */
  memra_status (*rmsnorm_ffn_glu)(memra_backend *be, const memra_tensor *xn, const memra_tensor *x,
                                  const memra_tensor *res, const memra_tensor *w_norm, float eps,
                                  const memra_tensor *y, const memra_tensor *h,
                                  const memra_tensor *u, const memra_tensor *w_gate,
                                  const memra_tensor *w_up, const memra_tensor *w_down,
                                  int32_t act);
  /* ABI 1.15. matmul_rmsnorm (optional: NULL = matmul, then rmsnorm): matmul(y, a, w, NULL),
   * then rmsnorm(xn, x, y, w_norm, eps) (x += y, written back), with those calls' bits in y, x and
   * xn: a decode step's projection into the residual branch with the norm that adds it, so the
   * norm needs no launch of its own. The core calls it for decode-only batches of the llama
   * family when the plugin lacks the ABI 1.14 norm slots (those take the norm forward instead); y,
   * x, xn F32
   * ([n, N]), a [n, K]; y overlaps none of a, x, xn; xn overlaps neither a nor x. */
  memra_status (*matmul_rmsnorm)(memra_backend *be, const memra_tensor *y, const memra_tensor *a,
                                 const memra_tensor *w, const memra_tensor *xn,
                                 const memra_tensor *x, const memra_tensor *w_norm, float eps);
  /* ABI 1.16. matmul_n_rope_kv (optional: NULL = matmul_n, then rope_kv_store): a decode step's
   * q, k, v projections with their rope and cache store. y[0..2] are q, k, v; the first n (2 or
   * 3) are computed here, matmul_n(n, y, x, w, bias) (n == 2: v, y[2], was written before the
   * call, e.g. by a projection of another weight type); then rope_kv_store(&y[0], &y[1], &y[2],
   * k_cache, v_cache, batch, p). The bits of those calls in y[0] (q, rotated), y[1] (k, rotated),
   * y[2] and the caches. The core calls it for decode-only batches whose q and k take no norm
   * between projection and rope (llama, qwen2); both calls' contracts hold otherwise. */
  memra_status (*matmul_n_rope_kv)(memra_backend *be, int32_t n, const memra_tensor *y,
                                   const memra_tensor *x, const memra_tensor *w,
                                   const memra_tensor *bias, const memra_tensor *k_cache,
                                   const memra_tensor *v_cache, const memra_batch *batch,
                                   const memra_rope_params *p);
  /* ABI 1.17. matmul_acc (optional: NULL = matmul into t, then add): y += x w^T, i.e. t = x w^T
   * with matmul's bits, then y = y + t with add's (rmsnorm's residual add: the same sum). t is
   * F32 scratch of y's shape, its contents after the call unspecified (a plugin whose kernel adds
   * at its store need not write it); y, t and x F32, pairwise apart. The core calls it for a
   * decode step's projections into the residual stream (llama: o, down), so the norm after it
   * takes no residual (rmsnorm_matmul_n's res none: no write-back of x). */
  memra_status (*matmul_acc)(memra_backend *be, const memra_tensor *y, const memra_tensor *t,
                             const memra_tensor *x, const memra_tensor *w);
  /* ABI 1.18. download_start / download_wait (optional, both or neither; NULL = buf_download):
   * buf_download in two halves, so the host can queue the next step before it waits for this
   * one's token. download_start queues a copy of nbytes (1..MEMRA_STAGE_BYTES) at src + off into
   * the plugin's host staging slot `slot` (0..MEMRA_STAGE_SLOTS-1), in stream order: after all
   * work queued before it, before all work queued after it (not inside graph capture);
   * download_wait(slot) waits for that copy and writes its bytes to dst. A slot holds one copy:
   * start it again only after its wait. */
  memra_status (*download_start)(memra_backend *be, const memra_buf *src, uint64_t off,
                                 uint64_t nbytes, int32_t slot);
  memra_status (*download_wait)(memra_backend *be, int32_t slot, void *dst, uint64_t nbytes);
  /* ABI 1.19. rmsnorm_qk_rope_kv (optional: NULL = the norms' calls, then rope_kv_store): an
   * attention layer's per-head q and k norms (heads of p->head_dim, weights wq and wk of head_dim):
   * q = rmsnorm(q_in) wq per head (q_in NULL: q in place, rmsnorm_qk's form; else q_in a per-head
   * view [rows x heads, head_dim] as rmsnorm takes it, e.g. Qwen3-Next's q rows inside its q +
   * gate projection), k = rmsnorm(k) wk in place, then rope_kv_store(q, k, v, k_cache, v_cache,
   * batch, p): those calls' contracts and bits in one (one launch on the GPU plugins, one or two
   * small kernels' links fewer in a decode step). q, k and v as rope_kv_store takes them, q and k
   * with packed rows (nb1 = 4 ne0), q_in apart from q and k. On failure q and k may already be
   * normed or rotated. */
  memra_status (*rmsnorm_qk_rope_kv)(memra_backend *be, const memra_tensor *q,
                                     const memra_tensor *q_in, const memra_tensor *wq,
                                     const memra_tensor *k, const memra_tensor *wk, float eps,
                                     const memra_tensor *v, const memra_tensor *k_cache,
                                     const memra_tensor *v_cache, const memra_batch *batch,
                                     const memra_rope_params *p);
  /* ABI 1.20. moe_combine_rmsnorm (optional: NULL = the combine, then rmsnorm): y = moe_combine(y,
   * down, weights) (logit NULL: down [n k, E]) or moe_combine_shexp(y, down, weights, logit)
   * (down [n (k+1), E], logit [n, 1]), then rmsnorm(xn, x, y, w_norm, eps) (x += y, written back):
   * those calls' contracts and bits in one, a MoE layer's combine with the norm after it that adds
   * it (the next layer's, or the output's). y, x and xn F32 [n, E], pairwise apart and apart from
   * down, weights and logit. */
  memra_status (*moe_combine_rmsnorm)(memra_backend *be, const memra_tensor *xn,
                                      const memra_tensor *x, const memra_tensor *w_norm, float eps,
                                      const memra_tensor *y, const memra_tensor *down,
                                      const memra_tensor *weights, const memra_tensor *logit);
  /* ABI 1.21. moe_route_glu (optional: NULL = moe_route, then matmul_id_glu): moe_route(ids',
   * weights, logits, normalize), ids' the first weights->ne0 columns of ids (columns past them,
   * the stacked shared expert's, are read, never written), then matmul_id_glu(y, x, w, ids,
   * n_expert, act) over all of ids' columns: those calls' contracts and bits in one, a MoE layer's
   * routing with its experts' gate, up and glu (on the GPU plugins a decode step's route inside
   * the experts' launch: one small launch fewer a layer). */
  memra_status (*moe_route_glu)(memra_backend *be, const memra_tensor *y, const memra_tensor *x,
                                const memra_tensor *w, const memra_tensor *ids, int32_t n_expert,
                                int32_t act, const memra_tensor *weights,
                                const memra_tensor *logits, int32_t normalize);
  /* ABI 1.22. matmul_n_route (optional: NULL = matmul_n, then moe_route): matmul_n(n, y, x, w,
   * bias), then moe_route(ids, weights, y[0], normalize): those calls' contracts and bits in one,
   * a MoE layer's router (with the projections that read its x beside it) and its route (on the
   * GPU plugins a decode row's route in the router GEMV's last block: the route's launch fewer a
   * layer). ids and weights must not overlap x, a w or a y. */
  memra_status (*matmul_n_route)(memra_backend *be, int32_t n, const memra_tensor *y,
                                 const memra_tensor *x, const memra_tensor *w,
                                 const memra_tensor *bias, const memra_tensor *ids,
                                 const memra_tensor *weights, int32_t normalize);
  /* ABI 1.23. rmsnorm_matmul_mixed (optional: NULL = rmsnorm_matmul_n per group of same-type
   * weights): rmsnorm_matmul_n's contract except that the w[i] may differ in type (each has x's
   * K): a decode step's q, k and v in one call where v's type is not q's (half the layers of a
   * Q4_K_M file). With one type it is rmsnorm_matmul_n. Otherwise each y[i] is within matmul's
   * tolerance of x . w[i]^T and a function of x's row and w[i] alone, the same in every call of
   * this slot at any batch size (the plugin may keep one kernel per matrix for these calls that
   * matmul does not take, e.g. one launch over both types); the core calls it for decode-only
   * batches, so a row's bits never depend on its batch. */
  memra_status (*rmsnorm_matmul_mixed)(memra_backend *be, const memra_tensor *xn,
                                       const memra_tensor *x, const memra_tensor *res,
                                       const memra_tensor *w_norm, float eps, int32_t n,
                                       const memra_tensor *y, const memra_tensor *w,
                                       const memra_tensor *bias);
} memra_backend_vt;

typedef const memra_plugin_info *(*memra_plugin_probe_fn)(void);
typedef const memra_backend_vt *(*memra_plugin_open_fn)(const memra_open_params *params,
                                                        memra_backend **out, char *err,
                                                        size_t err_size);

#define MEMRA_PLUGIN_PROBE_SYMBOL "memra_plugin_probe"
#define MEMRA_PLUGIN_OPEN_SYMBOL "memra_plugin_open"

#if defined(_WIN32)
#define MEMRA_PLUGIN_EXPORT __declspec(dllexport)
#else
#define MEMRA_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif
#endif /* MEMRA_PLUGIN_H */
