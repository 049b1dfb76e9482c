/* attention_v5.cuh — split-KV decode attention ver 5: split and combine in ONE launch,
 * through a thread-block cluster's distributed shared memory (included by attention.cu,
 * after att_args and attention_v4.cuh, whose cache loaders it shares).
 *
 * Why: on the H200 (ncu, Llama-3.1-8B layer, F16, B 1, L 512) v4's split kernel took
 * 15.5 us and its combine 7.0 us for 2 MB of K/V (0.5 us of bandwidth): 241 registers, 4
 * warps per SM, IPC 0.6, stalled on instruction-cache misses (the GM x P = 4 x 8 fully
 * unrolled body) and on dependent round trips; then a second launch re-read 16 partials per
 * output from global memory. The cost is latency, not bytes. v5:
 *  - one launch. Grid (S, KV heads, rows) in clusters of (S, 1, 1): the S blocks of one
 *    (KV head, row) are co-scheduled in one GPC. Each block pushes its partial (max, sum,
 *    acc) into the shared memory of the block that owns each output element
 *    (st.shared::cluster), one cluster barrier (release / acquire), and every block combines
 *    its own slice of the G x D outputs from its own shared memory and writes them. No
 *    partials in global memory, no workspace, no combine launch, no tickets to reset (v3's
 *    graph-safety problem does not arise: nothing outlives the launch);
 *  - the split of a row is a function of its own attended length n alone (att5_chunk:
 *    ceil(n / AT5_SPLITS) rounded up to 32 positions, so at most AT5_SPLITS = 16 splits, 8
 *    on the sm120a family, whose portable cluster limit is 8), read on the device like its
 *    position. The cluster size S = min(AT5_SPLITS, bucket / 32) only bounds the grid:
 *    blocks past a row's splits push nothing, the owners combine exactly the row's splits
 *    [0, ns) in order, and which block owns an element does not change its arithmetic. A
 *    row's bits are the same alone, in any batch, in any bucket, eager or replayed;
 *  - 256 threads, 8 warps; a "group" of LG lanes spans one K/V row across the head
 *    dimension (16-byte loads: a 128-dim F16 row is 16 lanes), each group takes P = 2
 *    positions per step with its own online softmax, and the step loop stays a loop
 *    (#pragma unroll 1): a compact body, 2 x 8 = 16 groups per block, so a 32-position
 *    split (L 512) is ONE step, every K and V row of it in flight at once;
 *  - q lives in shared memory (read 8 floats per head per step, not GM x 8 registers);
 *    registers hold only acc (GM x 8), the step's K and V and the scores;
 *  - long rows: each step hints L2 to fetch the K/V rows AT5_PFD steps ahead
 *    (prefetch.global.L2, no registers), so later steps wait on L2, not DRAM; page
 *    arithmetic by shifts (block size 16), and a group's rescale only when its max moved
 *    (e^0 = 1 would give the same bits).
 * The block merge is v4's (warp max to shared memory, block max, each group weighted
 * e^(m - M) and summed by a butterfly, warps summed in order); the combine is v4's
 * (M = max over the splits, sum_s f_s acc_s / sum_s f_s l_s, splits in order, fmaf chains).
 * A row that attends to nothing (bad sequence id or position) gets NaN, as v4.
 * The latency chain of a short row: q, pos, seq (one round trip) -> block table -> K and V
 * (DRAM) -> one step -> block merge -> push, cluster barrier -> combine -> out.
 *
 * PREDICTION (attn_bench, H200, graph replay, F16, us per layer; v4 / v2 measured):
 *   B 1 L 512: 5 (v4 13.4, v2 17.3);  B 1 L 4096: 10 (v4 23.6);  B 8 L 512: 12 (v2 20.8).
 * Registers (ptxas, CUDA 13): <__half, 8, 4> 112 (v4 241), <__half, 8, 8> 160, no spills;
 * 2 blocks of 256 threads per SM for GM 4, 1 for GM 8.
 * Where unsure: whether PDL and a cluster launch overlap as well as plain launches do; how
 * the GPCs place 16-block clusters when batch 8 fills the machine (4 waves); the cluster
 * barrier's release is a MEMBAR.ALL.GPU in SASS (st.async with a complete_tx mbarrier per
 * owner would avoid it and the second barrier: the next step if the barrier shows in ncu);
 * L 4096 B 1 is instruction-bound (8 steps of ~500 instructions per warp, 8 warps per SM). */
