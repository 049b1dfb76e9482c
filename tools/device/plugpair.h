/* plugpair.h — two plugins opened side by side (a reference and one under test), and
 * device buffers that hold the same bytes on both. Used by opcheck and gemv_bench. */
#ifndef MEMRA_TOOLS_PLUGPAIR_H
#define MEMRA_TOOLS_PLUGPAIR_H

#include <stdint.h>

#include "plugins/include/memra_plugin.h"

typedef struct memra_plug {
  const char *path;
  void *dl;
  const memra_backend_vt *vt;
  memra_backend *be;
} memra_plug;

/* dlopens path, checks the ABI, opens the backend. 0 on success, else prints one line. */
int memra_plug_open(memra_plug *p, const char *path);
void memra_plug_close(memra_plug *p);

/* Exits the tool (not a library) with a message when a vtable call fails. */
void memra_plug_must(const memra_plug *p, memra_status st, const char *what);

#endif
