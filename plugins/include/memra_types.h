/* memra_types.h — tensor element types, numbered as ggml/GGUF number them.
 *
 * Shared by the core, every plugin and the CUDA code (C and CUDA compilers).
 * Block layouts themselves live in plugins/quant/blocks.h. */
#ifndef MEMRA_TYPES_H
#define MEMRA_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum memra_type {
  MEMRA_TYPE_F32 = 0,
  MEMRA_TYPE_F16 = 1,
  MEMRA_TYPE_Q4_0 = 2,
  MEMRA_TYPE_Q4_1 = 3,
  MEMRA_TYPE_Q5_0 = 6,
  MEMRA_TYPE_Q5_1 = 7,
  MEMRA_TYPE_Q8_0 = 8,
  MEMRA_TYPE_Q8_1 = 9,
  MEMRA_TYPE_Q2_K = 10,
  MEMRA_TYPE_Q3_K = 11,
  MEMRA_TYPE_Q4_K = 12,
  MEMRA_TYPE_Q5_K = 13,
  MEMRA_TYPE_Q6_K = 14,
  MEMRA_TYPE_Q8_K = 15,
  MEMRA_TYPE_I8 = 24,
  MEMRA_TYPE_I16 = 25,
  MEMRA_TYPE_I32 = 26,
  MEMRA_TYPE_I64 = 27,
  MEMRA_TYPE_F64 = 28,
  MEMRA_TYPE_BF16 = 30,
  MEMRA_TYPE_COUNT = 40, /* upper bound on GGUF ids; not every id below it is a type */
  /* memra-only types: ids above 40 (ggml's last, MXFP4, is 39), never read from a GGUF
   * file (gguf_read refuses ids >= MEMRA_TYPE_COUNT). */
  MEMRA_TYPE_F8_E4M3 = 41, /* OCP FP8 e4m3fn: bias 7, no inf, 0x7f/0xff NaN, max 448; KV cache */
} memra_type;

/* Elements per block and bytes per block; {0, 0} for ids memra does not know. */
typedef struct memra_type_traits {
  const char *name;
  int32_t blck; /* elements per block */
  int32_t size; /* bytes per block */
} memra_type_traits;

static inline memra_type_traits memra_type_info(int32_t t) {
  switch (t) {
  case MEMRA_TYPE_F32: return (memra_type_traits){"F32", 1, 4};
  case MEMRA_TYPE_F16: return (memra_type_traits){"F16", 1, 2};
  case MEMRA_TYPE_BF16: return (memra_type_traits){"BF16", 1, 2};
  case MEMRA_TYPE_Q4_0: return (memra_type_traits){"Q4_0", 32, 18};
  case MEMRA_TYPE_Q4_1: return (memra_type_traits){"Q4_1", 32, 20};
  case MEMRA_TYPE_Q5_0: return (memra_type_traits){"Q5_0", 32, 22};
  case MEMRA_TYPE_Q5_1: return (memra_type_traits){"Q5_1", 32, 24};
  case MEMRA_TYPE_Q8_0: return (memra_type_traits){"Q8_0", 32, 34};
  case MEMRA_TYPE_Q8_1: return (memra_type_traits){"Q8_1", 32, 36};
  case MEMRA_TYPE_Q2_K: return (memra_type_traits){"Q2_K", 256, 84};
  case MEMRA_TYPE_Q3_K: return (memra_type_traits){"Q3_K", 256, 110};
  case MEMRA_TYPE_Q4_K: return (memra_type_traits){"Q4_K", 256, 144};
  case MEMRA_TYPE_Q5_K: return (memra_type_traits){"Q5_K", 256, 176};
  case MEMRA_TYPE_Q6_K: return (memra_type_traits){"Q6_K", 256, 210};
  case MEMRA_TYPE_Q8_K: return (memra_type_traits){"Q8_K", 256, 292};
  case MEMRA_TYPE_I8: return (memra_type_traits){"I8", 1, 1};
  case MEMRA_TYPE_I16: return (memra_type_traits){"I16", 1, 2};
  case MEMRA_TYPE_I32: return (memra_type_traits){"I32", 1, 4};
  case MEMRA_TYPE_I64: return (memra_type_traits){"I64", 1, 8};
  case MEMRA_TYPE_F64: return (memra_type_traits){"F64", 1, 8};
  case MEMRA_TYPE_F8_E4M3: return (memra_type_traits){"F8_E4M3", 1, 1};
  default: return (memra_type_traits){0, 0, 0};
  }
}

/* Bytes of one row of ne0 elements, or 0 when ne0 is not a whole number of blocks. */
static inline uint64_t memra_type_row_bytes(int32_t t, int64_t ne0) {
  memra_type_traits tr = memra_type_info(t);
  if (tr.blck <= 0 || ne0 < 0 || ne0 % tr.blck != 0) return 0;
  return (uint64_t)(ne0 / tr.blck) * (uint64_t)tr.size;
}

#ifdef __cplusplus
}
#endif
#endif /* MEMRA_TYPES_H */