#ifndef MEMRA_CUDA_ATTENTION_V5_CUH
#define MEMRA_CUDA_ATTENTION_V5_CUH

#include <cuda_fp16.h>
#include <stdint.h>

/* MEMRA_AT5_SPLITS / MEMRA_AT5_P: experiment builds only (tools/device/build_variant.sh) */
#ifndef MEMRA_AT5_P
#define MEMRA_AT5_P 2
#endif
enum {
#ifdef MEMRA_CUDA_FAMILY_SM120
  AT5_SPLITS = 8, /* most splits of one row: the cluster size bound (portable: 8) */
#elif defined(MEMRA_AT5_SPLITS)
  AT5_SPLITS = MEMRA_AT5_SPLITS,
#else
  AT5_SPLITS = 16, /* sm_90a: non-portable clusters of 16 */
#endif
  AT5_ALIGN = 32, /* chunks are multiples of this many positions */
  AT5_THREADS = 256,
  AT5_WARPS = AT5_THREADS / 32,
  AT5_E = 8,           /* head dimensions per lane */
  AT5_P = MEMRA_AT5_P, /* positions per lane group per step */
  AT5_PFD = 4          /* steps ahead hinted to L2 */
};

/* Positions per part of a row attending to n >= 1 positions in at most `parts` parts, each a
 * multiple of `align` positions (v5's splits, v6's units). */
__host__ __device__ __forceinline__ int32_t att_part_chunk(int32_t n, int32_t parts,
                                                           int32_t align) {
  const int32_t c = (n + parts - 1) / parts;
  return (c + align - 1) / align * align;
}
/* Positions per split of a row attending to n >= 1 positions: at most AT5_SPLITS splits. */
__host__ __device__ __forceinline__ int32_t att5_chunk(int32_t n) {
  return att_part_chunk(n, AT5_SPLITS, AT5_ALIGN);
}

/* Cluster size (grid x) for a bucket: enough splits for any row with position < bucket. */
static inline int att5_grid_splits(int32_t bucket) {
  int ns = (bucket + AT5_ALIGN - 1) / AT5_ALIGN;
  if (ns > AT5_SPLITS) ns = AT5_SPLITS;
  return ns < 1 ? 1 : ns;
}

/* Dynamic shared memory of a launch: q [G][D], the warps' sums [AT5_WARPS][G][D] and the
 * pushed slices [S][E] (E = ceil(G D / S) elements owned per block). */
static inline size_t att5_smem(int G, int D, int S) {
  const int E = (G * D + S - 1) / S;
  return ((size_t)(1 + AT5_WARPS) * G * D + (size_t)S * E) * sizeof(float);
}
/* The most any launch asks (G 8, D 256; S E < G D + S): the opt-in above 48 KB. */
static const size_t AT5_SMEM_MAX =
    ((size_t)(1 + AT5_WARPS + 1) * 8 * 256 + AT5_SPLITS) * sizeof(float);

/* A row's attended range [lo, lo + n) and its splits (att4_row_of with v5's chunks), from
 * its position p and sequence s. */
template <typename A>
__device__ __forceinline__ att4_row att5_row_of(const A &a, int32_t p, int32_t s) {
  att4_row w;
  w.lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
  w.n = s < 0 || s >= a.n_seqs || p < 0 ? 0 : p - w.lo + 1;
  w.chunk = att5_chunk(w.n > 0 ? w.n : 1);
  w.ns = (w.n + w.chunk - 1) / w.chunk;
  if (w.ns > a.n_split) w.ns = a.n_split; /* a bucket below the position drops the rest */
  return w;
}

/* Page arithmetic of positions p >= 0: a shift when the block size is a power of two (the
 * caches' 16), a division otherwise. */
