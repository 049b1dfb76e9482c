/* attention_v6.cuh — split-KV decode attention ver 6: v5's one launch (a cluster's blocks
 * combine through distributed shared memory) with each warp's positions on the tensor cores
 * (included by attention.cu after attention_v5.cuh, whose row, paging and cluster helpers it
 * uses; the register layouts are attention_v6_layout.h's).
 *
 * Why: v5 at d512 is ~9 us of a Llama-8B layer's chain for ~0.5 us of K/V bytes, and its
 * profile is one long dependent chain a warp (ncu: ~2,000 instructions a warp at IPC 0.26; the
 * phase probes: the step 2.5-2.9 us, the block merge 1.4-2.2, pages 1.2, the cluster combine
 * 1.5; docs/PERF.md, seventh session). A step of 32 positions is 16 lane groups' scalar dot
 * products, shuffles and online softmax; on mma.sync m16n8k16 it is 32 MMAs of scores and 32 of
 * output, with q and P each split in two halves (f16 hi + f16 rest) so that nothing is rounded
 * below f32 but K and V themselves, which the cache holds in f16 or e4m3 already. v6:
 *  - a warp is a unit: its own contiguous chunk of the row's positions, its own softmax state
 *    (max and sum of each head across the 4 lanes of a quad, no block merge). Grid (S, KV
 *    heads, rows) in clusters of (S, 1, 1) as v5, 4 warps a block, so up to AT6_UNITS = 4
 *    AT5_SPLITS units a row; the chunk is a function of the row's attended length alone
 *    (att6_chunk), so a row's bits are the same alone, in any batch or bucket, eager or
 *    replayed;
 *  - a step loads 32 K rows and 32 V rows at once in the layout the MMAs take (16-byte loads,
 *    one per 8 F16 or 16 FP8 elements; V^T's pairs of positions by byte permutes), scores
 *    S^T = q K^T (one MMA per 16 head dims and 8 positions: q's hi and rest in A's rows g and
 *    g + 8), the softmax on the C fragments, P^T's B fragments from the lane's own scores;
 *  - each unit pushes its (max, sum, output) into the owners' shared memory, one cluster
 *    barrier, the owner combines the units [0, ns) in order (v5's combine: M = max, sum_u
 *    e^(m_u - M) acc_u / sum_u e^(m_u - M) l_u, fmaf chains).
 * Head dim 128, groups up to 8 (the MMA's 8 columns are the group's heads), F16 and FP8 caches,
 * without the output gate (the caller's launch after it) or rope_kv_attend's work (the two calls
 * then); everything else stays on v5. EARLY as v5:
 * rows of distinct sequences read their older K/V before the PDL wait. The default on sm_90a
 * (attention.cu's ATT6_DEFAULT), MEMRA_ATT=5 runs v5 instead.
 *
 * PREDICTION (H200, Llama-8B layer, B 1): attn_bench L 512 ~3.5 us (v5 ~6.1), L 4096 ~8 (v5
 * ~21); in the step, the attention's ~9 us of chain at d512 -> ~5: tg128 @ d512 Q8_0 +4%,
 * Q4_K_M +5%. Registers ~200 (K 64 + V 64 + q 32 + output 32 at F16), 128 threads a block.
 * Where unsure: whether 128 registers of K/V a lane in flight costs occupancy beside the GEMV
 * blocks resident for the next launch; the owners' combine over up to 64 units at d4096. */
#ifndef MEMRA_CUDA_ATTENTION_V6_CUH
#define MEMRA_CUDA_ATTENTION_V6_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "plugins/cuda/attention_v6_layout.h"
#include "plugins/cuda/l2_policy.cuh"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/mma_sync.cuh"

enum {
  AT6_WARPS = 4,
  AT6_THREADS = 32 * AT6_WARPS,
  AT6_UNITS = AT6_WARPS * AT5_SPLITS, /* most units (warps with positions) of one row */
  AT6_GM = 8,                         /* most heads of a group: the MMA's 8 columns */
  AT6_PFD = 4                         /* steps ahead hinted to L2 */
};

/* Positions per unit of a row attending to n >= 1 positions: at most AT6_UNITS units, whole
 * steps. */
