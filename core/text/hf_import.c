/* hf_import.c — tokenizer.json -> GGUF tokenizer metadata (see hf_import.h). */
#include "core/text/hf_import.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/base/alloc.h"
#include "core/text/tok_internal.h"

#define LLAMA3_SPLIT                                                                               \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                       \
  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_SPLIT                                                                                \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                            \
  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct scan {
  bool byte_level, byte_level_regex, digits_individual, prepend_space;
  const char *split_regex;
} scan;

/* Walks a normalizer / pre-tokenizer / decoder tree and notes what it contains. */
static void scan_node(const cJSON *n, scan *s) {
  if (!cJSON_IsObject(n)) return;
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(n, "type"));
  if (type && strcmp(type, "ByteLevel") == 0) {
    s->byte_level = true;
    const cJSON *ur = cJSON_GetObjectItemCaseSensitive(n, "use_regex");
    if (!ur || cJSON_IsTrue(ur)) s->byte_level_regex = true;
  } else if (type && strcmp(type, "Digits") == 0) {
    s->digits_individual = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "individual_digits"));
  } else if (type && strcmp(type, "Split") == 0) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(n, "pattern");
    const char *re = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "Regex"));
    if (re) s->split_regex = re;
  } else if (type && strcmp(type, "Prepend") == 0) {
    const char *pp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(n, "prepend"));
    if (pp && strcmp(pp, "\xE2\x96\x81") == 0) s->prepend_space = true;
  } else if (type && strcmp(type, "Metaspace") == 0) {
    const char *sch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(n, "prepend_scheme"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "add_prefix_space")) ||
        (sch && strcmp(sch, "never") != 0))
      s->prepend_space = true;
  }
  const char *lists[] = {"normalizers", "pretokenizers", "decoders", "processors"};
  for (int i = 0; i < 4; i++) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(n, lists[i]), *e;
    cJSON_ArrayForEach(e, arr) scan_node(e, s);
  }
}

/* The text of a config token entry: a string or {"content": ...}. */
static const char *token_text(const cJSON *v) {
  if (cJSON_IsString(v)) return v->valuestring;
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "content"));
}

/* The post-processor's TemplateProcessing "single" template: which special token comes
 * before and after the sequence. */
static void find_template(const cJSON *pp, const char **before, const char **after) {
  if (!cJSON_IsObject(pp)) return;
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pp, "type"));
  if (type && strcmp(type, "TemplateProcessing") == 0) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single"), *e;
    bool seen_seq = false;
    cJSON_ArrayForEach(e, single) {
      if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
        seen_seq = true;
        continue;
      }
      const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
      const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "id"));
      if (id && !seen_seq && !*before) *before = id;
      if (id && seen_seq && !*after) *after = id;
    }
  }
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(pp, "processors"), *e;
  cJSON_ArrayForEach(e, arr) find_template(e, before, after);
}

static int is_byte_token(const char *s) {
  return strlen(s) == 6 && strncmp(s, "<0x", 3) == 0 && s[5] == '>';
}

