/* check_util.h — what the device checks and benchmarks share: one seeded random stream
 * (never all zeros), random weight rows of any type, device buffers with guard bytes on
 * one plugin or holding the same bytes on several, tensor views of them, and timers.
 * Tool code: allocation failures and failed vtable calls exit the tool (status 3). */
#ifndef MEMRA_TOOLS_CHECK_UTIL_H
#define MEMRA_TOOLS_CHECK_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/include/memra_plugin.h"
#include "tools/device/plugpair.h"

/* --- random data ---------------------------------------------------------------------- */

/* xorshift64* state; each tool seeds it (a non-zero value: `--seed N` sets N | 1). */
extern uint64_t ck_rng;
uint64_t ck_rnd(void);
/* Uniform in [lo, hi) at 24-bit resolution. */
float ck_frand(float lo, float hi);
/* One of -1, -0.999, ..., 1 (the benchmarks' values). */
float ck_frand_milli(void);
void *ck_xmalloc(size_t n);
/* n floats from ck_frand(lo, hi) (caller frees). */
float *ck_frand_vec(int64_t n, float lo, float hi);
/* Quantized blocks: random bytes, then every block's f16 scale fields set to scale() (random
 * bytes there would be NaN/Inf/huge); any such block is a valid block. */
void ck_rand_blocks(int32_t type, uint8_t *p, uint64_t bytes, float (*scale)(void));
/* rows rows of ne0 elements of type (caller frees): float formats in [-1, 1), FP8 encoded
 * values (never the NaN code), quantized blocks from ck_rand_blocks with scales in
 * [0.001, 0.02). */
void *ck_rand_rows(int32_t type, int64_t ne0, int64_t rows, uint64_t *nbytes);

/* --- one plugin's buffers: payload, then CK_GUARD bytes of 0xA5 ----------------------- */

enum { CK_GUARD = 256 };

/* init NULL: payload poisoned with 0xFF (NaN floats and f16, -1 ints). */
memra_buf *ck_alloc(const memra_plug *p, uint64_t size, const void *init);
void ck_poison1(const memra_plug *p, memra_buf *b, uint64_t size);
/* size bytes from off (caller frees). */
void *ck_download(const memra_plug *p, memra_buf *b, uint64_t off, uint64_t size);
/* 1 when the guard bytes after a payload of size bytes are intact. */
int ck_guard_ok1(const memra_plug *p, memra_buf *b, uint64_t size);
/* ne1 rows of ne0 elements from byte off, rows nb1 bytes apart (0: packed). */
memra_tensor ck_tensor(memra_buf *b, uint64_t off, int32_t type, int64_t ne0, int64_t ne1,
                       uint64_t nb1);
memra_tensor ck_none(void);

/* --- the same bytes on plugins [0, n) of the array given to ck_use_plugs --------------- */

enum { CK_MAX_PLUGS = 3 };

typedef struct ck_buf {
  memra_buf *b[CK_MAX_PLUGS]; /* NULL on plugins it was not made on */
  uint64_t size;              /* payload; CK_GUARD bytes follow */
} ck_buf;

/* The plugins buffers live on, and how many of them ck_new fills. */
void ck_use_plugs(memra_plug *plugs, int n_default);
ck_buf ck_new(uint64_t size, const void *init);
ck_buf ck_new_in(int n, uint64_t size, const void *init);
void ck_free(ck_buf *d);
void ck_poison(const ck_buf *d);
/* Plugin i's payload (caller frees). */
void *ck_get(const ck_buf *d, int i);
/* 1 when every plugin's guard bytes are intact. */
int ck_guard_ok(const ck_buf *d);
/* Records (ck_record) whether both plugins' first n int32 values in d are equal, exactly (ids,
 * indices: no tolerance), with the first difference in the note. */
void ck_cmp_i32(const char *op, const char *what, const ck_buf *d, int64_t n);
memra_tensor ck_view(const ck_buf *d, int i, int32_t type, int64_t ne0, int64_t ne1, uint64_t nb1,
                     uint64_t off);
/* Packed rows from the start of the buffer. */
memra_tensor ck_t(const ck_buf *d, int i, int32_t type, int64_t ne0, int64_t ne1);

/* --- command line -------------------------------------------------------------------- */

/* --quick and --seed N anywhere (--seed sets ck_rng to N | 1); the other arguments fill
 * paths[0, max). Returns how many there were, max + 1 when there were more. */
int ck_args(int argc, char **argv, int *quick, const char **paths, int max);
/* --quick and --seed N leading the arguments; returns the index of the first other one,
 * or -1 at another option when strict (else that option is the first other one). */
int ck_flags(int argc, char **argv, int *quick, int strict);

/* --- timing ---------------------------------------------------------------------------- */

/* Seconds on the monotonic clock. */
double ck_now(void);
/* Sorts t[0, n) and returns its middle element t[n / 2]. */
double ck_median(double *t, int n);

#endif
