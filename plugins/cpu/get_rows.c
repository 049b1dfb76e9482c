/* get_rows.c — y[r] = dequant(table row ids[r]): the token embedding lookup. The table
 * keeps its GGUF type; rows come out as the exact floats memra_dequant_row gives. */
#include <inttypes.h>

#include "plugins/cpu/cpu_backend.h"
#include "plugins/quant/quant.h"

typedef struct get_rows_ctx {
  const memra_tensor *y, *table, *ids;
} get_rows_ctx;

static void get_rows_rows(void *p, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const get_rows_ctx *c = p;
  for (int64_t r = begin; r < end; ++r)
    memra_dequant_row(c->table->type, cpu_row(c->table, cpu_i32_at(c->ids, r)),
                      cpu_row_f32(c->y, r), c->table->ne0);
}

memra_status cpu_get_rows(memra_backend *be, const memra_tensor *y, const memra_tensor *table,
                          const memra_tensor *ids) {
  memra_status st;
  if ((st = cpu_check(be, "get_rows", "table", table, 0))) return st;
  if (!memra_quant_supported(table->type))
    return cpu_fail(be, MEMRA_E_UNSUPPORTED, "get_rows: table type %s has no dequantizer",
                    memra_type_info(table->type).name);
  if ((st = cpu_check_shape(be, "get_rows", "y", y, CPU_F32, table->ne0, -1)) ||
      (st = cpu_check_shape(be, "get_rows", "ids", ids, CPU_I32, y->ne1, 1)))
    return st;
  for (int64_t r = 0; r < y->ne1; ++r) {
    int32_t id = cpu_i32_at(ids, r);
    if (id < 0 || id >= table->ne1)
      return cpu_fail(be, MEMRA_E_INVALID,
                      "get_rows: ids[%" PRId64 "] = %d is outside the table's %" PRId64 " rows", r,
                      id, table->ne1);
  }
  get_rows_ctx c = {y, table, ids};
  cpu_run(be, y->ne1, 4 * y->ne0, get_rows_rows, &c);
  return MEMRA_OK;
}
