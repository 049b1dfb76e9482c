/* ring_bench.cu — how fast the decode GEMVs' weight ring (v13 / v11: a producer warp's bulk
 * copies into shared-memory stages, consumer warps releasing them) streams a matrix from DRAM,
 * by the shape of a stage's copies, with no arithmetic:
 *   rows   a copy per row segment (what v13 does at every K and v11 above K 4096),
 *   tiled  one contiguous copy a stage (v11 at K <= 4096; long rows would need the matrix
 *          stored tile by tile),
 *   box    one 3-D tensor-map box a stage (8 or 16 row segments at the row stride in one TMA
 *          instruction; the matrix as GGUF stores it).
 * Why: K 14336 down projections run at 48-75% of copy where K 4096 gate/up run at 78-100%
 * (docs/PERF.md, sixth session); this separates the copies' shape from the consumers.
 * A device experiment, built by nvcc alone in tools/device/pack.sh (into dist/ring_bench), not by
 * Bazel. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/tensor_map.h"

#include "tools/device/bench_util.cuh"

enum { MODE_ROWS, MODE_TILED, MODE_BOX };
enum { CW = 4, MAX_ST = 8 };

struct shape {
  const char *name;
  int64_t rows, rowbytes;
  int R, C, U; /* rows a tile, bytes of a row a stage, the box's inner unit (bytes) */
};

__device__ __forceinline__ void box_load(void *dst, const CUtensorMap *map, uint64_t *bar, int x,
                                         int y, int z) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(memra_smem_addr(dst)),
               "l"((uint64_t)map), "r"(memra_smem_addr(bar)), "r"(x), "r"(y), "r"(z)
               : "memory");
}

template <int MODE>
__global__ void __launch_bounds__((CW + 1) * 32)
    ring_kernel(const uint8_t *__restrict__ w, int64_t rows, int64_t rowbytes, int R, int C, int U,
                int ST, const __grid_constant__ CUtensorMap tm, unsigned *sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  const int stage = R * C;
  uint64_t *full = (uint64_t *)(sm + (size_t)ST * stage), *empty = full + MAX_ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nkc = (rowbytes + C - 1) / C, n_tiles = rows / R;
  const int64_t my_tiles = (n_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
  const int64_t units = my_tiles * nkc;
  memra_ring_init(full, empty, ST, CW);
  if (warp == CW) {
    for (int64_t u = 0; u < units; ++u) {
      const int s = (int)(u % ST);
      if (u >= ST) memra_mbar_wait(&empty[s], (uint32_t)(u / ST - 1) & 1);
      const int64_t tile = blockIdx.x + (u / nkc) * gridDim.x, c = u % nkc;
      const int64_t off = c * C;
      const uint32_t rb = (uint32_t)(rowbytes - off < C ? rowbytes - off : C);
      uint8_t *dst = sm + (size_t)s * stage;
      if (MODE == MODE_BOX) {
        if (lane == 0) {
          memra_mbar_expect(&full[s], (uint32_t)stage);
          box_load(dst, &tm, &full[s], 0, (int)(off / U), (int)(tile * R));
        }
      } else {
        if (lane == 0) memra_mbar_expect(&full[s], (uint32_t)R * rb);
        __syncwarp();
        if (MODE == MODE_TILED) {
          if (lane == 0)
            memra_bulk_load(dst, w + (uint64_t)tile * R * rowbytes + (uint64_t)off * R,
                            (uint32_t)R * rb, &full[s]);
        } else {
          for (int r = lane; r < R; r += 32)
            memra_bulk_load(dst + r * C, w + (uint64_t)(tile * R + r) * rowbytes + off, rb,
                            &full[s]);
        }
      }
    }
    return;
  }
  unsigned acc = 0;
  for (int64_t u = 0; u < units; ++u) {
    const int s = (int)(u % ST);
    memra_mbar_wait(&full[s], (uint32_t)(u / ST) & 1);
    const uint4 v = *(const uint4 *)(sm + (size_t)s * stage + 16 * (threadIdx.x % (stage / 16)));
    acc += v.x ^ v.w;
    __syncwarp();
    if (lane == 0) memra_mbar_arrive(&empty[s]);
  }
  if (acc == 0x9e3779b9u) atomicAdd(sink, acc); /* keeps the reads */
}

/* A plain streaming read of the same bytes (16-byte loads, grid-stride): the read ceiling. */
__global__ void read_kernel(const uint4 *__restrict__ p, int64_t n, unsigned *sink) {
  unsigned acc = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc += v.x ^ v.w;
  }
  if (acc == 0x9e3779b9u) atomicAdd(sink, acc);
}

static memra_tmap_encode_fn encoder(void) {
  memra_tmap_encode_fn fn;
  CK(memra_tmap_encoder(&fn));
  return fn;
}

/* The matrix as 8-byte elements: [rows][rowbytes / U][U / 8], boxes of [R][C / U][U / 8]. */
static CUtensorMap box_map(const uint8_t *w, const shape &sh) {
  CUtensorMap m;
  const cuuint64_t dims[3] = {(cuuint64_t)sh.U / 8, (cuuint64_t)(sh.rowbytes / sh.U),
                              (cuuint64_t)sh.rows};
  const cuuint64_t strides[2] = {(cuuint64_t)sh.U, (cuuint64_t)sh.rowbytes};
  const cuuint32_t box[3] = {(cuuint32_t)sh.U / 8, (cuuint32_t)(sh.C / sh.U), (cuuint32_t)sh.R};
  const cuuint32_t estr[3] = {1, 1, 1};
  CUresult r = encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT64, 3, (void *)w, dims, strides, box, estr,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                         CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "ring_bench: %s: cuTensorMapEncodeTiled failed (%d)\n", sh.name, (int)r);
    exit(1);
  }
  return m;
}

