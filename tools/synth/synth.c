/* memra-synth — writes a GGUF of a llama-family architecture with seeded random weights:
 * tiny models for end-to-end fixtures, real shapes (Llama-3.1-8B, Qwen3-8B, and the hybrid
 * Qwen3-Next-80B-A3B per-layer shapes of ANCHORS.md) for the GPU machine, where no large
 * file can travel. Weights N(0, 0.02) like the anchors' models; norms near 1; a byte-level
 * BPE vocabulary that llama.cpp loads too. Hybrid (qwen3next) files follow llama.cpp's
 * converter: Gated DeltaNet layers (attn_qkv, attn_gate, ssm_ba, ssm_conv1d F32, ssm_a < 0,
 * ssm_dt, ssm_norm, ssm_out) with every full_attention_interval-th layer gated attention
 * (attn_q holding [q, gate] per head, q/k norms), routed experts stacked [E, F, n_expert]
 * with the router kept F32 (llama-quantize leaves ffn_gate_inp alone), plus the shared
 * expert and its sigmoid gate.
 *
 *   memra-synth --preset llama31-8b --types q4_k_m --seed 1 -o m.gguf
 *   memra-synth --preset qwen3next-80b-a3b --types q4_k_m -o h.gguf (4 layers: ANCHORS.md)
 *   memra-synth --preset qwen3-30b-a3b --types q4_k_m -o moe.gguf */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/alloc.h"
#include "core/gguf/gguf.h"
#include "plugins/quant/quant.h"

typedef struct shape {
  const char *arch;
  int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
  float rope_base;
  bool tied, rope_freqs;
  /* routed experts (0: dense), top-k, expert and shared-expert FFN widths */
  int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
  /* Gated DeltaNet (ssm_d 0: none): conv width, head dim, H_k, H_v; rotated dims of the
   * attention heads (0: all) and every interval-th layer is attention */
  int ssm_conv, ssm_d, ssm_hk, ssm_hv, n_rot, interval;
} shape;

typedef struct preset {
  const char *name;
  shape s;
} preset;

#define DENSE 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 /* no experts, no recurrent layers */
static const preset PRESETS[] = {
    {"tiny-llama", {"llama", 300, 64, 2, 4, 2, 16, 96, 10000.0f, false, true, DENSE}},
    {"tiny-qwen2", {"qwen2", 300, 64, 2, 4, 1, 16, 96, 1000000.0f, true, false, DENSE}},
    {"tiny-qwen3", {"qwen3", 300, 64, 2, 4, 2, 32, 96, 1000000.0f, false, false, DENSE}},
    /* K-quant rows (256 wide): q4_k_m mixes Q6_K attn_v / ffn_down into its last layer */
    {"tiny-llama-k", {"llama", 300, 256, 3, 4, 2, 64, 512, 10000.0f, false, true, DENSE}},
    {"llama31-8b", {"llama", 128256, 4096, 32, 32, 8, 128, 14336, 500000.0f, false, true, DENSE}},
    {"qwen3-8b", {"qwen3", 151936, 4096, 36, 32, 8, 128, 12288, 1000000.0f, false, false, DENSE}},
    {"smollm2-135m", {"llama", 49152, 576, 30, 9, 3, 64, 1536, 100000.0f, true, false, DENSE}},
    /* ANCHORS.md's hybrid: Qwen3-Next-80B-A3B layers (4 by default: 3 GDN + 1 attention) */
    {"qwen3next-80b-a3b",
     {"qwen3next", 151936, 2048, 4,   16, 2,   256, 0,  10000000.0f, false, false,
      512,         10,     512,  512, 4,  128, 16,  32, 64,          4}},
    /* Qwen3-30B-A3B (qwen3moe: 128 experts, top-8, no shared expert) */
    {"qwen3-30b-a3b", {"qwen3moe", 151936, 2048, 48, 32, 4, 128, 0, 1000000.0f, false, false,
                       128,        8,      768,  0,  0,  0, 0,   0, 0,          0}},
    /* the same structures at toy size (CPU tests of this tool); tiny-qwen3next's shared
     * expert has its routed experts' width, as Qwen3-Next's, so its layers stack it */
    {"tiny-qwen3moe", {"qwen3moe", 300, 64, 2, 4, 2, 32, 0, 1000000.0f, false, false,
                       7,          2,   32, 0, 0, 0, 0,  0, 0,          0}},
    {"tiny-qwen3next", {"qwen3next", 300, 64, 4,  4, 2,  32, 0, 10000000.0f, false, false,
                        7,           2,   64, 64, 4, 32, 2,  4, 8,           4}},
};

