/* moe_id.cuh — what every matmul_id kernel reads (moe.cu's v1 / v2, moe_tc.cuh's v3): the
 * op's pointers and shape, and the expert a row of y takes. Included by moe.cu. */
#ifndef MEMRA_CUDA_MOE_ID_CUH
#define MEMRA_CUDA_MOE_ID_CUH

#include <stdint.h>

#define MOE_NAN __int_as_float(0x7fc00000)

/* Where row rj = r k + j of y reads: the expert (or -1 when the id is out of range) and
 * its x row. */
struct mmid_args {
  float *y;
  int64_t y_ld;
  const float *x;
  int64_t x_ld;
  int shared_x; /* x has one row per token */
  const uint8_t *w;
  uint64_t w_nb1;
  const int32_t *ids;
  int64_t ids_ld;
  int k, n_expert;
  int64_t N, K, rows; /* rows = n k */
  int64_t F;          /* y's columns: N, or (matmul_id_glu) N / 2 */
};

__device__ __forceinline__ int mmid_expert(const mmid_args &a, int64_t rj) {
  const int64_t r = rj / a.k, j = rj % a.k;
  const int32_t e = a.ids[r * a.ids_ld + j];
  return e < 0 || e >= a.n_expert ? -1 : e;
}

#endif /* MEMRA_CUDA_MOE_ID_CUH */