static int cmp_f(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

enum { NCOPY = 8, REPS = 40 };

/* Median us of REPS launches, each on the next of the NCOPY copies (so L2 holds none). */
template <typename F> static float time_median(F launch) {
  cudaEvent_t e0[REPS], e1[REPS];
  float t[REPS];
  for (int i = 0; i < REPS; ++i) {
    CK(cudaEventCreate(&e0[i]));
    CK(cudaEventCreate(&e1[i]));
  }
  for (int i = 0; i < 4; ++i)
    launch(i % NCOPY);
  for (int i = 0; i < REPS; ++i) {
    CK(cudaEventRecord(e0[i]));
    launch(i % NCOPY);
    CK(cudaEventRecord(e1[i]));
  }
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  for (int i = 0; i < REPS; ++i) {
    CK(cudaEventElapsedTime(&t[i], e0[i], e1[i]));
    cudaEventDestroy(e0[i]);
    cudaEventDestroy(e1[i]);
  }
  qsort(t, REPS, sizeof t[0], cmp_f);
  return 1000.f * t[REPS / 2];
}

int main(void) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int n_sms = prop.multiProcessorCount;
  /* the copy rate as the project states it: a 2 GiB device-to-device copy, read + written */
  const size_t cb = (size_t)2 << 30;
  void *ca, *cbuf;
  CK(cudaMalloc(&ca, cb));
  CK(cudaMalloc(&cbuf, cb));
  CK(cudaMemset(ca, 1, cb));
  float cus =
      time_median([&](int) { CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 2.0 * cb / (cus * 1e3);
  CK(cudaFree(ca));
  CK(cudaFree(cbuf));
  printf("copy %.0f GB/s (2 GiB, read + written), %d SMs\n", copy_gbs, n_sms);

  static const shape shapes[] = {
      {"Q8_0 gate/up 28672x4096", 28672, 4352, 8, 4352, 1088},
      {"Q8_0 down 4096x14336", 4096, 15232, 8, 4352, 1088},
      {"Q4_K gate/up 28672x4096", 28672, 2304, 16, 2304, 1152},
      {"Q4_K down 4096x14336", 4096, 8064, 16, 1152, 1152},
      {"Q4_K down 4096x14336 C2304", 4096, 8064, 16, 2304, 1152},
      {"Q6_K down 4096x14336 R8", 4096, 11760, 8, 1680, 1680},
  };
  unsigned *sink;
  CK(cudaMalloc(&sink, 4));
  printf("%-28s %-6s %3s %3s %9s %8s %7s\n", "shape", "mode", "ST", "bps", "us", "GB/s", "%copy");
  for (const shape &sh : shapes) {
    const size_t bytes = (size_t)sh.rows * sh.rowbytes;
    uint8_t *w;
    CK(cudaMalloc(&w, bytes * NCOPY));
    CK(cudaMemset(w, 0x5a, bytes * NCOPY));
    CUtensorMap maps[NCOPY];
    for (int i = 0; i < NCOPY; ++i)
      maps[i] = box_map(w + i * bytes, sh);
    float rus = time_median([&](int i) {
      read_kernel<<<n_sms * 8, 256>>>((const uint4 *)(w + i * bytes), (int64_t)bytes / 16, sink);
    });
    printf("%-28s %-6s %3s %3s %9.1f %8.0f %6.1f%%\n", sh.name, "read", "-", "-", rus,
           bytes / (rus * 1e3), 100.0 * bytes / (rus * 1e3) / copy_gbs);
    for (int mode = 0; mode < 3; ++mode) {
      for (int ST = 2; ST <= 4; ST += 2) {
        const size_t smem = (size_t)ST * sh.R * sh.C + 2 * MAX_ST * 8;
        if (smem > (size_t)prop.sharedMemPerBlockOptin) continue;
        void (*k)(const uint8_t *, int64_t, int64_t, int, int, int, int, const CUtensorMap,
                  unsigned *) = mode == MODE_ROWS    ? ring_kernel<MODE_ROWS>
                                : mode == MODE_TILED ? ring_kernel<MODE_TILED>
                                                     : ring_kernel<MODE_BOX>;
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, (CW + 1) * 32, smem));
        for (int bps = 1; bps <= (occ < 4 ? occ : 4); bps *= 2) {
          const int64_t tiles = sh.rows / sh.R, slots = (int64_t)n_sms * bps;
          const int64_t per = (tiles + slots - 1) / slots, grid = (tiles + per - 1) / per;
          float us = time_median([&](int i) {
            k<<<(unsigned)grid, (CW + 1) * 32, smem>>>(w + i * bytes, sh.rows, sh.rowbytes, sh.R,
                                                       sh.C, sh.U, ST, maps[i], sink);
          });
          static const char *mn[] = {"rows", "tiled", "box"};
          printf("%-28s %-6s %3d %3d %9.1f %8.0f %6.1f%%\n", sh.name, mn[mode], ST, bps, us,
                 bytes / (us * 1e3), 100.0 * bytes / (us * 1e3) / copy_gbs);
        }
      }
    }
    CK(cudaFree(w));
  }
  return 0;
}