/* splitmix64: a seeded stream; Box-Muller for normals. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static float rng_normal(uint64_t *s) {
  double u1 = ((rng_next(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = (rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

typedef struct synth {
  memra_gguf_writer *w;
  uint64_t rng;
  const char *types; /* f32 f16 bf16 q8_0 q4_0 q4_1 q4_k_m q6_k ... */
  uint8_t *buf;
  size_t buf_cap;
} synth;

static int parse_type(const char *s) {
  static const struct {
    const char *n;
    int t;
  } T[] = {{"f32", MEMRA_TYPE_F32},   {"f16", MEMRA_TYPE_F16},   {"bf16", MEMRA_TYPE_BF16},
           {"q8_0", MEMRA_TYPE_Q8_0}, {"q4_0", MEMRA_TYPE_Q4_0}, {"q4_1", MEMRA_TYPE_Q4_1},
           {"q5_0", MEMRA_TYPE_Q5_0}, {"q5_1", MEMRA_TYPE_Q5_1}, {"q2_k", MEMRA_TYPE_Q2_K},
           {"q3_k", MEMRA_TYPE_Q3_K}, {"q4_k", MEMRA_TYPE_Q4_K}, {"q5_k", MEMRA_TYPE_Q5_K},
           {"q6_k", MEMRA_TYPE_Q6_K}};
  for (size_t i = 0; i < sizeof T / sizeof T[0]; ++i)
    if (!strcmp(s, T[i].n)) return T[i].t;
  return -1;
}

/* The type of a weight matrix under the mix; role is "attn_v", "ffn_down", "output", ... */
static int weight_type(const synth *S, const char *role, int layer, int n_layer) {
  if (!strcmp(S->types, "q4_k_m")) {
    /* Q4_K_M as llama.cpp mixes it: Q6_K for the output, and for attn_v / ffn_down in
     * the first and last eighth of the layers and every third layer between. */
    if (!strcmp(role, "output")) return MEMRA_TYPE_Q6_K;
    if (!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) {
      int e = n_layer / 8;
      if (layer < e || layer >= n_layer - e || (layer - e) % 3 == 2) return MEMRA_TYPE_Q6_K;
    }
    return MEMRA_TYPE_Q4_K;
  }
  return parse_type(S->types);
}

/* Rows are generated in parallel; each row's stream is seeded from (seed, tensor, row), so
 * the file is the same whatever the thread count. */
typedef struct row_job {
  uint64_t seed;
  int type;
  int64_t ne0, ne1;
  uint64_t row_bytes;
  uint8_t *dst;
  float mean, stddev;
  int64_t next; /* shared row counter */
  pthread_mutex_t lock;
  bool failed;
} row_job;

static void *row_worker(void *p) {
  row_job *j = p;
  float *row = malloc(sizeof(float) * (size_t)j->ne0);
  if (!row) {
    j->failed = true;
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&j->lock);
    int64_t r0 = j->next;
    j->next += 64;
    pthread_mutex_unlock(&j->lock);
    if (r0 >= j->ne1) break;
    for (int64_t r = r0; r < r0 + 64 && r < j->ne1; ++r) {
      uint64_t rng = j->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(r + 1));
      for (int64_t i = 0; i < j->ne0; ++i)
        row[i] = j->mean + j->stddev * rng_normal(&rng);
      if (!memra_quantize_row(j->type, row, j->dst + r * j->row_bytes, j->ne0)) j->failed = true;
    }
  }
  free(row);
  return NULL;
}

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; ++s)
    h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* ne2 > 1: a stack of ne2 matrices of ne1 rows (expert tensors), generated as ne1 * ne2 rows. */
