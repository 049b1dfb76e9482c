/* attention_prefill_wgmma.cu — flash-attention for prefill batches on Hopper warpgroup tensor
 * cores (wgmma, sm_90a plugin only), F16 paged KV cache; same contract and entry-point
 * signature as attention_prefill.cu (mma.sync), which it replaces behind the hook in
 * attention.cu on sm90a. Checked against the CPU plugin by tools/device/mma_check; it gives
 * the same bits as attention_prefill.cu (same per-row arithmetic, same tile order).
 *
 * NWG warpgroups (1 or 2) x 64 M rows per CTA: a CTA takes R = 64 NWG / G consecutive batch
 *   rows and one KV head, M row = row * G + head, so a K/V tile is loaded once for the whole
 *   GQA group and both warpgroups. K/V tiles of 64 positions come from the paged cache by
 *   the block table (cp.async by all threads; a block table does not fit a TMA tensor map)
 *   into the 128-byte-swizzled layout the wgmma descriptors read: a [64][D] f16 tile is D/64
 *   blocks of [64 rows][64 halves], 128-byte rows, 16-byte chunk c of row r stored at chunk
 *   c ^ (r % 8) (what TMA's SWIZZLE_128B writes; 1024-byte aligned blocks).
 *   S = Q K^T: wgmma m64n64k16, Q and K both K-major from shared memory (descriptors as in
 *   gemm_wgmma.cu). Online softmax in f32 on the S accumulators (attention_prefill v1's
 *   arithmetic). O += P V: wgmma m64nDk16 with P as the register A operand (the S
 *   accumulator layout of a k16 slice is the A fragment layout) and V from shared memory,
 *   MN-major (imm-trans-b = 1; descriptor LBO = 8192 B between 64-column blocks, SBO =
 *   1024 B between 8-row groups). CTAs walk the rows last-first (longest causal work first).
 * PIPE = 0 (d 64: 1 warpgroup, 2 CTAs per SM): two K/V stages; S, softmax, P V in sequence.
 * PIPE = 1 (d 128: 2 warpgroups): three K/V stages, and S = Q K^T of tile j + 1 is issued
 *   before the softmax of tile j, so the tensor cores work during the softmax (FA3's
 *   intra-warpgroup overlap); the per-row arithmetic is PIPE 0's, so the same bits.
 *   H200, 4096 tokens, 32/8 heads (docs/PERF.md): d 128 98.6 TFLOP/s (mma.sync 67.6), d 64
 *   73.2 (66.4).
 * Masking, sequence passes and exactness are v1's: KV tiles on the fixed grid of absolute
 *   positions (multiples of 64) in ascending order, each row's softmax state its own, a tile
 *   fully masked for a row is an exact no-op for it, so chunked prefill equals one-shot bit
 *   for bit and a row does not depend on the other rows. */
#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120) /* sm120a family: mma.sync */
#include <cuda_fp16.h>
#include <math.h>

#include "plugins/cuda/attention_prefill.h"
#include "plugins/cuda/mma_sync.cuh"

