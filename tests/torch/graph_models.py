#!/usr/bin/env python3
"""Models as people write them, for dapple's graph-cut tests, and PyTorch's own training of them.

  graph_models.py write DIR
      writes torchvision's resnet18, mobilenet_v2 and vgg11 as shipped (random weights), a GPT
      with an nn.ModuleList loop, SDPA causal attention, positions made in forward and a tied head
      (scripted), a nanoGPT-style GPT whose forward(idx, targets) returns (logits, loss)
      (traced), a U-Net with skip connections, a residual written around children, and their
      data files (images.pt, unet_data.pt; the GPTs read tokens.bin of script_models.py).
  graph_models.py check MODEL DATA EXPORTED LOSSES --steps N --gbs G --micro-batch M
      [--slices R] [--seq-len T] [--loss cross-entropy|mse|own] [--lr 0.05] [--momentum 0.9]
      [--dtype float64|float32]
      trains MODEL in PyTorch (SGD, the data in file order as dapple's --no-shuffle), running
      every micro-batch (and each of its R replica slices) alone as the pipeline does, so that
      BatchNorm normalises the same samples; prints one JSON line with the largest relative
      difference of the per-step losses against LOSSES (dapple's, one per line) and of the
      final parameters against EXPORTED (dapple's --save-model output), and whether the
      exported buffers kept the original dtypes.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
from script_models import batches  # noqa: E402  (the same batches as dapple's --no-shuffle)
from gpt_modulelist_kjv import Gpt  # noqa: E402  (the example's GPT, smaller)
from reference_training import add_check_args, max_rel_diff, train_in_slices  # noqa: E402


class LoopGpt(Gpt):
    """The example's GPT (blocks in an nn.ModuleList run by a loop, positions made in forward,
    attention by F.scaled_dot_product_attention(is_causal=True), the head tied to the token
    embedding), small."""

    def __init__(self):
        super().__init__(vocab=16, seq=8, d=16, heads=2, layers=3)


class NanoGpt(LoopGpt):
    """nanoGPT's interface: forward(idx, targets) returns (logits, loss)."""

    def forward(self, idx, targets):
        logits = Gpt.forward(self, idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def conv_block(i: int, o: int):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """Encoder outputs concatenated into the decoder several layers later."""

    def __init__(self):
        super().__init__()
        self.enc1 = conv_block(1, 4)
        self.enc2 = conv_block(4, 8)
        self.pool = nn.MaxPool2d(2)
        self.mid = conv_block(8, 8)
        self.up2 = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.dec2 = conv_block(16, 4)
        self.up1 = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.dec1 = conv_block(8, 4)
        self.out = nn.Conv2d(4, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.out(d1)


class Residual(nn.Module):
    """A residual written around children."""

    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(8, 6)
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 6)
        self.head = nn.Linear(6, 4)

    def forward(self, x):
        h = torch.relu(self.fc0(x))
        h = h + torch.relu(self.fc1(h))
        return self.head(torch.relu(self.fc2(h)))


def write(out):
    import torchvision
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    tv = torchvision.models
    torch.jit.script(tv.resnet18(num_classes=10)).save(os.path.join(out, "resnet18.pt"))
    # Dropout off (the constructors' own argument): PyTorch and dapple draw other masks.
    torch.jit.script(tv.mobilenet_v2(num_classes=10, dropout=0.0)).save(
        os.path.join(out, "mobilenet_v2.pt"))
    torch.jit.script(tv.vgg11(num_classes=10, dropout=0.0)).save(os.path.join(out, "vgg11.pt"))
    torch.jit.script(LoopGpt()).save(os.path.join(out, "loop_gpt.pt"))
    nano = NanoGpt()
    idx = torch.randint(0, 16, (2, 8))
    torch.jit.trace(nano, (idx, idx)).save(os.path.join(out, "nano_gpt.pt"))
    torch.jit.script(UNet()).save(os.path.join(out, "unet.pt"))
    torch.jit.script(Residual()).save(os.path.join(out, "residual_graph.pt"))
    g = torch.Generator().manual_seed(2)
    torch.save({"input": torch.randn(32, 3, 32, 32, generator=g),
                "target": torch.randint(0, 10, (32,), generator=g)},
               os.path.join(out, "images.pt"))
    torch.save({"input": torch.randn(32, 1, 16, 16, generator=g),
                "target": torch.randn(32, 1, 16, 16, generator=g)},
               os.path.join(out, "unet_data.pt"))
    torch.save({"input": torch.randn(32, 8, generator=g),
                "target": torch.randint(0, 4, (32,), generator=g)},
               os.path.join(out, "residual_data.pt"))


def slice_loss(model, x, y, loss):
    if loss == "own":
        return model(x, y)[1]
    out = model(x)
    if loss == "mse":
        return F.mse_loss(out, y)
    return F.cross_entropy(out.flatten(0, -2), y.flatten())


def check(a):
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    model = torch.jit.load(a.model)
    for p in model.parameters():
        p.data = p.data.to(dtype)
    for b in model.buffers():
        if b.is_floating_point():
            b.data = b.data.to(dtype)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    steps = ((x.to(dtype) if x.is_floating_point() else x, y.to(dtype) if y.is_floating_point()
              else y) for x, y in batches(a.data, a.gbs, a.steps, a.seq_len))
    losses = train_in_slices(opt, steps, a.gbs, a.micro_batch, a.slices,
                             lambda x, y: slice_loss(model, x, y, a.loss))
    theirs = [float(v) for v in open(a.losses).read().split()]
    exported = torch.jit.load(a.exported)
    mine = dict(model.named_parameters())
    worst = 0.0
    for name, p in exported.named_parameters():
        q = mine[name].detach()
        worst = max(worst, ((p.detach().to(q.dtype) - q).abs().max() /
                            q.abs().max().clamp(min=1e-12)).item())
    original = dict(torch.jit.load(a.model).named_buffers())
    dtypes_kept = all(original[n].dtype == b.dtype or b.is_floating_point()
                      for n, b in exported.named_buffers())
    loss_diff = max_rel_diff(losses, theirs)
    print(json.dumps({"steps": len(losses), "dapple_steps": len(theirs),
                      "max_loss_rel_diff": loss_diff, "max_param_rel_diff": worst,
                      "buffer_dtypes_kept": dtypes_kept, "final_loss": losses[-1]}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    c = sub.add_parser("check")
    add_check_args(c, ("model", "data", "exported", "losses"))
    c.add_argument("--loss", choices=("cross-entropy", "mse", "own"), default="cross-entropy")
    a = p.parse_args()
    torch.set_num_threads(1)
    write(a.dir) if a.cmd == "write" else check(a)


if __name__ == "__main__":
    sys.exit(main())
