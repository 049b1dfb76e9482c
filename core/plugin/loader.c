#define _GNU_SOURCE
#include "core/plugin/loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

size_t memra_plugin_dirs(const char *plugin_dir, char dirs[][1024], size_t max_dirs) {
  size_t n = 0;
  if (plugin_dir && *plugin_dir && n < max_dirs) copy_str(dirs[n++], 1024, plugin_dir);
  const char *env = getenv("MEMRA_PLUGIN_PATH");
  if (env) {
    const char *p = env;
    while (*p && n < max_dirs) {
      const char *colon = strchr(p, ':');
      size_t len = colon ? (size_t)(colon - p) : strlen(p);
      if (len > 0 && len < 1024) {
        memcpy(dirs[n], p, len);
        dirs[n++][len] = 0;
      }
      if (!colon) break;
      p = colon + 1;
    }
  }
  char exe[1024];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0 && n < max_dirs) {
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      copy_str(dirs[n++], 1024, exe);
    }
  }
  return n;
}

/* Opens a library and resolves both entry points; on failure fills why and returns NULL. */
static void *open_plugin_lib(const char *path, memra_plugin_probe_fn *probe,
                             memra_plugin_open_fn *open, char *why, size_t why_cap,
                             memra_status *st) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    snprintf(why, why_cap, "%s: %s", path, strerror(errno));
    *st = MEMRA_E_IO;
    return NULL;
  }
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(why, why_cap, "%s: cannot load: %s", path, dlerror());
    *st = MEMRA_E_IO;
    return NULL;
  }
  *probe = (memra_plugin_probe_fn)dlsym(dl, MEMRA_PLUGIN_PROBE_SYMBOL);
  *open = (memra_plugin_open_fn)dlsym(dl, MEMRA_PLUGIN_OPEN_SYMBOL);
  if (!*probe || !*open) {
    snprintf(why, why_cap, "%s: not a memra plugin (missing symbol %s)", path,
             !*probe ? MEMRA_PLUGIN_PROBE_SYMBOL : MEMRA_PLUGIN_OPEN_SYMBOL);
    dlclose(dl);
    *st = MEMRA_E_ABI;
    return NULL;
  }
  *st = MEMRA_OK;
  return dl;
}

/* Checks the probe's answer; the ABI major is read before any other field. */
static memra_status check_info(const char *path, const memra_plugin_info *info, char *why,
                               size_t why_cap) {
  if (!info) {
    snprintf(why, why_cap, "%s: probe returned nothing", path);
    return MEMRA_E_ABI;
  }
  if (info->abi_major != MEMRA_ABI_MAJOR) {
    snprintf(why, why_cap, "%s: plugin ABI %u, this memra needs ABI %u (rebuild the plugin)", path,
             info->abi_major, MEMRA_ABI_MAJOR);
    return MEMRA_E_ABI;
  }
  if (info->struct_size < sizeof(memra_plugin_info) || !info->name) {
    snprintf(why, why_cap, "%s: plugin info of %u bytes, expected at least %zu", path,
             info->struct_size, sizeof(memra_plugin_info));
    return MEMRA_E_ABI;
  }
  return MEMRA_OK;
}

void memra_plugin_probe_file(const char *path, memra_plugin_entry *e) {
  memset(e, 0, sizeof *e);
  copy_str(e->path, sizeof e->path, path);
  memra_plugin_probe_fn probe;
  memra_plugin_open_fn open;
  void *dl = open_plugin_lib(path, &probe, &open, e->why, sizeof e->why, &e->status);
  if (!dl) return;
  const memra_plugin_info *info = probe();
  e->status = check_info(path, info, e->why, sizeof e->why);
  if (e->status == MEMRA_OK) {
    copy_str(e->name, sizeof e->name, info->name);
    e->score = info->score > 0 ? info->score : 0;
    copy_str(e->why, sizeof e->why, info->why);
  }
  dlclose(dl);
}

