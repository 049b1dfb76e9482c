/* tensor_map.h — cuTensorMapEncodeTiled (the TMA descriptors of gemm_wgmma.cu and
 * tools/device/ring_bench.cu) through the runtime's driver entry point: no -lcuda link. */
#ifndef MEMRA_CUDA_TENSOR_MAP_H
#define MEMRA_CUDA_TENSOR_MAP_H

#include <cuda.h>
#include <cuda_runtime.h>

typedef CUresult (*memra_tmap_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                         const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                         const cuuint32_t *, CUtensorMapInterleave,
                                         CUtensorMapSwizzle, CUtensorMapL2promotion,
                                         CUtensorMapFloatOOBfill);

/* The encoder into *out, looked up once (cudaErrorSymbolNotFound where the driver lacks it). */
static inline cudaError_t memra_tmap_encoder(memra_tmap_encode_fn *out) {
  static memra_tmap_encode_fn fn = NULL;
  if (!fn) {
    void *p = NULL;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess) return e;
    if (q != cudaDriverEntryPointSuccess || !p) return cudaErrorSymbolNotFound;
    fn = (memra_tmap_encode_fn)p;
  }
  *out = fn;
  return cudaSuccess;
}

#endif /* MEMRA_CUDA_TENSOR_MAP_H */
