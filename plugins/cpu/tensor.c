/* tensor.c — validation of tensor views and batch descriptors at the door of each op.
 * Every count and offset is checked against the bytes that back it (overflow-safe), so
 * hostile shapes give a one-line error naming the op, never an out-of-bounds access. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

#define CPU_MAX_NE ((int64_t)1 << 40) /* far beyond any model; keeps byte math in range */

static unsigned elem_align(int32_t type) {
  switch (type) {
  case MEMRA_TYPE_F32:
  case MEMRA_TYPE_I32: return 4;
  case MEMRA_TYPE_I64:
  case MEMRA_TYPE_F64: return 8;
  case MEMRA_TYPE_I8: return 1;
  default: return 2; /* F16, BF16, I16 and every ggml block (they open with a half) */
  }
}

static const char *type_name(int32_t t) {
  const char *n = memra_type_info(t).name;
  return n ? n : "an unknown type";
}

/* "F32 or F16" from a mask, for messages. */
static void mask_names(uint64_t mask, char *out, size_t n) {
  out[0] = '\0';
  size_t len = 0;
  for (int t = 0; t < 64; ++t) {
    if (!(mask & (1ull << t))) continue;
    int w = snprintf(out + len, n - len, "%s%s", len ? " or " : "", type_name(t));
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
}

memra_status cpu_check(memra_backend *be, const char *op, const char *name, const memra_tensor *t,
                       uint64_t type_mask) {
  if (!cpu_present(t)) return cpu_fail(be, MEMRA_E_INVALID, "%s: tensor %s is absent", op, name);
  if (t->buf->magic != CPU_BUF_MAGIC)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: %s is not a buffer of the CPU backend", op, name);
  bool known = t->type >= 0 && t->type < 64 && memra_type_info(t->type).blck > 0;
  if (!known || (type_mask && !(type_mask & (1ull << t->type)))) {
    char want[96];
    mask_names(type_mask, want, sizeof want);
    if (!type_mask) snprintf(want, sizeof want, "a known type");
    if (!known)
      return cpu_fail(be, MEMRA_E_INVALID, "%s: %s has unknown type id %d, expected %s", op, name,
                      (int)t->type, want);
    return cpu_fail(be, MEMRA_E_UNSUPPORTED, "%s: %s has type %s, expected %s", op, name,
                    type_name(t->type), want);
  }
  if (t->ne0 < 1 || t->ne0 > CPU_MAX_NE || t->ne1 < 0 || t->ne1 > CPU_MAX_NE)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: %s has shape [%" PRId64 ", %" PRId64 "]", op, name,
                    t->ne1, t->ne0);
  uint64_t row = memra_type_row_bytes(t->type, t->ne0);
  if (row == 0)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %s row of %" PRId64 " elements is not a whole number of %s blocks of %d",
                    op, name, t->ne0, type_name(t->type), (int)memra_type_info(t->type).blck);
  unsigned a = elem_align(t->type);
  if (t->offset % a != 0 || (t->ne1 > 1 && t->nb1 % a != 0))
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %s offset %" PRIu64 " or row stride %" PRIu64 " is not %u-byte aligned",
                    op, name, t->offset, t->nb1, a);
  if (t->ne1 > 1 && t->nb1 < row)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %s row stride %" PRIu64 " is below its row size %" PRIu64, op, name,
                    t->nb1, row);
  uint64_t size = t->buf->size, extent = 0;
  if (t->ne1 > 0) {
    uint64_t gaps = (uint64_t)(t->ne1 - 1);
    if (gaps && t->nb1 > (UINT64_MAX - row) / gaps)
      return cpu_fail(be, MEMRA_E_INVALID, "%s: %s spans more than 2^64 bytes", op, name);
    extent = gaps * t->nb1 + row;
  }
  if (t->offset > size || extent > size - t->offset)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %s needs bytes [%" PRIu64 ", %" PRIu64 " + %" PRIu64
                    ") but its buffer has %" PRIu64,
                    op, name, t->offset, t->offset, extent, size);
  return MEMRA_OK;
}