struct att5_paging {
  int32_t bs, sh; /* block size, log2 of it or -1 */
  __device__ __forceinline__ int32_t blk(int32_t p) const { return sh >= 0 ? p >> sh : p / bs; }
  __device__ __forceinline__ int32_t off(int32_t p) const {
    return sh >= 0 ? p & (bs - 1) : p - p / bs * bs;
  }
};
/* att4_page with that arithmetic: the page of position p of sequence s, or -1. */
template <typename A>
__device__ __forceinline__ int32_t att5_page(const A &a, const att5_paging &pz, int32_t s,
                                             int32_t p, int32_t pe) {
  if (p >= pe) return -1;
  const int32_t b = pz.blk(p);
  return b < a.max_blocks ? a.bt[(int64_t)s * a.bt_ld + b] : -1;
}

/* Cluster barrier halves and a store into another block's shared memory (same offset). */
__device__ __forceinline__ void att5_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
__device__ __forceinline__ void att5_cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}
__device__ __forceinline__ void att5_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ void att5_st_cluster(const float *local, uint32_t rank, float v) {
  const uint32_t la = (uint32_t)__cvta_generic_to_shared(local);
  uint32_t ra;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(la), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(ra), "f"(v) : "memory");
}

/* Bytes rope_kv_attend's kernel (RK) asks beyond att5_smem: the pairs' (cos, sin) in double
 * and the row's rotated K and its V in the cache type, each 16-byte aligned. */
static const size_t AT5_RK_SMEM = 16 + (ATT_MAX_D / 2) * 16 + 2 * ATT_MAX_D * sizeof(float);

/* v5: block (split, KV head, row) of a cluster (S, 1, 1), S = gridDim.x = a.n_split;
 * AT5_THREADS threads; GM >= the group size. With a head split (a.hsplit > 1) blockIdx.y is a
 * KV head's part: the KV head blockIdx.y / a.hsplit, its q heads blockIdx.y * group + [0, group)
 * (consecutive: the whole group's heads are), each head's arithmetic the same.
 * RK (ABI 1.10 rope_kv_attend, decode rows of distinct sequences): rope_kv_store's work for the
 * block's KV head first, with its bits: q's G heads turned into shared memory (memra_rope_turn
 * of the (cos, sin) rope_kv_v1_kernel computes), the row's K turned and cast to the cache type,
 * its V cast, stored at the row's slot by split 0 of the KV head's first cluster (memra_kv_slot's
 * conditions) and read by the block owning the position from shared memory. What is no step's
 * output is read before the PDL wait: the position, sequence and pages, the (cos, sin), and the
 * first step's K/V rows of earlier positions (written by earlier steps: no other row of the call
 * writes them). */
/* EARLY costs registers (<__half, 8, 4, HD 128>: 104 -> 124); capped at 112 (two v13 blocks
 * beside it in an SM) it ran no faster in the step (H200, 2026-12-03: 350.0 vs 349.4 tok/s). */