__host__ __device__ __forceinline__ int32_t att6_chunk(int32_t n) {
  return att_part_chunk(n, AT6_UNITS, AT6_STEP);
}

/* Cluster size for a bucket: a power of two (so a block's share of the G x 128 outputs is a
 * whole number of 8-element runs) with enough units for any row with position < bucket. */
static inline int att6_grid_splits(int32_t bucket) {
  int units = (bucket + AT6_STEP - 1) / AT6_STEP;
  if (units > AT6_UNITS) units = AT6_UNITS;
  int s = 1;
  while (s * AT6_WARPS < units)
    s *= 2;
  return s;
}

/* A shared-memory address of this block as the same offset in block `rank` of the cluster. */
__device__ __forceinline__ uint32_t att6_mapa(const void *local, uint32_t rank) {
  uint32_t ra;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(ra)
               : "r"((uint32_t)__cvta_generic_to_shared(local)), "r"(rank));
  return ra;
}

/* Eight floats into another block's shared memory (same offset), 16-byte aligned. TX: by
 * st.async, each completing its bytes on the owner's barrier bar (the same offset there). */
template <bool TX>
__device__ __forceinline__ void att6_st_cluster8(const float *local, uint32_t rank,
                                                 const float v[8], const uint64_t *bar) {
  const uint32_t ra = att6_mapa(local, rank);
  if (TX) {
    const uint32_t rb = att6_mapa(bar, rank);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], "
                 "{%1, %2, %3, %4}, [%5];" ::"r"(ra),
                 "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3]), "r"(rb)
                 : "memory");
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], "
                 "{%1, %2, %3, %4}, [%5];" ::"r"(ra + 16),
                 "f"(v[4]), "f"(v[5]), "f"(v[6]), "f"(v[7]), "r"(rb)
                 : "memory");
  } else {
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(ra), "f"(v[0]),
                 "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(ra + 16), "f"(v[4]),
                 "f"(v[5]), "f"(v[6]), "f"(v[7])
                 : "memory");
  }
}
/* One float, the same way. */
template <bool TX>
__device__ __forceinline__ void att6_st_cluster1(const float *local, uint32_t rank, float v,
                                                 const uint64_t *bar) {
  const uint32_t ra = att6_mapa(local, rank);
  if (TX)
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(ra),
        "f"(v), "r"(att6_mapa(bar, rank))
        : "memory");
  else
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(ra), "f"(v) : "memory");
}
/* Waits for the phase of bar (this block's) with parity 0, acquiring the cluster's writes. */
__device__ __forceinline__ void att6_wait_cluster_tx(const uint64_t *bar) {
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"((uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
  } while (!done);
}

/* EXPERIMENT (a build define, N in 0..10, default 0): the cache loads under an L2 policy that
 * keeps N tenths of their lines evict-last, so part of the cache stays in L2 from one step to the
 * next while the weights stream past it evict-first (mbarrier.cuh); 0: plain loads. Llama Q4_K_M
 * tg128 with 3 tenths: H100 +0.5% @ d512, +0.4% @ d4096; H200 -0.2% / -0.3%, Q8_0 -0.2%
 * (docs/PERF.md, thirty-first session): the product's machine keeps the plain loads. */
#ifndef MEMRA_ATT6_KV_L2
#define MEMRA_ATT6_KV_L2 0
#endif
/* A 16-byte load of cache elements as halves: F16 as it is (4 words), FP8 widened exactly
 * (cvt.rn.f16x2.e4m3x2: e4m3 is a subset of f16; 8 words, the low byte in the low half). */
template <typename TC> struct att6_row16 {
  static constexpr int E = 16 / (int)sizeof(TC), W = E / 2; /* elements, words */
  uint4 raw;
  __device__ __forceinline__ void load(const char *p) {
#if MEMRA_ATT6_KV_L2
    raw = memra_ldg_policy(p, memra_l2_evict_last(MEMRA_ATT6_KV_L2 / 10.f));
#else
    raw = __ldg((const uint4 *)p);
#endif
  }
  __device__ __forceinline__ void zero() { raw = make_uint4(0u, 0u, 0u, 0u); }
  __device__ __forceinline__ void words(uint32_t w[W]) const {
    const uint32_t r[4] = {raw.x, raw.y, raw.z, raw.w};
    if (sizeof(TC) == 2) {
#pragma unroll
      for (int i = 0; i < W && i < 4; ++i)
        w[i] = r[i];
    } else {
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const uint16_t two = (uint16_t)(r[i >> 1] >> (16 * (i & 1)));
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(w[i]) : "h"(two));
      }
    }
  }
};

