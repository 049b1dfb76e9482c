#include "core/serve/stop.h"

#include <string.h>

size_t memra_serve_stop_scan(const char *text, size_t n, size_t released, const char (*stop)[256],
                             int n_stop, bool *hit) {
  *hit = false;
  size_t first = n;
  /* A stop string cannot start before `released`: that text had no held-back prefix. */
  for (int s = 0; s < n_stop; ++s) {
    size_t L = strlen(stop[s]);
    if (!L || L > n) continue;
    for (size_t p = released; p + L <= n && p < first; ++p)
      if (memcmp(text + p, stop[s], L) == 0) {
        first = p;
        *hit = true;
        break;
      }
  }
  if (*hit) return first;
  /* Hold back the longest suffix that is a proper prefix of some stop string. */
  size_t keep = 0;
  for (int s = 0; s < n_stop; ++s) {
    size_t L = strlen(stop[s]);
    for (size_t k = L > 1 ? L - 1 : 0; k > keep; --k)
      if (k <= n - released && memcmp(text + n - k, stop[s], k) == 0) {
        keep = k;
        break;
      }
  }
  return n - keep;
}