/* MEMRA_AT5_MAXNREG: experiment builds only, a register cap instead of the launch bounds */
#ifdef MEMRA_AT5_MAXNREG
#define AT5_BOUNDS __maxnreg__(MEMRA_AT5_MAXNREG)
#else
#define AT5_BOUNDS __launch_bounds__(AT5_THREADS)
#endif
template <typename TC, int VW, int GM, bool RK = false, bool GATE = false, int HD = 0>
__global__ void AT5_BOUNDS attention_v5_kernel(att_args a) {
  /* q [G][D] | warp sums [AT5_WARPS][G][D] | push [S][E] */
  extern __shared__ __align__(16) float sm5[];
  __shared__ float sm5_wm[AT5_WARPS][GM], sm5_wl[AT5_WARPS][GM]; /* per warp */
  __shared__ float sm5_m[AT5_SPLITS][GM], sm5_l[AT5_SPLITS][GM]; /* pushed, per split */
  att5_cluster_arrive_relaxed(); /* "this block runs": peers may push once all have */
  /* EARLY (RK, or rows of distinct sequences: a.early): the position, sequence, pages and the
   * first step's K/V rows below the row's own position are older than this step (written by
   * earlier steps, or by ops that completed before the grid before ours started), so they are
   * read before the PDL wait, while rope_kv_store runs; q, the gate and the row's own K/V after */
  const bool EARLY = RK || a.early;
  if (EARLY)
    memra_pdl_trigger(); /* the wait comes after what no step's output feeds */
  else
    memra_pdl_enter_early();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.x, kh = blockIdx.y, S = gridDim.x;
  const int64_t rl = blockIdx.z, r = a.row0 + rl;
  /* HD: the head dimension known at compile time (0: a.head_dim). Then the lane group's width,
   * the positions a step and every division by them fold to constants and shifts, and the
   * butterflies unroll: the same operations on the same values in the same order, so the same
   * bits, with a shorter dependent chain before the first K/V load (at 128: ~2,000 instructions
   * a warp, IPC 0.26 a scheduler, ncu) */
  /* With HD the host also guarantees a.group == GM, so the group is a constant too. */
  const int G = HD ? GM : a.group, D = HD ? HD : a.head_dim, GD = G * D, E = (GD + S - 1) / S;
  /* E is a power of two in the common launches (G D 512 or 1024 over 16 splits): shifts */
  const int e_sh = (E & (E - 1)) == 0 ? __ffs(E) - 1 : -1;
  float *sq = sm5, *sacc = sm5 + GD, *spush = sm5 + (1 + AT5_WARPS) * GD;

  /* the row's position and sequence, and q, all in flight before any of them is used */
  const int32_t s = a.seq[r], p_r = a.pos[r];
  constexpr int QT = RK ? 1 : GM * ATT_MAX_D / AT5_THREADS; /* q elements a thread stages */
  const float *qr = a.q + r * a.q_ld + (int64_t)kh * GD;
  float qt[QT];
  auto load_q = [&]() {
#pragma unroll
    for (int k = 0; k < QT; ++k)
      qt[k] = tid + k * AT5_THREADS < GD ? qr[tid + k * AT5_THREADS] : 0.f;
  };
  auto store_q = [&]() {
#pragma unroll
    for (int k = 0; k < QT; ++k)
      if (tid + k * AT5_THREADS < GD) sq[tid + k * AT5_THREADS] = qt[k];
  };
  if (!EARLY) load_q();
  const att4_row w = att5_row_of(a, p_r, s);
  /* GATE: the output gate of this thread's first combined element, loaded now so that its
   * latency hides behind the attention (sigmoid_gate's arithmetic at the store) */
  auto gate_at = [&](int gi) {
    const int col = kh * GD + gi, hh = col / D;
    return a.gate[(r * a.n_head + hh) * a.gate_ld + (col - hh * D)];
  };
  const bool has_g0 = GATE && tid < E && split * E + tid < GD;
  float g0 = has_g0 && !EARLY ? gate_at(split * E + tid) : 0.f;
  if (!EARLY) store_q();
  /* RK: (cos, sin) of the row's pairs, its rotated K and V rows (cache type) */
  const int rk_off = ((1 + AT5_WARPS) * GD + S * E) * (int)sizeof(float) + 15 & ~15;
  double2 *scs = (double2 *)((char *)sm5 + rk_off);
  TC *krow = (TC *)(scs + ATT_MAX_D / 2), *vrow = krow + (D + 15) / 16 * 16;
  const int hr = a.n_rot / 2; /* rotated pairs of a head */
  if (RK)
    for (int i = tid; i < hr; i += AT5_THREADS) {
      double c, sn;
      memra_rope_cs(p_r, i, a.n_rot, a.freq_base, a.freq_scale, a.ff, &c, &sn);
      scs[i] = make_double2(c, sn);
    }
  const bool mine = split < w.ns; /* this block has positions */
  const int32_t pb = w.lo + split * w.chunk;
  const int32_t pe = !mine ? pb : (pb + w.chunk < w.lo + w.n ? pb + w.chunk : w.lo + w.n);

  const int nsl = (D + AT5_E - 1) / AT5_E; /* lanes a row needs */
  int LG = 1;
  while (LG < nsl)
    LG <<= 1;
  const int lg = lane & (LG - 1), grp = tid / LG, T = AT5_THREADS / LG * AT5_P;
  const bool has = VW == 1 || lg < nsl; /* VW 8: D % 8 == 0, lanes past D/8 idle */
  const int n_steps = (pe - pb + T - 1) / T;
  const int64_t koff = (int64_t)(kh / a.hsplit) * D; /* the KV head (a.hsplit clusters each) */
  /* 128-byte lines of one head's K (or V) row: at most LG / 4, one a lane */
  const int lines = (int)((D * sizeof(TC) + 127) / 128);

  float acc[GM][AT5_E], m[GM], l[GM];
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < AT5_E; ++e)
      acc[g][e] = 0.f;
  }
  att5_paging pz;
  pz.bs = a.block_size;
  pz.sh = (a.block_size & (a.block_size - 1)) == 0 ? __ffs(a.block_size) - 1 : -1;
  int32_t pg[AT5_P];
