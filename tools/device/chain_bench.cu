/* chain_bench.cu — what a link of a decode step's kernel chain costs by how the next kernel
 * learns its input is ready: griddepcontrol.wait (PDL, what the plugin does), a counter in
 * global memory the producer's blocks bump and the consumer's blocks poll (the next kernel is
 * resident early through PDL's trigger but never waits on the grid), or a plain launch.
 * Why: the sixth session's trace put ~2-4 us of chain on every small launch of a decode layer
 * (rmsnorm, rope, glu) for ~0.5 us of work; if most of it is the grid's completion and the
 * wait's release, a flag hand-off would cut it at every link (docs/PERF.md).
 * Each link: every block reads the 4096-float input row, sums its squares, writes its slice of
 * out = in * rsqrt(mean + eps) (an rmsnorm's shape), so a link's data really depends on the
 * last. A chain of L links is captured in a CUDA graph and replayed; the figure is the median
 * replay's time over L. A device experiment built by nvcc alone in tools/device/pack.sh. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/device/bench_util.cuh"

enum { MODE_PDL, MODE_FLAG, MODE_PLAIN, MODE_PDL_LATE, N_ROW = 4096, MAX_L = 512 };

template <int MODE>
__global__ void link_kernel(const float *__restrict__ in, float *__restrict__ out,
                            const unsigned *cnt_prev, unsigned target, unsigned *cnt_mine) {
  __shared__ float red[32];
  __shared__ float scale;
  const int tid = threadIdx.x, nt = blockDim.x;
  if (MODE == MODE_PDL) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  } else if (MODE == MODE_PDL_LATE) { /* the GEMVs' order: wait, then trigger */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  } else if (MODE == MODE_FLAG) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (cnt_prev && tid == 0)
      while (bench_ld_acquire(cnt_prev) < target)
        __nanosleep(32);
    __syncthreads();
  }
  float s = 0.f;
  for (int i = tid; i < N_ROW; i += nt) {
    const float v = in[i];
    s = fmaf(v, v, s);
  }
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((tid & 31) == 0) red[tid >> 5] = s;
  __syncthreads();
  if (tid < 32) {
    float t = tid < (nt >> 5) ? red[tid] : 0.f;
    for (int o = 16; o; o >>= 1)
      t += __shfl_xor_sync(0xffffffffu, t, o);
    if (tid == 0) scale = rsqrtf(t / N_ROW + 1e-5f);
  }
  __syncthreads();
  const int per = (N_ROW + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per;
  const int hi = lo + per < N_ROW ? lo + per : N_ROW;
  for (int i = lo + tid; i < hi; i += nt)
    out[i] = in[i] * scale;
  if (MODE == MODE_FLAG) {
    __syncthreads(); /* every thread's stores before the release (cumulative through the bar) */
    if (tid == 0) bench_red_release(cnt_mine, 1u);
  }
}

static void launch(int mode, cudaStream_t st, int grid, int threads, const float *in, float *out,
                   const unsigned *cp, unsigned target, unsigned *cm) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.stream = st;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = mode == MODE_PLAIN ? 0 : 1;
  if (mode == MODE_PDL)
    CK(cudaLaunchKernelEx(&cfg, link_kernel<MODE_PDL>, in, out, cp, target, cm));
  if (mode == MODE_FLAG)
    CK(cudaLaunchKernelEx(&cfg, link_kernel<MODE_FLAG>, in, out, cp, target, cm));
  if (mode == MODE_PLAIN)
    CK(cudaLaunchKernelEx(&cfg, link_kernel<MODE_PLAIN>, in, out, cp, target, cm));
  if (mode == MODE_PDL_LATE)
    CK(cudaLaunchKernelEx(&cfg, link_kernel<MODE_PDL_LATE>, in, out, cp, target, cm));
}