namespace {

enum {
  FW_BKV = 64,       /* KV positions per tile */
  FW_BLK = 64 * 128, /* bytes of one [64 rows][64 halves] swizzled block */
  FW_MAX_G = 64
};

struct fw_args {
  float *out;
  int64_t out_ld;
  const float *q;
  int64_t q_ld;
  const char *kc, *vc;
  uint64_t k_nb1, v_nb1;
  int64_t k_slots, v_slots;
  const int32_t *pos, *seq, *bt;
  int64_t bt_ld;
  int n_rows, n_seqs, block_size, max_blocks;
  int n_kv_head, group, rows_per_cta, window;
  float scale_log2, scale, softcap; /* scale_log2 = scale * log2(e) */
};

/* Shared memory of one CTA, offsets from a 1024-byte aligned base (the 128B swizzle pattern
 * is a function of address bits 4-9, so every block starts on 1024 bytes). */
template <int D, int NWG, int STAGES> struct fw_cfg {
  static constexpr int NB = D / 64; /* 64-column blocks per row of a tile */
  static constexpr int BM = 64 * NWG, THREADS = 128 * NWG;
  static constexpr int Q_BYTES = NWG * NB * FW_BLK; /* warpgroup w: blocks [w NB, w NB + NB) */
  static constexpr int KV_BYTES = NB * FW_BLK;
  static constexpr int K_OFF = Q_BYTES, V_OFF = K_OFF + STAGES * KV_BYTES;
  static constexpr int SMEM = V_OFF + STAGES * KV_BYTES + 1024; /* + slack for the alignment */
};

/* Byte offset of (row, 16-byte chunk) inside a tile of 64 rows stored as D/64 swizzled
 * blocks: block chunk / 8, row r at r * 128, chunk (chunk % 8) ^ (r % 8). */
__device__ __forceinline__ uint32_t fw_off(int row, int chunk) {
  return (uint32_t)((chunk >> 3) * FW_BLK + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

/* --- helpers copied from gemm_wgmma.cu (proven on the H200 there) --- */
__device__ __forceinline__ uint32_t fw_smem(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
/* K-major tile with 128-byte rows, 128B swizzle: start >> 4, leading offset unused (1), stride
 * 1024 bytes between 8-row groups (gemm_wgmma.cu gw_desc). */
__device__ __forceinline__ uint64_t fw_desc_k(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) |
         (1ull << 62);
}
__device__ __forceinline__ void fw_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void fw_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void fw_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int R> __device__ __forceinline__ void fw_pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}
/* --- end of the copied helpers --- */

/* MN-major tile (V stored [kv rows][d], 128-byte rows of 64 d values, 128B swizzle): the
 * canonical layout ((8 x 8 elements, m), (8 rows, k)) : ((1, 8, LBO), (64 elements, SBO))
 * (CUTLASS make_gmma_desc<Major::MN>, LayoutType B128): LBO = bytes between 64-column
 * blocks along N (d), SBO = bytes between 8-row groups along K (kv). */
__device__ __forceinline__ uint64_t fw_desc_mn(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

/* Generic-proxy writes to shared memory (cp.async, st.shared) become visible to wgmma's
 * async-proxy reads only after this fence (then a barrier). */
__device__ __forceinline__ void fw_fence_proxy() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* wgmma m64n64k16, A and B from shared-memory descriptors, both K-major (no transpose);
 * from gemm_wgmma.cu (gw_mma_n64_f16). */
__device__ __forceinline__ void fw_mma_ss_n64(float (&d)[32], uint64_t da, uint64_t db,
                                              int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
               "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                 "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
                 "+f"(d[31])
               : "l"(da), "l"(db), "r"(scale_d));
}
/* wgmma m64n64k16, A (P) from registers in the mma.m16n8k16 A fragment layout, B from a
 * shared-memory descriptor, B transposed (imm-trans-b = 1: MN-major, V stored [kv][d]). */
__device__ __forceinline__ void fw_mma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t db,
                                              int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
               "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                 "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
                 "+f"(d[31])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
/* wgmma m64n128k16, A (P) from registers, B from a shared-memory descriptor, transposed
 * (imm-trans-b = 1); the accumulators as two halves: d0 = columns 0..63, d1 = 64..127 (the
 * D fragment's register i covers column 8 (i / 4) + ..., so the halves are registers 0..31
 * and 32..63). */
__device__ __forceinline__ void fw_mma_rs_n128(float (&d0)[32], float (&d1)[32],
                                               const uint32_t (&a)[4], uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "
               "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "
               "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
               "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]),
                 "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]),
                 "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]),
                 "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]),
                 "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]),
                 "+f"(d0[30]), "+f"(d0[31]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]),
                 "+f"(d1[4]), "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]),
                 "+f"(d1[10]), "+f"(d1[11]), "+f"(d1[12]), "+f"(d1[13]), "+f"(d1[14]), "+f"(d1[15]),
                 "+f"(d1[16]), "+f"(d1[17]), "+f"(d1[18]), "+f"(d1[19]), "+f"(d1[20]), "+f"(d1[21]),
                 "+f"(d1[22]), "+f"(d1[23]), "+f"(d1[24]), "+f"(d1[25]), "+f"(d1[26]), "+f"(d1[27]),
                 "+f"(d1[28]), "+f"(d1[29]), "+f"(d1[30]), "+f"(d1[31])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

/* O += P V for one k16 slice of P (16 kv rows of V starting at v): one m64nDk16. The V
 * descriptor is MN-major: LBO = 8192 B between the 64-column blocks along N (d; only d 128
 * reaches the second), SBO = 1024 B between 8-row groups along K (kv). */
template <int D> struct fw_pv;
template <> struct fw_pv<64> {
  static __device__ __forceinline__ void run(float (&o)[1][32], const uint32_t (&a)[4],
                                             uint32_t v) {
    fw_mma_rs_n64(o[0], a, fw_desc_mn(v, FW_BLK, 1024), 1);
  }
};
template <> struct fw_pv<128> {
  static __device__ __forceinline__ void run(float (&o)[2][32], const uint32_t (&a)[4],
                                             uint32_t v) {
    fw_mma_rs_n128(o[0], o[1], a, fw_desc_mn(v, FW_BLK, 1024), 1);
  }
};

/* Issues the cp.async loads of positions [t0, t0 + 64) of sequence s into stage st.
 * Positions outside [kv_lo, kv_hi) or on a missing page are zero-filled and flagged invalid
 * (masked for every row). As attention_prefill.cu atp_load_kv, with the wgmma layout. */
template <int D, int NWG>
__device__ __forceinline__ void fw_load_kv(const fw_args &a, uint32_t kbase, uint32_t vbase,
                                           int8_t *valid, int st, int s, int kh, int64_t t0,
                                           int64_t kv_lo, int64_t kv_hi) {
  constexpr int THREADS = 128 * NWG, KV_BYTES = D / 64 * FW_BLK; /* any stage count */
  constexpr int CPR = D / 8;                                     /* 16-byte chunks per row */
  const int chunk = threadIdx.x % CPR;
  kbase += st * KV_BYTES;
  vbase += st * KV_BYTES;
#pragma unroll
  for (int i = 0; i < FW_BKV * CPR / THREADS; ++i) {
    const int row = threadIdx.x / CPR + i * (THREADS / CPR);
    const int64_t p = t0 + row;
    int64_t slot = -1;
    if (p >= kv_lo && p < kv_hi && p / a.block_size < a.max_blocks) {
      const int32_t page = a.bt[(int64_t)s * a.bt_ld + p / a.block_size];
      slot = (int64_t)page * a.block_size + p % a.block_size;
      if (page < 0 || slot >= a.k_slots || slot >= a.v_slots) slot = -1;
    }
    const uint32_t off = fw_off(row, chunk);
    const char *kp =
        slot >= 0 ? a.kc + (uint64_t)slot * a.k_nb1 + ((int64_t)kh * D + chunk * 8) * 2 : a.kc;
    const char *vp =
        slot >= 0 ? a.vc + (uint64_t)slot * a.v_nb1 + ((int64_t)kh * D + chunk * 8) * 2 : a.vc;
    memra_cp_async16(kbase + off, kp, slot >= 0 ? 16 : 0);
    memra_cp_async16(vbase + off, vp, slot >= 0 ? 16 : 0);
    if (chunk == 0) valid[st * FW_BKV + row] = slot >= 0;
  }
}

/* S = Q K^T of one tile into sc (issued and committed, not waited for). */
template <int D>
__device__ __forceinline__ void fw_issue_s(float (&sc)[32], uint32_t qw, uint32_t kst) {
  fw_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t koff = (ks >> 2) * FW_BLK + (ks & 3) * 32;
    fw_mma_ss_n64(sc, fw_desc_k(qw + koff), fw_desc_k(kst + koff), ks > 0);
  }
  fw_commit();
}

/* Online softmax of one tile's scores sc (ver 1's arithmetic, in place: sc becomes P), the
 * rescale of O, and P packed as the f16 A fragments. */
template <int NB>
__device__ __forceinline__ void
fw_softmax(const fw_args &a, float (&sc)[32], float (&o)[NB][32], uint32_t (&pa)[4][4],
           float (&mrow)[2], float (&lrow)[2], const int8_t *valid, int64_t t0, int s, int t,
           const int32_t (&rseq)[2], const int32_t (&rpos)[2], const int32_t (&rlo)[2]) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int h = (i >> 1) & 1, col = (i >> 2) * 8 + 2 * t + (i & 1);
    const int64_t p = t0 + col;
    const bool ok = rseq[h] == s && p >= rlo[h] && p <= rpos[h] && valid[col];
    float x = sc[i];
    if (a.softcap > 0.f)
      x = a.softcap * tanhf(x * a.scale / a.softcap) * 1.4426950408889634f;
    else
      x *= a.scale_log2;
    x = ok ? x : -INFINITY;
    sc[i] = x;
    mx[h] = fmaxf(mx[h], x);
  }
  float alpha[2], muse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float mn = fmaxf(mrow[h], mx[h]);
    muse[h] = mn == -INFINITY ? 0.f : mn;
    alpha[h] = exp2f(mrow[h] - muse[h]);
    mrow[h] = mn;
  }
  float ls[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int h = (i >> 1) & 1;
    const float pv = exp2f(sc[i] - muse[h]);
    sc[i] = pv;
    ls[h] += pv;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h)
    lrow[h] = lrow[h] * alpha[h] + ls[h];
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int i = 0; i < 32; ++i)
      o[nb][i] *= alpha[(i >> 1) & 1];
