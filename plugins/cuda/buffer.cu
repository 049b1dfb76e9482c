/* buffer.cu — device buffers: cudaMalloc'd, copied on the backend's stream.
 * Uploads from pageable memory return once the source has been staged (the caller may
 * reuse it); downloads wait for the stream, so the data is there when they return. */
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/buffer.h"

static memra_status check_range(memra_backend *be, const memra_buf *b, uint64_t off, uint64_t n,
                                const char *what) {
  if (!b) return memra_cu_errf(be, MEMRA_E_INVALID, "%s: buffer is NULL", what);
  if (off > b->size || n > b->size - off)
    return memra_cu_errf(
        be, MEMRA_E_INVALID, "%s: %llu bytes at offset %llu overrun the buffer's %llu bytes", what,
        (unsigned long long)n, (unsigned long long)off, (unsigned long long)b->size);
  return MEMRA_OK;
}

memra_status memra_cu_buf_alloc(memra_backend *be, uint64_t nbytes, memra_buf **out) {
  if (!out) return memra_cu_errf(be, MEMRA_E_INVALID, "buf_alloc: out is NULL");
  *out = NULL;
  if (be->capturing)
    return memra_cu_errf(be, MEMRA_E_INVALID, "buf_alloc: not allowed inside graph capture");
  memra_buf *b = (memra_buf *)calloc(1, sizeof *b);
  if (!b) return memra_cu_errf(be, MEMRA_E_OOM, "buf_alloc: out of host memory");
  /* cudaMalloc(0) gives NULL; keep a real pointer so views of empty buffers stay valid. */
  cudaError_t e = cudaMalloc(&b->ptr, nbytes ? nbytes : 1);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* an OOM is not sticky: clear it */
    free(b);
    return memra_cu_errf(be, MEMRA_E_OOM, "buf_alloc: cudaMalloc of %llu bytes failed: %s",
                         (unsigned long long)nbytes, cudaGetErrorString(e));
  }
  b->size = nbytes;
  *out = b;
  return MEMRA_OK;
}

void memra_cu_buf_free(memra_backend *be, memra_buf *buf) {
  (void)be;
  if (!buf) return;
  cudaFree(buf->ptr); /* implicitly waits for work that uses it */
  free(buf);
}

memra_status memra_cu_buf_upload(memra_backend *be, memra_buf *dst, uint64_t off, const void *src,
                                 uint64_t nbytes) {
  memra_status st = check_range(be, dst, off, nbytes, "buf_upload");
  if (st != MEMRA_OK) return st;
  if (nbytes == 0) return MEMRA_OK;
  if (!src) return memra_cu_errf(be, MEMRA_E_INVALID, "buf_upload: src is NULL");
  MEMRA_CU(
      cudaMemcpyAsync((char *)dst->ptr + off, src, nbytes, cudaMemcpyHostToDevice, be->stream));
  return MEMRA_OK;
}

memra_status memra_cu_buf_download(memra_backend *be, const memra_buf *src, uint64_t off, void *dst,
                                   uint64_t nbytes) {
  memra_status st = check_range(be, src, off, nbytes, "buf_download");
  if (st != MEMRA_OK) return st;
  if (nbytes == 0) return MEMRA_OK;
  if (!dst) return memra_cu_errf(be, MEMRA_E_INVALID, "buf_download: dst is NULL");
  if (be->capturing)
    return memra_cu_errf(be, MEMRA_E_INVALID, "buf_download: not allowed inside graph capture");
  MEMRA_CU(cudaMemcpyAsync(dst, (const char *)src->ptr + off, nbytes, cudaMemcpyDeviceToHost,
                           be->stream));
  MEMRA_CU(cudaStreamSynchronize(be->stream));
  return MEMRA_OK;
}

memra_status memra_cu_buf_copy(memra_backend *be, memra_buf *dst, uint64_t dst_off,
                               const memra_buf *src, uint64_t src_off, uint64_t nbytes) {
  memra_status st = check_range(be, dst, dst_off, nbytes, "buf_copy: dst");
  if (st == MEMRA_OK) st = check_range(be, src, src_off, nbytes, "buf_copy: src");
  if (st != MEMRA_OK) return st;
  if (nbytes == 0) return MEMRA_OK;
  MEMRA_CU(cudaMemcpyAsync((char *)dst->ptr + dst_off, (const char *)src->ptr + src_off, nbytes,
                           cudaMemcpyDeviceToDevice, be->stream));
  return MEMRA_OK;
}