static int add_tensor3(synth *S, const char *name, int type, int64_t ne0, int64_t ne1, int64_t ne2,
                       float mean, float stddev) {
  const int64_t rows_per = ne1;
  ne1 *= ne2;
  if (ne0 % memra_type_info(type).blck) {
    fprintf(stderr, "memra-synth: %s: row of %lld is not a multiple of %s's block of %d\n", name,
            (long long)ne0, memra_type_info(type).name, memra_type_info(type).blck);
    return 1;
  }
  uint64_t row_bytes = memra_type_row_bytes(type, ne0), total = row_bytes * (uint64_t)ne1;
  if (total > S->buf_cap) {
    memra_free(S->buf);
    S->buf = memra_malloc(total);
    S->buf_cap = total;
  }
  if (!S->buf) {
    fprintf(stderr, "memra-synth: out of memory for %s\n", name);
    return 1;
  }
  row_job j = {.seed = S->rng ^ hash_name(name),
               .type = type,
               .ne0 = ne0,
               .ne1 = ne1,
               .row_bytes = row_bytes,
               .dst = S->buf,
               .mean = mean,
               .stddev = stddev};
  pthread_mutex_init(&j.lock, NULL);
  long n_threads = sysconf(_SC_NPROCESSORS_ONLN);
  if (n_threads < 1) n_threads = 1;
  if (n_threads > 64) n_threads = 64;
  if (ne1 < 256) n_threads = 1;
  pthread_t th[64];
  for (long t = 1; t < n_threads; ++t)
    pthread_create(&th[t], NULL, row_worker, &j);
  row_worker(&j);
  for (long t = 1; t < n_threads; ++t)
    pthread_join(th[t], NULL);
  pthread_mutex_destroy(&j.lock);
  if (j.failed) {
    fprintf(stderr, "memra-synth: no quantizer for %s\n", memra_type_info(type).name);
    return 1;
  }
  int64_t ne[3] = {ne0, rows_per, ne2};
  if (memra_gguf_writer_add_tensor(S->w, name, type,
                                   ne2 > 1    ? 3
                                   : ne1 == 1 ? 1
                                              : 2,
                                   ne, S->buf, total)) {
    fprintf(stderr, "memra-synth: cannot add tensor %s\n", name);
    return 1;
  }
  return 0;
}

static int add_tensor(synth *S, const char *name, int type, int64_t ne0, int64_t ne1, float mean,
                      float stddev) {
  return add_tensor3(S, name, type, ne0, ne1, 1, mean, stddev);
}

/* GPT-2 byte-level vocabulary: 256 byte tokens, 3 specials, then letter n-grams with the
 * merges that build them (so llama.cpp and memra both load it). */
static int add_vocab(synth *S, int n_vocab) {
  char **tok = memra_calloc((size_t)n_vocab, sizeof(char *));
  int32_t *types = memra_calloc((size_t)n_vocab, sizeof(int32_t));
  char **merges = memra_calloc((size_t)n_vocab, sizeof(char *));
  if (!tok || !types || !merges) return 1;
  int n = 0, n_merges = 0;
  /* byte -> code point as GPT-2 maps it: printable Latin-1 stays, the rest shift to 256+ */
  int shift = 0;
  for (int b = 0; b < 256; ++b) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    int cp = printable ? b : 256 + shift++;
    char *s = memra_malloc(4);
    if (cp < 0x80)
      s[0] = (char)cp, s[1] = 0;
    else
      s[0] = (char)(0xC0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3F)), s[2] = 0;
    types[n] = 1;
    tok[n++] = s;
  }
  const char *specials[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"};
  for (int i = 0; i < 3 && n < n_vocab; ++i) {
    types[n] = 3;
    tok[n++] = memra_strndup(specials[i], strlen(specials[i]));
  }
  for (int len = 2; n < n_vocab && len <= 5; ++len) {
    long count = 1;
    for (int i = 0; i < len; ++i)
      count *= 26;
    for (long k = 0; k < count && n < n_vocab; ++k) {
      char s[8];
      long v = k;
      for (int i = len - 1; i >= 0; --i)
        s[i] = (char)('a' + v % 26), v /= 26;
      s[len] = 0;
      types[n] = 1;
      tok[n++] = memra_strndup(s, (size_t)len);
      char m[16];
      snprintf(m, sizeof m, "%.*s %c", len - 1, s, s[len - 1]);
      merges[n_merges++] = memra_strndup(m, strlen(m));
    }
  }
  int rc = memra_gguf_writer_set_str(S->w, "tokenizer.ggml.model", "gpt2") ||
           memra_gguf_writer_set_str(S->w, "tokenizer.ggml.pre", "default") ||
           memra_gguf_writer_set_arr_str(S->w, "tokenizer.ggml.tokens", (const char *const *)tok,
                                         (uint64_t)n) ||
           memra_gguf_writer_set_arr(S->w, "tokenizer.ggml.token_type", 5 /* I32 */, types,
                                     (uint64_t)n) ||
           memra_gguf_writer_set_arr_str(S->w, "tokenizer.ggml.merges", (const char *const *)merges,
                                         (uint64_t)n_merges) ||
           memra_gguf_writer_set_u32(S->w, "tokenizer.ggml.bos_token_id", 256) ||
           memra_gguf_writer_set_u32(S->w, "tokenizer.ggml.eos_token_id", 257) ||
           memra_gguf_writer_set_bool(S->w, "tokenizer.ggml.add_bos_token", false);
  for (int i = 0; i < n; ++i)
    memra_free(tok[i]);
  for (int i = 0; i < n_merges; ++i)
    memra_free(merges[i]);
  memra_free(tok);
  memra_free(types);
  memra_free(merges);
  return rc;
}