/* f = hi + rest: two f16 pairs (lo element in the low half) of (x0, x1). */
__device__ __forceinline__ void att6_split2(float x0, float x1, uint32_t *hi, uint32_t *rest) {
  const __half h0 = __float2half_rn(x0), h1 = __float2half_rn(x1);
  const __half r0 = __float2half_rn(x0 - __half2float(h0)),
               r1 = __float2half_rn(x1 - __half2float(h1));
  *hi = (uint32_t)__half_as_ushort(h0) | (uint32_t)__half_as_ushort(h1) << 16;
  *rest = (uint32_t)__half_as_ushort(r0) | (uint32_t)__half_as_ushort(r1) << 16;
}

/* v6: block (split, KV head, row) of a cluster (S, 1, 1), S = gridDim.x = a.n_split a power of
 * two; AT6_THREADS threads; a.group <= 8, head dim 128, a.hsplit 1, a.block_size a power of two
 * >= 16. */
/* TX (MEMRA_ATT6_TX=1, A/B): the pushes by st.async onto each owner's transaction barrier, which
 * expects the row's ns units' bytes; the owner waits on it, not on a second cluster barrier (whose
 * release is a MEMBAR.ALL.GPU in SASS). The same values in the same places: the same bits. */
template <typename TC, bool TX>
__global__ void __launch_bounds__(AT6_THREADS) attention_v6_kernel(att_args a) {
  constexpr int E = att6_row16<TC>::E, W = att6_row16<TC>::W;
  constexpr int KC = AT6_D / (4 * E), KS = E / 4; /* K chunks of 4 E dims, k-steps in one */
  constexpr int VC = AT6_D / (8 * E), VT = E / 2; /* V chunks of 8 E dims, tiles in one */
  __shared__ __align__(16) float sm6_push[AT6_WARPS * AT6_GM * AT6_D]; /* [units][E6] */
  __shared__ float sm6_m[AT6_UNITS][AT6_GM], sm6_l[AT6_UNITS][AT6_GM]; /* pushed, per unit */
  __shared__ float sm6_den[AT6_GM];
  __shared__ uint4 sm6_q[AT6_WARPS][KC * KS][32]; /* each lane's q fragments, one a k-step */
  __shared__ __align__(8) uint64_t sm6_bar;       /* TX: the pushes' bytes */
  if (TX && threadIdx.x == 0) {
    memra_mbar_init(&sm6_bar, 1);
    memra_mbar_fence_init(); /* before the arrive below: peers complete_tx on it after their wait */
  }
  const bool EARLY = a.early;
  if (EARLY)
    memra_pdl_trigger(); /* the wait comes after what no step's output feeds */
  else
    memra_pdl_enter_early();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, kh = blockIdx.y, S = gridDim.x;
  const int64_t r = a.row0 + blockIdx.z;
  const int G = a.group, GD = G * AT6_D, E6 = GD / S; /* E6: a multiple of 8 (S | 16) */

  const int32_t s = a.seq[r], p_r = a.pos[r];
  const int32_t lo = a.window > 0 && p_r - a.window + 1 > 0 ? p_r - a.window + 1 : 0;
  const int32_t n = s < 0 || s >= a.n_seqs || p_r < 0 ? 0 : p_r - lo + 1;
  const int32_t chunk = att6_chunk(n > 0 ? n : 1);
  int ns = (n + chunk - 1) / chunk;
  if (ns > S * AT6_WARPS) ns = S * AT6_WARPS; /* a bucket below the position drops the rest */
  const int u = split * AT6_WARPS + warp;
  const bool mine = u < ns;
  const int32_t pb = lo + u * chunk;
  const int32_t pe = !mine ? pb : (pb + chunk < lo + n ? pb + chunk : lo + n);
  const int n_steps = (pe - pb + AT6_STEP - 1) / AT6_STEP;
  /* TX: each of the ns units pushes this block its E6 outputs and the G heads' (m, l); expected
   * before this block arrives, so no byte lands before its count is set */
  if (TX && tid == 0) memra_mbar_expect(&sm6_bar, (uint32_t)ns * (uint32_t)(E6 + 2 * G) * 4u);
  att5_cluster_arrive_relaxed(); /* "this block runs": peers may push once all have */
  const int64_t koff = (int64_t)kh * AT6_D * (int64_t)sizeof(TC); /* the KV head's bytes */

  /* Paging: the block size a power of two >= 16 (the host's condition), so a step's 32
   * positions lie in at most 3 pages; every lane reads the 3 entries once a step (the same
   * lines: L1) and picks each position's, no per-position table read and no shuffle. */
  const int bsh = __ffs(a.block_size) - 1;
  const int32_t *bt_row = a.bt + (int64_t)s * a.bt_ld;
  struct pages3 {
    int32_t pg[3];
  };
  /* the pages of blocks (p0 >> bsh) + 0, 1, 2 of the unit, or -1 */
  auto step_pages = [&](int32_t p0) {
    pages3 r3;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const int32_t b = (p0 >> bsh) + i;
      r3.pg[i] = (b << bsh) < pe && b < a.max_blocks ? bt_row[b] : -1;
    }
    return r3;
  };
  /* the cache slot of position p (in p0's step) of the unit, or -1 (past its end, no page, past
   * the caches) */
  const int64_t lim64 = a.k_slots < a.v_slots ? a.k_slots : a.v_slots;
  const int32_t slot_lim = lim64 < INT32_MAX ? (int32_t)lim64 : INT32_MAX; /* 32-bit compares */
  auto slot_in = [&](const pages3 &pgs, int32_t p0, int32_t p) -> int32_t {
    const int d = (p >> bsh) - (p0 >> bsh);
    const int32_t pg = d == 0 ? pgs.pg[0] : d == 1 ? pgs.pg[1] : pgs.pg[2];
    /* pg <= slot_lim >> bsh keeps pg * block_size + offset within 32 bits; then the bound */
    const bool ok = p < pe && pg >= 0 && pg <= (slot_lim >> bsh);
    const int32_t sl = ok ? (pg << bsh) + (p & (a.block_size - 1)) : -1;
    return sl < slot_lim ? sl : -1;
  };
  /* K rows: score tile j's column g (chunk c: 16 bytes at dims att6_k_dim(c, t)); V rows: the
   * lane's 8 positions (output k-step kk, row q; chunk c at dims att6_v_dim(c, g)) */
  att6_row16<TC> kr[4][KC], vr[2][4][VC];
