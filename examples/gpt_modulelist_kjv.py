#!/usr/bin/env python3
"""A GPT written the way people write one in 2026, trained by dapple without changes: nanoGPT's
current form, with attention by F.scaled_dot_product_attention(is_causal=True) (PyTorch 2), the
blocks in an nn.ModuleList run by a loop in forward, the positions made in forward, and the
output head tied to the token embedding (head.weight = wte.weight). Writes OUT/gpt.pt
(scripted) and the King James Bible as character tokens, OUT/train.bin and OUT/eval.bin.
dapple's layers are wte, wpe, blocks.0 .. blocks.N-1, ln_f and head (docs/your-model.md).

  examples/gpt_modulelist_kjv.py OUT [--layers 4] [--hidden 64] [--seq 64]
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_kjv import write_kjv_splits  # noqa: E402


class Attention(nn.Module):
    """Causal self-attention through PyTorch 2's fused kernel: no mask tensor is made."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    def __init__(self, vocab: int, seq: int, d: int, heads: int, layers: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", default="out/gpt-modulelist")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seq", type=int, default=64)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    model = Gpt(vocab=128, seq=a.seq, d=a.hidden, heads=4, layers=a.layers)
    torch.jit.script(model).save(os.path.join(a.out, "gpt.pt"))
    cut = write_kjv_splits(a.out)
    print(f"wrote {a.out}/gpt.pt (blocks in an nn.ModuleList, tied head), "
          f"{a.out}/train.bin ({cut} tokens), {a.out}/eval.bin")


if __name__ == "__main__":
    main()
