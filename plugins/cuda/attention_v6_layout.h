/* attention_v6_layout.h — where decode attention v6 (attention_v6.cuh) puts each K, V, q and
 * score element in the registers of its mma.sync m16n8k16 tiles. Plain integer code, host and
 * device alike, so tests/gpu_plugins/att6_layout_test.cc builds the fragments with these very
 * functions and emulates the MMAs on the CPU (the GPU runs them in tools/device/opcheck.c).
 *
 * mma.m16n8k16 .row.col (PTX ISA), g = lane / 4, t = lane % 4:
 *   A 16x16: a0 (row g, k 2t, 2t+1), a1 (row g+8, k 2t..), a2 (row g, k 8+2t..), a3 (row g+8, k
 * 8+2t..) B 16x8:  b0 (col g, k 2t, 2t+1), b1 (col g, k 8+2t..) C 16x8:  c0, c1 (row g, cols 2t,
 * 2t+1), c2, c3 (row g+8, cols 2t, 2t+1) A 16-byte load holds E cache elements (E 8 for F16, 16 for
 * FP8), widened to E / 2 words of two halves (dims 2w, 2w + 1 of the load in word w).
 *
 * Scores, S^T = Q K^T per 8 positions: A is q (row g: head g in f16, row g + 8: the rest q - hi
 * in f16, so c0 + c2 is the score at f32 precision of q), B is K^T. The sum over k may take the
 * head dimensions in any order as long as A and B agree: lane (g, t) loads E dims of K at
 * att6_k_dim(c, t, 0, 0) of position att6_k_pos(j, g) and k-step s of chunk c takes words 2s
 * (k 2t, 2t+1) and 2s + 1 (k 8+2t..); the q pairs at the same dims. Its scores: head g at
 * positions att6_s_pos(j, t, 0 / 1).
 * Output, O^T = V^T P^T per 16 positions: A is V^T (rows: head dims, k: positions), B is P^T
 * (k: positions, col g: head g), P in f16 twice (hi, then the rest) into one accumulator. Lane
 * (g, t) loads E dims of V at att6_v_dim(c, g, 0, 0) for positions att6_v_pos(kk, t, 0..3); tile i
 * of chunk c has rows g / g + 8 at dims att6_v_dim(c, g, i, 0 / 1); its B words are its own
 * scores of tiles j = 2 kk and 2 kk + 1 (positions 2t, 2t+1 and 8+2t..), so no shuffle moves P.
 * The lane's output: heads 2t, 2t + 1 at dims att6_v_dim(c, g, i, 0 / 1). */
#ifndef MEMRA_CUDA_ATTENTION_V6_LAYOUT_H
#define MEMRA_CUDA_ATTENTION_V6_LAYOUT_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ATT6_FN __host__ __device__ static inline
#else
#define ATT6_FN static inline
#endif

enum {
  AT6_D = 128,   /* the head dimension v6 is compiled for */
  AT6_STEP = 32, /* positions of one step: 4 score tiles, 2 output k-steps */
};

/* Head dimension of K's element i (0..3: a0 / b0 low, high, a2 / b1 low, high) of k-step s in
 * chunk c, lane t; a chunk is 4 E dims (4 lanes of E). */
ATT6_FN int att6_k_dim(int E, int c, int t, int s, int i) { return c * 4 * E + t * E + 4 * s + i; }
/* Position (in the step) of score tile j's B column g. */
ATT6_FN int att6_k_pos(int j, int g) { return 8 * j + g; }
/* Position of score element c0 (hi 0) or c1 (hi 1) of tile j in lane t (head g). */
ATT6_FN int att6_s_pos(int j, int t, int hi) { return 8 * j + 2 * t + hi; }
/* Position of V row q (0..3: k 2t, 2t+1, 8+2t, 9+2t) of output k-step kk in lane t. */
ATT6_FN int att6_v_pos(int kk, int t, int q) { return 16 * kk + (q >> 1) * 8 + 2 * t + (q & 1); }
/* Head dimension of output tile i (0..E/2-1) of chunk c, row g (hi 0) or g + 8 (hi 1); a
 * chunk is 8 E dims (8 lane groups of E). */
ATT6_FN int att6_v_dim(int E, int c, int g, int i, int hi) {
  return c * 8 * E + g * E + 2 * i + hi;
}

/* The lane's slot mask: bit att6_v_bit(kk, q) says V row (kk, q) has a slot; score (j, c0 / c1:
 * hi 0 / 1) is at that row's position when its bit att6_s_bit(j, hi) is the row's. */
ATT6_FN int att6_v_bit(int kk, int q) { return 4 * kk + q; }
ATT6_FN int att6_s_bit(int j, int hi) { return 4 * (j >> 1) + 2 * (j & 1) + hi; }

/* A lane holding head h's softmax state (max, sum): the quad g = h, its first lane. The output's
 * columns 2t, 2t + 1 take their rescale factors from att6_head_lane(2t) and (2t + 1). */
ATT6_FN int att6_head_lane(int h) { return 4 * h; }

/* Two halves: the low halves of x and y (x's in the low half of the result), or the high. */
ATT6_FN uint32_t att6_lo_pair(uint32_t x, uint32_t y) { return (x & 0xffffu) | (y << 16); }
ATT6_FN uint32_t att6_hi_pair(uint32_t x, uint32_t y) { return (x >> 16) | (y & 0xffff0000u); }

/* V^T's A fragment of tile i from the lane's four V rows (words of E / 2 each, rows in
 * att6_v_pos order): word i of a row is dims 2i, 2i + 1, the tile's rows g and g + 8. */
ATT6_FN void att6_v_frag(const uint32_t *r0, const uint32_t *r1, const uint32_t *r2,
                         const uint32_t *r3, int i, uint32_t a[4]) {
  a[0] = att6_lo_pair(r0[i], r1[i]);
  a[1] = att6_hi_pair(r0[i], r1[i]);
  a[2] = att6_lo_pair(r2[i], r3[i]);
  a[3] = att6_hi_pair(r2[i], r3[i]);
}

#endif /* MEMRA_CUDA_ATTENTION_V6_LAYOUT_H */
