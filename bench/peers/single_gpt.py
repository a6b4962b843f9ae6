#!/usr/bin/env python3
"""Single-process plain-torch baseline for dapple's `gpt` (src/dapple/models/gpt.cc and
transformer.cc): token + position embedding, `layers` causal pre-norm blocks (qkv, proj, a
GELU feed-forward of 4 x hidden), a final layer norm and an untied projection to the
vocabulary; mean token cross-entropy. Gradient accumulation over M micro-batches (loss / M),
one SGD-with-momentum step, as `dapple train` under a one-stage plan. On --device cuda the
step is timed with torch.cuda.synchronize() at its end. Prints one JSON line (median step
time, samples/s). scripts/gpu_check.sh runs it beside `dapple train --device cuda`; it has
not run on a GPU yet.
  python3 bench/peers/single_gpt.py --device cuda --hidden 512 --heads 8 --layers 8 \
      --seq 256 --vocab 128 --micro-batch 8 --micro-batches 4 --steps 30
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402  (sets no env by itself)


def extra_args(p):
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--device", default="cpu", help="cpu | cuda")


def build_gpt(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(a.vocab, a.hidden)
            self.positions = nn.Embedding(a.seq, a.hidden)

        def forward(self, t):
            pos = torch.arange(t.size(1), device=t.device)
            return self.tokens(t) + self.positions(pos).unsqueeze(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            h = a.hidden
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.up, self.down = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
            self.norm1, self.norm2 = nn.LayerNorm(h), nn.LayerNorm(h)

        def attention(self, x):
            n, t, d = x.size(0), x.size(1), a.hidden // a.heads
            q, k, v = self.qkv(x).view(n, t, 3, a.heads, d).permute(2, 0, 3, 1, 4).unbind(0)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d)
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            out = scores.masked_fill(future, float("-inf")).softmax(-1) @ v
            return self.proj(out.transpose(1, 2).reshape(n, t, a.hidden))

        def forward(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    head = nn.Sequential(nn.LayerNorm(a.hidden), nn.Linear(a.hidden, a.vocab))
    return nn.Sequential(Embed(), *[Block() for _ in range(a.layers)], head)


def main():
    a = pc.parse_args(__doc__, extra_args)
    pc.set_thread_env(a.threads)
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    model = build_gpt(a).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    gbs = a.micro_batch * a.micro_batches
    g = torch.Generator().manual_seed(a.seed)
    batches = [torch.randint(0, a.vocab, (gbs, a.seq + 1), generator=g).to(dev)
               for _ in range(min(a.steps, 4))]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = []
    for s in range(a.steps):
        sync()
        t0 = pc.now()
        b = batches[s % len(batches)]
        opt.zero_grad(set_to_none=True)
        for m in b.split(a.micro_batch):
            out = model(m[:, :-1])
            loss = torch.nn.functional.cross_entropy(out.flatten(0, 1), m[:, 1:].flatten())
            (loss / a.micro_batches).backward()
        opt.step()
        sync()
        times.append(pc.now() - t0)
    params = sum(p.numel() for p in model.parameters())
    pc.report("torch-single-gpt", a, times, {"device": a.device, "parameters": params})


if __name__ == "__main__":
    main()
