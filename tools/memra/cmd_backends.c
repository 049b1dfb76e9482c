/* memra backends — every plugin found, its score on this machine and why. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "core/plugin/loader.h"
#include "tools/memra/commands.h"
#include "tools/memra/options.h"

int memra_cmd_backends(int argc, char **argv, int first) {
  memra_opts o;
  if (!memra_opts_from_args(&o, argc, argv, first, "backends")) return 2;
  const char *dir = o.plugin_dir[0] ? o.plugin_dir : NULL;
  char dirs[8][1024];
  size_t n_dirs = memra_plugin_dirs(dir, dirs, 8);
  printf("plugin search path:\n");
  for (size_t i = 0; i < n_dirs; ++i)
    printf("  %s\n", dirs[i]);
  memra_plugin_list list;
  memra_plugin_scan(dir, &list);
  if (list.n == 0) {
    printf("no plugins (libmemra_*.so) found\n");
    return 1;
  }
  const memra_plugin_entry *best = NULL;
  for (size_t i = 0; i < list.n; ++i)
    if (list.items[i].score > 0 && (!best || list.items[i].score > best->score))
      best = &list.items[i];
  printf("%-8s %5s  %-40s %s\n", "name", "score", "file", "status");
  for (size_t i = 0; i < list.n; ++i) {
    const memra_plugin_entry *e = &list.items[i];
    const char *state = e->status != MEMRA_OK ? "unusable"
                        : e->score == 0       ? "declined"
                        : e == best           ? "auto picks this"
                                              : "usable";
    printf("%-8s %5d  %-40s %s: %s\n", e->name[0] ? e->name : "?", e->score, e->path, state,
           e->why);
  }
  return best ? 0 : 1;
}