#pragma unroll
  for (int j = 0; j < AT5_P; ++j)
    pg[j] = att5_page(a, pz, s, pb + grp * AT5_P + j, pe);
  /* L2 hints for the K/V rows of steps [f0, f1] (hints only: a line the row's own K/V store
   * writes later is still read from L2 after it) */
  auto hint_steps = [&](int f0, int f1) {
#pragma unroll 1
    for (int f = f0; f <= f1; ++f) {
#pragma unroll
      for (int j = 0; j < AT5_P; ++j) {
        const int32_t pf = pb + f * T + grp * AT5_P + j, pgf = att5_page(a, pz, s, pf, pe);
        const int64_t sl = (int64_t)pgf * a.block_size + pz.off(pf);
        if (pgf >= 0 && lg < lines && sl < a.k_slots && sl < a.v_slots) {
          const char *kp = a.kc + (uint64_t)sl * a.k_nb1 + (uint64_t)koff * sizeof(TC) + lg * 128;
          const char *vp = a.vc + (uint64_t)sl * a.v_nb1 + (uint64_t)koff * sizeof(TC) + lg * 128;
          asm volatile("prefetch.global.L2 [%0];" ::"l"(kp));
          asm volatile("prefetch.global.L2 [%0];" ::"l"(vp));
        }
      }
    }
  };
  att4_vec<TC, VW> kr[AT5_P], vr[AT5_P];
  if (EARLY) { /* the first step's rows of earlier positions, before the wait */
    const int32_t p0 = pb + grp * AT5_P, o0 = pz.off(p0);
#pragma unroll
    for (int j = 0; j < AT5_P; ++j) {
      int32_t o = o0 + j;
      while (o >= a.block_size)
        o -= a.block_size;
      const int64_t sl = (int64_t)pg[j] * a.block_size + o;
      if (pg[j] >= 0 && sl < a.k_slots && sl < a.v_slots && has && p0 + j != p_r) {
        kr[j].load((const TC *)(a.kc + (uint64_t)sl * a.k_nb1) + koff, lg, LG, D);
        vr[j].load((const TC *)(a.vc + (uint64_t)sl * a.v_nb1) + koff, lg, LG, D);
      }
    }
    hint_steps(1, AT5_PFD < n_steps - 1 ? AT5_PFD : n_steps - 1);
    memra_pdl_wait();
    if (!RK) {
      load_q();
      if (has_g0) g0 = gate_at(split * E + tid);
      store_q();
    }
  }
  if (RK) {
    __syncthreads(); /* scs */
    /* q: rope_kv_v1_kernel's pairs, then the unrotated tail dims */
    for (int t = tid; t < G * hr; t += AT5_THREADS) {
      const int g = t / hr, i = t - g * hr;
      int e0, e1;
      memra_rope_pair_at(i, hr, a.neox, &e0, &e1);
      float x0 = qr[g * D + e0], x1 = qr[g * D + e1];
      memra_rope_turn(&x0, &x1, scs[i].x, scs[i].y);
      sq[g * D + e0] = x0;
      sq[g * D + e1] = x1;
    }
    const int tail = D - a.n_rot;
    for (int t = tid; t < G * tail; t += AT5_THREADS) {
      const int g = t / tail, e = a.n_rot + (t - g * tail);
      sq[g * D + e] = qr[g * D + e];
    }
    /* K and V of the row: into shared memory for the block owning its position, and into
     * the caches by split 0 (whoever owns it: a bucket below the position drops the split) */
    const bool owner = mine && p_r >= pb && p_r < pe;
    const bool store = split == 0 && kh % a.hsplit == 0; /* one cluster of the KV head */
    if (owner || store) {
      const float *kx = a.kin + r * a.kin_ld + koff, *vx = a.vin + r * a.vin_ld + koff;
      const int64_t ks = !store ? -1
                                : memra_kv_slot(r, a.pos, a.seq, a.bt, a.bt_ld, a.n_seqs,
                                                a.block_size, a.max_blocks, a.k_slots);
      const int64_t vs = !store ? -1
                                : memra_kv_slot(r, a.pos, a.seq, a.bt, a.bt_ld, a.n_seqs,
                                                a.block_size, a.max_blocks, a.v_slots);
      TC *kd = (TC *)(a.kc + (uint64_t)(ks < 0 ? 0 : ks) * a.k_nb1) + koff;
      TC *vd = (TC *)(a.vc + (uint64_t)(vs < 0 ? 0 : vs) * a.v_nb1) + koff;
      for (int i = tid; i < hr; i += AT5_THREADS) {
        int e0, e1;
        memra_rope_pair_at(i, hr, a.neox, &e0, &e1);
        float x0 = kx[e0], x1 = kx[e1];
        memra_rope_turn(&x0, &x1, scs[i].x, scs[i].y);
        krow[e0] = (TC)x0;
        krow[e1] = (TC)x1;
        if (ks >= 0) {
          kd[e0] = (TC)x0;
          kd[e1] = (TC)x1;
        }
      }
      for (int e = a.n_rot + tid; e < D; e += AT5_THREADS) {
        krow[e] = (TC)kx[e];
        if (ks >= 0) kd[e] = (TC)kx[e];
      }
      for (int e = tid; e < D; e += AT5_THREADS) {
        vrow[e] = (TC)vx[e];
        if (vs >= 0) vd[e] = (TC)vx[e];
      }
    }
  }
  __syncthreads(); /* q (RK: and the row's K / V) */