#pragma unroll
  for (int j = 0; j < 4; ++j) /* defined once; a row without a slot keeps what it holds */
#pragma unroll
    for (int c = 0; c < KC; ++c)
      kr[j][c].zero();
  uint32_t valid = 0; /* bit att6_v_bit(kk, q): V row (kk, q) has a slot (att6_s_bit: scores) */
  /* the lane's first byte in a K row and a V row; chunk c lies 4 E (K) or 8 E (V) elements on;
   * row strides below 2^32 (the host's condition): one 32 x 32 -> 64-bit multiply a row */
  const uint32_t knb = (uint32_t)a.k_nb1, vnb = (uint32_t)a.v_nb1;
  const uint64_t kb = (uint64_t)koff + (uint64_t)att6_k_dim(E, 0, t, 0, 0) * sizeof(TC),
                 vb = (uint64_t)koff + (uint64_t)att6_v_dim(E, 0, g, 0, 0) * sizeof(TC);
  /* early 0: every row of the step; early 1 (before the wait): all but the row's own
   * position's, whose K/V this step's kv store writes (load_own reads them after the wait) */
  int32_t own_sl = -1; /* the slot of the row's own position when early 1 skipped it */
  auto load_step = [&](int32_t p0, bool early) {
    valid = 0;
    const pages3 pages = step_pages(p0);
    if (early && p_r - p0 < AT6_STEP) own_sl = slot_in(pages, p0, p_r);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int32_t p = p0 + att6_k_pos(j, g), sl = slot_in(pages, p0, p);
      /* a K row without a slot is not loaded: its column of scores is masked (-inf) whatever
       * the registers hold, and no other score reads it */
      const char *kp = a.kc + (uint64_t)(uint32_t)sl * knb + kb;
#pragma unroll
      for (int c = 0; c < KC; ++c)
        if (sl >= 0 && !(early && p == p_r)) kr[j][c].load(kp + c * 4 * E * (int)sizeof(TC));
    }
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int32_t p = p0 + att6_v_pos(kk, t, q), sl = slot_in(pages, p0, p);
        if (sl >= 0) valid |= 1u << att6_v_bit(kk, q);
        const char *vp = a.vc + (uint64_t)(uint32_t)sl * vnb + vb;
