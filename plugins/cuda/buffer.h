/* buffer.h — device buffers and the stream's copies (buffer.cu). */
#ifndef MEMRA_CUDA_BUFFER_H
#define MEMRA_CUDA_BUFFER_H

#include "plugins/cuda/cuda_common.h"

memra_status memra_cu_buf_alloc(memra_backend *be, uint64_t nbytes, memra_buf **out);
void memra_cu_buf_free(memra_backend *be, memra_buf *buf);
memra_status memra_cu_buf_upload(memra_backend *be, memra_buf *dst, uint64_t off, const void *src,
                                 uint64_t nbytes);
memra_status memra_cu_buf_download(memra_backend *be, const memra_buf *src, uint64_t off, void *dst,
                                   uint64_t nbytes);
memra_status memra_cu_buf_copy(memra_backend *be, memra_buf *dst, uint64_t dst_off,
                               const memra_buf *src, uint64_t src_off, uint64_t nbytes);
memra_status memra_cu_synchronize(memra_backend *be);
/* ABI 1.18: buf_download in two halves, through pinned staging slots and an event each. */
memra_status memra_cu_download_start(memra_backend *be, const memra_buf *src, uint64_t off,
                                     uint64_t nbytes, int32_t slot);
memra_status memra_cu_download_wait(memra_backend *be, int32_t slot, void *dst, uint64_t nbytes);
/* Frees the staging slots (at close, after the stream has drained). */
void memra_cu_stage_free(memra_backend *be);

#endif
