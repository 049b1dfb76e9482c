#include "core/decode/decoder.h"

#include <stdlib.h>
#include <string.h>

static int bucket_index(int32_t bucket) {
  int i = 0;
  while ((256 << i) < bucket)
    ++i;
  return i;
}

memra_status memra_decoder_init(memra_decoder *d, memra_ctx *c, int32_t n_seq,
                                const int32_t *tokens, const int32_t *pos, bool use_graph,
                                memra_err *err) {
  memset(d, 0, sizeof *d);
  if (n_seq < 1 || n_seq > 64 || n_seq > c->p.n_seq_max || n_seq > c->p.n_ubatch)
    return memra_errf(err, MEMRA_E_INVALID, "decoder: %d sequences (1..%d)", n_seq,
                      c->p.n_seq_max < 64 ? c->p.n_seq_max : 64);
  d->c = c;
  d->n_seq = n_seq;
  const char *env = getenv("MEMRA_LOOKAHEAD"); /* read once, not every step */
  d->lookahead_off = env && env[0] == '0';
  const memra_backend_vt *vt = c->m->vt;
  d->use_graph = use_graph && vt->graph_begin && vt->graph_end && vt->graph_launch;
  int32_t seq[64], rows[64];
  for (int32_t i = 0; i < n_seq; ++i) {
    seq[i] = rows[i] = i;
    d->pos[i] = pos[i];
    memra_status st = memra_kv_pages_reserve(&c->pages, i, pos[i] + 1, err);
    if (st) return st;
  }
  return memra_ctx_set_rows(c, n_seq, tokens, pos, seq, n_seq, rows, err);
}

/* The step as vtable calls: forward, argmax into the ids, positions + 1. */
static memra_status record_step(memra_decoder *d, memra_err *err) {
  memra_ctx *c = d->c;
  const memra_backend_vt *vt = c->m->vt;
  memra_status st = memra_ctx_forward(c, err);
  if (st) return st;
  memra_tensor lg = c->logits, ids = c->ids, pos = c->pos;
  lg.ne1 = d->n_seq;
  ids.ne0 = pos.ne0 = d->n_seq;
  if (d->sampling) {
    memra_tensor rng = d->rng;
    rng.ne0 = d->n_seq;
    if ((st = vt->sample(c->m->be, &ids, &lg, &rng, &d->sp)))
      return memra_ctx_fail(c, st, "sample", err);
  } else if ((st = vt->argmax(c->m->be, &ids, &lg))) {
    return memra_ctx_fail(c, st, "argmax", err);
  }
  if ((st = vt->add_i32(c->m->be, &pos, 1))) return memra_ctx_fail(c, st, "add_i32", err);
  return MEMRA_OK;
}

/* The bucket of a step whose largest position is max_pos: 256, 512, ... (the split count of
 * split-KV attention is captured per bucket). */
static int32_t bucket_of(int32_t max_pos) {
  int32_t bucket = 256;
  while (bucket < max_pos + 1)
    bucket *= 2;
  return bucket;
}

static int32_t max_pos_of(const memra_decoder *d) {
  int32_t m = 0;
  for (int32_t i = 0; i < d->n_seq; ++i)
    if (d->pos[i] > m) m = d->pos[i];
  return m;
}

/* KV pages for every row's next position. */
static memra_status reserve_rows(memra_decoder *d, memra_err *err) {
  for (int32_t i = 0; i < d->n_seq; ++i) {
    memra_status st = memra_kv_pages_reserve(&d->c->pages, i, d->pos[i] + 1, err);
    if (st) return st;
  }
  return MEMRA_OK;
}

/* Queues one step after the pages are reserved: the block tables if a page is new, then the
 * graph of the step's bucket (captured the first time) or the eager calls; advances the host
 * positions. */
static memra_status queue_step(memra_decoder *d, memra_err *err) {
  memra_ctx *c = d->c;
  const memra_backend_vt *vt = c->m->vt;
  memra_backend *be = c->m->be;
  const int32_t max_pos = max_pos_of(d);
  memra_status st = MEMRA_OK;
  if (c->pages.dirty) { /* a new page: the block table changes outside the graph */
    st = vt->buf_upload(be, c->block_table.buf, c->block_table.offset, c->pages.tables,
                        4u * (uint64_t)c->pages.max_blocks * c->p.n_seq_max);
    if (st) return memra_ctx_fail(c, st, "upload block tables", err);
    c->pages.dirty = false;
  }
  const int32_t bucket = bucket_of(max_pos);
  c->batch.kv_bucket = bucket;
  d->buckets_seen |= 1u << bucket_index(bucket);
  if (!d->use_graph)
    st = record_step(d, err);
  else {
    int bi = bucket_index(bucket);
    if (bi >= MEMRA_DECODER_MAX_BUCKETS)
      return memra_errf(err, MEMRA_E_INVALID, "decoder: position %d beyond the last bucket",
                        max_pos);
    if (!d->graphs[bi]) {
      if ((st = vt->graph_begin(be))) return memra_ctx_fail(c, st, "graph_begin", err);
      memra_status rec = record_step(d, err);
      memra_graph *g = NULL;
      st = vt->graph_end(be, &g);
      if (rec) return rec;
      if (st) return memra_ctx_fail(c, st, "graph_end", err);
      d->graphs[bi] = g;
      d->n_captures++;
    }
    if ((st = vt->graph_launch(be, d->graphs[bi])))
      return memra_ctx_fail(c, st, "graph_launch", err);
  }
  if (st) return st;
  for (int32_t i = 0; i < d->n_seq; ++i)
    d->pos[i]++;
  return MEMRA_OK;
}

