/* decoder.h — greedy decode with the step state in device memory.
 *
 * One step is: forward over one row per sequence, argmax written straight into the token
 * ids the next step embeds, positions advanced by add_i32 — all on the device, so the
 * host only reads back 4 bytes per sequence. On a backend with graph capture the step is
 * captured once per KV bucket (the split count of split-KV attention depends on it) and
 * replayed; elsewhere it runs eagerly through the same calls. */
#ifndef MEMRA_DECODER_H
#define MEMRA_DECODER_H

#include "core/models/context.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MEMRA_DECODER_MAX_BUCKETS = 24 };

typedef struct memra_decoder {
  memra_ctx *c;
  int32_t n_seq;   /* rows per step: sequences 0..n_seq-1 */
  int32_t pos[64]; /* host mirror of each row's position */
  bool use_graph;
  memra_graph *graphs[MEMRA_DECODER_MAX_BUCKETS]; /* by log2(bucket / 256) */
  int32_t n_captures;
  bool sampling; /* steps draw with the plugin's sample op, not argmax */
  memra_sample_params sp;
  memra_buf *rng_buf; /* I64 [n_seq] generator states, advanced by the op */
  memra_tensor rng;
  uint32_t buckets_seen; /* bit i: bucket 256 << i was used */
  /* Lookahead (ABI 1.18 download_start / download_wait): step n + 1 is queued before the host
   * waits for step n's tokens, so the device does not idle while the host returns and queues
   * the next step. The step queued ahead computes the row of the last returned token: its KV
   * entries are the ones the next eval of that token writes, but a recurrent state (hybrid
   * models) has taken the token in, so set it only where the sequence ends with the decoder or
   * keeps no recurrent state (memra_decoder_can_look_ahead). */
  bool lookahead;
  bool lookahead_off; /* MEMRA_LOOKAHEAD=0 at init */
  int32_t in_flight;  /* steps queued whose tokens were not returned: 0, 1 or 2 */
  int32_t slot_head;  /* the staging slot of the oldest step in flight */
  int32_t n_ahead;    /* steps queued before the previous step's tokens were read */
} memra_decoder;

/* Starts decoding n_seq sequences (rows) whose next input tokens are tokens[i] at
 * positions pos[i]. use_graph: capture and replay when the backend can. */
memra_status memra_decoder_init(memra_decoder *d, memra_ctx *c, int32_t n_seq,
                                const int32_t *tokens, const int32_t *pos, bool use_graph,
                                memra_err *err);
/* Makes every step draw with the backend's sample op (top-k/top-p/min-p/temperature on
 * the device, inside the graph) instead of argmax; sequence i's generator starts at
 * seed + i. Call before the first step. MEMRA_E_UNSUPPORTED if the plugin has no op. */
memra_status memra_decoder_set_sampling(memra_decoder *d, const memra_sample_params *p,
                                        uint64_t seed, memra_err *err);
/* Whether lookahead may stay on when the sequence goes on after the decoder (chat): the model
 * keeps no recurrent state, and the plugin has the ABI 1.18 slots. Lookahead is used only where
 * the plugin has them, whatever d->lookahead says; MEMRA_LOOKAHEAD=0 turns it off. */
bool memra_decoder_can_look_ahead(const memra_decoder *d);
/* One step: out[i] = the token sequence i produced (its next input). */
memra_status memra_decoder_step(memra_decoder *d, int32_t *out, memra_err *err);
void memra_decoder_free(memra_decoder *d);

#ifdef __cplusplus
}
#endif
#endif
