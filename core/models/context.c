#include "core/models/context.h"

#include <string.h>

#include "core/base/alloc.h"
#include "core/models/forward.h"

memra_ctx_params memra_ctx_defaults(void) {
  return (memra_ctx_params){
      .n_ctx = 4096, .n_seq_max = 1, .n_ubatch = 512, .block_size = 16, .kv_type = MEMRA_TYPE_F16};
}

memra_status memra_ctx_fail(memra_ctx *c, memra_status st, const char *what, memra_err *err) {
  return memra_errf(err, st, "%s on backend %s: %s", what, c->m->vt->name,
                    c->m->vt->last_error(c->m->be));
}

/* A tensor of rows x cols at *off in buf, advancing *off (256-byte aligned). */
static memra_tensor carve(memra_buf *buf, uint64_t *off, int32_t type, int64_t cols, int64_t rows) {
  memra_tensor t = {.buf = buf, .offset = *off, .type = type, .ne0 = cols, .ne1 = rows};
  t.nb1 = memra_type_row_bytes(type, cols);
  *off += (t.nb1 * (uint64_t)rows + 255) / 256 * 256;
  return t;
}

static memra_status alloc_kv(memra_ctx *c, memra_err *err) {
  const memra_hparams *hp = &c->m->hp;
  const int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim;
  const int64_t slots = (int64_t)c->pages.n_pages * c->p.block_size;
  c->k_cache = memra_calloc((size_t)hp->n_layer, sizeof(memra_tensor));
  c->v_cache = memra_calloc((size_t)hp->n_layer, sizeof(memra_tensor));
  if (!c->k_cache || !c->v_cache) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  uint64_t total = 0;
  for (int il = 0; il < hp->n_layer; ++il) {
    /* recurrent layers keep a fixed-size state instead (alloc_rs) */
    const int64_t n_slots = memra_hparams_layer_recurrent(hp, il) ? 0 : slots;
    c->k_cache[il] = carve(NULL, &total, c->p.kv_type, kd, n_slots);
    c->v_cache[il] = carve(NULL, &total, c->p.kv_type, kd, n_slots);
  }
  memra_status st = c->m->vt->buf_alloc(c->m->be, total, &c->kv_buf);
  if (st)
    return memra_errf(err, st, "cannot allocate %.1f MiB of KV cache (%d positions): %s",
                      total / 1048576.0, c->p.n_ctx * c->p.n_seq_max,
                      c->m->vt->last_error(c->m->be));
  for (int il = 0; il < hp->n_layer; ++il)
    c->k_cache[il].buf = c->v_cache[il].buf = c->kv_buf;
  return MEMRA_OK;
}

/* The recurrent state pool of hybrid models: fixed size per sequence slot. */
static memra_status alloc_rs(memra_ctx *c, memra_err *err) {
  const memra_hparams *hp = &c->m->hp;
  if (!memra_hparams_hybrid(hp)) return MEMRA_OK;
  const int64_t d = hp->ssm_head_dim, C = 2 * (int64_t)hp->ssm_k_heads * d + hp->ssm_v_heads * d;
  c->conv_state = memra_calloc((size_t)hp->n_layer, sizeof(memra_tensor));
  c->ssm_state = memra_calloc((size_t)hp->n_layer, sizeof(memra_tensor));
  if (!c->conv_state || !c->ssm_state) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  uint64_t total = 0;
  for (int il = 0; il < hp->n_layer; ++il) {
    if (!memra_hparams_layer_recurrent(hp, il)) continue;
    c->conv_state[il] = carve(NULL, &total, MEMRA_TYPE_F32, (hp->ssm_conv - 1) * C, c->p.n_seq_max);
    c->ssm_state[il] = carve(NULL, &total, MEMRA_TYPE_F32, hp->ssm_v_heads * d * d, c->p.n_seq_max);
  }
  if (total == 0) return MEMRA_OK;
  memra_status st = c->m->vt->buf_alloc(c->m->be, total, &c->rs_buf);
  if (st)
    return memra_errf(err, st, "cannot allocate %.1f MiB of recurrent state (%d sequences): %s",
                      total / 1048576.0, c->p.n_seq_max, c->m->vt->last_error(c->m->be));
  for (int il = 0; il < hp->n_layer; ++il)
    if (memra_hparams_layer_recurrent(hp, il))
      c->conv_state[il].buf = c->ssm_state[il].buf = c->rs_buf;
  return MEMRA_OK;
}

