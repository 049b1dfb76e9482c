/* probe.c — memra_plugin_probe for the GPU plugins: reads the driver, runs no GPU code.
 *
 * The CUDA runtime is never touched here (it would initialise a context and load our
 * sm_90a/sm_120a SASS); the driver API is reached through dlopen("libcuda.so.1") so that a
 * machine without a driver gets a clean "cannot run" instead of a failed dlopen of the
 * plugin itself. Built once per plugin with MEMRA_CUDA_NAME, MEMRA_CUDA_CC_MAJOR and
 * MEMRA_CUDA_CC_MINOR: the exact compute capability whose SASS the plugin carries.
 *
 * MEMRA_LIBCUDA (environment), when set, names the driver library to load instead: the
 * tests point it at a fake driver to reach every branch on a machine without a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "plugins/include/memra_plugin.h"

#ifndef MEMRA_CUDA_NAME
#error "MEMRA_CUDA_NAME, MEMRA_CUDA_CC_MAJOR and MEMRA_CUDA_CC_MINOR must be defined"
#endif

/* The few driver entry points the probe needs, declared here so no CUDA header is needed. */
typedef int (*cu_init_fn)(unsigned int flags);
typedef int (*cu_device_get_count_fn)(int *count);
typedef int (*cu_device_get_fn)(int *dev, int ordinal);
typedef int (*cu_device_get_attribute_fn)(int *value, int attrib, int dev);
typedef int (*cu_device_get_name_fn)(char *name, int len, int dev);

enum {
  CU_SUCCESS = 0,
  CU_ERROR_NO_DEVICE = 100,
  CU_ATTR_CC_MAJOR = 75, /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  CU_ATTR_CC_MINOR = 76,
};

/* Per thread, so two threads probing at once never see each other's message. */
static _Thread_local char g_why[256];
static _Thread_local memra_plugin_info g_info;

static const memra_plugin_info *probe_result(int score) {
  g_info.abi_major = MEMRA_ABI_MAJOR;
  g_info.abi_minor = MEMRA_ABI_MINOR;
  g_info.struct_size = (uint32_t)sizeof(memra_plugin_info);
  g_info.score = score;
  g_info.name = MEMRA_CUDA_NAME;
  g_info.why = g_why;
  return &g_info;
}

MEMRA_PLUGIN_EXPORT const memra_plugin_info *memra_plugin_probe(void) {
  const char *lib = getenv("MEMRA_LIBCUDA");
  if (!lib || !*lib) lib = "libcuda.so.1";
  /* Kept open on purpose: unloading a driver after cuInit is not supported. */
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_why, sizeof g_why, "no NVIDIA driver (%s not found)", lib);
    return probe_result(0);
  }
  cu_init_fn cu_init = (cu_init_fn)dlsym(h, "cuInit");
  cu_device_get_count_fn get_count = (cu_device_get_count_fn)dlsym(h, "cuDeviceGetCount");
  cu_device_get_fn get_dev = (cu_device_get_fn)dlsym(h, "cuDeviceGet");
  cu_device_get_attribute_fn get_attr =
      (cu_device_get_attribute_fn)dlsym(h, "cuDeviceGetAttribute");
  cu_device_get_name_fn get_name = (cu_device_get_name_fn)dlsym(h, "cuDeviceGetName");
  if (!cu_init || !get_count || !get_dev || !get_attr || !get_name) {
    snprintf(g_why, sizeof g_why, "NVIDIA driver %s lacks the driver API entry points", lib);
    return probe_result(0);
  }
  int rc = cu_init(0);
  int count = 0;
  if (rc == CU_ERROR_NO_DEVICE ||
      (rc == CU_SUCCESS && get_count(&count) == CU_SUCCESS && count <= 0)) {
    snprintf(g_why, sizeof g_why, "no CUDA device");
    return probe_result(0);
  }
  if (rc != CU_SUCCESS) {
    snprintf(g_why, sizeof g_why, "NVIDIA driver failed to initialise (cuInit error %d)", rc);
    return probe_result(0);
  }
  int dev = 0, major = 0, minor = 0;
  char name[96] = "unknown device";
  if (count <= 0 || get_dev(&dev, 0) != CU_SUCCESS ||
      get_attr(&major, CU_ATTR_CC_MAJOR, dev) != CU_SUCCESS ||
      get_attr(&minor, CU_ATTR_CC_MINOR, dev) != CU_SUCCESS) {
    snprintf(g_why, sizeof g_why, "could not read the compute capability of device 0");
    return probe_result(0);
  }
  if (get_name(name, (int)sizeof name, dev) != CU_SUCCESS) snprintf(name, sizeof name, "?");
  name[sizeof name - 1] = '\0';
  /* Arch-specific ("a") SASS runs only on its exact compute capability. */
  if (major != MEMRA_CUDA_CC_MAJOR || minor != MEMRA_CUDA_CC_MINOR) {
    snprintf(g_why, sizeof g_why, "device 0 is sm_%d%d (%s), this plugin needs sm_%d%d", major,
             minor, name, MEMRA_CUDA_CC_MAJOR, MEMRA_CUDA_CC_MINOR);
    return probe_result(0);
  }
  snprintf(g_why, sizeof g_why, "device 0 is sm_%d%d (%s), %d device(s)", major, minor, name,
           count);
  return probe_result(100);
}
