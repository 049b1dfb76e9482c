/* gguf_dump.c — prints an opened GGUF the way gguf-dump does, one line per kv/tensor. */
#include "core/gguf/gguf_dump.h"

#include <inttypes.h>

#include "plugins/include/memra_types.h"

enum { ARRAY_SHOWN = 8 }; /* elements printed before "..." unless full_arrays */

/* A string from the file, quoted and escaped so it cannot break the line. */
static void put_str(FILE *out, memra_str s) {
  fputc('"', out);
  for (uint64_t i = 0; i < s.len; ++i) {
    unsigned char ch = (unsigned char)s.ptr[i];
    switch (ch) {
    case '\n': fputs("\\n", out); break;
    case '\r': fputs("\\r", out); break;
    case '\t': fputs("\\t", out); break;
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    default:
      if (ch < 0x20 || ch == 0x7f)
        fprintf(out, "\\x%02x", ch);
      else
        fputc(ch, out); /* UTF-8 bytes pass through */
    }
  }
  fputc('"', out);
}

static void put_scalar(FILE *out, const memra_gguf_kv *kv) {
  switch (kv->type) {
  case MEMRA_GGUF_U8:
  case MEMRA_GGUF_U16:
  case MEMRA_GGUF_U32:
  case MEMRA_GGUF_U64: fprintf(out, "%" PRIu64, kv->v.u64); break;
  case MEMRA_GGUF_I8:
  case MEMRA_GGUF_I16:
  case MEMRA_GGUF_I32:
  case MEMRA_GGUF_I64: fprintf(out, "%" PRId64, kv->v.i64); break;
  case MEMRA_GGUF_F32: fprintf(out, "%.9g", kv->v.f64); break;
  case MEMRA_GGUF_F64: fprintf(out, "%.17g", kv->v.f64); break;
  case MEMRA_GGUF_BOOL: fputs(kv->v.u64 ? "true" : "false", out); break;
  case MEMRA_GGUF_STRING: put_str(out, kv->v.str); break;
  }
}

static void put_elem(FILE *out, const memra_gguf *g, const memra_gguf_kv *kv, uint64_t i) {
  switch (kv->v.arr.elem_type) {
  case MEMRA_GGUF_STRING: put_str(out, memra_gguf_arr_str(g, kv, i)); break;
  case MEMRA_GGUF_F32: fprintf(out, "%.9g", memra_gguf_arr_f64(kv, i)); break;
  case MEMRA_GGUF_F64: fprintf(out, "%.17g", memra_gguf_arr_f64(kv, i)); break;
  case MEMRA_GGUF_U64: fprintf(out, "%" PRIu64, (uint64_t)memra_gguf_arr_i64(kv, i)); break;
  case MEMRA_GGUF_BOOL: fputs(memra_gguf_arr_i64(kv, i) ? "true" : "false", out); break;
  default: fprintf(out, "%" PRId64, memra_gguf_arr_i64(kv, i));
  }
}

static void put_name(FILE *out, memra_str s) { /* keys and tensor names, unquoted */
  for (uint64_t i = 0; i < s.len; ++i) {
    unsigned char ch = (unsigned char)s.ptr[i];
    if (ch < 0x20 || ch == 0x7f || ch == '\\')
      fprintf(out, "\\x%02x", ch);
    else
      fputc(ch, out);
  }
}

memra_status memra_gguf_dump(const memra_gguf *g, FILE *out, bool full_arrays) {
  fprintf(out,
          "* GGUF version %" PRIu32 ", %" PRIu64 " bytes, alignment %" PRIu64
          ", tensor data at byte %" PRIu64 "\n",
          memra_gguf_version(g), memra_gguf_size(g), memra_gguf_alignment(g),
          memra_gguf_data_offset(g));
  uint64_t n_kv = memra_gguf_n_kv(g);
  fprintf(out, "* %" PRIu64 " key/value pair%s\n", n_kv, n_kv == 1 ? "" : "s");
  for (uint64_t i = 0; i < n_kv; ++i) {
    const memra_gguf_kv *kv = memra_gguf_kv_at(g, i);
    char ty[24];
    uint64_t n = 1;
    if (kv->type == MEMRA_GGUF_ARRAY) {
      snprintf(ty, sizeof ty, "[%s]", memra_gguf_vtype_name(kv->v.arr.elem_type));
      n = kv->v.arr.n;
    } else {
      snprintf(ty, sizeof ty, "%s", memra_gguf_vtype_name(kv->type));
    }
    fprintf(out, "%7" PRIu64 ": %-9s | %8" PRIu64 " | ", i + 1, ty, n);
    put_name(out, kv->key);
    fputs(" = ", out);
    if (kv->type != MEMRA_GGUF_ARRAY) {
      put_scalar(out, kv);
    } else {
      uint64_t shown = full_arrays || n <= ARRAY_SHOWN ? n : ARRAY_SHOWN;
      fputc('[', out);
      for (uint64_t j = 0; j < shown; ++j) {
        if (j) fputs(", ", out);
        put_elem(out, g, kv, j);
      }
      if (shown < n)
        fprintf(out, ", ...] (%" PRIu64 " items)", n);
      else
        fputc(']', out);
    }
    fputc('\n', out);
  }
  uint64_t n_t = memra_gguf_n_tensors(g);
  fprintf(out, "* %" PRIu64 " tensor%s\n", n_t, n_t == 1 ? "" : "s");
  if (n_t)
    fprintf(out, "%7s  %-6s %-28s %14s %14s  %s\n", "index", "type", "shape", "offset", "bytes",
            "name");
  for (uint64_t i = 0; i < n_t; ++i) {
    const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
    char shape[96];
    int k = snprintf(shape, sizeof shape, "[%" PRId64, t->ne[0]);
    for (int d = 1; d < t->n_dims && k > 0 && (size_t)k < sizeof shape; ++d)
      k += snprintf(shape + k, sizeof shape - (size_t)k, ", %" PRId64, t->ne[d]);
    if (k > 0 && (size_t)k < sizeof shape) snprintf(shape + k, sizeof shape - (size_t)k, "]");
    const char *tn = memra_type_info(t->type).name;
    fprintf(out, "%7" PRIu64 "  %-6s %-28s %14" PRIu64 " %14" PRIu64 "  ", i, tn ? tn : "?", shape,
            t->offset, t->nbytes);
    put_name(out, t->name);
    fputc('\n', out);
  }
  return ferror(out) ? MEMRA_E_IO : MEMRA_OK;
}
