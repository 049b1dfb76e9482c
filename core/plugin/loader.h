/* loader.h — finds backend plugins (libmemra_*.so), probes them and opens one.
 *
 * Search order: the --plugin-dir flag, then MEMRA_PLUGIN_PATH (':'-separated), then the
 * folder of the running executable. A .so dropped into any of them is found without
 * rebuilding anything. `auto` opens the highest-scoring plugin. */
#ifndef MEMRA_LOADER_H
#define MEMRA_LOADER_H

#include <stddef.h>

#include "core/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MEMRA_MAX_PLUGINS = 32 };

typedef struct memra_plugin_entry {
  char path[1024];
  char name[32];       /* from the probe; empty when the file could not be probed */
  int score;           /* 0 = declined or unusable */
  char why[512];       /* the probe's reason, or what was wrong with the file */
  memra_status status; /* MEMRA_OK when probed; MEMRA_E_ABI / E_IO when the file is bad */
} memra_plugin_entry;

typedef struct memra_plugin_list {
  memra_plugin_entry items[MEMRA_MAX_PLUGINS];
  size_t n;
} memra_plugin_list;

/* Directories searched, in order (plugin_dir may be NULL). Returns the count written. */
size_t memra_plugin_dirs(const char *plugin_dir, char dirs[][1024], size_t max_dirs);

/* Probes every libmemra_*.so in the search directories (first occurrence of a plugin
 * name wins). Never fails on a bad file: its entry carries the error. */
void memra_plugin_scan(const char *plugin_dir, memra_plugin_list *out);

/* Probes one file. */
void memra_plugin_probe_file(const char *path, memra_plugin_entry *out);

/* An opened backend: the vtable, its handle and the library that holds them. */
typedef struct memra_backend_handle {
  void *dl;
  const memra_backend_vt *vt; /* points to vt_full */
  memra_backend_vt vt_full;   /* the plugin's vtable, slots of later minors zeroed */
  memra_backend *be;
  char name[32];
  char path[1024];
} memra_backend_handle;

/* spec: "auto", a plugin name ("cpu", "sm90a", "sm120a", or any other name a plugin
 * reports) or a path to a .so. On failure, one line naming the plugin and the reason. */
memra_status memra_backend_open(const char *spec, const char *plugin_dir,
                                const memra_open_params *params, memra_backend_handle *out,
                                memra_err *err);
void memra_backend_close(memra_backend_handle *h);

#ifdef __cplusplus
}
#endif
#endif
