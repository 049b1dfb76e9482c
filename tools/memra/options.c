#define _POSIX_C_SOURCE 200809L
#include "tools/memra/options.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { OPT_STR, OPT_INT, OPT_FLOAT, OPT_U64, OPT_BOOL } opt_kind;

typedef struct opt_spec {
  const char *name; /* long name without dashes; also the INI key */
  char short_name;  /* 0: none */
  opt_kind kind;
  size_t offset;
  size_t cap;        /* strings: buffer size */
  double lo, hi;     /* numbers: accepted range */
  size_t set_offset; /* bool set alongside a string (0: none) */
  const char *help;
} opt_spec;

#define OFF(f) offsetof(memra_opts, f)
#define STR(n, s, f, h)                                                                            \
  { n, s, OPT_STR, OFF(f), sizeof(((memra_opts *)0)->f), 0, 0, 0, h }
#define STRSET(n, s, f, set, h)                                                                    \
  { n, s, OPT_STR, OFF(f), sizeof(((memra_opts *)0)->f), 0, 0, OFF(set), h }
#define NUM(n, s, k, f, lo, hi, h)                                                                 \
  { n, s, k, OFF(f), 0, lo, hi, 0, h }
#define BOOL(n, f, h)                                                                              \
  { n, 0, OPT_BOOL, OFF(f), 0, 0, 0, 0, h }

static const opt_spec SPECS[] = {
    STR("model", 'm', model, "GGUF model file (default: the cached SmolLM2-135M-Instruct)"),
    STRSET("prompt", 'p', prompt, prompt_set, "prompt text (default: read stdin)"),
    STRSET("prompt-ids", 0, prompt_ids, prompt_ids_set, "prompt as token ids 1,2,3 (no BOS added)"),
    NUM("n-predict", 'n', OPT_INT, n_predict, 0, 1 << 24, "tokens to generate"),
    NUM("temp", 0, OPT_FLOAT, temperature, 0, 100, "temperature (0 = greedy)"),
    NUM("top-k", 0, OPT_INT, top_k, 0, 1 << 24, "top-k (0 = off)"),
    NUM("top-p", 0, OPT_FLOAT, top_p, 0, 1, "top-p (1 = off)"),
    NUM("min-p", 0, OPT_FLOAT, min_p, 0, 1, "min-p (0 = off)"),
    NUM("repeat-penalty", 0, OPT_FLOAT, repeat_penalty, 0, 100, "repetition penalty (1 = off)"),
    NUM("seed", 0, OPT_U64, seed, 0, 1.8e19, "sampling seed"),
    NUM("ctx-size", 'c', OPT_INT, n_ctx, 1, 1 << 24, "context length in tokens"),
    NUM("ubatch", 0, OPT_INT, n_ubatch, 1, 65536, "rows per forward step (prefill chunk)"),
    NUM("threads", 't', OPT_INT, threads, 0, 1024, "CPU plugin threads (0 = all cores)"),
    STR("backend", 0, backend, "auto | cpu | sm90a | sm120a | PATH.so"),
    STR("plugin-dir", 0, plugin_dir, "folder searched first for libmemra_*.so plugins"),
    BOOL("print-ids", print_ids, "print the generated ids as a JSON array"),
    STR("dump-logits", 0, dump_logits, "write prompt logits (f32, [positions x vocab]) to FILE"),
    STR("kv-type", 0, kv_type,
        "KV cache type: auto (f32 on the CPU oracle, f16 on GPUs) | f16 | f32 | f8 (e4m3)"),
    BOOL("device-sampling", device_sampling,
         "sample (temperature > 0) on the device, no penalties; experimental"),
    BOOL("no-display-prompt", no_display_prompt, "do not echo the prompt"),
    STR("bench-p", 0, bench_p, "bench: prompt lengths, comma-separated"),
    STR("bench-n", 0, bench_n, "bench: generation lengths, comma-separated"),
    STR("bench-d", 0, bench_d, "bench: context depths before generation, comma-separated"),
    NUM("repetitions", 'r', OPT_INT, bench_reps, 1, 1000, "bench: repetitions"),
    STR("output", 'o', bench_output, "bench: md | json"),
    NUM("gate-p", 0, OPT_INT, gate_p, 1, 1 << 24, "gate: prompt tokens primed before decoding"),
    NUM("gate-b", 0, OPT_INT, gate_b, 1, 64, "gate batch: sequences decoded together"),
    STR("system", 0, system, "chat: system prompt"),
    STR("chat-template", 0, chat_template,
        "chat: built-in template (chatml, llama3, gemma) instead of the model's"),
    STR("config", 0, config, "INI file with defaults for these flags ([memra] section)"),
};
enum { N_SPECS = sizeof SPECS / sizeof SPECS[0] };