/* The routed experts of layer il: the router [E, n_expert] kept F32 (llama-quantize leaves
 * ffn_gate_inp alone), gate/up [E, F, n_expert] and down [F, E, n_expert] in the mix. */
static int add_expert_ffn(synth *S, const shape *s, int il) {
  char n[96];
  const int64_t E = s->n_embd, NX = s->n_expert, FX = s->n_ff_exp;
#define X(suffix, role, ne0, ne1)                                                                  \
  (snprintf(n, sizeof n, "blk.%d." suffix, il),                                                    \
   add_tensor3(S, n, weight_type(S, role, il, s->n_layer), ne0, ne1, NX, 0, 0.02f))
  int rc = (snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", il),
            add_tensor(S, n, MEMRA_TYPE_F32, E, NX, 0, 0.02f)) ||
           X("ffn_gate_exps.weight", "ffn_gate", E, FX) ||
           X("ffn_up_exps.weight", "ffn_up", E, FX) || X("ffn_down_exps.weight", "ffn_down", FX, E);
#undef X
  return rc;
}

/* One layer of a qwen3next file (model.c want_layer_hybrid names the same tensors). */
static int add_hybrid_layer(synth *S, const shape *s, int il) {
  char n[96];
  const int64_t E = s->n_embd, QD = (int64_t)s->n_head * s->head_dim,
                KD = (int64_t)s->n_head_kv * s->head_dim, d = s->ssm_d, HV = s->ssm_hv, VD = HV * d,
                C = 2 * (int64_t)s->ssm_hk * d + VD, FS = s->n_ff_shexp;
  const bool gdn = (il + 1) % s->interval != 0;
#define T(suffix, role, ne0, ne1)                                                                  \
  (snprintf(n, sizeof n, "blk.%d." suffix, il),                                                    \
   add_tensor(S, n, weight_type(S, role, il, s->n_layer), ne0, ne1, 0, 0.02f))
#define F(suffix, ne0, ne1, mean, sd)                                                              \
  (snprintf(n, sizeof n, "blk.%d." suffix, il),                                                    \
   add_tensor(S, n, MEMRA_TYPE_F32, ne0, ne1, mean, sd))
  int rc =
      F("attn_norm.weight", E, 1, 1.0f, 0.1f) || F("post_attention_norm.weight", E, 1, 1.0f, 0.1f);
  if (gdn) /* ssm_a = -exp(A_log) < 0: a decay in (0, 1) */
    rc = rc || T("attn_qkv.weight", "attn_qkv", E, C) ||
         T("attn_gate.weight", "attn_gate", E, VD) || T("ssm_ba.weight", "ssm_ba", E, 2 * HV) ||
         F("ssm_conv1d.weight", s->ssm_conv, C, 0, 0.3f) || F("ssm_a", HV, 1, -1.0f, 0.2f) ||
         F("ssm_dt.bias", HV, 1, 0, 0.5f) || F("ssm_norm.weight", d, 1, 1.0f, 0.1f) ||
         T("ssm_out.weight", "ssm_out", VD, E);
  else
    rc = rc || T("attn_q.weight", "attn_q", E, 2 * QD) || T("attn_k.weight", "attn_k", E, KD) ||
         T("attn_v.weight", "attn_v", E, KD) || T("attn_output.weight", "attn_output", QD, E) ||
         F("attn_q_norm.weight", s->head_dim, 1, 1.0f, 0.1f) ||
         F("attn_k_norm.weight", s->head_dim, 1, 1.0f, 0.1f);
  rc = rc || add_expert_ffn(S, s, il);
  if (FS > 0)
    rc = rc || F("ffn_gate_inp_shexp.weight", E, 1, 0, 0.02f) ||
         T("ffn_gate_shexp.weight", "ffn_gate", E, FS) ||
         T("ffn_up_shexp.weight", "ffn_up", E, FS) || T("ffn_down_shexp.weight", "ffn_down", FS, E);
#undef T
#undef F
  return rc;
}