#pragma unroll 1
  for (int it = 0; it < n_steps; ++it) {
    const int32_t p0 = pb + it * T + grp * AT5_P;
    int64_t slot[AT5_P];
    const int32_t o0 = pz.off(p0);
#pragma unroll
    for (int j = 0; j < AT5_P; ++j) {
      int32_t o = o0 + j;
      while (o >= a.block_size) /* block_size may be < P */
        o -= a.block_size;
      const int64_t sl = (int64_t)pg[j] * a.block_size + o;
      slot[j] = pg[j] < 0 || sl >= a.k_slots || sl >= a.v_slots ? -1 : sl;
    }
    /* every K and V row of the step in flight before the first score (EARLY: the first
     * step's are, but for the row's own position: RK's in shared memory) */
#pragma unroll
    for (int j = 0; j < AT5_P; ++j) {
      if (slot[j] >= 0 && has) {
        if (RK && p0 + j == p_r) {
          kr[j].load_s(krow, lg, LG, D);
          vr[j].load_s(vrow, lg, LG, D);
        } else if (!EARLY || it > 0 || p0 + j == p_r) { /* EARLY: the first step's are */
          kr[j].load((const TC *)(a.kc + (uint64_t)slot[j] * a.k_nb1) + koff, lg, LG, D);
          vr[j].load((const TC *)(a.vc + (uint64_t)slot[j] * a.v_nb1) + koff, lg, LG, D);
        }
      } else {
        kr[j].zero();
        vr[j].zero();
      }
    }
    /* L2 hints for the rows AT5_PFD steps ahead (the first step: steps 1 .. AT5_PFD, which
     * EARLY gave before the wait) */
    const int f_hi = it + AT5_PFD < n_steps - 1 ? it + AT5_PFD : n_steps - 1;
    hint_steps(it == 0 ? (EARLY ? f_hi + 1 : 1) : it + AT5_PFD, f_hi);
    /* the next step's block-table entries, in flight with this step's rows */
    if (it + 1 < n_steps) {
#pragma unroll
      for (int j = 0; j < AT5_P; ++j)
        pg[j] = att5_page(a, pz, s, p0 + T + j, pe);
    }

    float kf[AT5_P][AT5_E], sc[GM][AT5_P];
#pragma unroll
    for (int j = 0; j < AT5_P; ++j)
      kr[j].get(kf[j]);
#pragma unroll
    for (int g = 0; g < GM; ++g) {
#pragma unroll
      for (int j = 0; j < AT5_P; ++j)
        sc[g][j] = 0.f;
      if (g >= G || !has) continue;
      float qv[AT5_E];
      if (VW == 8) {
        const float4 q0 = *(const float4 *)(sq + g * D + AT5_E * lg),
                     q1 = *(const float4 *)(sq + g * D + AT5_E * lg + 4);
        qv[0] = q0.x;
        qv[1] = q0.y;
        qv[2] = q0.z;
        qv[3] = q0.w;
        qv[4] = q1.x;
        qv[5] = q1.y;
        qv[6] = q1.z;
        qv[7] = q1.w;
      } else {
#pragma unroll
        for (int e = 0; e < AT5_E; ++e) {
          const int d = lg + LG * e;
          qv[e] = d < D ? sq[g * D + d] : 0.f;
        }
      }
#pragma unroll
      for (int j = 0; j < AT5_P; ++j) {
        float x = 0.f;
#pragma unroll
        for (int e = 0; e < AT5_E; ++e)
          x = fmaf(qv[e], kf[j][e], x);
        sc[g][j] = x;
      }
    }
#pragma unroll
    for (int o = 1; o < LG; o <<= 1) {
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
#pragma unroll
        for (int j = 0; j < AT5_P; ++j)
          sc[g][j] += __shfl_xor_sync(0xffffffffu, sc[g][j], o);
      }
    }
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      if (g >= G) break;
      float mt = -INFINITY;
