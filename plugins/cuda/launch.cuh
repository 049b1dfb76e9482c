/* launch.cuh — the one way the decode-path kernels are launched: programmatic dependent
 * launch (PDL, sm_90+), so the next kernel of a step is scheduled while this one runs and
 * a captured graph gets programmatic edges instead of full kernel-boundary waits.
 *
 * Contract every kernel launched with memra_cu_launch keeps (else it races):
 *  - memra_pdl_wait() runs in every thread before the first read of data an earlier op
 *    wrote and before the first global write; only constant data (weights) may be read
 *    before it. The wait returns once the previous grid has COMPLETED and its writes are
 *    visible, and since that grid waited on its own predecessor, on all earlier ones too.
 *  - memra_pdl_trigger() lets the next grid's blocks start (they then block in their own
 *    wait). After the wait (memra_pdl_enter) at most two grids are in flight; the small
 *    kernels trigger first (memra_pdl_enter_early), so a third grid, the next GEMV, may be.
 * Kernels of other files launched with <<<>>> are ordinary stream launches: still correct
 * beside these (a PDL kernel after one waits for its completion; it starts only after ours
 * completed). MEMRA_PDL=0 in the environment turns the attribute off (A/B timing). */
#ifndef MEMRA_CUDA_LAUNCH_CUH
#define MEMRA_CUDA_LAUNCH_CUH

#include <stdint.h>

#include "plugins/cuda/cuda_common.h"
#include "plugins/cuda/trace.cuh"

__device__ __forceinline__ void memra_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  MEMRA_TRACE_WAIT(asm volatile("griddepcontrol.wait;" ::: "memory"));
#endif
}

__device__ __forceinline__ void memra_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Both, for kernels with nothing to do before their inputs are ready. */
__device__ __forceinline__ void memra_pdl_enter() {
  memra_pdl_wait();
  memra_pdl_trigger();
}

/* The same with the trigger first, for the small kernels between two GEMVs (norms, rope, the
 * kv store, decode attention, glu, adds): the GEMV behind them is then scheduled while the
 * GEMV before them still runs, its blocks take the SMs that one frees and its weight copies
 * overlap that one's tail (H200, docs/PERF.md: Q4_K_M tg128 @ d512 367 -> 374 tok/s, @ d4096
 * 297 -> 303; F16, hybrid and MoE unchanged). A grid triggers only once all its blocks have
 * run, so no earlier grid's blocks can be starved. The GEMVs and the MoE / GDN kernels keep
 * memra_pdl_enter: with every kernel triggering first the MoE model lost 6% (1,503 -> 1,412)
 * and the hybrid 1% (a deeper chain of waiting grids, each prefetching its weights). */
__device__ __forceinline__ void memra_pdl_enter_early() {
  memra_pdl_trigger();
  memra_pdl_wait();
}

/* Hints L2 to fetch bytes [p, p + n) of constant data (weights) before the wait, a 128-byte
 * line per thread step; at most max_lines lines per call so a huge row costs little. 32-bit
 * line arithmetic: the 64-bit form cost ~50 instructions a row (SASS of matmul_v5_kernel,
 * 2026-12-01), ~25% of a K = 4096 GEMV's instructions at 8 rows per block. */
__device__ __forceinline__ void memra_prefetch_l2(const void *p, uint64_t n, int tid, int nthreads,
                                                  int max_lines) {
  const uintptr_t a0 = (uintptr_t)p & ~(uintptr_t)127;
  const uint32_t off = (uint32_t)((uintptr_t)p & 127), cap = (uint32_t)max_lines << 7;
  const uint32_t nn = n > cap ? cap : (uint32_t)n;
  int lines = (int)((off + nn + 127) >> 7);
  if (lines > max_lines) lines = max_lines;
#pragma unroll 1
  for (int i = tid; i < lines; i += nthreads)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a0 + ((uintptr_t)i << 7)));
}

/* Launches kernel<<<grid, block, smem, be->stream>>>(args...) in thread-block clusters of
 * (cluster_x, 1, 1) when cluster_x > 0 (grid.x a multiple of it; above 8 the kernel needs
 * cudaFuncAttributeNonPortableClusterSizeAllowed), with the PDL attribute when the backend
 * allows it (be->pdl). Returns the launch's error. */
template <typename... KArgs, typename... Args>
static inline cudaError_t memra_cu_launch_cluster(const memra_backend *be, void (*kernel)(KArgs...),
                                                  dim3 grid, dim3 block, size_t smem,
                                                  unsigned cluster_x, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = be->stream;
  cudaLaunchAttribute at[2];
  unsigned n = 0;
  if (cluster_x > 0) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = cluster_x;
    at[n].val.clusterDim.y = 1;
    at[n].val.clusterDim.z = 1;
    ++n;
  }
  if (be->pdl) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = at;
  cfg.numAttrs = n;
  ++((memra_backend *)be)->n_launch; /* a count only (moe_tc.cuh: which launch came last) */
  return cudaLaunchKernelEx(&cfg, kernel, ((KArgs)args)...);
}

/* The same without clusters: the one way the decode-path kernels are launched. */
template <typename... KArgs, typename... Args>
static inline cudaError_t memra_cu_launch(const memra_backend *be, void (*kernel)(KArgs...),
                                          dim3 grid, dim3 block, size_t smem, Args... args) {
  return memra_cu_launch_cluster(be, kernel, grid, block, smem, 0u, args...);
}

#endif /* MEMRA_CUDA_LAUNCH_CUH */