static int usage(void) {
  fprintf(stderr, "usage: memra-synth --preset NAME [--types f32|f16|bf16|q8_0|q4_0|q4_1|q4_k|"
                  "q6_k|q4_k_m] [--seed N] [--layers N] -o OUT.gguf\npresets:");
  for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; ++i)
    fprintf(stderr, " %s", PRESETS[i].name);
  fprintf(stderr, "\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *preset_name = NULL, *out = NULL, *types = "f32";
  uint64_t seed = 1;
  int layers = 0;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 >= argc) return usage();
    if (!strcmp(argv[i], "--preset"))
      preset_name = argv[++i];
    else if (!strcmp(argv[i], "--types"))
      types = argv[++i];
    else if (!strcmp(argv[i], "--seed"))
      seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--layers"))
      layers = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-o"))
      out = argv[++i];
    else
      return usage();
  }
  const shape *sh = NULL;
  for (size_t i = 0; preset_name && i < sizeof PRESETS / sizeof PRESETS[0]; ++i)
    if (!strcmp(PRESETS[i].name, preset_name)) sh = &PRESETS[i].s;
  if (!sh || !out) return usage();
  if (strcmp(types, "q4_k_m") && parse_type(types) < 0) {
    fprintf(stderr, "memra-synth: unknown --types '%s'\n", types);
    return 2;
  }
  shape s = *sh;
  if (layers > 0) s.n_layer = layers;
  synth S = {.w = memra_gguf_writer_new(32), .rng = seed, .types = types};
  if (!S.w) return 1;
  char k[128];
  int rc = memra_gguf_writer_set_str(S.w, "general.architecture", s.arch) ||
           memra_gguf_writer_set_str(S.w, "general.name", preset_name);
#define KEY(suffix) (snprintf(k, sizeof k, "%s." suffix, s.arch), k)
  rc = rc || memra_gguf_writer_set_u32(S.w, KEY("context_length"), 131072) ||
       memra_gguf_writer_set_u32(S.w, KEY("embedding_length"), (uint32_t)s.n_embd) ||
       memra_gguf_writer_set_u32(S.w, KEY("block_count"), (uint32_t)s.n_layer) ||
       memra_gguf_writer_set_u32(S.w, KEY("feed_forward_length"), (uint32_t)s.n_ff) ||
       memra_gguf_writer_set_u32(S.w, KEY("attention.head_count"), (uint32_t)s.n_head) ||
       memra_gguf_writer_set_u32(S.w, KEY("attention.head_count_kv"), (uint32_t)s.n_head_kv) ||
       memra_gguf_writer_set_u32(S.w, KEY("attention.key_length"), (uint32_t)s.head_dim) ||
       memra_gguf_writer_set_u32(S.w, KEY("attention.value_length"), (uint32_t)s.head_dim) ||
       memra_gguf_writer_set_u32(S.w, KEY("rope.dimension_count"),
                                 (uint32_t)(s.n_rot ? s.n_rot : s.head_dim)) ||
       memra_gguf_writer_set_f32(S.w, KEY("rope.freq_base"), s.rope_base) ||
       memra_gguf_writer_set_f32(S.w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f) ||
       memra_gguf_writer_set_u32(S.w, KEY("vocab_size"), (uint32_t)s.n_vocab);
  if (s.n_expert)
    rc = rc || memra_gguf_writer_set_u32(S.w, KEY("expert_count"), (uint32_t)s.n_expert) ||
         memra_gguf_writer_set_u32(S.w, KEY("expert_used_count"), (uint32_t)s.n_expert_used) ||
         memra_gguf_writer_set_u32(S.w, KEY("expert_feed_forward_length"), (uint32_t)s.n_ff_exp) ||
         memra_gguf_writer_set_u32(S.w, KEY("expert_shared_feed_forward_length"),
                                   (uint32_t)s.n_ff_shexp);
  if (s.ssm_d)
    rc = rc || memra_gguf_writer_set_u32(S.w, KEY("ssm.conv_kernel"), (uint32_t)s.ssm_conv) ||
         memra_gguf_writer_set_u32(S.w, KEY("ssm.state_size"), (uint32_t)s.ssm_d) ||
         memra_gguf_writer_set_u32(S.w, KEY("ssm.group_count"), (uint32_t)s.ssm_hk) ||
         memra_gguf_writer_set_u32(S.w, KEY("ssm.time_step_rank"), (uint32_t)s.ssm_hv) ||
         memra_gguf_writer_set_u32(S.w, KEY("ssm.inner_size"), (uint32_t)(s.ssm_hv * s.ssm_d)) ||
         memra_gguf_writer_set_u32(S.w, KEY("full_attention_interval"), (uint32_t)s.interval);