static int is_plugin_file(const char *name) {
  size_t n = strlen(name);
  return strncmp(name, "libmemra_", 9) == 0 && n > 12 && strcmp(name + n - 3, ".so") == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void memra_plugin_scan(const char *plugin_dir, memra_plugin_list *out) {
  memset(out, 0, sizeof *out);
  char dirs[8][1024];
  size_t n_dirs = memra_plugin_dirs(plugin_dir, dirs, 8);
  for (size_t d = 0; d < n_dirs; ++d) {
    DIR *dir = opendir(dirs[d]);
    if (!dir) continue;
    char *names[MEMRA_MAX_PLUGINS];
    size_t n_names = 0;
    struct dirent *de;
    while ((de = readdir(dir)) && n_names < MEMRA_MAX_PLUGINS)
      if (is_plugin_file(de->d_name)) names[n_names++] = strdup(de->d_name);
    closedir(dir);
    qsort(names, n_names, sizeof names[0], cmp_str); /* a stable order across runs */
    for (size_t i = 0; i < n_names; ++i) {
      char path[2100];
      snprintf(path, sizeof path, "%s/%s", dirs[d], names[i]);
      free(names[i]);
      if (out->n >= MEMRA_MAX_PLUGINS) continue;
      memra_plugin_entry *e = &out->items[out->n];
      memra_plugin_probe_file(path, e);
      int dup = 0; /* the first directory that provides a plugin name wins */
      for (size_t j = 0; j < out->n; ++j)
        if (e->name[0] && strcmp(out->items[j].name, e->name) == 0) dup = 1;
      if (!dup) out->n++;
    }
  }
}

static memra_status open_path(const char *path, const memra_open_params *params,
                              memra_backend_handle *h, memra_err *err) {
  char why[512];
  memra_status st;
  memra_plugin_probe_fn probe;
  memra_plugin_open_fn open;
  void *dl = open_plugin_lib(path, &probe, &open, why, sizeof why, &st);
  if (!dl) return memra_errf(err, st, "%s", why);
  const memra_plugin_info *info = probe();
  st = check_info(path, info, why, sizeof why);
  if (st != MEMRA_OK) {
    dlclose(dl);
    return memra_errf(err, st, "%s", why);
  }
  if (info->score <= 0) {
    memra_errf(err, MEMRA_E_UNSUPPORTED, "plugin %s (%s) cannot run here: %s", info->name, path,
               info->why ? info->why : "no reason given");
    dlclose(dl);
    return MEMRA_E_UNSUPPORTED;
  }
  char open_err[512] = "";
  memra_backend *be = NULL;
  const memra_backend_vt *vt = open(params, &be, open_err, sizeof open_err);
  if (!vt || !be) {
    memra_errf(err, MEMRA_E_DEVICE, "plugin %s (%s) failed to open: %s", info->name, path,
               open_err[0] ? open_err : "no reason given");
    dlclose(dl);
    return MEMRA_E_DEVICE;
  }
  /* A plugin of an older minor has a shorter vtable: the slots it lacks read as NULL
   * (unsupported); ABI 1.0 ends with get_proc. */
  const size_t min_size = offsetof(memra_backend_vt, get_proc) + sizeof(vt->get_proc);
  if (vt->abi_major != MEMRA_ABI_MAJOR || vt->struct_size < min_size) {
    memra_errf(err, MEMRA_E_ABI,
               "%s: vtable of ABI %u (%u bytes), this memra needs ABI %u (at least %zu bytes)",
               path, vt->abi_major, vt->struct_size, MEMRA_ABI_MAJOR, min_size);
    if (vt->abi_major == MEMRA_ABI_MAJOR && vt->close) vt->close(be);
    dlclose(dl);
    return MEMRA_E_ABI;
  }
  h->dl = dl;
  memset(&h->vt_full, 0, sizeof h->vt_full);
  memcpy(&h->vt_full, vt,
         vt->struct_size < sizeof h->vt_full ? vt->struct_size : sizeof h->vt_full);
  h->vt = &h->vt_full;
  h->be = be;
  copy_str(h->name, sizeof h->name, info->name);
  copy_str(h->path, sizeof h->path, path);
  return MEMRA_OK;
}

memra_status memra_backend_open(const char *spec, const char *plugin_dir,
                                const memra_open_params *params, memra_backend_handle *out,
                                memra_err *err) {
  memset(out, 0, sizeof *out);
  if (!spec || !*spec) spec = "auto";
  if (strchr(spec, '/') || (strlen(spec) > 3 && strcmp(spec + strlen(spec) - 3, ".so") == 0))
    return open_path(spec, params, out, err);

  memra_plugin_list list;
  memra_plugin_scan(plugin_dir, &list);
  int auto_pick = strcmp(spec, "auto") == 0;
  const memra_plugin_entry *best = NULL;
  for (size_t i = 0; i < list.n; ++i) {
    const memra_plugin_entry *e = &list.items[i];
    if (e->status != MEMRA_OK) continue;
    if (auto_pick) {
      if (e->score > 0 && (!best || e->score > best->score)) best = e;
    } else if (strcmp(e->name, spec) == 0) {
      best = e;
      break;
    }
  }
  if (!best) {
    char found[1024] = "";
    size_t len = 0;
    for (size_t i = 0; i < list.n && len < sizeof found - 64; ++i)
      len += (size_t)snprintf(found + len, sizeof found - len, "%s%s (%s)", i ? ", " : "",
                              list.items[i].name[0] ? list.items[i].name : list.items[i].path,
                              list.items[i].score > 0 ? "usable" : "declined");
    if (auto_pick)
      return memra_errf(err, MEMRA_E_NOT_FOUND,
                        "no usable backend plugin found (searched --plugin-dir, "
                        "MEMRA_PLUGIN_PATH and the executable's folder; found: %s)",
                        list.n ? found : "none");
    return memra_errf(err, MEMRA_E_NOT_FOUND,
                      "backend '%s' not found (expected auto, cpu, sm90a, sm120a or a path to a "
                      ".so; plugins found: %s)",
                      spec, list.n ? found : "none");
  }
  return open_path(best->path, params, out, err);
}

void memra_backend_close(memra_backend_handle *h) {
  if (!h) return;
  if (h->vt && h->be && h->vt->close) h->vt->close(h->be);
  if (h->dl) dlclose(h->dl);
  memset(h, 0, sizeof *h);
}
