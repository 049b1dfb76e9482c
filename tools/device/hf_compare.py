#!/usr/bin/env python3
"""Compares memra's logits (--dump-logits: float32 [positions x vocab]) with HF transformers
loading the same GGUF in float32 (an implementation nobody here wrote).

usage: hf_compare.py MODEL.gguf IDS_FILE MEMRA_LOGITS.f32 [cuda|cpu]
Prints rel L2 over all positions, top-1 agreement where the reference's top-2 margin exceeds
1e-2, and exits non-zero on any disagreement there."""
import os, sys
import numpy as np
import torch
from transformers import AutoModelForCausalLM

gguf, ids_path, ours_path = sys.argv[1:4]
dev = sys.argv[4] if len(sys.argv) > 4 else ("cuda" if torch.cuda.is_available() else "cpu")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
ids = [int(x) for x in open(ids_path).read().replace(",", " ").split()]
m = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(gguf)),
                                         gguf_file=os.path.basename(gguf), dtype=torch.float32,
                                         attn_implementation="eager").to(dev).eval()
with torch.no_grad():
    ref = m(torch.tensor([ids], device=dev)).logits[0].float().cpu().numpy()
ours = np.fromfile(ours_path, dtype="<f4").reshape(len(ids), -1)
assert ours.shape == ref.shape, (ours.shape, ref.shape)
rel = np.linalg.norm(ours - ref) / np.linalg.norm(ref)
top2 = np.sort(ref, axis=1)[:, -2:]
margin = top2[:, 1] - top2[:, 0]
sure = margin > 1e-2
agree = (ours.argmax(1) == ref.argmax(1))
bad = int((~agree & sure).sum())
print(f"hf_compare {os.path.basename(gguf)}: {len(ids)} positions, rel L2 {rel:.3g}, "
      f"top-1 agrees at {int((agree & sure).sum())}/{int(sure.sum())} positions with margin > 1e-2 "
      f"({int(agree.sum())}/{len(ids)} overall)")
sys.exit(1 if bad else 0)
