/* fake_cuda.c — a stand-in NVIDIA driver for the GPU plugins' probe tests.
 *
 * The probe loads it through MEMRA_LIBCUDA. Its answers come from MEMRA_FAKE_CUDA, read at
 * every call so one process can walk every branch:
 *   "init=N"             cuInit returns N (100 = CUDA_ERROR_NO_DEVICE)
 *   "COUNT"              COUNT devices, no compute capability (COUNT 0: no device)
 *   "COUNT:MAJ.MIN:NAME" COUNT devices of that compute capability and name */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *spec(void) {
  const char *s = getenv("MEMRA_FAKE_CUDA");
  return s ? s : "0";
}

int cuInit(unsigned int flags) {
  (void)flags;
  const char *s = spec();
  return strncmp(s, "init=", 5) == 0 ? atoi(s + 5) : 0;
}

int cuDeviceGetCount(int *count) {
  *count = atoi(spec());
  return 0;
}

int cuDeviceGet(int *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= atoi(spec())) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = ordinal;
  return 0;
}

int cuDeviceGetAttribute(int *value, int attrib, int dev) {
  (void)dev;
  int maj = 0, min = 0;
  const char *c = strchr(spec(), ':');
  if (!c || sscanf(c + 1, "%d.%d", &maj, &min) != 2) return 1; /* CUDA_ERROR_INVALID_VALUE */
  if (attrib == 75)
    *value = maj;
  else if (attrib == 76)
    *value = min;
  else
    return 1;
  return 0;
}

int cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  const char *c = strchr(spec(), ':');
  c = c ? strchr(c + 1, ':') : NULL;
  snprintf(name, (size_t)len, "%s", c ? c + 1 : "");
  return 0;
}
