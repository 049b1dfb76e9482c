/* memra info FILE — a GGUF's metadata and tensor table, like gguf-dump. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "core/gguf/gguf.h"
#include "core/gguf/gguf_dump.h"
#include "tools/memra/commands.h"

int memra_cmd_info(int argc, char **argv, int first) {
  const char *path = NULL;
  bool full = false;
  for (int i = first; i < argc; ++i) {
    if (!strcmp(argv[i], "--full"))
      full = true;
    else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "memra info: unknown option '%s' (usage: memra info [--full] FILE)\n",
              argv[i]);
      return 2;
    } else if (!path)
      path = argv[i];
    else {
      fprintf(stderr, "memra info: one file at a time ('%s' is extra)\n", argv[i]);
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "memra info: no file given (usage: memra info [--full] FILE)\n");
    return 2;
  }
  memra_err err = {{0}};
  memra_gguf *g;
  if (memra_gguf_open(path, &g, &err)) {
    fprintf(stderr, "memra info: %s\n", err.msg);
    return 1;
  }
  memra_status st = memra_gguf_dump(g, stdout, full);
  memra_gguf_close(g);
  return st ? 1 : 0;
}
