/* matmul_early.cuh — EXPERIMENT (build define MEMRA_V_EARLY, 0 by default: none of this is
 * compiled in): a v5 GEMV that runs beside the rmsnorm_matmul_n launch before it instead of
 * after it (included by matmul.cu through matmul_norm13.cuh and matmul_kq.cuh).
 *
 * Why (docs/PERF.md, twenty-fifth session's trace): in half of a Llama Q4_K_M file's layers
 * attn_v is Q6_K, so q / k (Q4_K, v11 with the attention norm in its head) and v (Q6_K, v5, grid
 * 512) are two launches on the chain: q/k 9.9 us, then v 3.8 us for 1.1 us of bytes, against
 * 9.8 us for a layer whose q / k / v are one launch.
 *
 * Protocol (one stream a device; the q/k launch and v are consecutive launches):
 *  - the q/k launch's block 0 writes xn (rmsnorm's row, v's x), then its consumer threads meet at
 *    a barrier and thread 0 publishes the launch's tag in mm_xn_ready (fence, then the store);
 *  - v's blocks do not wait for the q/k grid at their start: thread 0 spins until mm_xn_ready
 *    holds the tag, the block meets, then triggers its dependents and reads x past L1 (ld.cg:
 *    xn was written by another SM while this grid ran); the block taking the last ticket resets
 *    mm_xn_ready to 0 (every block has seen the tag by then) and the ticket count;
 *  - v's threads wait for the q/k grid (griddepcontrol.wait) at their end, so v completes only
 *    after q/k and the launch after v (rope_kv) sees both, as the PDL chain requires.
 * MEMRA_V_EARLY=1 triggers v's dependents once the tag is seen (rope_kv, the attention and o may
 * then be scheduled while q/k still streams); =2 lets them start only at v's exit.
 * A tag is the q/k launch's index (be->n_launch) with the top bit set, unique among a captured
 * graph's launches, so a value left by another launch site never matches; one left by the same
 * site in the graph's last replay was reset by that replay's v. v writes only its own output,
 * which no launch in flight beside it reads. The arithmetic is v5's: the same bits. */
#ifndef MEMRA_CUDA_MATMUL_EARLY_CUH
#define MEMRA_CUDA_MATMUL_EARLY_CUH

#include "plugins/cuda/launch.cuh"

#ifndef MEMRA_V_EARLY
#define MEMRA_V_EARLY 0
#endif

#if MEMRA_V_EARLY
__device__ unsigned int mm_xn_ready, mm_xn_ticket;

/* The q/k launch, block 0's NT consumer threads (bar 1) once their xn stores are issued. */
template <int NT> __device__ __forceinline__ void mm_early_publish(unsigned tag) {
  asm volatile("bar.sync 1, %0;" ::"n"(NT) : "memory");
  if (threadIdx.x == 0) {
    __threadfence();
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(&mm_xn_ready), "r"(tag) : "memory");
  }
}

/* v's start, every thread of the block: the tag seen, the ticket taken, the trigger. */
__device__ __forceinline__ void mm_early_enter(unsigned tag) {
  if (threadIdx.x == 0) {
    unsigned v;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(&mm_xn_ready) : "memory");
      if (v == tag) break;
      __nanosleep(100);
    }
    if (atomicAdd(&mm_xn_ticket, 1u) == gridDim.x * gridDim.y - 1) { /* the last block */
      mm_xn_ticket = 0;
      atomicExch(&mm_xn_ready, 0u);
    }
  }
  __syncthreads();
  if (MEMRA_V_EARLY == 1) memra_pdl_trigger(); /* 2: at the exit, a chain of fewer grids */
}
#endif

#endif /* MEMRA_CUDA_MATMUL_EARLY_CUH */