void memra_opts_defaults(memra_opts *o) {
  memset(o, 0, sizeof *o);
  o->n_predict = 128;
  o->temperature = 0.8f;
  o->top_k = 40;
  o->top_p = 0.95f;
  o->min_p = 0.05f;
  o->repeat_penalty = 1.0f;
  o->seed = 0x5EED;
  o->n_ctx = 4096;
  o->n_ubatch = 512;
  o->threads = 0;
  snprintf(o->backend, sizeof o->backend, "auto");
  snprintf(o->kv_type, sizeof o->kv_type, "auto");
  snprintf(o->bench_p, sizeof o->bench_p, "512");
  snprintf(o->bench_n, sizeof o->bench_n, "128");
  snprintf(o->bench_d, sizeof o->bench_d, "0");
  o->bench_reps = 5;
  o->gate_p = 200;
  o->gate_b = 8;
  snprintf(o->bench_output, sizeof o->bench_output, "md");
}

static const opt_spec *find_long(const char *name, size_t len) {
  for (int i = 0; i < N_SPECS; ++i)
    if (strlen(SPECS[i].name) == len && strncmp(SPECS[i].name, name, len) == 0) return &SPECS[i];
  return NULL;
}

static const opt_spec *find_short(char c) {
  for (int i = 0; i < N_SPECS; ++i)
    if (SPECS[i].short_name && SPECS[i].short_name == c) return &SPECS[i];
  return NULL;
}

/* Stores value into the field of spec; `where` names the source in messages. */
static memra_status set_value(memra_opts *o, const opt_spec *s, const char *value,
                              const char *where, memra_err *err) {
  char *base = (char *)o;
  if (s->kind == OPT_STR) {
    size_t n = strlen(value);
    if (n >= s->cap)
      return memra_errf(err, MEMRA_E_INVALID, "%s --%s: value of %zu bytes, at most %zu", where,
                        s->name, n, s->cap - 1);
    memcpy(base + s->offset, value, n + 1);
    if (s->set_offset) *(bool *)(base + s->set_offset) = true;
    return MEMRA_OK;
  }
  if (s->kind == OPT_BOOL) {
    bool v;
    if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "yes"))
      v = true;
    else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "no"))
      v = false;
    else
      return memra_errf(err, MEMRA_E_INVALID, "%s --%s: '%s' is not a boolean (true/false)", where,
                        s->name, value);
    *(bool *)(base + s->offset) = v;
    return MEMRA_OK;
  }
  errno = 0;
  char *end = NULL;
  double d = s->kind == OPT_FLOAT ? strtod(value, &end) : (double)strtoll(value, &end, 10);
  if (s->kind == OPT_U64) d = (double)strtoull(value, &end, 10);
  if (!*value || *end || errno == ERANGE || !(d == d) || isinf(d) ||
      (s->kind == OPT_U64 && value[0] == '-'))
    return memra_errf(err, MEMRA_E_INVALID, "%s --%s: '%s' is not a %s", where, s->name, value,
                      s->kind == OPT_FLOAT ? "number" : "whole number");
  if (d < s->lo || d > s->hi)
    return memra_errf(err, MEMRA_E_INVALID, "%s --%s: %s is out of range %g..%g", where, s->name,
                      value, s->lo, s->hi);
  if (s->kind == OPT_INT)
    *(int32_t *)(base + s->offset) = (int32_t)d;
  else if (s->kind == OPT_FLOAT)
    *(float *)(base + s->offset) = (float)d;
  else
    *(uint64_t *)(base + s->offset) = strtoull(value, NULL, 10);
  return MEMRA_OK;
}

typedef struct ini_ctx {
  memra_opts *o;
  const char *path;
  memra_err *err;
  memra_status st;
} ini_ctx;

static int on_ini_entry(void *user, const char *section, const char *name, const char *value) {
  ini_ctx *c = user;
  if (c->st) return 0;
  if (*section && strcmp(section, "memra") != 0) {
    c->st = memra_errf(c->err, MEMRA_E_INVALID, "%s: unknown section [%s] (expected [memra])",
                       c->path, section);
    return 0;
  }
  const opt_spec *s = find_long(name, strlen(name));
  if (!s || !strcmp(name, "config")) {
    c->st = memra_errf(c->err, MEMRA_E_INVALID, "%s: unknown key '%s'", c->path, name);
    return 0;
  }
  char where[1100];
  snprintf(where, sizeof where, "%s:", c->path);
  c->st = set_value(c->o, s, value, where, c->err);
  return c->st == MEMRA_OK;
}

enum { CONFIG_MAX_BYTES = 1 << 20 };

static memra_status load_config(memra_opts *o, const char *path, memra_err *err) {
  FILE *f = fopen(path, "r");
  if (!f) return memra_errf(err, MEMRA_E_IO, "config %s: %s", path, strerror(errno));
  /* a regular file of a config's size: not a device or a pipe that never ends */
  struct stat sb;
  memset(&sb, 0, sizeof sb);
  const bool stat_ok = fstat(fileno(f), &sb) == 0;
  if (!stat_ok || !S_ISREG(sb.st_mode) || sb.st_size > CONFIG_MAX_BYTES) {
    const bool reg = stat_ok && S_ISREG(sb.st_mode);
    fclose(f);
    return reg ? memra_errf(err, MEMRA_E_INVALID, "config %s: %lld bytes (at most %d)", path,
                            (long long)sb.st_size, CONFIG_MAX_BYTES)
               : memra_errf(err, MEMRA_E_INVALID, "config %s: not a regular file", path);
  }
  ini_ctx c = {o, path, err, MEMRA_OK};
  int line = ini_parse_file(f, on_ini_entry, &c);
  fclose(f);
  if (c.st) return c.st;
  if (line != 0)
    return memra_errf(err, MEMRA_E_INVALID, "config %s: syntax error on line %d", path, line);
  return MEMRA_OK;
}