static bool pipelined(const memra_decoder *d) {
  const memra_backend_vt *vt = d->c->m->vt;
  return d->lookahead && !d->lookahead_off && vt->download_start && vt->download_wait;
}

/* Queues one step and its tokens' copy into the staging slot after the last one in flight. */
static memra_status queue_with_copy(memra_decoder *d, memra_err *err) {
  memra_ctx *c = d->c;
  memra_status st = queue_step(d, err);
  if (st) return st;
  const int32_t slot = (d->slot_head + d->in_flight) % 2;
  if ((st = c->m->vt->download_start(c->m->be, c->ids.buf, c->ids.offset, 4u * (uint64_t)d->n_seq,
                                     slot)))
    return memra_ctx_fail(c, st, "download ids", err);
  d->in_flight++;
  return MEMRA_OK;
}

/* Whether the step after the one in flight may be queued now: its positions fit the context,
 * its graph exists (no capture while a step runs) and its pages could be reserved. */
static bool ahead_ready(memra_decoder *d) {
  memra_ctx *c = d->c;
  const int32_t max_pos = max_pos_of(d);
  if (max_pos + 1 > c->p.n_ctx) return false;
  const int bi = bucket_index(bucket_of(max_pos));
  if (d->use_graph && (bi >= MEMRA_DECODER_MAX_BUCKETS || !d->graphs[bi])) return false;
  memra_err scratch = {{0}};
  return reserve_rows(d, &scratch) == MEMRA_OK; /* else the next call reports it */
}

memra_status memra_decoder_step(memra_decoder *d, int32_t *out, memra_err *err) {
  memra_ctx *c = d->c;
  const memra_backend_vt *vt = c->m->vt;
  memra_status st;
  if (!pipelined(d) && d->in_flight == 0) {
    if ((st = reserve_rows(d, err)) || (st = queue_step(d, err))) return st;
    if ((st = vt->buf_download(c->m->be, c->ids.buf, c->ids.offset, out, 4u * (uint64_t)d->n_seq)))
      return memra_ctx_fail(c, st, "download ids", err);
    return MEMRA_OK;
  }
  if (d->in_flight == 0 && ((st = reserve_rows(d, err)) || (st = queue_with_copy(d, err))))
    return st;
  if (d->in_flight == 1 && pipelined(d) && ahead_ready(d)) {
    if ((st = queue_with_copy(d, err))) return st;
    d->n_ahead++;
  }
  const int32_t slot = d->slot_head;
  d->slot_head = (d->slot_head + 1) % 2;
  d->in_flight--;
  if ((st = vt->download_wait(c->m->be, slot, out, 4u * (uint64_t)d->n_seq)))
    return memra_ctx_fail(c, st, "download ids", err);
  return MEMRA_OK;
}

bool memra_decoder_can_look_ahead(const memra_decoder *d) {
  const memra_backend_vt *vt = d->c->m->vt;
  return !d->c->conv_state && !d->c->ssm_state && vt->download_start && vt->download_wait;
}

memra_status memra_decoder_set_sampling(memra_decoder *d, const memra_sample_params *p,
                                        uint64_t seed, memra_err *err) {
  memra_ctx *c = d->c;
  const memra_backend_vt *vt = c->m->vt;
  if (d->n_captures > 0)
    return memra_errf(err, MEMRA_E_INVALID, "decoder: sampling must be set before the first step");
  if (!vt->sample)
    return memra_errf(err, MEMRA_E_UNSUPPORTED, "backend %s has no sample op (ABI 1.2)", vt->name);
  uint64_t states[64];
  for (int32_t i = 0; i < d->n_seq; ++i)
    states[i] = seed + (uint64_t)i;
  memra_status st = MEMRA_OK;
  if (!d->rng_buf && (st = vt->buf_alloc(c->m->be, 8u * 64, &d->rng_buf)))
    return memra_ctx_fail(c, st, "allocate sampler state", err);
  if ((st = vt->buf_upload(c->m->be, d->rng_buf, 0, states, 8u * (uint64_t)d->n_seq)))
    return memra_ctx_fail(c, st, "upload sampler state", err);
  d->rng = (memra_tensor){.buf = d->rng_buf,
                          .type = MEMRA_TYPE_I64,
                          .ne0 = d->n_seq,
                          .ne1 = 1,
                          .nb1 = 8u * (uint64_t)d->n_seq};
  d->sp = *p;
  d->sampling = true;
  return MEMRA_OK;
}

void memra_decoder_free(memra_decoder *d) {
  if (!d->c) return;
  const memra_backend_vt *vt = d->c->m->vt;
  for (; d->in_flight > 0; --d->in_flight) { /* a step queued ahead: its copy's slot freed */
    int32_t ids[64];
    (void)vt->download_wait(d->c->m->be, d->slot_head, ids, 4u * (uint64_t)d->n_seq);
    d->slot_head = (d->slot_head + 1) % 2;
  }
  if (d->rng_buf) vt->buf_free(d->c->m->be, d->rng_buf);
  for (int i = 0; i < MEMRA_DECODER_MAX_BUCKETS; ++i)
    if (d->graphs[i] && vt->graph_free) vt->graph_free(d->c->m->be, d->graphs[i]);
  memset(d, 0, sizeof *d);
}
