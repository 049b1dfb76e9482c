/* rope_kv.cuh — what rope.cu, kv_store.cu and the fused rope_kv.cu share: the rotation of
 * one pair and the KV slot of one row (device), and the two ops' argument checks (host),
 * so the fused op computes and refuses exactly what the separate ops do. */
#ifndef MEMRA_CUDA_ROPE_KV_CUH
#define MEMRA_CUDA_ROPE_KV_CUH

#include <stdint.h>

#include "plugins/cuda/cuda_common.h"

/* Pair i of a head at position pos turns by
 * theta_i = pos * freq_scale * base^(-2i / n_rot) / ff[i], formed in double (positions in
 * the thousands times a float angle would lose ~1e-4 relative): its cosine and sine. */
__device__ __forceinline__ void memra_rope_cs(int32_t pos, int i, int n_rot, float freq_base,
                                              float freq_scale, const float *ff, double *c,
                                              double *s) {
  double theta =
      (double)pos * (double)freq_scale * pow((double)freq_base, -2.0 * (double)i / (double)n_rot);
  if (ff) theta /= (double)ff[i];
  sincos(theta, s, c);
}

/* (x0, x1) <- the pair turned by (c, s), rounded once to float. */
__device__ __forceinline__ void memra_rope_turn(float *x0, float *x1, double c, double s) {
  const float a = *x0, b = *x1;
  *x0 = (float)((double)a * c - (double)b * s);
  *x1 = (float)((double)a * s + (double)b * c);
}

/* Both: one function for every rope kernel, so they give the same bits. */
__device__ __forceinline__ void memra_rope_pair(float *x0, float *x1, int32_t pos, int i, int n_rot,
                                                float freq_base, float freq_scale,
                                                const float *ff) {
  double c, s;
  memra_rope_cs(pos, i, n_rot, freq_base, freq_scale, ff, &c, &s);
  memra_rope_turn(x0, x1, c, s);
}

/* Element offsets of pair i in a head: NORM (2i, 2i+1), NEOX (i, i + n_rot/2). */
__device__ __forceinline__ void memra_rope_pair_at(int i, int half, int neox, int *a, int *b) {
  *a = neox ? i : 2 * i;
  *b = neox ? i + half : 2 * i + 1;
}

/* Slot of row r, or -1 when its seq, position or page is out of range. */
__device__ __forceinline__ int64_t memra_kv_slot(int64_t r, const int32_t *pos, const int32_t *seq,
                                                 const int32_t *bt, int64_t bt_ld, int n_seqs,
                                                 int block_size, int max_blocks, int64_t slots) {
  const int32_t p = pos[r], s = seq[r];
  if (p < 0 || s < 0 || s >= n_seqs || p / block_size >= max_blocks) return -1;
  const int32_t page = bt[(int64_t)s * bt_ld + p / block_size];
  if (page < 0) return -1;
  const int64_t slot = (int64_t)page * block_size + p % block_size;
  return slot < slots ? slot : -1;
}

/* rope's argument checks (rope.cu); *pos_out, *ff_out: the device vectors (ff NULL when
 * absent). what prefixes the messages ("rope", "rope_kv_store: k"). */
memra_status memra_cu_rope_check(memra_backend *be, const char *what, const memra_tensor *x,
                                 const memra_tensor *pos, const memra_rope_params *p,
                                 const int32_t **pos_out, const float **ff_out);

/* kv_store's argument checks (kv_store.cu); the batch's device vectors come back as from
 * memra_cu_check_batch. */
memra_status memra_cu_kv_store_check(memra_backend *be, const char *what,
                                     const memra_tensor *k_cache, const memra_tensor *v_cache,
                                     const memra_tensor *k, const memra_tensor *v,
                                     const memra_batch *batch, const int32_t **pos,
                                     const int32_t **seq, const int32_t **bt, int64_t *bt_ld);

/* rope_kv_store's checks (rope_kv.cu): kv_store's, both ropes', the rows and overlaps; what
 * prefixes the messages. */
memra_status memra_cu_rope_kv_check(memra_backend *be, const char *what, const memra_tensor *q,
                                    const memra_tensor *k, const memra_tensor *v,
                                    const memra_tensor *k_cache, const memra_tensor *v_cache,
                                    const memra_batch *batch, const memra_rope_params *p,
                                    const int32_t **pos, const int32_t **seq, const int32_t **bt,
                                    int64_t *bt_ld, const float **ff);

#endif /* MEMRA_CUDA_ROPE_KV_CUH */
