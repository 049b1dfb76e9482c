/* trace.cuh — EXPERIMENT (built only with -DMEMRA_CUDA_TRACE): a per-block record of every PDL
 * wait (%globaltimer before and after it, the SM, the block, the grid, the dynamic shared
 * memory), so a decode step's chain can be read off the device: kernel k + 1's first release is
 * kernel k's completion. Each .cu file has its own ring of records (no relocatable device code);
 * a static constructor registers the file's dump, and the plugin's close writes every ring to
 * $MEMRA_TRACE_OUT (tools/device/trace_step.py reads it). */
#ifndef MEMRA_CUDA_TRACE_CUH
#define MEMRA_CUDA_TRACE_CUH
#ifdef MEMRA_CUDA_TRACE

#include <stdint.h>
#include <stdio.h>

/* records a file keeps (the last ones): the ring GEMVs leave three a block (wait, head, end), so
 * a decode token of Llama-8B is ~130K records in matmul.cu alone */
enum { MEMRA_TRACE_CAP = 1 << 20 };

struct memra_trace_rec {
  uint64_t t0, t1;     /* before and after the wait, ns */
  uint32_t smid, blk;  /* SM, blockIdx.x | blockIdx.y << 20 */
  uint32_t grid, smem; /* gridDim.x * y * z, dynamic shared memory bytes */
};

static __device__ memra_trace_rec memra_trace_ring[MEMRA_TRACE_CAP];
static __device__ unsigned long long memra_trace_n;

__device__ __forceinline__ uint64_t memra_trace_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* kind 0: a PDL wait (t0, t1 around it); else a mark (memra_trace_mark), in the shared-memory
 * field's top bits. */
__device__ __forceinline__ void memra_trace_record(uint64_t t0, uint64_t t1, uint32_t kind = 0) {
  if (threadIdx.x | threadIdx.y | threadIdx.z) return;
  uint32_t smid, dsm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dsm));
  const unsigned long long i = atomicAdd(&memra_trace_n, 1ull) % MEMRA_TRACE_CAP;
  memra_trace_ring[i] = {t0,
                         t1,
                         smid,
                         blockIdx.x | (blockIdx.y << 20),
                         gridDim.x * gridDim.y * gridDim.z,
                         dsm | kind << 30};
}

extern "C" void memra_trace_register(void (*dump)(FILE *));

static void memra_trace_dump_file(FILE *f) {
  static memra_trace_rec h[MEMRA_TRACE_CAP];
  unsigned long long n = 0;
  if (cudaMemcpyFromSymbol(&n, memra_trace_n, sizeof n) != cudaSuccess || n == 0) return;
  if (cudaMemcpyFromSymbol(h, memra_trace_ring, sizeof h) != cudaSuccess) return;
  const unsigned long long k = n < MEMRA_TRACE_CAP ? n : MEMRA_TRACE_CAP;
  fwrite(h, sizeof(memra_trace_rec), (size_t)k, f);
}

namespace {
struct memra_trace_reg {
  memra_trace_reg() { memra_trace_register(memra_trace_dump_file); }
};
static memra_trace_reg memra_trace_reg_once;
} // namespace

#define MEMRA_TRACE_WAIT(WAIT)                                                                     \
  do {                                                                                             \
    const uint64_t t0_ = memra_trace_now();                                                        \
    WAIT;                                                                                          \
    memra_trace_record(t0_, memra_trace_now());                                                    \
  } while (0)

/* A point in a block's life after its wait (the ring GEMVs: 1 = x split and the head done, the
 * first tile next; 2 = the block's last store done), so trace_step.py can split a launch's
 * chain time into its head, its streaming, its blocks' spread of ends and the release of the
 * next launch. Thread 0's, t0 = t1 = now. */
__device__ __forceinline__ void memra_trace_mark(uint32_t kind) {
  const uint64_t t = memra_trace_now();
  memra_trace_record(t, t, kind);
}
#define MEMRA_TRACE_MARK(KIND) memra_trace_mark(KIND)
#else
#define MEMRA_TRACE_WAIT(WAIT) WAIT
#define MEMRA_TRACE_MARK(KIND) ((void)0)
#endif
#endif /* MEMRA_CUDA_TRACE_CUH */
