/* A stand-in plugin for the loader tests, compiled several ways: another ABI major
 * (FAKE_ABI_MAJOR), a declining probe (FAKE_SCORE 0), or a higher score than the CPU
 * plugin so `auto` must pick it. Its ops are unsupported; buffers are host memory. */
#include <stdlib.h>
#include <string.h>

#include "plugins/include/memra_plugin.h"

#if FAKE_KIND == 1 /* outranks the CPU plugin */
#define FAKE_NAME "fakehigh"
#define FAKE_SCORE 50
#define FAKE_ABI_MAJOR MEMRA_ABI_MAJOR
#define FAKE_WHY "a stand-in that outranks the CPU"
#elif FAKE_KIND == 2 /* declines */
#define FAKE_NAME "fakedecline"
#define FAKE_SCORE 0
#define FAKE_ABI_MAJOR MEMRA_ABI_MAJOR
#define FAKE_WHY "needs a device this machine lacks"
#else /* from another ABI major */
#define FAKE_NAME "fakeabi"
#define FAKE_SCORE 10
#define FAKE_ABI_MAJOR 99u
#define FAKE_WHY "from the future"
#endif

struct memra_backend {
  int unused;
};

static const char *last_error(memra_backend *be) {
  (void)be;
  return "fake plugin: no kernels";
}
static void fake_close(memra_backend *be) { free(be); }
static memra_status device_info(memra_backend *be, memra_device_info *out) {
  (void)be;
  memset(out, 0, sizeof *out);
  strcpy(out->name, "fake device");
  return MEMRA_OK;
}

static const memra_backend_vt VT = {
    .abi_major = FAKE_ABI_MAJOR,
    .abi_minor = MEMRA_ABI_MINOR,
    .struct_size = sizeof(memra_backend_vt),
    .name = FAKE_NAME,
    .close = fake_close,
    .last_error = last_error,
    .device_info = device_info,
};

static const memra_plugin_info INFO = {
    .abi_major = FAKE_ABI_MAJOR,
    .abi_minor = MEMRA_ABI_MINOR,
    .struct_size = sizeof(memra_plugin_info),
    .score = FAKE_SCORE,
    .name = FAKE_NAME,
    .why = FAKE_WHY,
};

MEMRA_PLUGIN_EXPORT const memra_plugin_info *memra_plugin_probe(void) { return &INFO; }

MEMRA_PLUGIN_EXPORT const memra_backend_vt *memra_plugin_open(const memra_open_params *params,
                                                              memra_backend **out, char *err,
                                                              size_t err_size) {
  (void)params, (void)err, (void)err_size;
  *out = calloc(1, sizeof **out);
  return *out ? &VT : NULL;
}
