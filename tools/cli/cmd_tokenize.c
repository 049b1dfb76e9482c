/* cmd_tokenize.c — `memra tokenize`: the vocabulary from -m FILE.gguf or --tokenizer-json
 * FILE, text from -p TEXT or -f FILE (stdin if neither), ids printed as a JSON array.
 * --jsonl: every input line is a JSON string, every output line the array of its ids. */
#include "tools/cli/cmd_tokenize.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "core/text/hf_import.h"
#include "core/text/tokenizer.h"

static const char USAGE[] =
    "usage: memra tokenize (-m FILE.gguf | --tokenizer-json FILE) [-p TEXT | -f FILE]\n"
    "                      [--no-bos] [--special] [--jsonl]\n"
    "  -m FILE.gguf            vocabulary from a GGUF file\n"
    "  --tokenizer-json FILE   vocabulary from a Hugging Face tokenizer.json\n"
    "  -p TEXT                 the text (default: stdin)\n"
    "  -f FILE                 the text from a file\n"
    "  --no-bos                do not prepend BOS even if the vocabulary asks for it\n"
    "  --special               text spelling a special token becomes that token\n"
    "  --jsonl                 each input line is a JSON string; prints one array per line\n";

static char *slurp(FILE *f, size_t *len) {
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - n - 1, f);
    if (n < cap - 1) break;
    char *nb = realloc(b, cap * 2);
    if (!nb) free(b);
    b = nb, cap *= 2;
  }
  if (b) b[n] = '\0';
  *len = n;
  return b;
}

/* Prints ids as a one-line JSON array through cJSON. */
static int print_ids(const int32_t *ids, size_t n) {
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; arr && i < n; i++) {
    cJSON *v = cJSON_CreateNumber(ids[i]);
    if (!v) {
      cJSON_Delete(arr);
      arr = NULL;
      break;
    }
    cJSON_AddItemToArray(arr, v);
  }
  char *s = arr ? cJSON_PrintUnformatted(arr) : NULL;
  cJSON_Delete(arr);
  if (!s) {
    fprintf(stderr, "memra tokenize: out of memory\n");
    return 1;
  }
  puts(s);
  cJSON_free(s);
  return 0;
}

static int tokenize_one(const memra_tokenizer *t, const char *text, size_t len, bool bos,
                        bool special, const char *where) {
  int32_t *ids = NULL;
  size_t n = 0;
  memra_err err = {{0}};
  if (memra_tokenize(t, text, len, bos, special, &ids, &n, &err)) {
    fprintf(stderr, "memra tokenize: %s: %s\n", where, err.msg);
    return 1;
  }
  int rc = print_ids(ids, n);
  memra_free(ids);
  return rc;
}

static int run_jsonl(const memra_tokenizer *t, char *buf, size_t len, bool bos, bool special) {
  size_t line = 0;
  for (char *p = buf, *end = buf + len; p < end;) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
    line++;
    if (ll && p[ll - 1] == '\r') ll--;
    if (ll) {
      cJSON *j = cJSON_ParseWithLength(p, ll);
      char where[64];
      snprintf(where, sizeof where, "line %zu", line);
      if (!cJSON_IsString(j)) {
        fprintf(stderr, "memra tokenize: line %zu: expected a JSON string\n", line);
        cJSON_Delete(j);
        return 1;
      }
      /* cJSON strings stop at an escaped NUL; such text cannot be passed through here. */
      int rc = tokenize_one(t, j->valuestring, strlen(j->valuestring), bos, special, where);
      cJSON_Delete(j);
      if (rc) return rc;
    }
    p += (nl ? (size_t)(nl - p) + 1 : ll);
    if (!nl) break;
  }
  fflush(stdout);
  return 0;
}

int memra_cmd_tokenize(int argc, char **argv) {
  const char *model = NULL, *tjson = NULL, *prompt = NULL, *file = NULL;
  bool bos = true, special = false, jsonl = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_val = i + 1 < argc;
    if (strcmp(a, "-m") == 0 && has_val)
      model = argv[++i];
    else if (strcmp(a, "--tokenizer-json") == 0 && has_val)
      tjson = argv[++i];
    else if (strcmp(a, "-p") == 0 && has_val)
      prompt = argv[++i];
    else if (strcmp(a, "-f") == 0 && has_val)
      file = argv[++i];
    else if (strcmp(a, "--no-bos") == 0)
      bos = false;
    else if (strcmp(a, "--special") == 0)
      special = true;
    else if (strcmp(a, "--jsonl") == 0)
      jsonl = true;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(USAGE, stdout);
      return 0;
    } else {
      fprintf(stderr, "memra tokenize: unknown or incomplete argument '%s'\n%s", a, USAGE);
      return 2;
    }
  }
  if (!model == !tjson) {
    fprintf(stderr, "memra tokenize: give exactly one of -m FILE.gguf or --tokenizer-json FILE\n%s",
            USAGE);
    return 2;
  }
  if (prompt && file) {
    fprintf(stderr, "memra tokenize: give at most one of -p and -f\n");
    return 2;
  }
  memra_err err = {{0}};
  memra_tokenizer *t = NULL;
  memra_gguf *g = NULL;
  if (model) {
    if (memra_gguf_open(model, &g, &err) || memra_tokenizer_from_gguf(g, &t, &err)) {
      fprintf(stderr, "memra tokenize: %s\n", err.msg);
      memra_gguf_close(g);
      return 1;
    }
    memra_gguf_close(g);
  } else if (memra_tokenizer_from_hf_files(tjson, NULL, &t, NULL, &err)) {
    fprintf(stderr, "memra tokenize: %s\n", err.msg);
    return 1;
  }
  char *buf = NULL;
  size_t len = 0;
  if (prompt) {
    len = strlen(prompt);
    buf = malloc(len + 1);
    if (buf) memcpy(buf, prompt, len + 1);
  } else {
    FILE *f = file ? fopen(file, "rb") : stdin;
    if (!f) {
      fprintf(stderr, "memra tokenize: %s: cannot open\n", file);
      memra_tokenizer_free(t);
      return 1;
    }
    buf = slurp(f, &len);
    if (file) fclose(f);
  }
  int rc;
  if (!buf) {
    fprintf(stderr, "memra tokenize: out of memory reading the text\n");
    rc = 1;
  } else if (jsonl) {
    rc = run_jsonl(t, buf, len, bos, special);
  } else {
    rc = tokenize_one(t, buf, len, bos, special, prompt ? "-p" : file ? file : "stdin");
  }
  free(buf);
  memra_tokenizer_free(t);
  return rc;
}
