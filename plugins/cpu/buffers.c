/* buffers.c — device memory on the CPU is plain host memory, 64-byte aligned. Every
 * transfer is bounds-checked (overflow-safe) before it touches a byte. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cpu/cpu_backend.h"

static memra_status check_range(memra_backend *be, const char *op, const char *name,
                                const memra_buf *b, uint64_t off, uint64_t n) {
  if (!b) return cpu_fail(be, MEMRA_E_INVALID, "%s: %s buffer is NULL", op, name);
  if (b->magic != CPU_BUF_MAGIC)
    return cpu_fail(be, MEMRA_E_INVALID, "%s: %s is not a buffer of the CPU backend", op, name);
  if (off > b->size || n > b->size - off)
    return cpu_fail(be, MEMRA_E_INVALID,
                    "%s: %s range [%" PRIu64 ", %" PRIu64 " + %" PRIu64 ") is outside its %" PRIu64
                    " bytes",
                    op, name, off, off, n, b->size);
  return MEMRA_OK;
}

memra_status cpu_buf_alloc(memra_backend *be, uint64_t nbytes, memra_buf **out) {
  if (!out) return cpu_fail(be, MEMRA_E_INVALID, "buf_alloc: out is NULL");
  *out = NULL;
  /* aligned_alloc wants a multiple of the alignment; keep at least one line. */
  if (nbytes > SIZE_MAX - CPU_ALIGN || nbytes > (uint64_t)1 << 48)
    return cpu_fail(be, MEMRA_E_OOM, "buf_alloc: %" PRIu64 " bytes is more than this host has",
                    nbytes);
  size_t len = ((size_t)nbytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
  if (len == 0) len = CPU_ALIGN;
  memra_buf *b = malloc(sizeof *b);
  uint8_t *data = b ? aligned_alloc(CPU_ALIGN, len) : NULL;
  if (!data) {
    free(b);
    return cpu_fail(be, MEMRA_E_OOM, "buf_alloc: cannot allocate %" PRIu64 " bytes", nbytes);
  }
  *b = (memra_buf){.magic = CPU_BUF_MAGIC, .size = nbytes, .data = data};
  *out = b;
  return MEMRA_OK;
}

void cpu_buf_free(memra_backend *be, memra_buf *buf) {
  (void)be;
  if (!buf || buf->magic != CPU_BUF_MAGIC) return;
  buf->magic = 0; /* a second free is ignored instead of corrupting the heap */
  free(buf->data);
  free(buf);
}

memra_status cpu_buf_upload(memra_backend *be, memra_buf *dst, uint64_t off, const void *src,
                            uint64_t nbytes) {
  memra_status st = check_range(be, "buf_upload", "dst", dst, off, nbytes);
  if (st != MEMRA_OK) return st;
  if (nbytes && !src) return cpu_fail(be, MEMRA_E_INVALID, "buf_upload: src is NULL");
  if (nbytes) memcpy(dst->data + off, src, nbytes);
  return MEMRA_OK;
}

memra_status cpu_buf_download(memra_backend *be, const memra_buf *src, uint64_t off, void *dst,
                              uint64_t nbytes) {
  memra_status st = check_range(be, "buf_download", "src", src, off, nbytes);
  if (st != MEMRA_OK) return st;
  if (nbytes && !dst) return cpu_fail(be, MEMRA_E_INVALID, "buf_download: dst is NULL");
  if (nbytes) memcpy(dst, src->data + off, nbytes);
  return MEMRA_OK;
}

memra_status cpu_download_start(memra_backend *be, const memra_buf *src, uint64_t off,
                                uint64_t nbytes, int32_t slot) {
  if (slot < 0 || slot >= MEMRA_STAGE_SLOTS)
    return cpu_fail(be, MEMRA_E_INVALID, "download_start: slot %d is not in 0..%d", (int)slot,
                    MEMRA_STAGE_SLOTS - 1);
  if (nbytes == 0 || nbytes > MEMRA_STAGE_BYTES)
    return cpu_fail(be, MEMRA_E_INVALID, "download_start: %" PRIu64 " bytes (1..%d)", nbytes,
                    MEMRA_STAGE_BYTES);
  if (be->stage_len[slot])
    return cpu_fail(be, MEMRA_E_INVALID, "download_start: slot %d still holds a copy", (int)slot);
  memra_status st = check_range(be, "download_start", "src", src, off, nbytes);
  if (st != MEMRA_OK) return st;
  memcpy(be->stage[slot], src->data + off, nbytes);
  be->stage_len[slot] = nbytes;
  return MEMRA_OK;
}

memra_status cpu_download_wait(memra_backend *be, int32_t slot, void *dst, uint64_t nbytes) {
  if (slot < 0 || slot >= MEMRA_STAGE_SLOTS)
    return cpu_fail(be, MEMRA_E_INVALID, "download_wait: slot %d is not in 0..%d", (int)slot,
                    MEMRA_STAGE_SLOTS - 1);
  if (!be->stage_len[slot])
    return cpu_fail(be, MEMRA_E_INVALID, "download_wait: slot %d holds no copy", (int)slot);
  if (nbytes != be->stage_len[slot])
    return cpu_fail(be, MEMRA_E_INVALID,
                    "download_wait: %" PRIu64 " bytes asked, slot %d holds %" PRIu64, nbytes,
                    (int)slot, be->stage_len[slot]);
  if (!dst) return cpu_fail(be, MEMRA_E_INVALID, "download_wait: dst is NULL");
  memcpy(dst, be->stage[slot], nbytes);
  be->stage_len[slot] = 0;
  return MEMRA_OK;
}

memra_status cpu_buf_copy(memra_backend *be, memra_buf *dst, uint64_t dst_off, const memra_buf *src,
                          uint64_t src_off, uint64_t nbytes) {
  memra_status st = check_range(be, "buf_copy", "dst", dst, dst_off, nbytes);
  if (st == MEMRA_OK) st = check_range(be, "buf_copy", "src", src, src_off, nbytes);
  if (st != MEMRA_OK) return st;
  if (nbytes) memmove(dst->data + dst_off, src->data + src_off, nbytes); /* may overlap */
  return MEMRA_OK;
}