memra_status memra_cu_synchronize(memra_backend *be) {
  if (be->capturing)
    return memra_cu_errf(be, MEMRA_E_INVALID, "synchronize: not allowed inside graph capture");
  MEMRA_CU(cudaStreamSynchronize(be->stream));
  return MEMRA_OK;
}

/* The staging slots, made once: MEMRA_STAGE_SLOTS x MEMRA_STAGE_BYTES pinned bytes (a copy into
 * pinned memory is a real asynchronous copy, so the host can queue work behind it). */
static memra_status stage_init(memra_backend *be) {
  if (be->stage) return MEMRA_OK;
  void *p = NULL;
  MEMRA_CU(cudaMallocHost(&p, (size_t)MEMRA_STAGE_SLOTS * MEMRA_STAGE_BYTES));
  for (int i = 0; i < MEMRA_STAGE_SLOTS; ++i) {
    cudaError_t e = cudaEventCreateWithFlags(&be->stage_ev[i], cudaEventDisableTiming);
    if (e != cudaSuccess) {
      while (i-- > 0)
        cudaEventDestroy(be->stage_ev[i]);
      cudaFreeHost(p);
      return memra_cu_fail(be, e, "cudaEventCreateWithFlags", __FILE__, __LINE__);
    }
  }
  be->stage = (uint8_t *)p;
  return MEMRA_OK;
}

memra_status memra_cu_download_start(memra_backend *be, const memra_buf *src, uint64_t off,
                                     uint64_t nbytes, int32_t slot) {
  if (slot < 0 || slot >= MEMRA_STAGE_SLOTS)
    return memra_cu_errf(be, MEMRA_E_INVALID, "download_start: slot %d is not in 0..%d", (int)slot,
                         MEMRA_STAGE_SLOTS - 1);
  if (nbytes == 0 || nbytes > MEMRA_STAGE_BYTES)
    return memra_cu_errf(be, MEMRA_E_INVALID, "download_start: %llu bytes (1..%d)",
                         (unsigned long long)nbytes, MEMRA_STAGE_BYTES);
  if (be->stage_len[slot])
    return memra_cu_errf(be, MEMRA_E_INVALID, "download_start: slot %d still holds a copy",
                         (int)slot);
  memra_status st = check_range(be, src, off, nbytes, "download_start");
  if (st != MEMRA_OK) return st;
  if (be->capturing)
    return memra_cu_errf(be, MEMRA_E_INVALID, "download_start: not allowed inside graph capture");
  if ((st = stage_init(be)) != MEMRA_OK) return st;
  uint8_t *dst = be->stage + (size_t)slot * MEMRA_STAGE_BYTES;
  MEMRA_CU(cudaMemcpyAsync(dst, (const char *)src->ptr + off, nbytes, cudaMemcpyDeviceToHost,
                           be->stream));
  MEMRA_CU(cudaEventRecord(be->stage_ev[slot], be->stream));
  be->stage_len[slot] = nbytes;
  return MEMRA_OK;
}

memra_status memra_cu_download_wait(memra_backend *be, int32_t slot, void *dst, uint64_t nbytes) {
  if (slot < 0 || slot >= MEMRA_STAGE_SLOTS)
    return memra_cu_errf(be, MEMRA_E_INVALID, "download_wait: slot %d is not in 0..%d", (int)slot,
                         MEMRA_STAGE_SLOTS - 1);
  if (!be->stage_len[slot])
    return memra_cu_errf(be, MEMRA_E_INVALID, "download_wait: slot %d holds no copy", (int)slot);
  if (nbytes != be->stage_len[slot])
    return memra_cu_errf(be, MEMRA_E_INVALID, "download_wait: %llu bytes asked, slot %d holds %llu",
                         (unsigned long long)nbytes, (int)slot,
                         (unsigned long long)be->stage_len[slot]);
  if (!dst) return memra_cu_errf(be, MEMRA_E_INVALID, "download_wait: dst is NULL");
  be->stage_len[slot] = 0; /* the slot is free again whether or not the wait succeeds */
  MEMRA_CU(cudaEventSynchronize(be->stage_ev[slot]));
  memcpy(dst, be->stage + (size_t)slot * MEMRA_STAGE_BYTES, nbytes);
  return MEMRA_OK;
}

void memra_cu_stage_free(memra_backend *be) {
  if (!be->stage) return;
  for (int i = 0; i < MEMRA_STAGE_SLOTS; ++i)
    cudaEventDestroy(be->stage_ev[i]);
  cudaFreeHost(be->stage);
  be->stage = NULL;
}