static int cmp_f(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* One chain of L links whose grids cycle through grids[0..ng), threads[0..ng); returns the
 * median us a link over reps replays, and checks the last row against a host recomputation. */
static float run_chain(int mode, int L, const int *grids, const int *threads, int ng, int reps,
                       float *d_buf, unsigned *d_cnt, const float *h_in, double *max_rel) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  CK(cudaMemcpyAsync(d_buf, h_in, N_ROW * sizeof(float), cudaMemcpyHostToDevice, st));
  CK(cudaMemsetAsync(d_cnt, 0, MAX_L * sizeof(unsigned), st));
  for (int i = 0; i < L; ++i) {
    const int k = i % ng;
    const int prev_grid = i ? grids[(i - 1) % ng] : 0;
    launch(mode, st, grids[k], threads[k], d_buf + (size_t)i * N_ROW,
           d_buf + (size_t)(i + 1) * N_ROW, i ? d_cnt + i - 1 : NULL, (unsigned)prev_grid,
           d_cnt + i);
  }
  CK(cudaStreamEndCapture(st, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float *t = (float *)malloc(sizeof(float) * reps);
  for (int r = -3; r < reps; ++r) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 0) t[r] = ms * 1000.f / L;
  }
  qsort(t, reps, sizeof(float), cmp_f);
  const float med = t[reps / 2];
  /* the chain's result: L rmsnorms of the input, each a scale; recompute on the host */
  float *h = (float *)malloc(N_ROW * sizeof(float)), *ref = (float *)malloc(N_ROW * sizeof(float));
  CK(cudaMemcpy(h, d_buf + (size_t)L * N_ROW, N_ROW * sizeof(float), cudaMemcpyDeviceToHost));
  memcpy(ref, h_in, N_ROW * sizeof(float));
  for (int i = 0; i < L; ++i) {
    double s = 0;
    for (int j = 0; j < N_ROW; ++j)
      s += (double)ref[j] * ref[j];
    const double sc = 1.0 / sqrt(s / N_ROW + 1e-5);
    for (int j = 0; j < N_ROW; ++j)
      ref[j] = (float)(ref[j] * sc);
  }
  *max_rel = 0;
  for (int j = 0; j < N_ROW; ++j) {
    const double d = fabs((double)h[j] - ref[j]) / (fabs(ref[j]) + 1e-3);
    if (d > *max_rel || d != d) *max_rel = d != d ? 1e9 : d;
  }
  free(h);
  free(ref);
  free(t);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(st));
  return med;
}

int main(int argc, char **argv) {
  const int L = argc > 1 ? atoi(argv[1]) : 256, reps = argc > 2 ? atoi(argv[2]) : 30;
  if (L < 2 || L > MAX_L - 1 || reps < 1) {
    fprintf(stderr, "chain_bench: usage: chain_bench [links 2..%d] [replays]\n", MAX_L - 1);
    return 2;
  }
  float *d_buf;
  unsigned *d_cnt;
  CK(cudaMalloc(&d_buf, (size_t)(L + 1) * N_ROW * sizeof(float)));
  CK(cudaMalloc(&d_cnt, MAX_L * sizeof(unsigned)));
  float *h_in;
  CK(cudaMallocHost(&h_in, N_ROW * sizeof(float)));
  srand(12345);
  for (int j = 0; j < N_ROW; ++j)
    h_in[j] = (float)rand() / RAND_MAX * 2.f - 1.f + 0.01f;
  struct {
    const char *name;
    int ng, grids[4], threads[4];
  } cfgs[] = {
      {"1 x 1024 (norm)", 1, {1}, {1024}},
      {"14 x 256 (glu, rope)", 1, {14}, {256}},
      {"132 x 256", 1, {132}, {256}},
      {"264 x 160 (GEMV grid)", 1, {264}, {160}},
      {"264 x 160 / 1 x 1024", 2, {264, 1}, {160, 1024}},
  };
  printf("chain_bench: %d links, median of %d graph replays, us a link\n", L, reps);
  printf("%-24s %8s %8s %8s %8s   max rel err (pdl flag plain late)\n", "links", "pdl", "flag",
         "plain", "pdl-late");
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; ++c) {
    float us[4];
    double err[4];
    for (int m = 0; m < 4; ++m)
      us[m] = run_chain(m, L, cfgs[c].grids, cfgs[c].threads, cfgs[c].ng, reps, d_buf, d_cnt, h_in,
                        &err[m]);
    printf("%-24s %8.2f %8.2f %8.2f %8.2f   %.1e %.1e %.1e %.1e\n", cfgs[c].name, us[0], us[1],
           us[2], us[3], err[0], err[1], err[2], err[3]);
  }
  return 0;
}
