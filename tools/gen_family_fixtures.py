#!/usr/bin/env python3
"""Writes the model-family parity fixtures under tests/families/fixtures/ (re-runnable).

References nobody here wrote:
  * gemma3: the real Gemma 3 270M Q4_K_M (tools/fetch_gemma3.sh) loaded by HF transformers
    from the GGUF (dequantized to float32, eager float32 math): prompt ids, 32 greedy tokens
    and the last-position logits for fixed prompts (one of them in the Gemma chat format).
  * qwen3moe / qwen3next / qwen35 / qwen35moe: tiny seeded random HF models, converted by
    llama.cpp's own convert_hf_to_gguf.py (F32), and the HF float32 logits of every position
    of a fixed token sequence, once from the full prompt (prefill) and once token by token
    through the model's cache (decode).

usage: tools/gen_family_fixtures.py [--gemma3 GGUF] [--convert DIR/convert_hf_to_gguf.py]
                                    [--only NAME ...]
"""
import argparse, os, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "families", "fixtures")
TOKDIR = "/work/shared/fixtures/tokenizers"
N_GEN = 32
GEMMA_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "<start_of_turn>user\nWhat is the tallest mountain in the world?<end_of_turn>\n"
    "<start_of_turn>model\n",
    # over 512 tokens: the local layers' sliding window cuts in
    "Summarize the following notes.\n" + "".join(
        f"Note {i}: the shipment of {i * 7 % 13 + 2} crates left port {chr(65 + i % 26)} on "
        f"day {i * 3 % 29 + 1} and arrived {i % 5 + 1} days later.\n" for i in range(24)),
]
GEMMA_GEN = [N_GEN, N_GEN, N_GEN, 8]
# The tiny models keep the first TINY_VOCAB rows of the (real, 151936-entry) Qwen vocabulary
# after conversion, so that each GGUF stays small: a logit depends only on its own output
# row, so the first TINY_VOCAB logits are those of the full model. Ids below TINY_VOCAB.
TINY_VOCAB = 1000
TINY_IDS = [785, 11, 879, 374, 264, 273, 13, 999, 220, 16, 17, 18, 555, 88, 42, 7, 640]


def write_ids(f, name, ids):
    f.write(name + " " + " ".join(str(int(i)) for i in ids) + "\n")


def gemma3(path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.dirname(path), os.path.basename(path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                             attn_implementation="eager")
    m.eval()
    for i, p in enumerate(GEMMA_PROMPTS):
        ids = tok(p, return_tensors="pt").input_ids
        seq = ids[0].tolist()
        with torch.no_grad():
            logits = m(ids).logits[0, -1].float().numpy()
            # plain greedy over the whole sequence each step: no generate() processors
            for _ in range(GEMMA_GEN[i]):
                seq.append(int(torch.argmax(m(torch.tensor([seq])).logits[0, -1])))
        gen = seq[ids.shape[1]:]
        with open(os.path.join(OUT, f"gemma3_case{i}.txt"), "w") as fh:
            fh.write("prompt_text " + p.encode("unicode_escape").decode() + "\n")
            write_ids(fh, "prompt", ids[0].tolist())
            write_ids(fh, "greedy_hf", gen)
            fh.write("greedy_text " + tok.decode(gen).encode("unicode_escape").decode() + "\n")
        logits.astype("<f4").tofile(os.path.join(OUT, f"gemma3_case{i}.logits.f32"))
        print(f"gemma3 case {i}: {p!r} -> {tok.decode(gen)!r}")


def hf_tokenizer_dir(dst):
    import gzip, shutil
    src = os.path.join(TOKDIR, "qwen3")
    with gzip.open(os.path.join(src, "tokenizer.json.gz")) as f, \
            open(os.path.join(dst, "tokenizer.json"), "wb") as g:
        shutil.copyfileobj(f, g)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), dst)