#pragma unroll
        for (int c = 0; c < VC; ++c) {
          if (sl >= 0 && !(early && p == p_r))
            vr[kk][q][c].load(vp + c * 8 * E * (int)sizeof(TC));
          else
            vr[kk][q][c].zero(); /* P is 0 there, but 0 x NaN is not */
        }
      }
    }
  };
  /* the row's own K and V rows into the lanes that hold them (step 0 of the unit, early 1) */
  auto load_own = [&]() {
    const char *kp = a.kc + (uint64_t)(uint32_t)own_sl * knb + kb,
               *vp = a.vc + (uint64_t)(uint32_t)own_sl * vnb + vb;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < KC; ++c)
        if (pb + att6_k_pos(j, g) == p_r) kr[j][c].load(kp + c * 4 * E * (int)sizeof(TC));
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int c = 0; c < VC; ++c)
          if (pb + att6_v_pos(kk, t, q) == p_r) vr[kk][q][c].load(vp + c * 8 * E * (int)sizeof(TC));
  };
  /* L2 hints for the K/V rows of step f: each lane its column's row (j), lines by t */
  auto hint_step = [&](int f) {
    constexpr int LINES = AT6_D * (int)sizeof(TC) / 128; /* 128-byte lines a row: 2 or 1 */
    const int32_t p0 = pb + f * AT6_STEP;
    const pages3 pages = step_pages(p0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int32_t sl = slot_in(pages, p0, p0 + att6_k_pos(j, g));
      if (sl >= 0 && t < 2 * LINES) {
        const char *base =
            t < LINES ? a.kc + (uint64_t)sl * a.k_nb1 : a.vc + (uint64_t)sl * a.v_nb1;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(base + koff + (t % LINES) * 128));
      }
    }
  };

  if (EARLY) { /* the first step's rows of earlier positions, before the wait */
    if (mine) {
      load_step(pb, true);
      for (int f = 1; f < n_steps && f <= AT6_PFD; ++f)
        hint_step(f);
    }
    memra_pdl_wait();
  }

  /* q of head g (zero past the group): row g of A its f16 pairs, row g + 8 the rest; the pairs
   * at the dims K's words hold (att6_k_dim). In shared memory, not 32 registers a lane: the
   * step's K and V rows hold 128 (F16). Its loads first, then the row's own K/V rows (EARLY),
   * both L2 round trips in flight at once, then the split. */
  {
    const float *qh = a.q + r * a.q_ld + ((int64_t)kh * G + g) * AT6_D;
    float x[KC][E];
#pragma unroll
    for (int c = 0; c < KC; ++c)
#pragma unroll
      for (int e = 0; e < E; e += 4) {
        const float4 v = g < G ? *(const float4 *)(qh + att6_k_dim(E, c, t, 0, e))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
        x[c][e] = v.x;
        x[c][e + 1] = v.y;
        x[c][e + 2] = v.z;
        x[c][e + 3] = v.w;
      }
    if (EARLY && own_sl >= 0) load_own();
#pragma unroll
    for (int c = 0; c < KC; ++c)
#pragma unroll
      for (int s2 = 0; s2 < KS; ++s2) {
        uint4 f;
        att6_split2(x[c][4 * s2], x[c][4 * s2 + 1], &f.x, &f.y);
        att6_split2(x[c][4 * s2 + 2], x[c][4 * s2 + 3], &f.z, &f.w);
        sm6_q[warp][c * KS + s2][lane] = f;
      }
    __syncwarp();
  }

  float acc[VC][VT][4], m = -INFINITY, l = 0.f; /* m, l: head g's; acc: heads 2t, 2t + 1 */
  int hinted = EARLY ? AT6_PFD : 0;             /* the last step hinted to L2 */
