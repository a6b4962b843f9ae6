#!/usr/bin/env python3
"""TorchScript models and data files for dapple's tests, and PyTorch's own training of them.

  script_models.py write DIR
      writes the test models (mlp.pt, gpt.pt with tied embeddings and a (hidden, mask) tuple
      between blocks), malformed ones (residual.pt, dict.pt, state_dict.pt, legacy.pt) and
      data files (mlp_data.pt, mlp_badclass.pt, tokens.bin, tokens_odd.bin, tokens_big.bin).
  script_models.py check MODEL DATA EXPORTED LOSSES --steps N --gbs G [--seq-len T]
      [--loss cross-entropy] [--lr 0.05] [--momentum 0.9] [--bf16] [--micro-batch M]
      trains MODEL in PyTorch (float64, SGD, the data in file order as dapple's --no-shuffle;
      --bf16: float32 weights under bfloat16 autocast; --micro-batch: gradients accumulated
      over micro-batches of M, the loss of each scaled by M / G) and prints one JSON line: the largest
      difference of the per-step losses against LOSSES (dapple's, one number per line) and of
      the final weights against EXPORTED (dapple's --save-model output).
"""
import argparse
import json
import os
import sys

from array import array

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
from gpt_kjv import Block, Embed, Head  # noqa: E402  (the example's layers, two blocks here)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_training import add_check_args  # noqa: E402
import torch
import torch.nn as nn
import torch.nn.functional as F


class Dense(nn.Module):
    def __init__(self, n_in: int, n_out: int, relu: bool):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)
        self.relu = relu

    def forward(self, x):
        y = self.linear(x.flatten(1))
        return torch.relu(y) if self.relu else y


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = Dense(8, 6, True)
        self.fc1 = Dense(6, 6, True)
        self.fc2 = Dense(6, 6, True)
        self.head = Dense(6, 4, False)

    def forward(self, x):
        return self.head(self.fc2(self.fc1(self.fc0(x))))


class Residual(Mlp):
    def forward(self, x):
        h = self.fc0(x)
        return self.head(self.fc2(self.fc1(h) + h))


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = Dense(8, 4, False)

    def forward(self, x):
        return {"out": self.fc0(x)}


class Gpt(nn.Module):
    def __init__(self, vocab=16, seq=8, d=16, heads=2):
        super().__init__()
        self.embed = Embed(vocab, seq, d)
        self.block0 = Block(d, heads)
        self.block1 = Block(d, heads)
        self.head = Head(self.embed.tok, d)

    def forward(self, idx):
        h, mask = self.embed(idx)
        h, mask = self.block0(h, mask)
        h, mask = self.block1(h, mask)
        return self.head(h, mask)


def write(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.script(Mlp()).save(os.path.join(out, "mlp.pt"))
    torch.jit.script(Residual()).save(os.path.join(out, "residual.pt"))
    torch.jit.script(DictOut()).save(os.path.join(out, "dict.pt"))
    torch.save(Mlp().state_dict(), os.path.join(out, "state_dict.pt"))
    torch.save({"x": torch.zeros(2)}, os.path.join(out, "legacy.pt"),
               _use_new_zipfile_serialization=False)
    torch.jit.script(Gpt()).save(os.path.join(out, "gpt.pt"))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = torch.randint(0, 4, (64,), generator=g)
    torch.save({"input": x, "target": y}, os.path.join(out, "mlp_data.pt"))
    torch.save({"input": x, "target": y + 4}, os.path.join(out, "mlp_badclass.pt"))
    torch.save({"input": torch.randn(64, 5), "target": y}, os.path.join(out, "mlp_badshape.pt"))
    tokens = array("H", torch.randint(0, 16, (8 * 64 + 1,), generator=g).tolist())
    assert sys.byteorder == "little"
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(tokens.tobytes())
    with open(os.path.join(out, "tokens_odd.bin"), "wb") as f:
        f.write(tokens.tobytes()[:-1])
    tokens[5] = 40
    with open(os.path.join(out, "tokens_big.bin"), "wb") as f:
        f.write(tokens.tobytes())


def batches(data, gbs, steps, seq_len):
    if data.endswith(".bin"):
        ids = array("H")
        with open(data, "rb") as f:
            ids.frombytes(f.read())
        t = torch.tensor(ids.tolist(), dtype=torch.int64)
        n = (t.numel() - 1) // seq_len
        x = torch.stack([t[i * seq_len:(i + 1) * seq_len] for i in range(n)])
        y = torch.stack([t[i * seq_len + 1:(i + 1) * seq_len + 1] for i in range(n)])
    else:
        d = torch.load(data)
        x, y = d["input"].double(), d["target"]
        n = x.size(0)
    for s in range(steps):
        idx = torch.tensor([(s * gbs + i) % n for i in range(gbs)])
        yield x[idx], y[idx]


def check(a):
    # --bf16: float32 weights, forward and loss under CPU autocast to bfloat16 (one autocast
    # block per step, as dapple clears its cast cache every step); else float64.
    model = torch.jit.load(a.model)
    model = model.float() if a.bf16 else model.double()
    model.train()
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    elif a.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    losses = []
    for x, y in batches(a.data, a.gbs, a.steps, a.seq_len):
        opt.zero_grad()
        loss = 0.0
        mb = a.micro_batch or a.gbs  # gradients accumulated over micro-batches, as dapple's
        for b in range(0, a.gbs, mb):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                xb = x[b:b + mb]
                out = model(xb.float() if a.bf16 and xb.is_floating_point() else xb)
                part = F.cross_entropy(out.flatten(0, -2), y[b:b + mb].flatten()) * (mb / a.gbs)
            part.backward()
            loss += part.item()
        opt.step()
        losses.append(loss)
    theirs = [float(l) for l in open(a.losses).read().split()]
    exported = torch.jit.load(a.exported)
    mine = dict(model.named_parameters())
    worst = 0.0
    for name, p in exported.named_parameters():
        q = mine[name].detach().double()
        worst = max(worst, ((p.detach().double() - q).abs().max() /
                            q.abs().max().clamp(min=1e-12)).item())
    loss_diff = max(abs(x - y) for x, y in zip(losses, theirs)) if theirs else 1e300
    print(json.dumps({"steps": len(losses), "dapple_steps": len(theirs),
                      "max_loss_diff": loss_diff, "max_param_rel_diff": worst,
                      "final_loss": losses[-1]}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    c = sub.add_parser("check")
    add_check_args(c, ("model", "data", "exported", "losses"))
    c.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="sgd")
    c.add_argument("--weight-decay", type=float, default=0.0)
    c.add_argument("--bf16", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    write(a.dir) if a.cmd == "write" else check(a)


if __name__ == "__main__":
    sys.exit(main())