memra_status cpu_check_shape(memra_backend *be, const char *op, const char *name,
                             const memra_tensor *t, uint64_t type_mask, int64_t ne0, int64_t ne1) {
  memra_status st = cpu_check(be, op, name, t, type_mask);
  if (st != MEMRA_OK) return st;
  if ((ne0 >= 0 && t->ne0 != ne0) || (ne1 >= 0 && t->ne1 != ne1)) {
    char want0[24] = "*", want1[24] = "*";
    if (ne0 >= 0) snprintf(want0, sizeof want0, "%" PRId64, ne0);
    if (ne1 >= 0) snprintf(want1, sizeof want1, "%" PRId64, ne1);
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %s has shape [%" PRId64 ", %" PRId64 "], expected [%s, %s]", op, name,
                    t->ne1, t->ne0, want1, want0);
  }
  return MEMRA_OK;
}

int64_t cpu_batch_slot(const memra_batch *b, int32_t seq, int32_t pos) {
  int32_t page;
  memcpy(&page, cpu_row(&b->block_table, seq) + 4 * (int64_t)(pos / b->block_size), 4);
  return (int64_t)page * b->block_size + pos % b->block_size;
}

memra_status cpu_batch_check(memra_backend *be, const char *op, const memra_batch *b) {
  if (!b) return cpu_fail(be, MEMRA_E_INVALID, "%s: batch is absent", op);
  if (b->n_rows < 0 || b->n_seqs < 1 || b->block_size < 1 || b->max_blocks < 1 || b->kv_bucket < 1)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: batch has n_rows %d, n_seqs %d, block_size %d, max_blocks %d, kv_bucket "
                    "%d (each must be >= 1, n_rows >= 0)",
                    op, b->n_rows, b->n_seqs, b->block_size, b->max_blocks, b->kv_bucket);
  memra_status st;
  if ((st = cpu_check_shape(be, op, "batch.pos", &b->pos, CPU_I32, -1, 1)) ||
      (st = cpu_check_shape(be, op, "batch.seq", &b->seq, CPU_I32, -1, 1)) ||
      (st = cpu_check_shape(be, op, "batch.block_table", &b->block_table, CPU_I32, b->max_blocks,
                            -1)))
    return st;
  if (b->pos.ne0 < b->n_rows || b->seq.ne0 < b->n_rows)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: batch.pos/seq hold %" PRId64 "/%" PRId64 " entries, batch has %d rows", op,
                    b->pos.ne0, b->seq.ne0, b->n_rows);
  if (b->block_table.ne1 < b->n_seqs)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: batch.block_table has %" PRId64 " rows, batch has %d sequences", op,
                    b->block_table.ne1, b->n_seqs);
  for (int32_t r = 0; r < b->n_rows; ++r) {
    int32_t pos = cpu_i32_at(&b->pos, r), seq = cpu_i32_at(&b->seq, r);
    if (seq < 0 || seq >= b->n_seqs)
      return cpu_fail(be, MEMRA_E_INVALID, "%s: row %d has sequence %d, batch has %d", op, r, seq,
                      b->n_seqs);
    if (pos < 0 || pos >= b->kv_bucket)
      return cpu_fail(be, MEMRA_E_INVALID, "%s: row %d has position %d, outside [0, kv_bucket %d)",
                      op, r, pos, b->kv_bucket);
    if (pos / b->block_size >= b->max_blocks)
      return cpu_fail(be, MEMRA_E_INVALID,
                      "%s: row %d position %d needs block %d, block_table has %d columns", op, r,
                      pos, pos / b->block_size, b->max_blocks);
  }
  return MEMRA_OK;
}

bool cpu_overlap(const memra_tensor *a, const memra_tensor *b) {
  if (a->buf != b->buf || a->ne1 == 0 || b->ne1 == 0) return false;
  uint64_t a1 = a->offset + (uint64_t)(a->ne1 - 1) * a->nb1 + memra_type_row_bytes(a->type, a->ne0);
  uint64_t b1 = b->offset + (uint64_t)(b->ne1 - 1) * b->nb1 + memra_type_row_bytes(b->type, b->ne0);
  return a->offset < b1 && b->offset < a1;
}