def randomize(model, seed):
    """HF inits norms to 1 (or 0 for the zero-centred ones) and biases to constants: give
    every 1-D parameter random values so that each scale and offset path is exercised."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(p + 0.2 * torch.randn(p.shape, generator=g))


def trim_vocab(src, dst, n_vocab, name):
    """Copies the converter's GGUF keeping the first n_vocab embedding/output rows and
    tokens; the merges (which name tokens beyond n_vocab) are dropped, and general.name
    (which the converter takes from the temporary folder) is fixed so reruns are
    byte-identical."""
    import gguf
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or \
                key == "tokenizer.ggml.merges":
            continue
        vtype = f.types[0]
        val = f.contents()
        sub = None
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"):
                val = val[:n_vocab]
        if key == "general.name":
            val = "tiny-" + name
        w.add_key_value(key, val, vtype, sub_type=sub)
    for t in r.tensors:
        data = np.array(t.data)
        if t.name in ("token_embd.weight", "output.weight"):
            data = data[:n_vocab]
        w.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_logits(model, ids):
    """Float32 logits of every position: once from the whole prompt (prefill), once token by
    token through the model's cache (decode)."""
    import torch
    with torch.no_grad():
        pre = model(torch.tensor([ids])).logits[0].float().numpy()
        cache, dec = None, []
        for t in ids:
            out = model(torch.tensor([[t]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            dec.append(out.logits[0, -1].float().numpy())
    return pre, np.stack(dec)


def tiny(name, make, convert):
    import torch
    torch.manual_seed(1234)
    model = make()
    randomize(model, 99)
    model.eval()
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        hf_tokenizer_dir(d)
        full = os.path.join(d, "full.gguf")
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(convert), "gguf-py"))
        subprocess.run([sys.executable, convert, d, "--outtype", "f32", "--outfile", full] +
                       (["--no-mtp"] if name != "qwen3moe" else []), check=True, env=env,
                       stdout=subprocess.DEVNULL)
        trim_vocab(full, os.path.join(OUT, name + ".gguf"), TINY_VOCAB, name)
    pre, dec = hf_logits(model, TINY_IDS)
    pre[:, :TINY_VOCAB].astype("<f4").tofile(os.path.join(OUT, name + ".prefill.f32"))
    dec[:, :TINY_VOCAB].astype("<f4").tofile(os.path.join(OUT, name + ".decode.f32"))
    with open(os.path.join(OUT, name + ".txt"), "w") as fh:
        write_ids(fh, "ids", TINY_IDS)
        fh.write(f"n_vocab {TINY_VOCAB}\n")
    diff = np.abs(pre - dec).max() / np.abs(pre).max()
    print(f"{name}: {os.path.getsize(os.path.join(OUT, name + '.gguf'))} bytes, "
          f"HF prefill vs decode max rel diff {diff:.2e}")


def make_qwen3moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    cfg = Qwen3MoeConfig(vocab_size=151936, hidden_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         intermediate_size=96, moe_intermediate_size=24, num_experts=7,
                         num_experts_per_tok=3, norm_topk_prob=True, decoder_sparse_step=1,
                         mlp_only_layers=[], rms_norm_eps=1e-6, max_position_embeddings=256,
                         tie_word_embeddings=False, initializer_range=0.15,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    return Qwen3MoeForCausalLM(cfg)


# Hybrids: 4 layers, GDN x3 then gated attention (interval 4); H_v / H_k = 2 so the
# grouped (qwen3next) and tiled (qwen35*) q/k -> v head orders differ; partial RoPE.
HYBRID = dict(vocab_size=151936, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, linear_conv_kernel_dim=4,
              linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
              linear_num_value_heads=4, rms_norm_eps=1e-6, max_position_embeddings=256,
              tie_word_embeddings=False, initializer_range=0.15,
              layer_types=["linear_attention"] * 3 + ["full_attention"])
MOE = dict(moe_intermediate_size=24, shared_expert_intermediate_size=40, num_experts=7,
           num_experts_per_tok=3)


def make_qwen3next():
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    cfg = Qwen3NextConfig(**HYBRID, **MOE, intermediate_size=96, norm_topk_prob=True,
                          decoder_sparse_step=1, mlp_only_layers=[],
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                           "partial_rotary_factor": 0.5})
    return Qwen3NextForCausalLM(cfg)


def make_qwen35():
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    cfg = Qwen3_5TextConfig(**HYBRID, intermediate_size=96,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                             "partial_rotary_factor": 0.5,
                                             "mrope_section": [2, 1, 1]})
    return Qwen3_5ForCausalLM(cfg)


def make_qwen35moe():
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
    cfg = Qwen3_5MoeTextConfig(**HYBRID, **MOE,
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "partial_rotary_factor": 0.5,
                                                "mrope_section": [2, 1, 1]})
    return Qwen3_5MoeForCausalLM(cfg)


TINY = {"qwen3moe": make_qwen3moe, "qwen3next": make_qwen3next, "qwen35": make_qwen35,
        "qwen35moe": make_qwen35moe}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--gemma3")
    ap.add_argument("--convert")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    want = lambda n: not a.only or n in a.only
    if a.gemma3 and want("gemma3"):
        gemma3(a.gemma3)
    if a.convert:
        for name, make in TINY.items():
            if want(name):
                tiny(name, make, a.convert)
