/* matmul_dyn.cuh — dynamic tiles for the ring GEMVs v11 and v13 (MEMRA_T11_DYN, opt-in; included
 * by matmul.cu through matmul_q13.cuh and matmul_tc11.cuh).
 *
 * Why (docs/PERF.md, eighteenth session): a static split (tiles b, b + grid, ...) lasts as long
 * as its most crowded SM, so v11 pads its blocks' shared memory to hold a launch to the blocks an
 * SM its grid needs, which also keeps the next launch's blocks off the SM. With dynamic tiles a
 * block's producer takes its next tile from a counter in global memory, one tile ahead, and tells
 * the consumers which tile a stage holds: the blocks share the tiles however the hardware placed
 * them. Every block takes exactly one ticket past the last tile; the block taking the launch's
 * last ticket resets the counter. A launch's counter is one of MM_DYN_SLOTS by its count
 * (memra_backend.n_dyn): a slot is used again four dynamic launches later, and a ring GEMV
 * triggers its dependents only after its PDL wait, so the launch that used the slot before has
 * completed by then. A tile's arithmetic does not depend on the block that runs it: the same
 * bits as the static split. */
#ifndef MEMRA_CUDA_MATMUL_DYN_CUH
#define MEMRA_CUDA_MATMUL_DYN_CUH

#include <stdint.h>
#include <stdlib.h>

#include "plugins/cuda/cuda_common.h"

enum { MM_DYN_SLOTS = 4 };
__device__ unsigned mm_dyn_ctr[MM_DYN_SLOTS];

/* The next tile's ticket of a launch of n_tiles tiles (one thread of the block's producer). */
__device__ __forceinline__ int64_t mm_dyn_grab(int dslot, int64_t n_tiles) {
  const unsigned t = atomicAdd(&mm_dyn_ctr[dslot], 1u);
  if (t == (unsigned)(n_tiles + gridDim.x - 1)) atomicExch(&mm_dyn_ctr[dslot], 0u);
  return (int64_t)t;
}

/* MEMRA_T11_DYN's value (read per call): 0 off, 1 dynamic tiles on the static split's grid (v11:
 * and its padding), 2 (v11) the same grid unpadded, 3 a block in every resident slot. */
static inline int mm_dyn_mode(void) {
  const char *e = getenv("MEMRA_T11_DYN");
  const int m = e ? atoi(e) : 0;
  return m < 0 || m > 3 ? 0 : m;
}

/* The counter slot of the next dynamic launch on be. */
static inline int mm_dyn_slot(const memra_backend *be) {
  return (int)(((memra_backend *)be)->n_dyn++ % MM_DYN_SLOTS);
}

#endif /* MEMRA_CUDA_MATMUL_DYN_CUH */
