/* check_report.h — how the device checks report cases: a line per case as it runs, counted
 * pass/fail, and (for opcheck-style tools) a table of every case printed last. */
#ifndef MEMRA_TOOLS_CHECK_REPORT_H
#define MEMRA_TOOLS_CHECK_REPORT_H

/* Column layout of a tool's case log (stderr) and final table (stdout). Strings kept for
 * the table are cut to *_keep characters. */
typedef struct ck_table_style {
  int op_keep, what_keep, note_keep;
  int op_log, what_log; /* widths on the per-case stderr line */
  int op_col, what_col; /* widths in the table */
  const char *err_title;
} ck_table_style;

void ck_table_style_set(const ck_table_style *style);
/* Logs one case to stderr ("ok"/"FAIL", op, what, err, tol, note) and keeps it for the
 * table (up to CK_TABLE_MAX cases; failures past that are still counted). */
void ck_record(const char *op, const char *what, double err, double tol, int pass,
               const char *note);
/* The header, one row per kept case, then "<title>: N cases, F failed". */
void ck_table_print(const char *title);
int ck_table_failed(void);

enum { CK_TABLE_MAX = 1024 };

/* The width what is padded to on a line (a tool's column). */
void ck_lines_width(int width);
/* Prints "ok"/"FAIL", what, then the formatted note, on stdout (flushed), and counts the
 * case. */
void ck_line(const char *what, int pass, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ck_lines_passed(void);
int ck_lines_failed(void);

#endif
