/* traffic.h — the bytes one decode step of one sequence moves, for bandwidth floors
 * (memra bench): tokens/s <= bandwidth / bytes. */
#ifndef MEMRA_TRAFFIC_H
#define MEMRA_TRAFFIC_H

#include "core/models/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Weights read (m->step_weight_bytes), plus the K and V rows of n_attended positions in each
 * attention layer (a sliding-window layer at most its window), plus each recurrent layer's
 * conv and delta-rule state of one sequence read and written. */
uint64_t memra_ctx_step_bytes(const memra_ctx *c, int64_t n_attended);

#ifdef __cplusplus
}
#endif

#endif