#pragma unroll
  for (int c = 0; c < VC; ++c)
#pragma unroll
    for (int i = 0; i < VT; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k)
        acc[c][i][k] = 0.f;

#pragma unroll 1
  for (int it = 0; it < n_steps; ++it) {
    const int32_t p0 = pb + it * AT6_STEP;
    if (it > 0 || !EARLY) load_step(p0, false); /* EARLY: step 0's are in flight */
    /* scores: tile j, k-step (c, s2): b0 / b1 are words 2 s2 and 2 s2 + 1 of K's load */
    float sc[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
    for (int c = 0; c < KC; ++c) {
#pragma unroll
      for (int s2 = 0; s2 < KS; ++s2) {
        const uint4 f = sm6_q[warp][c * KS + s2][lane];
        const uint32_t qf[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t w[W];
          kr[j][c].words(w);
          const uint32_t b[2] = {w[2 * s2], w[2 * s2 + 1]};
          memra_mma_16816<0>(sc[j], qf, b);
        }
      }
    }
    /* head g's scores at the lane's 8 positions (att6_s_pos: the V rows' positions) */
    float x[4][2], mt = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v = (sc[j][h] + sc[j][2 + h]) * a.scale;
        if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
        v = valid >> att6_s_bit(j, h) & 1u ? v : -INFINITY;
        x[j][h] = v;
        mt = fmaxf(mt, v);
      }
    }
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
    const float mn = fmaxf(m, mt);
    const float al = m == -INFINITY ? 0.f : expf(m - mn); /* m finite: mn finite */
    float ls = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        x[j][h] = x[j][h] == -INFINITY ? 0.f : expf(x[j][h] - mn);
        ls += x[j][h];
      }
    l = fmaf(l, al, ls);
    m = mn;
    /* the output's columns are heads 2t, 2t + 1: their factors from quads 2t, 2t + 1 */
    const float al0 = __shfl_sync(0xffffffffu, al, att6_head_lane(2 * t)),
                al1 = __shfl_sync(0xffffffffu, al, att6_head_lane(2 * t + 1));
#pragma unroll
    for (int c = 0; c < VC; ++c)
#pragma unroll
      for (int i = 0; i < VT; ++i) {
        acc[c][i][0] *= al0;
        acc[c][i][1] *= al1;
        acc[c][i][2] *= al0;
        acc[c][i][3] *= al1;
      }
      /* output: k-step kk's B is P^T of positions 2t, 2t+1 (tile 2 kk) and 8+2t.. (2 kk + 1) */
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t bh[2], br[2]; /* P's hi and rest: b0 tile 2 kk, b1 tile 2 kk + 1 */
      att6_split2(x[2 * kk][0], x[2 * kk][1], &bh[0], &br[0]);
      att6_split2(x[2 * kk + 1][0], x[2 * kk + 1][1], &bh[1], &br[1]);
#pragma unroll
      for (int c = 0; c < VC; ++c) {
        uint32_t w0[W], w1[W], w2[W], w3[W];
        vr[kk][0][c].words(w0);
        vr[kk][1][c].words(w1);
        vr[kk][2][c].words(w2);
        vr[kk][3][c].words(w3);
#pragma unroll
        for (int i = 0; i < VT; ++i) {
          uint32_t av[4];
          att6_v_frag(w0, w1, w2, w3, i, av);
          memra_mma_16816<0>(acc[c][i], av, bh);
          memra_mma_16816<0>(acc[c][i], av, br);
        }
      }
    }
    /* L2 hints for the steps up to AT6_PFD ahead not hinted yet, after this step's MMAs: their
     * table reads wait on nothing the step needs (EARLY hinted 1 .. AT6_PFD before the wait) */
    for (int f = hinted + 1; f < n_steps && f <= it + AT6_PFD; ++f)
      hint_step(f);
    hinted = it + AT6_PFD;
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  /* Push: the unit's outputs to their owners (element e = head G-local h x 128 + dim, owner
   * e / E6, at [u][e mod E6]) in runs of 8 dims; (m, l) of each head to every block. */
  att5_cluster_wait(); /* every block of the cluster runs: its shared memory is there */
  if (mine) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int h = 2 * t + hh;
      if (h >= G) continue;
