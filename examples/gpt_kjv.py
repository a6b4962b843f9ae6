#!/usr/bin/env python3
"""A small GPT on the King James Bible, written as a user of dapple would (docs/your-model.md):
tied input and output embeddings, and a (hidden, mask) tuple passed between blocks.

  examples/gpt_kjv.py OUT_DIR [--hidden 64] [--seq 64]
writes OUT_DIR/gpt.pt and the text as character tokens (uint16, the nanoGPT .bin
convention): OUT_DIR/train.bin (the first 95%) and OUT_DIR/eval.bin (the last 5%), from the
Debian package bible-kjv.
"""
import argparse
import os
import subprocess
import sys
from array import array

import torch
import torch.nn as nn
import torch.nn.functional as F


class Embed(nn.Module):
    """Token + position embedding; returns the hidden states and the causal mask."""

    def __init__(self, vocab: int, seq: int, d: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)

    def forward(self, idx):
        t = idx.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=idx.device), 1)
        return self.tok(idx) + self.pos[:t], mask


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP; passes the mask on."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, h, mask):
        n, t, d = h.shape
        q, k, v = self.qkv(self.ln1(h)).split(d, dim=2)
        q = q.view(n, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(n, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(n, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / float(d // self.heads) ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(n, t, d)
        h = h + self.proj(y)
        h = h + self.fc2(F.gelu(self.fc1(self.ln2(h))))
        return h, mask


class Head(nn.Module):
    """Final norm and the output projection, tied to the token embedding."""

    def __init__(self, tied: nn.Embedding, d: int):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.weight = tied.weight

    def forward(self, h, mask):
        return F.linear(self.ln(h), self.weight)


class Gpt(nn.Module):
    """Children in call order: embed, block0 .. block3, head (dapple's layers). Each block is a
    top-level child so that dapple can cut between blocks; the forward calls them one after
    another, as dapple requires (a loop over an nn.ModuleList would make them one child)."""

    def __init__(self, vocab: int = 128, seq: int = 64, d: int = 64, heads: int = 4):
        super().__init__()
        self.embed = Embed(vocab, seq, d)
        self.block0 = Block(d, heads)
        self.block1 = Block(d, heads)
        self.block2 = Block(d, heads)
        self.block3 = Block(d, heads)
        self.head = Head(self.embed.tok, d)

    def forward(self, idx):
        h, mask = self.embed(idx)
        h, mask = self.block0(h, mask)
        h, mask = self.block1(h, mask)
        h, mask = self.block2(h, mask)
        h, mask = self.block3(h, mask)
        return self.head(h, mask)


def kjv_text():
    out = subprocess.run(["/usr/bin/bible", "-f", "-p", "/usr/lib", "gen1:1-rev22:21"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    return "".join(line.split(" ", 1)[1] + "\n" for line in out.stdout.splitlines()
                   if " " in line)


def write_tokens(path, text):
    ids = array("H", (ord(c) & 0x7F for c in text))
    assert sys.byteorder == "little"
    with open(path, "wb") as f:
        f.write(ids.tobytes())


def write_kjv_splits(out):
    """out/train.bin (the first 95% of the King James Bible) and out/eval.bin (the rest), as
    character tokens; returns the number of training tokens."""
    text = kjv_text()
    cut = len(text) * 95 // 100
    write_tokens(os.path.join(out, "train.bin"), text[:cut])
    write_tokens(os.path.join(out, "eval.bin"), text[cut:])
    return cut


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", default="out/gpt")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seq", type=int, default=64)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    model = Gpt(vocab=128, seq=a.seq, d=a.hidden, heads=4)
    torch.jit.script(model).save(os.path.join(a.out, "gpt.pt"))
    cut = write_kjv_splits(a.out)
    print(f"wrote {a.out}/gpt.pt (layers embed, block0..block3, head; tied "
          f"embeddings), {a.out}/train.bin ({cut} tokens), {a.out}/eval.bin")


if __name__ == "__main__":
    main()
