#!/usr/bin/env python3
"""Writes the end-to-end parity fixtures under tests/e2e/fixtures/ (re-runnable).

References nobody here wrote:
  * SmolLM2-135M-Instruct Q4_1 (the default model): HF transformers loading the GGUF
    (dequantized to float32, eager float32 math) gives prompt ids, 32 greedy tokens and
    the last-position logits for fixed prompts; llama.cpp (llama-cpp-python) greedy ids
    are recorded beside them.
  * Tiny synthetic models of each supported architecture, written by our own GGUF writer
    (tools/synth, seeded): llama.cpp with an F32 KV cache gives the logits of every
    position of a fixed token sequence.

usage: tools/gen_e2e_fixtures.py --synth bazel-bin/tools/synth/memra-synth --model SMOL.gguf
"""
import argparse, os, subprocess, sys
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "e2e", "fixtures")
PROMPTS = ["The capital of France is", "def fibonacci(n):",
           "Once upon a time, in a small village,"]
TINY = ["tiny-llama", "tiny-qwen2", "tiny-qwen3"]
TINY_IDS = [5, 100, 258, 37, 200, 299, 3, 77, 150, 42, 280, 9, 64]
N_GEN = 32


def write_ids(f, name, ids):
    f.write(name + " " + " ".join(str(int(i)) for i in ids) + "\n")


def smollm(model_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.dirname(model_path), os.path.basename(model_path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                             attn_implementation="eager")
    m.eval()
    import llama_cpp
    lc = llama_cpp.Llama(model_path=model_path, n_ctx=512, verbose=False, n_threads=2)
    for i, p in enumerate(PROMPTS):
        ids = tok(p, return_tensors="pt").input_ids
        # Plain greedy over the full sequence each step: no generate() logits processors
        # (EOS is a token like any other here).
        seq = ids[0].tolist()
        with torch.no_grad():
            logits = m(ids).logits[0, -1].float().numpy()
            for _ in range(N_GEN):
                nxt = int(torch.argmax(m(torch.tensor([seq])).logits[0, -1]))
                seq.append(nxt)
        gen = seq[ids.shape[1]:]
        lc.reset()
        lc_gen = []
        for t in lc.generate(ids[0].tolist(), temp=0.0, top_k=1, reset=True):
            lc_gen.append(t)
            if len(lc_gen) == N_GEN:
                break
        with open(os.path.join(OUT, f"smollm2_case{i}.txt"), "w") as fh:
            fh.write("prompt_text " + p.encode("unicode_escape").decode() + "\n")
            write_ids(fh, "prompt", ids[0].tolist())
            write_ids(fh, "greedy_hf", gen)
            write_ids(fh, "greedy_llamacpp", lc_gen)
        logits.astype("<f4").tofile(os.path.join(OUT, f"smollm2_case{i}.logits.f32"))
        agree = sum(a == b for a, b in zip(gen, lc_gen))
        print(f"case {i}: {p!r} hf={tok.decode(gen)!r} llama.cpp agrees on {agree}/{N_GEN}")


def tiny(synth):
    import llama_cpp
    for name in TINY:
        path = os.path.join(OUT, name + ".gguf")
        subprocess.run([synth, "--preset", name, "--types", "f32", "--seed", "7", "-o", path],
                       check=True)
        lc = llama_cpp.Llama(model_path=path, n_ctx=64, logits_all=True, verbose=False,
                             n_threads=2, type_k=0, type_v=0)  # GGML_TYPE_F32 KV cache
        lc.reset()
        lc.eval(TINY_IDS)
        lg = np.array(lc.scores[:len(TINY_IDS)], dtype="<f4")
        lg.tofile(os.path.join(OUT, name + ".logits.f32"))
        with open(os.path.join(OUT, name + ".txt"), "w") as fh:
            write_ids(fh, "ids", TINY_IDS)
        print(f"{name}: logits {lg.shape}, |mean| {np.abs(lg).mean():.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--synth", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--only", choices=["tiny", "smollm2"])
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if a.only != "smollm2":
        tiny(a.synth)
    if a.only != "tiny":
        smollm(a.model)