#pragma unroll
      for (int c = 0; c < VC; ++c) {
#pragma unroll
        for (int i0 = 0; i0 < VT; i0 += 4) { /* dims att6_v_dim(c, g, i0 .. i0 + 3, 0 / 1) */
          float v[8];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            v[2 * i] = acc[c][i0 + i][hh];
            v[2 * i + 1] = acc[c][i0 + i][2 + hh];
          }
          const int e = h * AT6_D + att6_v_dim(E, c, g, i0, 0), ow = e / E6;
          att6_st_cluster8<TX>(sm6_push + u * E6 + (e - ow * E6), (uint32_t)ow, v, &sm6_bar);
        }
      }
    }
    if (g < G)
      for (int ow = t; ow < S; ow += 4) {
        att6_st_cluster1<TX>(&sm6_m[u][g], (uint32_t)ow, m, &sm6_bar);
        att6_st_cluster1<TX>(&sm6_l[u][g], (uint32_t)ow, l, &sm6_bar);
      }
  }
  if (TX) {
    att6_wait_cluster_tx(&sm6_bar); /* every unit's bytes are in this block's shared memory */
  } else {
    att5_cluster_arrive_release();
    att5_cluster_wait(); /* every push of the cluster is in this block's shared memory */
  }

  /* Combine this block's E6 outputs over the units [0, ns) in order. Per head of the block's
   * range, one warp: M = max over the units (lane L holds units L and L + 32), the weights
   * e^(m_u - M) in place of m_u, the denominator by the warp's butterfly (a fixed tree: a row's
   * bits depend on its ns alone); then each element's fmaf chain over the units. */
  static_assert(AT6_UNITS <= 64, "two units a lane in the combine");
  const int h0 = split * E6 / AT6_D, h1 = ((split + 1) * E6 - 1) / AT6_D;
  for (int h = h0 + warp; h <= h1; h += AT6_WARPS) {
    const bool in0 = lane < ns, in1 = lane + 32 < ns;
    const float m0 = in0 ? sm6_m[lane][h] : -INFINITY, m1 = in1 ? sm6_m[lane + 32][h] : -INFINITY;
    float M = fmaxf(m0, m1);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    const float f0 = m0 == -INFINITY ? 0.f : expf(m0 - M),
                f1 = m1 == -INFINITY ? 0.f : expf(m1 - M);
    float den = in0 ? f0 * sm6_l[lane][h] : 0.f;
    if (in1) den = fmaf(f1, sm6_l[lane + 32][h], den);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      den += __shfl_xor_sync(0xffffffffu, den, o);
    if (in0) sm6_m[lane][h] = f0; /* each lane its own units: no lane reads another's */
    if (in1) sm6_m[lane + 32][h] = f1;
    if (lane == 0) sm6_den[h] = den;
  }
  __syncthreads();
  for (int i = tid; i < E6; i += AT6_THREADS) {
    const int e = split * E6 + i, h = e / AT6_D;
    float num = 0.f;
#pragma unroll 4
    for (int u2 = 0; u2 < ns; ++u2)
      num = fmaf(sm6_m[u2][h], sm6_push[u2 * E6 + i], num);
    const float den = sm6_den[h];
    /* A row that attended to nothing (bad ids) gets NaN, not a silent zero. */
    a.out[r * a.out_ld + (int64_t)kh * GD + e] = den > 0.f ? num / den : __int_as_float(0x7fc00000);
  }
}

#endif /* MEMRA_CUDA_ATTENTION_V6_CUH */
