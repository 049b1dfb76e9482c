/* matmul_dyn.cuh — dynamic tiles for the ring GEMVs v11 and v13 (MEMRA_T11_DYN; by default on the
 * output matrices alone; included by matmul.cu through matmul_q13.cuh and matmul_tc11.cuh).
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
#include "plugins/cuda/mbarrier.cuh"

enum { MM_DYN_SLOTS = 4 };

/* The ring units a v11 / v13 producer issues before its PDL wait (MEMRA_RING_PRE, a build define:
 * 1 by default; 0 or the stage count: all of the ring's stages, the form before 2026-12-05). The
 * small kernel before a GEMV (a norm, the glu, the rope) runs while the GEMV's blocks become
 * resident: all stages issued at once put ~18 MB of copies ahead of its loads, one stage ~9 MB.
 * H100 tg128 @ d512, one stage against all (docs/PERF.md, twenty-third session): Llama Q8_0
 * +2.8%, Q4_K_M +1.1%, hybrid Q4_K_M +1.0%, MoE +0.6%. The same bits either way. */
#ifndef MEMRA_RING_PRE
#define MEMRA_RING_PRE 1
#endif
/* Units of a ring of `stages` issued before the PDL wait when `want` are asked (0: all). */
__host__ __device__ constexpr int mm_pre_units(int want, int stages) {
  return want > 0 && want < stages ? want : stages;
}
/* EXPERIMENT (not yet timed): the units before the wait for rows longer than 4096 (the down
 * projections, whose small kernel before them is the glu) apart from the rest, MEMRA_RING_PRE_BIG
 * (build define; MEMRA_RING_PRE by default, the same code). Asks whether pre1's gain came from
 * one kind of launch and the other wants two. */
#ifndef MEMRA_RING_PRE_BIG
#define MEMRA_RING_PRE_BIG MEMRA_RING_PRE
#endif
__host__ __device__ constexpr int mm_ring_pre_k(int stages, int64_t K) {
  return mm_pre_units(K > 4096 ? MEMRA_RING_PRE_BIG : MEMRA_RING_PRE, stages);
}
__device__ unsigned mm_dyn_ctr[MM_DYN_SLOTS];

/* The next tile's ticket of a launch of n_tiles tiles (one thread of the block's producer). */
__device__ __forceinline__ int64_t mm_dyn_grab(int dslot, int64_t n_tiles) {
  const unsigned t = atomicAdd(&mm_dyn_ctr[dslot], 1u);
  if (t == (unsigned)(n_tiles + gridDim.x - 1)) atomicExch(&mm_dyn_ctr[dslot], 0u);
  return (int64_t)t;
}

/* The producer warp's tile at a ring unit (first: the unit starts a tile, which is then the
 * ticket taken a tile ago, and the next ticket is taken now). Past the last tile lane 0 marks the
 * stage -1 and completes its full barrier, so the consumers stop there, and false is returned;
 * else lane 0 notes the tile in the stage (before its arrive on the barrier, a release). */
__device__ __forceinline__ bool mm_dyn_produce(int dslot, int64_t n_tiles, bool first, int lane,
                                               int64_t *tile, int64_t *next, int64_t *stile,
                                               uint64_t *full) {
  if (first) {
    *tile = __shfl_sync(0xffffffffu, *next, 0);
    if (*tile < n_tiles && lane == 0) *next = mm_dyn_grab(dslot, n_tiles);
  }
  if (*tile >= n_tiles) {
    if (lane == 0) {
      *stile = -1;
      memra_mbar_arrive(full);
    }
    return false;
  }
  if (lane == 0) *stile = *tile;
  return true;
}

/* The consumers' tile of ring unit u (the first of a tile) in a ring of ST stages: its stage's
 * note once the stage is full (the unit's own wait after this returns at once), -1 past the last.
 */
__device__ __forceinline__ int64_t mm_dyn_consume(uint64_t *full, const int64_t *stile, int64_t u,
                                                  int ST) {
  memra_mbar_wait(&full[(int)(u % ST)], (uint32_t)(u / ST) & 1);
  return stile[u % ST];
}

/* A launch's plan: MEMRA_T11_DYN's mode (read once, 4 when unset: 0 off, 1 dynamic tiles on the
 * static split's grid, and v11's padding; 2 (v11) the same grid unpadded; 3 a block in every
 * resident slot, *grid widened to it; 4 mode 1 for v11's long launches alone (8 tiles a slot or
 * more: the output matrices, where 1 measured faster, not the projections, where it measured
 * slower; H100 Llama-8B Q4_K_M tg128 +0.3..0.7%, the MoE +0.8%, the hybrid even) and v13 (Q8_0)
 * static (its dynamic gate/up and output: +1.0% on an H100 when written, even there and -1.2% of
 * a Llama Q8_0 step on the H200 with the one-stage ring head start, docs/PERF.md twenty-fifth
 * session); 5 mode 4's rule for v13 too, the former default, A/B) where ok, 0 elsewhere, into
 * *mode (may be NULL); returns the counter slot for the kernel (the next of be's count), -1 for
 * the static split. */
static inline int mm_dyn_plan(const memra_backend *be, bool ok, bool v13, int64_t tiles,
                              int64_t slots, int64_t *grid, int *mode) {
  static const int env = [] {
    const char *e = getenv("MEMRA_T11_DYN");
    const int m = e ? atoi(e) : 4;
    return m < 0 || m > 5 ? 0 : m;
  }();
  /* MEMRA_T11_DYN_MIN: mode 4's tiles a slot (8 unless set). Launches of one tile a slot (Llama's
   * o and down) lose badly dynamic (a fast block takes a second tile: down 15 -> 27 us, H100
   * trace); 2 makes Llama's gate/up (6.8 a slot) dynamic too: Q4_K_M +0.5%, hybrid -0.9%, MoE
   * +0.4% on an H100 (docs/PERF.md, twenty-seventh session), so not the default */
  static const int64_t dmin = memra_cu_env_int("MEMRA_T11_DYN_MIN", 8, 1, 1 << 20);
  int m = ok ? env : 0;
  if (m == 4 && v13) m = 0;
  if (m >= 4) m = tiles >= dmin * slots ? 1 : 0;
  if (mode) *mode = m;
  if (m == 3) *grid = tiles < slots ? tiles : slots;
  return m ? (int)(((memra_backend *)be)->n_dyn++ % MM_DYN_SLOTS) : -1;
}

#endif /* MEMRA_CUDA_MATMUL_DYN_CUH */
