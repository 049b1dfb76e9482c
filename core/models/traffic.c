/* traffic.c — bytes of one decode step (traffic.h). The KV rows and state rows are the
 * context's own tensors, so their element types (F16, F32, FP8 KV) count as allocated. */
#include "core/models/traffic.h"

uint64_t memra_ctx_step_bytes(const memra_ctx *c, int64_t n_attended) {
  const memra_hparams *hp = &c->m->hp;
  uint64_t b = c->m->step_weight_bytes;
  for (int il = 0; il < hp->n_layer; ++il) {
    if (memra_hparams_layer_recurrent(hp, il)) { /* state in, state out */
      b += 2 * (c->conv_state[il].nb1 + c->ssm_state[il].nb1);
      continue;
    }
    int64_t n = n_attended;
    if (hp->n_swa > 0 && memra_hparams_layer_swa(hp, il) && n > hp->n_swa) n = hp->n_swa;
    b += (uint64_t)n * (c->k_cache[il].nb1 + c->v_cache[il].nb1);
  }
  return b;
}