#pragma unroll
      for (int j = 0; j < AT5_P; ++j) {
        float x = sc[g][j] * a.scale;
        if (a.softcap > 0.f) x = a.softcap * tanhf(x / a.softcap);
        x = slot[j] >= 0 ? x : -INFINITY;
        sc[g][j] = x;
        mt = fmaxf(mt, x);
      }
      const float mn = fmaxf(m[g], mt);
      if (mn == -INFINITY) continue; /* nothing valid yet in this group */
      if (mn != m[g]) {              /* a new max: rescale (e^0 = 1 would leave the same bits) */
        const float al = m[g] == -INFINITY ? 0.f : expf(m[g] - mn);
        l[g] *= al;
#pragma unroll
        for (int e = 0; e < AT5_E; ++e)
          acc[g][e] *= al;
        m[g] = mn;
      }
      float ls = l[g];
#pragma unroll
      for (int j = 0; j < AT5_P; ++j) {
        sc[g][j] = expf(sc[g][j] - mn); /* -inf -> 0 */
        ls += sc[g][j];
      }
      l[g] = ls;
    }
#pragma unroll
    for (int j = 0; j < AT5_P; ++j) {
      float vf[AT5_E];
      vr[j].get(vf);
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
        if (m[g] == -INFINITY) continue;
#pragma unroll
        for (int e = 0; e < AT5_E; ++e)
          acc[g][e] = fmaf(sc[g][j], vf[e], acc[g][e]);
      }
    }
  }

  /* Block merge (v4's): M = max over the groups (exact in any order), each group's share
   * weighted e^(m - M), summed by a butterfly inside the warp, then the warps in order. */
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    if (g >= G) break;
    float mm = m[g];
#pragma unroll
    for (int o = LG; o < 32; o <<= 1)
      mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    if (lane == 0) sm5_wm[warp][g] = mm;
  }
  __syncthreads();
  float *wacc = sacc + warp * GD;
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    if (g >= G) break;
    float M = sm5_wm[0][g];
