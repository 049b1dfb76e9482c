/* gguf_fuzz.c — libFuzzer target for the GGUF reader (run: tools/fuzz/run_gguf_fuzz.sh).
 * Any input must give MEMRA_OK (then every accessor is exercised, and a copy through the
 * writer must reopen with the same contents) or MEMRA_E_FORMAT with a
 * one-line message, and leave no allocation behind. Anything else aborts: a finding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "tools/fuzz/gguf_touch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) devnull = fopen("/dev/null", "w");
  long live0 = memra_test_live_allocs();
  memra_gguf *g = NULL;
  memra_err err;
  memra_status st = memra_gguf_open_memory(size ? data : NULL, size, "fuzz.gguf", &g, &err);
  if (st == MEMRA_OK) {
    if (memra_gguf_fuzz_touch(g, devnull) == 0) {
      fprintf(stderr, "gguf_fuzz: an accessor disagreed with the tables\n");
      abort();
    }
    if (memra_gguf_fuzz_rewrite(g) == 0) {
      fprintf(stderr, "gguf_fuzz: writer round trip changed the file's contents\n");
      abort();
    }
    memra_gguf_close(g);
  } else if (st != MEMRA_E_FORMAT || err.msg[0] == 0 || strchr(err.msg, '\n') ||
             strncmp(err.msg, "fuzz.gguf: ", 11) != 0) {
    fprintf(stderr, "gguf_fuzz: bad failure: status %d, message '%s'\n", (int)st, err.msg);
    abort();
  }
  if (memra_test_live_allocs() != live0) {
    fprintf(stderr, "gguf_fuzz: %ld allocations leaked\n", memra_test_live_allocs() - live0);
    abort();
  }
  return 0;
}