memra_status memra_hf_tokenizer_to_gguf(const char *json, size_t len, const char *config_json,
                                        size_t config_len, memra_gguf_writer *w, memra_err *err) {
  memra_status st = MEMRA_OK;
  cJSON *root = cJSON_ParseWithLength(json, len);
  cJSON *cfg = config_json ? cJSON_ParseWithLength(config_json, config_len) : NULL;
  const char **toks = NULL, **merges = NULL;
  char **owned = NULL;
  size_t n_owned = 0;
  float *scores = NULL;
  int32_t *types = NULL;
  if (!root) {
    st = memra_errf(err, MEMRA_E_FORMAT, "tokenizer.json: not valid JSON");
    goto done;
  }
  if (config_json && !cfg) {
    st = memra_errf(err, MEMRA_E_FORMAT, "tokenizer_config.json: not valid JSON");
    goto done;
  }
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const char *mtype = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "type"));
  if (!mtype || strcmp(mtype, "BPE") != 0) {
    st = memra_errf(err, MEMRA_E_UNSUPPORTED, "tokenizer.json: model type '%s' (supported: BPE)",
                    mtype ? mtype : "(none)");
    goto done;
  }
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  const cJSON *jm = cJSON_GetObjectItemCaseSensitive(model, "merges");
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  if (!cJSON_IsObject(vocab) || !cJSON_IsArray(jm)) {
    st = memra_errf(err, MEMRA_E_FORMAT,
                    "tokenizer.json: model.vocab (object) and model.merges (array) required");
    goto done;
  }
  scan sc = {0};
  scan_node(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &sc);
  scan_node(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &sc);
  scan_node(cJSON_GetObjectItemCaseSensitive(root, "decoder"), &sc);
  bool byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
  bool spm = !sc.byte_level;
  if (spm && !byte_fallback && !sc.prepend_space) {
    st = memra_errf(err, MEMRA_E_UNSUPPORTED,
                    "tokenizer.json: BPE without ByteLevel or SentencePiece-style spaces");
    goto done;
  }

  /* The vocabulary spans the highest id of model.vocab and added_tokens. */
  long n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, vocab) {
    if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 24)) {
      st = memra_errf(err, MEMRA_E_FORMAT, "tokenizer.json: vocab entry '%s' has a bad id",
                      e->string);
      goto done;
    }
    if (e->valueint + 1 > n) n = e->valueint + 1;
  }
  cJSON_ArrayForEach(e, added) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
    if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= (1 << 24) ||
        !token_text(e)) {
      st = memra_errf(err, MEMRA_E_FORMAT, "tokenizer.json: added_tokens entry without id/content");
      goto done;
    }
    if (id->valueint + 1 > n) n = id->valueint + 1;
  }
  long entries = cJSON_GetArraySize(vocab) + cJSON_GetArraySize(added);
  if (n > 2 * entries + 1024) { /* holes are rare: never allocate for ids the file lacks */
    st = memra_errf(err, MEMRA_E_FORMAT, "tokenizer.json: ids up to %ld for %ld tokens", n - 1,
                    entries);
    goto done;
  }
  long nm = cJSON_GetArraySize(jm);
  toks = memra_calloc((size_t)n + 1, sizeof *toks);
  types = memra_calloc((size_t)n + 1, sizeof *types);
  scores = memra_calloc((size_t)n + 1, sizeof *scores);
  merges = memra_calloc((size_t)nm + 1, sizeof *merges);
  owned = memra_calloc((size_t)(n + nm) + 1, sizeof *owned);
  if (!toks || !types || !scores || !merges || !owned) goto oom;
  cJSON_ArrayForEach(e, vocab) {
    toks[e->valueint] = e->string;
    types[e->valueint] = spm && is_byte_token(e->string) ? MEMRA_TT_BYTE : MEMRA_TT_NORMAL;
  }
  cJSON_ArrayForEach(e, added) {
    int id = cJSON_GetObjectItemCaseSensitive(e, "id")->valueint;
    toks[id] = token_text(e);
    types[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"))
                    ? MEMRA_TT_CONTROL
                    : MEMRA_TT_USER_DEFINED;
  }
  for (long i = 0; i < n; i++) {
    if (toks[i]) continue;
    char buf[32];
    snprintf(buf, sizeof buf, "[PAD%ld]", i); /* a hole in the ids: never produced */
    if (!(owned[n_owned++] = memra_strndup(buf, strlen(buf)))) goto oom;
    toks[i] = owned[n_owned - 1];
    types[i] = MEMRA_TT_UNUSED;
  }
  /* Merges: "a b" strings or [a, b] pairs. SPM scores: minus the rank of the first merge
   * that makes the token, so score order is merge order. */
  long r = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, jm) { /* a linked list: indexing it would be quadratic */
    if (cJSON_IsString(m)) {
      merges[r] = m->valuestring;
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
               cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
      const char *a = cJSON_GetArrayItem(m, 0)->valuestring,
                 *b = cJSON_GetArrayItem(m, 1)->valuestring;
      size_t la = strlen(a), lb = strlen(b);
      char *s = memra_malloc(la + lb + 2);
      if (!s) goto oom;
      memcpy(s, a, la), s[la] = ' ', memcpy(s + la + 1, b, lb + 1);
      owned[n_owned++] = s;
      merges[r] = s;
    } else {
      st = memra_errf(err, MEMRA_E_FORMAT,
                      "tokenizer.json: merges[%ld] is neither \"a b\" nor [a, b]", r);
      goto done;
    }
    r++;
  }
  if (spm) {
    memra_strmap map;
    if (memra_strmap_init(&map, (size_t)n)) goto oom;
    for (long i = 0; i < n; i++)
      memra_strmap_put(&map, toks[i], strlen(toks[i]), (int32_t)i);
    for (long i = 0; i < n; i++)
      scores[i] = types[i] == MEMRA_TT_NORMAL ? -1e9f : 0.0f;
    for (r = nm - 1; r >= 0; r--) {
      const char *sp = strchr(merges[r] + 1, ' ');
      if (!sp) continue;
      size_t la = (size_t)(sp - merges[r]);
      char buf[512];
      if (strlen(merges[r]) >= sizeof buf) continue;
      memcpy(buf, merges[r], la);
      strcpy(buf + la, sp + 1);
      int32_t id = memra_strmap_get(&map, buf, strlen(buf));
      if (id >= 0) scores[id] = -(float)r;
    }
    memra_strmap_free(&map);
  }

  /* Special ids: unk from the model, bos/eos from the config, else the post-processor. */
  const char *pp_before = NULL, *pp_after = NULL;
  find_template(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), &pp_before, &pp_after);
  const char *unk = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "unk_token"));
  const char *bos = cfg ? token_text(cJSON_GetObjectItemCaseSensitive(cfg, "bos_token")) : NULL;
  const char *eos = cfg ? token_text(cJSON_GetObjectItemCaseSensitive(cfg, "eos_token")) : NULL;
  const char *pad = cfg ? token_text(cJSON_GetObjectItemCaseSensitive(cfg, "pad_token")) : NULL;
  if (!bos) bos = pp_before;
  if (!eos) eos = pp_after;
  const char *names[] = {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.bos_token_id",
                         "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"};
  const char *texts[] = {unk, bos, eos, pad};
  for (int k = 0; k < 4; k++) {
    if (!texts[k]) continue;
    long id = -1;
    for (long i = 0; i < n && id < 0; i++)
      if (strcmp(toks[i], texts[k]) == 0) id = i;
    if (id < 0) continue; /* named but not in the vocabulary: left out, as HF ignores it */
    if (k == 0 && spm) types[id] = MEMRA_TT_UNKNOWN;
    if ((st = memra_gguf_writer_set_u32(w, names[k], (uint32_t)id))) goto writer;
  }

  const char *pre = NULL;
  if (!spm) {
    if (sc.split_regex && strcmp(sc.split_regex, LLAMA3_SPLIT) == 0)
      pre = "llama-bpe";
    else if (sc.split_regex && strcmp(sc.split_regex, QWEN2_SPLIT) == 0)
      pre = "qwen2";
    else if (!sc.split_regex && sc.byte_level_regex && sc.digits_individual)
      pre = "smollm";
    else if (!sc.split_regex && sc.byte_level_regex)
      pre = "gpt2";
    else
      pre = "unrecognized"; /* the loader warns and falls back to the gpt2 split */
  }
  if ((st = memra_gguf_writer_set_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2")) ||
      (pre && (st = memra_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre))) ||
      (st = memra_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n)) ||
      (st = memra_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MEMRA_GGUF_I32, types,
                                      (uint64_t)n)) ||
      (spm && (st = memra_gguf_writer_set_arr(w, "tokenizer.ggml.scores", MEMRA_GGUF_F32, scores,
                                              (uint64_t)n))) ||
      (nm &&
       (st = memra_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, (uint64_t)nm))) ||
      (st = memra_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", pp_before != NULL)) ||
      (st = memra_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", pp_after != NULL)) ||
      (spm &&
       (st = memra_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", sc.prepend_space))))
    goto writer;
  if (cfg) {
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *tmpl = cJSON_GetStringValue(ct);
    if (cJSON_IsArray(ct)) { /* [{name, template}, ...]: the "default" one */
      cJSON_ArrayForEach(e, ct) {
        const char *nm2 = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        if (nm2 && strcmp(nm2, "default") == 0)
          tmpl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "template"));
      }
    }
    if (tmpl && (st = memra_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl))) goto writer;
  }
  goto done;
writer:
  st = memra_errf(err, st, "tokenizer.json: writing the GGUF metadata failed (%s)",
                  memra_status_str(st));
  goto done;
oom:
  st = memra_errf(err, MEMRA_E_OOM, "tokenizer.json: out of memory");
done:
  for (size_t i = 0; i < n_owned; i++)
    memra_free(owned[i]);
  memra_free(owned);
  memra_free(toks);
  memra_free(types);
  memra_free(scores);
  memra_free(merges);
  cJSON_Delete(root);
  cJSON_Delete(cfg);
  return st;
}

