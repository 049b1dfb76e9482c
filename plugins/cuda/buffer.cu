/* buffer.cu — device buffers: cudaMalloc'd, copied on the backend's stream.
 * Uploads from pageable memory return once the source has been staged (the caller may
 * reuse it); downloads wait for the stream, so the data is there when they return. */
#include <stdlib.h>

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
