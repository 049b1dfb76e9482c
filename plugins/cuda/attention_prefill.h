/* attention_prefill.h — the tensor-core (mma.sync) flash-attention kernel for prefill
 * batches, called from memra_cu_attention (attention.cu) after its argument checks. */
#ifndef MEMRA_CUDA_ATTENTION_PREFILL_H
#define MEMRA_CUDA_ATTENTION_PREFILL_H

#include "plugins/cuda/cuda_common.h"

/* True when the core marked the batch as prompt rows only (MEMRA_BATCH_PROMPT: decode rows
 * must stay batch-invariant on the split-KV kernel) and the kernel covers it: F16 caches,
 * head_dim 64 or 128, a GQA group of at most 64 heads, 16-byte aligned cache rows. Any
 * prompt batch, of any size, takes this kernel, so a prompt computed in chunks equals the
 * prompt in one step bit for bit (the split-KV kernel rounds differently). */
int memra_cu_attention_prefill_fits(const memra_batch *batch, const memra_tensor *k_cache,
                                    const memra_tensor *v_cache, const memra_attn_params *p);

/* Same contract as memra_cu_attention; arguments already checked by it (pos, seq, bt and
 * bt_ld are the batch's device vectors from memra_cu_check_batch). */
memra_status memra_cu_attention_prefill(memra_backend *be, const memra_tensor *out,
                                        const memra_tensor *q, const memra_tensor *k_cache,
                                        const memra_tensor *v_cache, const memra_batch *batch,
                                        const memra_attn_params *p, const int32_t *pos,
                                        const int32_t *seq, const int32_t *bt, int64_t bt_ld);

#if MEMRA_CUDA_CC_MAJOR == 9 && !defined(MEMRA_CUDA_FAMILY_SM120)
/* The same contract on wgmma (attention_prefill_wgmma.cu, the sm90a plugin only; the sm120a
 * family keeps mma.sync): same fit rules (F16 caches, head_dim 64/128, group <= 64, 16-byte
 * aligned rows) and the same bits. */
int memra_cu_attention_prefill_wgmma_fits(const memra_batch *batch, const memra_tensor *k_cache,
                                          const memra_tensor *v_cache, const memra_attn_params *p);
memra_status memra_cu_attention_prefill_wgmma(memra_backend *be, const memra_tensor *out,
                                              const memra_tensor *q, const memra_tensor *k_cache,
                                              const memra_tensor *v_cache, const memra_batch *batch,
                                              const memra_attn_params *p, const int32_t *pos,
                                              const int32_t *seq, const int32_t *bt, int64_t bt_ld);
#endif

#endif
