#include "core/base/err.h"

#include <stdarg.h>
#include <stdio.h>

memra_status memra_errf(memra_err *err, memra_status st, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* one line whatever the arguments held (a name from a file, a request or a flag) */
    for (char *p = err->msg; *p; ++p)
      if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = ' ';
  }
  return st;
}

const char *memra_status_str(memra_status st) {
  switch (st) {
  case MEMRA_OK: return "ok";
  case MEMRA_E_INVALID: return "invalid argument";
  case MEMRA_E_OOM: return "out of memory";
  case MEMRA_E_IO: return "i/o error";
  case MEMRA_E_FORMAT: return "malformed file";
  case MEMRA_E_UNSUPPORTED: return "unsupported";
  case MEMRA_E_DEVICE: return "device error";
  case MEMRA_E_ABI: return "plugin ABI mismatch";
  case MEMRA_E_NOT_FOUND: return "not found";
  }
  return "unknown status";
}
