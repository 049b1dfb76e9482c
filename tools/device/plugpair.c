/* plugpair.c — open a plugin by path through its two entry points (see plugpair.h). */
#include "tools/device/plugpair.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int memra_plug_open(memra_plug *p, const char *path) {
  p->path = path;
  p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!p->dl) {
    fprintf(stderr, "%s: %s\n", path, dlerror());
    return 1;
  }
  memra_plugin_probe_fn probe = (memra_plugin_probe_fn)dlsym(p->dl, MEMRA_PLUGIN_PROBE_SYMBOL);
  memra_plugin_open_fn open = (memra_plugin_open_fn)dlsym(p->dl, MEMRA_PLUGIN_OPEN_SYMBOL);
  if (!probe || !open) {
    fprintf(stderr, "%s: not a memra plugin (no %s/%s)\n", path, MEMRA_PLUGIN_PROBE_SYMBOL,
            MEMRA_PLUGIN_OPEN_SYMBOL);
    return 1;
  }
  const memra_plugin_info *info = probe();
  if (!info || info->abi_major != MEMRA_ABI_MAJOR) {
    fprintf(stderr, "%s: plugin ABI %u, this tool %u\n", path, info ? info->abi_major : 0u,
            MEMRA_ABI_MAJOR);
    return 1;
  }
  if (info->score <= 0) {
    fprintf(stderr, "%s: %s declines: %s\n", path, info->name, info->why);
    return 1;
  }
  memra_open_params prm = {sizeof(memra_open_params), 0, 0};
  char err[512] = "";
  p->vt = open(&prm, &p->be, err, sizeof err);
  if (!p->vt) {
    fprintf(stderr, "%s: open failed: %s\n", path, err);
    return 1;
  }
  fprintf(stderr, "%s: %s (%s)\n", path, p->vt->name, info->why);
  return 0;
}

void memra_plug_close(memra_plug *p) {
  if (p->vt) p->vt->close(p->be);
  p->vt = NULL;
}

void memra_plug_must(const memra_plug *p, memra_status st, const char *what) {
  if (st == MEMRA_OK) return;
  fprintf(stderr, "FATAL %s: %s: status %d: %s\n", p->vt->name, what, (int)st,
          p->vt->last_error(p->be));
  exit(3);
}
