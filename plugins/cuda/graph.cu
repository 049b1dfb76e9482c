/* graph.cu — graph capture: the op calls between graph_begin and graph_end are recorded
 * from the backend's stream and replayed by graph_launch with the same device pointers.
 * Step state lives in device memory, so one captured step replays step after step. */
#include <stdlib.h>

#include "plugins/cuda/cuda_common.h"

memra_status memra_cu_graph_begin(memra_backend *be) {
  if (be->capturing) return memra_cu_errf(be, MEMRA_E_INVALID, "graph_begin: already capturing");
  /* Relaxed: the attention workspace may grow (cudaMalloc) while a step is recorded. */
  MEMRA_CU(cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeRelaxed));
  be->capturing = 1;
  return MEMRA_OK;
}

memra_status memra_cu_graph_end(memra_backend *be, memra_graph **out) {
  if (!out) return memra_cu_errf(be, MEMRA_E_INVALID, "graph_end: out is NULL");
  *out = NULL;
  if (!be->capturing) return memra_cu_errf(be, MEMRA_E_INVALID, "graph_end: no graph_begin");
  be->capturing = 0;
  cudaGraph_t g = NULL;
  MEMRA_CU(cudaStreamEndCapture(be->stream, &g));
  memra_graph *mg = (memra_graph *)calloc(1, sizeof *mg);
  if (!mg) {
    cudaGraphDestroy(g);
    return memra_cu_errf(be, MEMRA_E_OOM, "graph_end: out of host memory");
  }
  cudaError_t e = cudaGraphInstantiate(&mg->exec, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    free(mg);
    return memra_cu_fail(be, e, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  *out = mg;
  return MEMRA_OK;
}

memra_status memra_cu_graph_launch(memra_backend *be, memra_graph *g) {
  if (!g) return memra_cu_errf(be, MEMRA_E_INVALID, "graph_launch: graph is NULL");
  if (be->capturing)
    return memra_cu_errf(be, MEMRA_E_INVALID, "graph_launch: not allowed inside graph capture");
  MEMRA_CU(cudaGraphLaunch(g->exec, be->stream));
  return MEMRA_OK;
}

void memra_cu_graph_free(memra_backend *be, memra_graph *g) {
  (void)be;
  if (!g) return;
  cudaGraphExecDestroy(g->exec);
  free(g);
}
