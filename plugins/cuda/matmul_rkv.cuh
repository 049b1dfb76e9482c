/* matmul_rkv.cuh — ABI 1.16 matmul_n_rope_kv's part of a ring GEMV (v13): the q / k projections'
 * rope and the k / v cache stores at the tile's store, so rope_kv_store needs no launch of its own.
 *
 * Why: a decode layer's rope_kv_store is a launch on the chain between the q/k/v GEMV and the
 * attention, ~2.6 us of a Llama-8B layer for ~0.1 us of work (docs/PERF.md, sixth session's
 * trace); left out it was worth 3.9 us a layer (the ablation). Its work fits the GEMV's store: a
 * NORM pair (rows 2i, 2i + 1 of a head) lies in one 8-row tile, so the thread storing a row reads
 * its partner's sum beside its own and turns the pair. What rope_kv_v1_kernel computes before its
 * wait (the position, the cache slots, each pair's cos and sin in double) is made here before the
 * GEMV's wait too, by one consumer warp; the rest is its arithmetic on the same values
 * (memra_rope_cs, memra_rope_turn, the casts): the bits of matmul_n then rope_kv_store. */
#ifndef MEMRA_CUDA_MATMUL_RKV_CUH
#define MEMRA_CUDA_MATMUL_RKV_CUH

#include <cuda_fp16.h>

#include "plugins/cuda/fp8.cuh"
#include "plugins/cuda/matmul_jobs.cuh"
#include "plugins/cuda/rope_kv.cuh"

enum {
  RKV_TILES = 4
}; /* a block's tiles whose angles are made before the wait (later ones: at
      their store) */

/* The block's rope state in shared memory: angles per (tile, row), the row's cache slots. */
template <int R> struct rkv_smem {
  double cs[RKV_TILES][R][2];
  int64_t slot[2]; /* k, v; -1: not stored (kv_store's rule) */
  int32_t pos;
};
struct rkv_none {};
template <bool RK, int R> struct rkv_smem_if { typedef rkv_none type; };
template <int R> struct rkv_smem_if<true, R> { typedef rkv_smem<R> type; };

/* Before the PDL wait, by one warp: what no op of the step writes (rope_kv_v1_kernel reads it
 * before its wait too): x row 0's position and slots, the (cos, sin) of the rows of the block's
 * first RKV_TILES tiles that are q or k rows below n_rot. Read at the stores, after a consumer
 * barrier. */
template <int R>
__device__ __forceinline__ void rkv_prologue(const mm_jobs &J, int64_t my_tiles, rkv_smem<R> &s,
                                             int lane) {
  const mm_rkv &k = J.rk;
  const int32_t p = k.pos[0];
  if (lane == 0) {
    s.pos = p;
    s.slot[0] = memra_kv_slot(0, k.pos, k.seq, k.bt, k.bt_ld, k.n_seqs, k.block_size, k.max_blocks,
                              k.k_slots);
    s.slot[1] = memra_kv_slot(0, k.pos, k.seq, k.bt, k.bt_ld, k.n_seqs, k.block_size, k.max_blocks,
                              k.v_slots);
  }
  const int nt = my_tiles < RKV_TILES ? (int)my_tiles : RKV_TILES;
  for (int idx = lane; idx < nt * R; idx += 32) {
    const int i = idx / R, r = idx % R;
    const mm_job jb = mm_pick_at(J, blockIdx.x + (int64_t)i * gridDim.x);
    const int e = (int)((jb.b * R + r) % k.head_dim);
    if ((jb.y == J.y[0] || jb.y == J.y[1]) && e < k.n_rot)
      memra_rope_cs(p, e >> 1, k.n_rot, k.freq_base, k.freq_scale, k.ff, &s.cs[i][r][0],
                    &s.cs[i][r][1]);
  }
}

/* Element i of a cache row of type t (0 f32, 1 f16, 2 fp8): kv_store's cast. */
__device__ __forceinline__ void rkv_put(char *row, int t, int64_t i, float v) {
  if (t == 1)
    ((__half *)row)[i] = (__half)v;
  else if (t == 2)
    ((memra_f8 *)row)[i] = (memra_f8)v;
  else
    ((float *)row)[i] = v;
}

/* Tile i of the block (job jb, rows from jb.b R) after its partials are in part: thread r < R
 * stores row r as mm_store_parts would, turned first when it is a q / k row below n_rot (its
 * NORM partner r ^ 1 summed the same way), then k into its cache and v (job 2, or v_src beside
 * k's rows) into its own. Rows past N are not stored (the host keeps N a multiple of R). */
template <int WARPS, int R>
__device__ __forceinline__ void rkv_store(const float (&part)[WARPS][1][R], const mm_jobs &J,
                                          const mm_job &jb, int64_t i, const rkv_smem<R> &s) {
  const int r = threadIdx.x;
  if (r >= R) return;
  const mm_rkv &k = J.rk;
  const int64_t n = jb.b * R + r;
  if (n >= jb.N) return;
  float v = mm_sum_parts<WARPS, 1, R>(part, 0, r);
  v = jb.bias ? __fadd_rn(v, jb.bias[n]) : v;
  const bool isq = jb.y == J.y[0], isk = jb.y == J.y[1];
  const int e = (int)(n % k.head_dim);
  if ((isq || isk) && e < k.n_rot) {
    float o = mm_sum_parts<WARPS, 1, R>(part, 0, r ^ 1);
    o = jb.bias ? __fadd_rn(o, jb.bias[n ^ 1]) : o;
    double c, sn;
    if (i < RKV_TILES)
      c = s.cs[i][r][0], sn = s.cs[i][r][1];
    else
      memra_rope_cs(s.pos, e >> 1, k.n_rot, k.freq_base, k.freq_scale, k.ff, &c, &sn);
    float a = (e & 1) ? o : v, b = (e & 1) ? v : o; /* the pair (2i, 2i + 1) */
    memra_rope_turn(&a, &b, c, sn);
    v = (e & 1) ? b : a;
  }
  jb.y[n] = v;
  if (isk && s.slot[0] >= 0) rkv_put(k.kc + (uint64_t)s.slot[0] * k.k_nb1, k.kt, n, v);
  if (s.slot[1] >= 0) {
    if (isk && k.v_src)
      rkv_put(k.vc + (uint64_t)s.slot[1] * k.v_nb1, k.vt, n, k.v_src[n]);
    else if (J.n == 3 && jb.y == J.y[2])
      rkv_put(k.vc + (uint64_t)s.slot[1] * k.v_nb1, k.vt, n, v);
  }
}

#endif /* MEMRA_CUDA_MATMUL_RKV_CUH */
