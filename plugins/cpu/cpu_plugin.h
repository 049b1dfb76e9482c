/* cpu_plugin.h — the CPU plugin's two entry points, for code that links //plugins/cpu:cpu
 * statically (tests, benchmarks) instead of dlopening libmemra_cpu.so. The signatures
 * are memra_plugin_probe_fn and memra_plugin_open_fn of memra_plugin.h. */
#ifndef MEMRA_CPU_PLUGIN_H
#define MEMRA_CPU_PLUGIN_H

#include "plugins/include/memra_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

const memra_plugin_info *memra_plugin_probe(void);
const memra_backend_vt *memra_plugin_open(const memra_open_params *params, memra_backend **out,
                                          char *err, size_t err_size);

#ifdef __cplusplus
}
#endif
#endif