#undef KEY
  rc = rc || add_vocab(&S, s.n_vocab);
  const int E = s.n_embd, QD = s.n_head * s.head_dim, KD = s.n_head_kv * s.head_dim, F = s.n_ff;
  const int emb_t = !strcmp(types, "q4_k_m") ? MEMRA_TYPE_Q4_K : parse_type(types);
  rc = rc || add_tensor(&S, "token_embd.weight", emb_t, E, s.n_vocab, 0, 0.02f);
  if (s.rope_freqs && !rc) {
    /* Llama 3.1's factors: high frequencies kept, low ones divided by 8, smooth between. */
    int n = s.head_dim / 2;
    float *f = memra_malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; ++i) {
      double freq = pow(s.rope_base, -2.0 * i / s.head_dim), wavelen = 6.283185307179586 / freq;
      double lo = 8192.0 / 1.0, hi = 8192.0 / 4.0;
      if (wavelen < hi)
        f[i] = 1.0f;
      else if (wavelen > lo)
        f[i] = 8.0f;
      else {
        double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
        f[i] = (float)(1.0 / ((1 - smooth) / 8.0 + smooth));
      }
    }
    int64_t ne[1] = {n};
    rc = memra_gguf_writer_add_tensor(S.w, "rope_freqs.weight", MEMRA_TYPE_F32, 1, ne, f,
                                      sizeof(float) * (size_t)n) != MEMRA_OK;
    memra_free(f);
  }
  for (int il = 0; il < s.n_layer && !rc && s.ssm_d; ++il)
    rc = add_hybrid_layer(&S, &s, il);
  for (int il = 0; il < s.n_layer && !rc && !s.ssm_d; ++il) {
    char n[96];
#define T(suffix, role, ne0, ne1)                                                                  \
  (snprintf(n, sizeof n, "blk.%d." suffix, il),                                                    \
   add_tensor(&S, n, weight_type(&S, role, il, s.n_layer), ne0, ne1, 0, 0.02f))
#define V(suffix, ne0, mean, sd)                                                                   \
  (snprintf(n, sizeof n, "blk.%d." suffix, il), add_tensor(&S, n, MEMRA_TYPE_F32, ne0, 1, mean, sd))
    rc = V("attn_norm.weight", E, 1.0f, 0.1f) || T("attn_q.weight", "attn_q", E, QD) ||
         T("attn_k.weight", "attn_k", E, KD) || T("attn_v.weight", "attn_v", E, KD) ||
         T("attn_output.weight", "attn_output", QD, E) || V("ffn_norm.weight", E, 1.0f, 0.1f);
    if (!rc && !s.n_expert)
      rc = T("ffn_gate.weight", "ffn_gate", E, F) || T("ffn_up.weight", "ffn_up", E, F) ||
           T("ffn_down.weight", "ffn_down", F, E);
    if (!rc && s.n_expert) /* qwen3moe */
      rc = add_expert_ffn(&S, &s, il);
    if (!rc && !strcmp(s.arch, "qwen2"))
      rc = V("attn_q.bias", QD, 0, 0.02f) || V("attn_k.bias", KD, 0, 0.02f) ||
           V("attn_v.bias", KD, 0, 0.02f);
    if (!rc && (!strcmp(s.arch, "qwen3") || !strcmp(s.arch, "qwen3moe")))
      rc = V("attn_q_norm.weight", s.head_dim, 1.0f, 0.1f) ||
           V("attn_k_norm.weight", s.head_dim, 1.0f, 0.1f);
#undef T
#undef V
  }
  rc = rc || add_tensor(&S, "output_norm.weight", MEMRA_TYPE_F32, E, 1, 1.0f, 0.1f);
  if (!s.tied && !rc)
    rc = add_tensor(&S, "output.weight", weight_type(&S, "output", 0, s.n_layer), E, s.n_vocab, 0,
                    0.02f);
  memra_err err = {{0}};
  if (!rc && memra_gguf_writer_write(S.w, out, &err)) {
    fprintf(stderr, "memra-synth: %s\n", err.msg);
    rc = 1;
  }
  memra_gguf_writer_free(S.w);
  memra_free(S.buf);
  return rc ? 1 : 0;
}