#pragma unroll
  for (int kv = 0; kv < 4; ++kv)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      pa[kv][j] = memra_pack_half2(sc[8 * kv + 2 * j], sc[8 * kv + 2 * j + 1]);
}

/* ver 2: one sequence pass, three stages. Iteration it: (a) wait for tile it + 1 (loaded
 * during iteration it - 1) and barrier, which also proves every warpgroup is done with
 * iteration it - 1 (its P V read stage (it - 1) % 3); (b) prefetch tile it + 2 into that
 * stage; (c) issue S(it + 1) into sn; (d) softmax(it) on sc while S(it + 1) runs;
 * (e) issue P V(it); (f) wait for both; sn -> sc. Tiles a warpgroup does not see are
 * skipped (exact no-ops), as in ver 1. Ends with a barrier (the next pass reloads). */
template <int D, int NWG>
__device__ __forceinline__ void
fw_pass_pipe(const fw_args &a, uint32_t qw, uint32_t kb, uint32_t vb, int8_t *s_valid, int s,
             int kh, int64_t t_first, int n_t, int64_t kv_lo, int64_t kv_hi, int32_t wlo,
             int32_t whi, int t, const int32_t (&rseq)[2], const int32_t (&rpos)[2],
             const int32_t (&rlo)[2], float (&sc)[32], float (&o)[D / 64][32], float (&mrow)[2],
             float (&lrow)[2]) {
  using C = fw_cfg<D, NWG, 3>;
  fw_load_kv<D, NWG>(a, kb, vb, s_valid, 0, s, kh, t_first, kv_lo, kv_hi);
  memra_cp_async_commit();
  if (n_t > 1) fw_load_kv<D, NWG>(a, kb, vb, s_valid, 1, s, kh, t_first + FW_BKV, kv_lo, kv_hi);
  memra_cp_async_commit();
  memra_cp_async_wait<1>(); /* tile 0 */
  fw_fence_proxy();
  __syncthreads();
  if (whi >= t_first && wlo < t_first + FW_BKV) {
    fw_issue_s<D>(sc, qw, kb);
    fw_wait<0>();
    fw_pin(sc);
  }
  float sn[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    sn[i] = 0.f;
  for (int it = 0; it < n_t; ++it) {
    const int st = it % 3, st1 = (it + 1) % 3;
    const int64_t t0 = t_first + (int64_t)it * FW_BKV, t1 = t0 + FW_BKV;
    const bool live = whi >= t0 && wlo < t0 + FW_BKV;
    const bool next = it + 1 < n_t, live1 = next && whi >= t1 && wlo < t1 + FW_BKV;
    if (next) {
      memra_cp_async_wait<0>(); /* (a) tile it + 1 */
      fw_fence_proxy();
      __syncthreads();
      if (it + 2 < n_t) /* (b) */
        fw_load_kv<D, NWG>(a, kb, vb, s_valid, (it + 2) % 3, s, kh, t1 + FW_BKV, kv_lo, kv_hi);
      memra_cp_async_commit();
      if (live1) fw_issue_s<D>(sn, qw, kb + st1 * C::KV_BYTES); /* (c) */
    }
    if (live) {
      uint32_t pa[4][4];
      fw_softmax<D / 64>(a, sc, o, pa, mrow, lrow, s_valid + st * FW_BKV, t0, s, t, rseq, rpos,
                         rlo); /* (d) */
#pragma unroll
      for (int nb = 0; nb < D / 64; ++nb)
        fw_pin(o[nb]);
      fw_fence();
      const uint32_t vst = vb + st * C::KV_BYTES;
#pragma unroll
      for (int kv = 0; kv < 4; ++kv) /* (e) */
        fw_pv<D>::run(o, pa[kv], vst + kv * 2048);
      fw_commit();
    }
    fw_wait<0>(); /* (f) */
#pragma unroll
    for (int nb = 0; nb < D / 64; ++nb)
      fw_pin(o[nb]);
    fw_pin(sn);
    if (live1)
#pragma unroll
      for (int i = 0; i < 32; ++i)
        sc[i] = sn[i];
  }
  __syncthreads(); /* every warpgroup is done with the stages before the next pass loads */
}

/* PIPE = 0: ver 1 (two stages, S, softmax and P V in sequence). PIPE = 1: ver 2, three
 * stages, and S of tile j + 1 runs on the tensor cores while the warpgroup does the softmax
 * of tile j (FA3's intra-warpgroup overlap); same arithmetic per row, so the same bits. */
template <int D, int NWG, int PIPE>
__global__ void __launch_bounds__(128 * NWG, 1) attention_prefill_wgmma_v1_kernel(fw_args a) {
  using C = fw_cfg<D, NWG, PIPE ? 3 : 2>;
  constexpr int BM = C::BM, THREADS = C::THREADS, CPR = D / 8;
  extern __shared__ unsigned char fw_raw[];
  __shared__ int32_t s_pos[BM], s_seq[BM], s_lo[BM];
  __shared__ int32_t s_first[BM], s_kvlo[BM], s_kvhi[BM];
  __shared__ int8_t s_valid[3 * FW_BKV];
  unsigned char *base = (unsigned char *)(((uintptr_t)fw_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t qb = fw_smem(base), kb = qb + C::K_OFF, vb = qb + C::V_OFF;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  const int G = a.group, R = a.rows_per_cta, kh = blockIdx.y;
  /* Last rows first: under the causal mask they have the most KV tiles, so the long CTAs
   * start in the first wave instead of forming the tail (FA3's LPT order; bits unaffected). */
  const int64_t r0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * R;

  /* Row facts: ok rows have a valid sequence id and position. */
  if (tid < R) {
    const int64_t r = r0 + tid;
    int32_t p = -1, s = -1, lo = 0;
    if (r < a.n_rows) {
      p = a.pos[r];
      s = a.seq[r];
      if (s < 0 || s >= a.n_seqs || p < 0) s = -1;
      lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    }
    s_pos[tid] = p;
    s_seq[tid] = s;
    s_lo[tid] = lo;
  }
  /* Q tile as f16, M row m = row * G + head; warpgroup m / 64 owns NB blocks. */
  for (int i = tid; i < BM * CPR; i += THREADS) {
    const int m = i / CPR, c = i % CPR, rr = m / G, h = m % G;
    const int64_t r = r0 + rr;
    uint32_t w[4] = {0u, 0u, 0u, 0u};
    if (rr < R && r < a.n_rows) {
      const float *src = a.q + r * a.q_ld + ((int64_t)kh * G + h) * D + c * 8;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[j] = memra_pack_half2(src[2 * j], src[2 * j + 1]);
    }
    *(uint4 *)(base + (m >> 6) * C::NB * FW_BLK + fw_off(m & 63, c)) =
        make_uint4(w[0], w[1], w[2], w[3]);
  }
  fw_fence_proxy();
  __syncthreads();
  /* Per sequence (first row naming it): the KV range its rows of this tile need. */
  if (tid < R) {
    const int32_t s = s_seq[tid];
    int first = s >= 0;
    int32_t lo = 0x7fffffff, hi = 0;
    for (int j = 0; j < R && first; ++j) {
      if (s_seq[j] != s) continue;
      if (j < tid) first = 0;
      lo = min(lo, s_lo[j]);
      hi = max(hi, s_pos[j] + 1);
    }
    s_first[tid] = first;
    s_kvlo[tid] = lo;
    s_kvhi[tid] = hi;
  }
  __syncthreads();

  /* This thread's two M rows: g and g + 8 of its warp's 16 (the wgmma D fragment: warp w of
   * the warpgroup holds rows 16 w .. 16 w + 15; accumulator i is row g + 8 ((i / 2) % 2),
   * column 8 (i / 4) + 2 t + i % 2). */
  const int g = lane >> 2, t = lane & 3;
  int32_t rpos[2], rlo[2], rseq[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = warp * 16 + g + 8 * h, rr = m / G;
    const bool in = rr < R;
    rpos[h] = in ? s_pos[rr] : -1;
    rlo[h] = in ? s_lo[rr] : 0;
    rseq[h] = in ? s_seq[rr] : -1;
  }
  /* The batch rows of this warpgroup's 64 M rows. */
  const int wg_r0 = (wg * 64) / G, wg_r1 = min(R, (wg * 64 + 63) / G + 1);
  const uint32_t qw = qb + wg * C::NB * FW_BLK;

  float o[C::NB][32]; /* O accumulators, block nb: columns 64 nb .. 64 nb + 63 */
#pragma unroll
  for (int nb = 0; nb < C::NB; ++nb)
#pragma unroll
    for (int i = 0; i < 32; ++i)
      o[nb][i] = 0.f;
  float sc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    sc[i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};

  for (int fi = 0; fi < R; ++fi) {
    if (!s_first[fi]) continue;
    const int s = s_seq[fi];
    const int64_t kv_lo = s_kvlo[fi], kv_hi = s_kvhi[fi];
    const int64_t t_first = kv_lo / FW_BKV * FW_BKV;
    const int n_t = (int)((kv_hi - t_first + FW_BKV - 1) / FW_BKV);
    /* This warpgroup's span of the sequence's positions (uniform over the warpgroup, so the
     * tile skip below keeps the warpgroup-collective wgmma uniform). */
    int32_t wlo = 0x7fffffff, whi = -1;
    for (int j = wg_r0; j < wg_r1; ++j)
      if (s_seq[j] == s) {
        wlo = min(wlo, s_lo[j]);
        whi = max(whi, s_pos[j]);
      }
    if constexpr (PIPE) {
      fw_pass_pipe<D, NWG>(a, qw, kb, vb, s_valid, s, kh, t_first, n_t, kv_lo, kv_hi, wlo, whi, t,
                           rseq, rpos, rlo, sc, o, mrow, lrow);
      continue;
    }
    fw_load_kv<D, NWG>(a, kb, vb, s_valid, 0, s, kh, t_first, kv_lo, kv_hi);
    memra_cp_async_commit();
    for (int it = 0; it < n_t; ++it) {
      const int st = it & 1;
      const int64_t t0 = t_first + (int64_t)it * FW_BKV;
      if (it + 1 < n_t)
        fw_load_kv<D, NWG>(a, kb, vb, s_valid, st ^ 1, s, kh, t0 + FW_BKV, kv_lo, kv_hi);
      memra_cp_async_commit();
      memra_cp_async_wait<1>();
      fw_fence_proxy(); /* this thread's cp.async data -> visible to wgmma after the barrier */
      __syncthreads();

      /* Warpgroups none of whose rows see a position of the tile skip it (an exact no-op
       * for them; rows that do not see it inside a live warpgroup are no-ops too). */
      if (whi >= t0 && wlo < t0 + FW_BKV) {
        const uint32_t kst = kb + st * C::KV_BYTES, vst = vb + st * C::KV_BYTES;
        fw_issue_s<D>(sc, qw, kst); /* S = Q K^T: 64 x 64 per warpgroup */
        fw_wait<0>();
        fw_pin(sc);
        uint32_t pa[4][4];
        fw_softmax<C::NB>(a, sc, o, pa, mrow, lrow, s_valid + st * FW_BKV, t0, s, t, rseq, rpos,
                          rlo);
#pragma unroll
        for (int nb = 0; nb < C::NB; ++nb)
          fw_pin(o[nb]);
        fw_fence();
#pragma unroll
        for (int kv = 0; kv < 4; ++kv) /* 16 kv rows = two 8-row groups = 2048 bytes */
          fw_pv<D>::run(o, pa[kv], vst + kv * 2048);
        fw_commit();
        fw_wait<0>();
#pragma unroll
        for (int nb = 0; nb < C::NB; ++nb)
          fw_pin(o[nb]);
      }
      __syncthreads(); /* stage st is refilled by the next iteration's prefetch */
    }
    memra_cp_async_wait<0>();
  }

  /* out = o / l (l summed over the row's quad in a fixed order); a row that attended to
   * nothing (bad ids) gets NaN, as the split-KV kernel does. */
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = lrow[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int m = warp * 16 + g + 8 * h, rr = m / G, head = m % G;
    const int64_t r = r0 + rr;
    if (rr >= R || r >= a.n_rows) continue;
    float *out = a.out + r * a.out_ld + ((int64_t)kh * G + head) * D;
    const float inv = l > 0.f ? 1.f / l : __int_as_float(0x7fc00000);
#pragma unroll
    for (int nb = 0; nb < C::NB; ++nb)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        out[nb * 64 + j * 8 + 2 * t] = o[nb][4 * j + 2 * h] * inv;
        out[nb * 64 + j * 8 + 2 * t + 1] = o[nb][4 * j + 2 * h + 1] * inv;
      }
  }
}

template <int D, int NWG, int PIPE> memra_status fw_launch(memra_backend *be, fw_args a) {
  using C = fw_cfg<D, NWG, PIPE ? 3 : 2>;
  static bool attr = false; /* the opt-in above 48 KiB, once per instance */
  if (!attr) {
    MEMRA_CU(cudaFuncSetAttribute(attention_prefill_wgmma_v1_kernel<D, NWG, PIPE>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    attr = true;
  }
  a.rows_per_cta = C::BM / a.group;
  dim3 grid((unsigned)((a.n_rows + a.rows_per_cta - 1) / a.rows_per_cta), (unsigned)a.n_kv_head);
  attention_prefill_wgmma_v1_kernel<D, NWG, PIPE><<<grid, C::THREADS, C::SMEM, be->stream>>>(a);
  MEMRA_CU_LAUNCHED();
  return MEMRA_OK;
}

} // namespace

int memra_cu_attention_prefill_wgmma_fits(const memra_batch *batch, const memra_tensor *k_cache,
                                          const memra_tensor *v_cache, const memra_attn_params *p) {
  if (!(batch->flags & MEMRA_BATCH_PROMPT)) return 0;
  if (k_cache->type != MEMRA_TYPE_F16 || v_cache->type != MEMRA_TYPE_F16) return 0;
  if (p->head_dim != 64 && p->head_dim != 128) return 0;
  if (p->n_head / p->n_kv_head > FW_MAX_G || p->n_kv_head > 65535) return 0;
  return memra_cu_align_of(memra_cu_ptr(k_cache), k_cache->nb1) >= 16 &&
         memra_cu_align_of(memra_cu_ptr(v_cache), v_cache->nb1) >= 16;
}

/* d 128: two warpgroups, pipelined (98.6 TFLOP/s at 4096 tokens vs 95.6 unpipelined and 77.9
 * with one); d 64: one warpgroup, 2 CTAs per SM (73.2 vs 66.4 with two). */
memra_status memra_cu_attention_prefill_wgmma(memra_backend *be, const memra_tensor *out,
                                              const memra_tensor *q, const memra_tensor *k_cache,
                                              const memra_tensor *v_cache, const memra_batch *batch,
                                              const memra_attn_params *p, const int32_t *pos,
                                              const int32_t *seq, const int32_t *bt,
                                              int64_t bt_ld) {
  fw_args a;
  a.out = (float *)memra_cu_ptr(out);
  a.out_ld = (int64_t)(out->nb1 / 4);
  a.q = (const float *)memra_cu_ptr(q);
  a.q_ld = (int64_t)(q->nb1 / 4);
  memra_cu_fill_paged(&a, k_cache, v_cache, batch, pos, seq, bt, bt_ld);
  a.n_rows = batch->n_rows;
  a.n_kv_head = p->n_kv_head;
  a.group = p->n_head / p->n_kv_head;
  a.rows_per_cta = 0; /* set by fw_launch from the CTA's M rows */
  a.window = p->window;
  a.scale = p->scale;
  a.scale_log2 = p->scale * 1.4426950408889634f;
  a.softcap = p->softcap;
  if (a.n_rows <= 0) return MEMRA_OK;
  return p->head_dim == 64 ? fw_launch<64, 1, 0>(be, a) : fw_launch<128, 2, 1>(be, a);
}

#endif /* sm90a plugin */