/* Column k of every row of the ids buffer [n_ubatch, k + 1] holds n_expert, the shared
 * expert's place in stacked layers; moe_route writes only columns [0, k). */
static memra_status preset_shexp_ids(memra_ctx *c, memra_err *err) {
  const memra_hparams *hp = &c->m->hp;
  if (hp->n_expert <= 0 || hp->n_ff_shexp <= 0) return MEMRA_OK;
  const int64_t R = c->p.n_ubatch, K1 = (int64_t)hp->n_expert_used + 1;
  int32_t *ids = memra_calloc((size_t)(R * K1), sizeof *ids);
  if (!ids) return memra_errf(err, MEMRA_E_OOM, "out of memory presetting expert ids");
  for (int64_t r = 0; r < R; ++r)
    ids[r * K1 + K1 - 1] = hp->n_expert;
  memra_status st = c->m->vt->buf_upload(c->m->be, c->act_buf, c->moe_ids.offset, ids,
                                         (uint64_t)(R * K1) * sizeof *ids);
  memra_free(ids);
  if (st)
    return memra_errf(err, st, "presetting the shared expert's ids: %s",
                      c->m->vt->last_error(c->m->be));
  return MEMRA_OK;
}

static memra_status alloc_act(memra_ctx *c, memra_err *err) {
  const memra_hparams *hp = &c->m->hp;
  const int64_t R = c->p.n_ubatch, E = hp->n_embd, QD = (int64_t)hp->n_head * hp->head_dim,
                KD = (int64_t)hp->n_head_kv * hp->head_dim,
                F = hp->n_ff > hp->n_ff_shexp ? (hp->n_ff > 0 ? hp->n_ff : 1) : hp->n_ff_shexp;
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t off = 0;
    memra_buf *b = pass ? c->act_buf : NULL;
    c->x = carve(b, &off, MEMRA_TYPE_F32, E, R);
    c->xn = carve(b, &off, MEMRA_TYPE_F32, E, R);
    c->q = carve(b, &off, MEMRA_TYPE_F32, QD, R);
    c->k = carve(b, &off, MEMRA_TYPE_F32, KD, R);
    c->v = carve(b, &off, MEMRA_TYPE_F32, KD, R);
    c->attn = carve(b, &off, MEMRA_TYPE_F32, QD, R);
    c->proj = carve(b, &off, MEMRA_TYPE_F32, E, R);
    c->gate = carve(b, &off, MEMRA_TYPE_F32, F, R);
    c->up = carve(b, &off, MEMRA_TYPE_F32, F, R);
    /* ABI 1.6: the 16-bit input of the next prompt-row gemm, made by rmsnorm or glu */
    const bool op16 = c->m->vt->gemm_x_type != NULL;
    c->op16 = op16 ? carve(b, &off, MEMRA_TYPE_F16, E, R) : (memra_tensor){0};
    c->op16_ff = op16 ? carve(b, &off, MEMRA_TYPE_F16, F, R) : (memra_tensor){0};
    c->sel = carve(b, &off, MEMRA_TYPE_F32, E, R);
    c->logits = carve(b, &off, MEMRA_TYPE_F32, hp->n_vocab, R);
    c->ids = carve(b, &off, MEMRA_TYPE_I32, R, 1);
    c->pos = carve(b, &off, MEMRA_TYPE_I32, R, 1);
    c->seq = carve(b, &off, MEMRA_TYPE_I32, R, 1);
    c->out_rows = carve(b, &off, MEMRA_TYPE_I32, R, 1);
    c->next_ids = carve(b, &off, MEMRA_TYPE_I32, R, 1);
    c->block_table = carve(b, &off, MEMRA_TYPE_I32, c->pages.max_blocks, c->p.n_seq_max);
    if (hp->n_expert > 0) {
      /* with a shared expert, k + 1 ids a token: the last, n_expert, is the shared expert
       * when the layer stacks it (model.c stack_shexp), preset once below */
      const int64_t K = hp->n_expert_used, K1 = K + (hp->n_ff_shexp > 0);
      c->router = carve(b, &off, MEMRA_TYPE_F32, hp->n_expert, R);
      c->moe_ids = carve(b, &off, MEMRA_TYPE_I32, K1, R);
      c->moe_w = carve(b, &off, MEMRA_TYPE_F32, K, R);
      /* gate (and, for a fused gate/up stack, up) in one row: [R K1, 2 n_ff_exp] */
      c->moe_gate = carve(b, &off, MEMRA_TYPE_F32, 2 * (int64_t)hp->n_ff_exp, R * K1);
      c->moe_up = carve(b, &off, MEMRA_TYPE_F32, hp->n_ff_exp, R * K1);
      c->moe_out = carve(b, &off, MEMRA_TYPE_F32, E, R * K1);
      c->sh_logit = carve(b, &off, MEMRA_TYPE_F32, 1, R);
      c->sh_out = carve(b, &off, MEMRA_TYPE_F32, E, R);
    }
    if (memra_hparams_hybrid(hp)) {
      const int64_t d = hp->ssm_head_dim, VD = hp->ssm_v_heads * d,
                    C = 2 * (int64_t)hp->ssm_k_heads * d + VD;
      c->qkv = carve(b, &off, MEMRA_TYPE_F32, C, R);
      c->conv_out = carve(b, &off, MEMRA_TYPE_F32, C, R);
      c->z = carve(b, &off, MEMRA_TYPE_F32, VD, R);
      c->gdn_out = carve(b, &off, MEMRA_TYPE_F32, VD, R);
      c->gbeta = carve(b, &off, MEMRA_TYPE_F32, hp->ssm_v_heads, R);
      c->galpha = carve(b, &off, MEMRA_TYPE_F32, hp->ssm_v_heads, R);
      c->qg = carve(b, &off, MEMRA_TYPE_F32, 2 * QD, R);
    }
    if (!pass) {
      memra_status st = c->m->vt->buf_alloc(c->m->be, off, &c->act_buf);
      if (st)
        return memra_errf(err, st, "cannot allocate %.1f MiB of activations: %s", off / 1048576.0,
                          c->m->vt->last_error(c->m->be));
    }
  }
  return preset_shexp_ids(c, err);
}