memra_status memra_opts_parse(memra_opts *o, int argc, char **argv, int first,
                              const char **positional, int max_pos, int *n_pos, memra_err *err) {
  *n_pos = 0;
  /* The config comes first so that every flag overrides it. */
  const char *config = getenv("MEMRA_CONFIG");
  for (int i = first; i < argc; ++i) {
    if (!strcmp(argv[i], "--")) break;
    if (!strcmp(argv[i], "--config") && i + 1 < argc)
      config = argv[i + 1];
    else if (!strncmp(argv[i], "--config=", 9))
      config = argv[i] + 9;
  }
  if (config && *config) {
    memra_status st = load_config(o, config, err);
    if (st) return st;
    snprintf(o->config, sizeof o->config, "%s", config);
  }
  bool only_positional = false;
  for (int i = first; i < argc; ++i) {
    const char *a = argv[i];
    if (only_positional || a[0] != '-' || a[1] == 0) {
      if (*n_pos >= max_pos) return memra_errf(err, MEMRA_E_INVALID, "unexpected argument '%s'", a);
      positional[(*n_pos)++] = a;
      continue;
    }
    if (!strcmp(a, "--")) {
      only_positional = true;
      continue;
    }
    const opt_spec *s;
    const char *value = NULL;
    if (a[1] == '-') {
      const char *eq = strchr(a + 2, '=');
      size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
      s = find_long(a + 2, len);
      if (eq) value = eq + 1;
    } else {
      s = a[2] == 0 ? find_short(a[1]) : NULL;
    }
    if (!s) return memra_errf(err, MEMRA_E_INVALID, "unknown option '%s' (see memra --help)", a);
    if (s->kind == OPT_BOOL && !value) value = "true";
    if (!value) {
      if (i + 1 >= argc)
        return memra_errf(err, MEMRA_E_INVALID, "option --%s needs a value", s->name);
      value = argv[++i];
    }
    memra_status st = set_value(o, s, value, "flag", err);
    if (st) return st;
  }
  /* A plugin folder named but missing would fall through to the other search folders and run
   * whatever plugin they hold, under the name asked for. */
  struct stat sb;
  if (o->plugin_dir[0] && stat(o->plugin_dir, &sb) != 0)
    return memra_errf(err, MEMRA_E_INVALID, "--plugin-dir %s: %s", o->plugin_dir, strerror(errno));
  if (o->plugin_dir[0] && !S_ISDIR(sb.st_mode))
    return memra_errf(err, MEMRA_E_INVALID, "--plugin-dir %s: not a directory", o->plugin_dir);
  return MEMRA_OK;
}

void memra_default_model_path(char *out, size_t cap) {
  const char *dir = getenv("MEMRA_CACHE");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (dir && *dir)
    snprintf(out, cap, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
  else if (xdg && *xdg)
    snprintf(out, cap, "%s/memra/SmolLM2-135M-Instruct.Q4_1.gguf", xdg);
  else
    snprintf(out, cap, "%s/.cache/memra/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
}

void memra_opts_usage(FILE *f) {
  for (int i = 0; i < N_SPECS; ++i) {
    char names[64];
    if (SPECS[i].short_name)
      snprintf(names, sizeof names, "-%c, --%s", SPECS[i].short_name, SPECS[i].name);
    else
      snprintf(names, sizeof names, "    --%s", SPECS[i].name);
    fprintf(f, "  %-26s %s\n", names, SPECS[i].help);
  }
}

bool memra_opts_from_args(memra_opts *o, int argc, char **argv, int first, const char *cmd) {
  memra_opts_defaults(o);
  memra_err err = {{0}};
  const char *pos[1];
  int n_pos;
  if (memra_opts_parse(o, argc, argv, first, pos, 0, &n_pos, &err) == MEMRA_OK) return true;
  fprintf(stderr, "memra %s: %s\n", cmd, err.msg);
  return false;
}

memra_sampler_params memra_opts_sampling(const memra_opts *o, bool *greedy) {
  memra_sampler_params sp = memra_sampler_defaults();
  sp.temperature = o->temperature;
  sp.top_k = o->top_k;
  sp.top_p = o->top_p;
  sp.min_p = o->min_p;
  sp.repeat_penalty = o->repeat_penalty;
  sp.seed = o->seed;
  if (greedy) *greedy = o->temperature == 0 && o->repeat_penalty == 1;
  return sp;
}