static memra_status read_file(const char *path, char **out, size_t *len, memra_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return memra_errf(err, MEMRA_E_IO, "%s: cannot open", path);
  size_t cap = 1 << 16, n = 0;
  char *buf = memra_malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *nb = cap > ((size_t)1 << 30) ? NULL : memra_realloc(buf, cap * 2);
    if (!nb) {
      memra_free(buf);
      buf = NULL;
      break;
    }
    buf = nb, cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf) return memra_errf(err, MEMRA_E_OOM, "%s: too large or out of memory", path);
  if (bad) {
    memra_free(buf);
    return memra_errf(err, MEMRA_E_IO, "%s: read error", path);
  }
  *out = buf, *len = n;
  return MEMRA_OK;
}

memra_status memra_tokenizer_from_hf_files(const char *path, const char *config_path,
                                           memra_tokenizer **out, char **chat_template,
                                           memra_err *err) {
  char *js = NULL, *cs = NULL, *cfg_auto = NULL;
  size_t jl = 0, cl = 0;
  uint8_t *mem = NULL;
  uint64_t msz = 0;
  memra_gguf *g = NULL;
  memra_gguf_writer *w = NULL;
  *out = NULL;
  if (chat_template) *chat_template = NULL;
  memra_status st = read_file(path, &js, &jl, err);
  if (st) return st;
  if (!config_path) { /* tokenizer_config.json in the same folder, when there is one */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path + 1) : 0;
    cfg_auto = memra_malloc(dl + 32);
    if (!cfg_auto) {
      st = memra_errf(err, MEMRA_E_OOM, "out of memory");
      goto done;
    }
    memcpy(cfg_auto, path, dl);
    strcpy(cfg_auto + dl, "tokenizer_config.json");
    FILE *f = fopen(cfg_auto, "rb");
    if (f) fclose(f), config_path = cfg_auto;
  }
  if (config_path && (st = read_file(config_path, &cs, &cl, err))) goto done;
  if (!(w = memra_gguf_writer_new(0))) {
    st = memra_errf(err, MEMRA_E_OOM, "out of memory");
    goto done;
  }
  if ((st = memra_hf_tokenizer_to_gguf(js, jl, cs, cl, w, err))) goto done;
  if ((st = memra_gguf_writer_to_memory(w, &mem, &msz, err))) goto done;
  if ((st = memra_gguf_open_memory(mem, msz, path, &g, err))) goto done;
  if ((st = memra_tokenizer_from_gguf(g, out, err))) goto done;
  if (chat_template) {
    memra_str s;
    if (memra_gguf_get_str(g, "tokenizer.chat_template", &s, NULL) == MEMRA_OK &&
        !(*chat_template = memra_strndup(s.ptr, s.len))) {
      memra_tokenizer_free(*out);
      *out = NULL;
      st = memra_errf(err, MEMRA_E_OOM, "out of memory");
    }
  }
done:
  memra_gguf_close(g);
  memra_free(mem);
  memra_gguf_writer_free(w);
  memra_free(js);
  memra_free(cs);
  memra_free(cfg_auto);
  return st;
}