memra_status memra_ctx_new(memra_model *m, const memra_ctx_params *p, memra_ctx **out,
                           memra_err *err) {
  *out = NULL;
  if (p->n_ctx < 1 || p->n_ctx > (1 << 24) || p->n_seq_max < 1 || p->n_seq_max > 4096 ||
      p->n_ubatch < 1 || p->n_ubatch > 65536 || p->block_size < 1 || p->block_size > 4096)
    return memra_errf(err, MEMRA_E_INVALID,
                      "context: n_ctx %d (1..16M), sequences %d (1..4096), ubatch %d "
                      "(1..65536), block size %d (1..4096)",
                      p->n_ctx, p->n_seq_max, p->n_ubatch, p->block_size);
  if (p->kv_type != MEMRA_TYPE_F16 && p->kv_type != MEMRA_TYPE_F32 &&
      p->kv_type != MEMRA_TYPE_F8_E4M3)
    return memra_errf(err, MEMRA_E_INVALID, "context: KV cache type must be F16, F32 or F8_E4M3");
  memra_ctx *c = memra_calloc(1, sizeof *c);
  if (!c) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  c->m = m;
  c->p = *p;
  int32_t max_blocks = (p->n_ctx + p->block_size - 1) / p->block_size;
  memra_status st = memra_kv_pages_init(&c->pages, max_blocks * p->n_seq_max, p->block_size,
                                        max_blocks, p->n_seq_max, err);
  if (!st) st = alloc_kv(c, err);
  if (!st) st = alloc_act(c, err);
  if (!st) st = alloc_rs(c, err);
  if (st) {
    memra_ctx_free(c);
    return st;
  }
  *out = c;
  return MEMRA_OK;
}

