/* check_report.c — the case log, result table and per-case lines (see check_report.h). */
#include "tools/device/check_report.h"

#include <stdarg.h>
#include <stdio.h>

/* --- the recorded table ---------------------------------------------------------------- */

typedef struct ck_result {
  char op[64], what[128];
  double err, tol;
  int pass;
  char note[128];
} ck_result;

static ck_table_style g_style = {15, 95, 95, 10, 64, 10, 64, "rel err"};
static ck_result g_res[CK_TABLE_MAX];
static int g_nres, g_ncases, g_nfail; /* the table's rows (at most CK_TABLE_MAX), all cases */

void ck_table_style_set(const ck_table_style *style) { g_style = *style; }

void ck_record(const char *op, const char *what, double err, double tol, int pass,
               const char *note) {
  if (g_nres < CK_TABLE_MAX) {
    ck_result *r = &g_res[g_nres++];
    snprintf(r->op, sizeof r->op, "%.*s", g_style.op_keep, op);
    snprintf(r->what, sizeof r->what, "%.*s", g_style.what_keep, what);
    r->err = err;
    r->tol = tol;
    r->pass = pass;
    snprintf(r->note, sizeof r->note, "%.*s", g_style.note_keep, note ? note : "");
  }
  ++g_ncases;
  if (!pass) ++g_nfail;
  fprintf(stderr, "%-4s %-*s %-*s err %.3e tol %.1e %s\n", pass ? "ok" : "FAIL", g_style.op_log, op,
          g_style.what_log, what, err, tol, note ? note : "");
}

void ck_table_print(const char *title) {
  printf("\n%-*s %-*s %10s %8s %s\n", g_style.op_col, "op", g_style.what_col, "case",
         g_style.err_title, "tol", "result");
  for (int r = 0; r < g_nres; ++r)
    printf("%-*s %-*s %10.2e %8.0e %s%s%s\n", g_style.op_col, g_res[r].op, g_style.what_col,
           g_res[r].what, g_res[r].err, g_res[r].tol, g_res[r].pass ? "PASS" : "FAIL",
           g_res[r].note[0] ? "  " : "", g_res[r].note);
  if (g_ncases > g_nres) /* every case is in the log on stderr, failures counted below */
    printf("(the table holds the first %d of %d cases)\n", g_nres, g_ncases);
  printf("%s: %d cases, %d failed\n", title, g_ncases, g_nfail);
}

int ck_table_failed(void) { return g_nfail; }

/* --- per-case lines -------------------------------------------------------------------- */

static int g_lines_width = 44, g_lines_pass, g_lines_fail;

void ck_lines_width(int width) { g_lines_width = width; }
void ck_line(const char *what, int pass, const char *fmt, ...) {
  char note[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(note, sizeof note, fmt, ap);
  va_end(ap);
  if (pass)
    ++g_lines_pass;
  else
    ++g_lines_fail;
  printf("%-4s %-*s %s\n", pass ? "ok" : "FAIL", g_lines_width, what, note);
  fflush(stdout);
}
int ck_lines_passed(void) { return g_lines_pass; }
int ck_lines_failed(void) { return g_lines_fail; }
