/* bench_floor.h — memra bench's bandwidth floor: the backend's own buffer-to-buffer copy
 * rate, measured in the same run, over the bytes a decode step moves (core traffic.h). */
#ifndef MEMRA_BENCH_FLOOR_H
#define MEMRA_BENCH_FLOOR_H

#include "core/models/context.h"

/* Median copy bandwidth in GB/s (1e9 bytes per second, bytes read plus written) of
 * buf_copy between two buffers of up to max_bytes (halved down to 16 MiB while the
 * allocation fails). *copied: the buffer size used. Fails only when not even 16 MiB fit. */
memra_status memra_bench_copy_gbps(const memra_backend_vt *vt, memra_backend *be,
                                   uint64_t max_bytes, double *gbps, uint64_t *copied,
                                   memra_err *err);

/* The decode floor in tokens/s of n_gen steps after depth positions of context: the
 * bandwidth over the mean bytes of those steps (step i attends to depth + i + 1). */
double memra_bench_tg_floor(const memra_ctx *c, double gbps, int32_t depth, int32_t n_gen);

#endif