void memra_ctx_free(memra_ctx *c) {
  if (!c) return;
  if (c->kv_buf) c->m->vt->buf_free(c->m->be, c->kv_buf);
  if (c->act_buf) c->m->vt->buf_free(c->m->be, c->act_buf);
  if (c->rs_buf) c->m->vt->buf_free(c->m->be, c->rs_buf);
  memra_free(c->conv_state);
  memra_free(c->ssm_state);
  memra_free(c->k_cache);
  memra_free(c->v_cache);
  memra_kv_pages_free(&c->pages);
  memra_free(c);
}

static memra_status upload(memra_ctx *c, const memra_tensor *t, const void *src, uint64_t n,
                           memra_err *err) {
  memra_status st = c->m->vt->buf_upload(c->m->be, t->buf, t->offset, src, n);
  return st ? memra_ctx_fail(c, st, "upload", err) : MEMRA_OK;
}

/* Split-KV kernels pick their split count from this bound; powers of two keep the
 * number of distinct graphs small. */
static int32_t kv_bucket(int32_t max_pos) {
  int32_t b = 256;
  while (b < max_pos + 1)
    b *= 2;
  return b;
}

memra_status memra_ctx_set_rows(memra_ctx *c, int32_t n, const int32_t *tokens, const int32_t *pos,
                                const int32_t *seq, int32_t n_out, const int32_t *out_rows,
                                memra_err *err) {
  if (n < 1 || n > c->p.n_ubatch || n_out < 0 || n_out > n)
    return memra_errf(err, MEMRA_E_INVALID, "step of %d rows (%d with logits), limit %d", n, n_out,
                      c->p.n_ubatch);
  int32_t max_pos = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c->m->hp.n_vocab)
      return memra_errf(err, MEMRA_E_INVALID, "token id %d out of range 0..%d", tokens[i],
                        c->m->hp.n_vocab - 1);
    if (seq[i] < 0 || seq[i] >= c->p.n_seq_max || pos[i] < 0 ||
        pos[i] >= c->pages.n_blocks[seq[i]] * c->p.block_size)
      return memra_errf(err, MEMRA_E_INVALID, "row %d: sequence %d position %d has no KV page", i,
                        seq[i], pos[i]);
    if (pos[i] > max_pos) max_pos = pos[i];
  }
  for (int32_t i = 0; i < n_out; ++i)
    if (out_rows[i] < 0 || out_rows[i] >= n)
      return memra_errf(err, MEMRA_E_INVALID, "logit row %d out of range", out_rows[i]);
  memra_status st;
  if ((st = upload(c, &c->ids, tokens, 4u * n, err)) ||
      (st = upload(c, &c->pos, pos, 4u * n, err)) || (st = upload(c, &c->seq, seq, 4u * n, err)) ||
      (n_out && (st = upload(c, &c->out_rows, out_rows, 4u * n_out, err))))
    return st;
  if (c->pages.dirty) {
    if ((st = upload(c, &c->block_table, c->pages.tables,
                     4u * (uint64_t)c->pages.max_blocks * c->p.n_seq_max, err)))
      return st;
    c->pages.dirty = false;
  }
  c->n_rows = n;
  c->n_out = n_out;
  /* A sequence's rows come consecutively (decoder, eval, scheduler): a row is a decode
   * row when no neighbour shares its sequence. */
  c->n_decode = 0;
  while (c->n_decode < n && (c->n_decode + 1 == n || seq[c->n_decode + 1] != seq[c->n_decode]))
    c->n_decode++;
  /* the longest prefix of rows of pairwise distinct sequences (ABI 1.10 rope_kv_attend's
   * precondition for decode rows; the callers' consecutive rows make it so, this proves it) */
  uint64_t seen[4096 / 64] = {0}; /* n_seq_max <= 4096 (memra_ctx_new) */
  c->n_distinct = 0;
  while (c->n_distinct < n &&
         !(seen[seq[c->n_distinct] >> 6] & (1ull << (seq[c->n_distinct] & 63)))) {
    seen[seq[c->n_distinct] >> 6] |= 1ull << (seq[c->n_distinct] & 63);
    c->n_distinct++;
  }
  memra_tensor pos_t = c->pos, seq_t = c->seq;
  pos_t.ne0 = seq_t.ne0 = n;
  c->batch = (memra_batch){.n_rows = n,
                           .n_seqs = c->p.n_seq_max,
                           .block_size = c->p.block_size,
                           .max_blocks = c->pages.max_blocks,
                           .kv_bucket = kv_bucket(max_pos),
                           .pos = pos_t,
                           .seq = seq_t,
                           .block_table = c->block_table};
  return MEMRA_OK;
}