#pragma unroll
    for (int w2 = 1; w2 < AT5_WARPS; ++w2)
      M = fmaxf(M, sm5_wm[w2][g]);
    const float f = m[g] == -INFINITY ? 0.f : expf(m[g] - M);
    float lf = l[g] * f;
    float x[AT5_E];
#pragma unroll
    for (int e = 0; e < AT5_E; ++e)
      x[e] = acc[g][e] * f;
#pragma unroll
    for (int o = LG; o < 32; o <<= 1) {
      lf += __shfl_xor_sync(0xffffffffu, lf, o);
#pragma unroll
      for (int e = 0; e < AT5_E; ++e)
        x[e] += __shfl_xor_sync(0xffffffffu, x[e], o);
    }
    if (lane < LG && has) {
#pragma unroll
      for (int e = 0; e < AT5_E; ++e) {
        const int d = VW == 8 ? AT5_E * lg + e : lg + LG * e;
        if (d < D) wacc[g * D + d] = x[e];
      }
    }
    if (lane == 0) sm5_wl[warp][g] = lf;
  }
  __syncthreads();

  /* Push: element i of the block's G x D sums to its owner, block i / E, at [split][i mod E];
   * the block's (max, sum) of each head to every block. Blocks without positions push
   * nothing: the owners read only the row's splits [0, ns). */
  att5_cluster_wait(); /* every block of the cluster runs: its shared memory is there */
  if (mine) {
    for (int i = tid; i < GD; i += AT5_THREADS) {
      float v = sacc[i];
#pragma unroll
      for (int w2 = 1; w2 < AT5_WARPS; ++w2)
        v += sacc[w2 * GD + i];
      const int ow = e_sh >= 0 ? i >> e_sh : i / E;
      att5_st_cluster(spush + split * E + (i - ow * E), (uint32_t)ow, v);
    }
    if (tid < G * S) {
      const int g = tid % G, ow = tid / G;
      float M = sm5_wm[0][g], L = sm5_wl[0][g];
#pragma unroll
      for (int w2 = 1; w2 < AT5_WARPS; ++w2) {
        M = fmaxf(M, sm5_wm[w2][g]);
        L += sm5_wl[w2][g];
      }
      att5_st_cluster(&sm5_m[split][g], (uint32_t)ow, M);
      att5_st_cluster(&sm5_l[split][g], (uint32_t)ow, L);
    }
  }
  att5_cluster_arrive_release();
  att5_cluster_wait(); /* every push of the cluster is in this block's shared memory */

  /* Combine this block's slice: out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s over
   * the row's splits in order (fmaf chains); no peer touches this block's memory now. */
  for (int i = tid; i < E; i += AT5_THREADS) {
    const int gi = split * E + i;
    if (gi >= GD) break;
    const int g = gi / D;
    float ms[AT5_SPLITS], M = -INFINITY; /* unrolled: every load in flight at once */
#pragma unroll
    for (int s2 = 0; s2 < AT5_SPLITS; ++s2) {
      ms[s2] = s2 < w.ns ? sm5_m[s2][g] : -INFINITY;
      M = fmaxf(M, ms[s2]);
    }
    float num = 0.f, den = 0.f;
#pragma unroll
    for (int s2 = 0; s2 < AT5_SPLITS; ++s2) {
      if (s2 >= w.ns) break;
      const float f = ms[s2] == -INFINITY ? 0.f : expf(ms[s2] - M);
      den = fmaf(f, sm5_l[s2][g], den);
      num = fmaf(f, spush[s2 * E + i], num);
    }
    /* A row that attended to nothing (bad ids) gets NaN, not a silent zero. */
    float o = den > 0.f ? num / den : __int_as_float(0x7fc00000);
    if (GATE) o = o / (1.0f + expf(-(i == tid ? g0 : gate_at(gi))));
    a.out[r * a.out_ld + (int64_t)kh * GD + gi] = o;
  }
}

#endif /* MEMRA_CUDA_ATTENTION_V5_CUH */