memra_status memra_ctx_get_logits(memra_ctx *c, float *dst, memra_err *err) {
  uint64_t n = (uint64_t)c->n_out * c->logits.nb1;
  memra_status st = c->m->vt->buf_download(c->m->be, c->logits.buf, c->logits.offset, dst, n);
  return st ? memra_ctx_fail(c, st, "download logits", err) : MEMRA_OK;
}

memra_status memra_ctx_argmax(memra_ctx *c, int32_t *dst, memra_err *err) {
  const memra_backend_vt *vt = c->m->vt;
  memra_tensor lg = c->logits, ids = c->next_ids;
  lg.ne1 = c->n_out;
  ids.ne0 = c->n_out;
  memra_status st = vt->argmax(c->m->be, &ids, &lg);
  if (st) return memra_ctx_fail(c, st, "argmax", err);
  st = vt->buf_download(c->m->be, ids.buf, ids.offset, dst, 4u * c->n_out);
  return st ? memra_ctx_fail(c, st, "download ids", err) : MEMRA_OK;
}

memra_status memra_ctx_eval(memra_ctx *c, int32_t seq, const int32_t *tokens, int32_t n,
                            int32_t pos0, bool all_logits, float *logits_out, memra_err *err) {
  if (n < 1) return memra_errf(err, MEMRA_E_INVALID, "nothing to evaluate (0 tokens)");
  memra_status st = memra_kv_pages_reserve(&c->pages, seq, pos0 + n, err);
  if (st) return st;
  const int32_t R = c->p.n_ubatch;
  int32_t *pos = memra_malloc(sizeof(int32_t) * 3 * (size_t)R);
  if (!pos) return memra_errf(err, MEMRA_E_OOM, "out of memory");
  int32_t *seqs = pos + R, *rows = pos + 2 * R;
  for (int32_t done = 0; done < n && !st; done += R) {
    int32_t m = n - done < R ? n - done : R;
    bool last = done + m == n;
    int32_t n_out = all_logits ? m : (last ? 1 : 0);
    for (int32_t i = 0; i < m; ++i) {
      pos[i] = pos0 + done + i;
      seqs[i] = seq;
      rows[i] = all_logits ? i : m - 1;
    }
    if ((st = memra_ctx_set_rows(c, m, tokens + done, pos, seqs, n_out, rows, err))) break;
    c->n_decode = 0; /* a prompt, even a one-row chunk of it */
    if ((st = memra_ctx_forward(c, err))) break;
    if (logits_out && n_out) {
      float *dst = logits_out + (all_logits ? (size_t)done * c->m->hp.n_vocab : 0);
      st = memra_ctx_get_logits(c, dst, err);
    }
  }
  memra_free(pos);
  return st;
}

memra_status memra_ctx_forward(memra_ctx *c, memra_err *err) {
  c->norm_defer.on = false; /* a failed step may have left one */
  c->proj_defer.on = c->proj_defer.ok = false;
  c->combine_defer.on = false;
  switch (c->m->hp.arch) {
  case MEMRA_ARCH_GEMMA3: return memra_gemma3_forward(c, err);
  case MEMRA_ARCH_QWEN3MOE: return memra_qwen3moe_forward(c, err);
  case MEMRA_ARCH_QWEN3NEXT:
  case MEMRA_ARCH_QWEN35:
  case MEMRA_ARCH_QWEN35MOE: return memra_qwen3next_forward(c, err);
  default: return memra_llama_forward(c, err);
  }
}
