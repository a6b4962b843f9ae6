#!/usr/bin/env python3
"""PyTorch's own training of a test model under a recipe, against a `dapple train` run.

  recipe_reference.py MODEL DATA EXPORTED LOG --steps N --gbs G [--seq-len T]
      [--optimizer sgd|adam|adamw] [--lr 0.05] [--momentum 0.9] [--weight-decay WD]
      [--lr-schedule constant|cosine|linear] [--warmup-steps W] [--min-lr L]
      [--clip-grad-norm X] [--adam-betas B1,B2] [--adam-eps E] [--no-decay-on-norm-and-bias]

trains MODEL (a TorchScript file of script_models.py) in float64 on one device on the
batches of script_models.py (dapple's --no-shuffle order): each step at the rate of the
schedule (set on every parameter group), torch.nn.utils.clip_grad_norm_ over all its
parameters, then the optimizer. LOG is dapple's stdout with --log-json (one JSON object
per step; a step logged twice, by a run and its resume, counts once, the later). Prints one
JSON line: the largest differences of the per-step loss (absolute), learning rate and
gradient norm (relative) and of the final weights against EXPORTED (relative), and how many
steps clip_grad_norm_ scaled (norm above X).
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_models import batches  # noqa: E402  (the data order of dapple's --no-shuffle)


def lr_at(a, t):
    """The issue's formulas, written out: step t (0-based) of a run of a.steps steps."""
    w, T, lr, low = a.warmup_steps, a.steps, a.lr, a.min_lr
    if t < w:
        return lr * (t + 1) / w
    if a.lr_schedule == "constant":
        return lr
    progress = (t - w) / (T - w)
    if a.lr_schedule == "cosine":
        return low + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - low)
    return lr - (lr - low) * progress


def make_optimizer(a, model):
    params = list(model.parameters())
    if a.no_decay_on_norm_and_bias:
        groups = [{"params": [p for p in params if p.dim() >= 2]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        groups = [g for g in groups if g["params"]]
    else:
        groups = [{"params": params}]
    if a.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum,
                               weight_decay=a.weight_decay)
    betas = tuple(float(b) for b in a.adam_betas.split(","))
    kind = torch.optim.Adam if a.optimizer == "adam" else torch.optim.AdamW
    return kind(groups, lr=a.lr, betas=betas, eps=a.adam_eps, weight_decay=a.weight_decay)


def dapple_steps(path):
    steps = {}
    for line in open(path):
        if line.startswith("{"):
            j = json.loads(line)
            if "step" in j and "loss" in j:
                steps[j["step"]] = j
    return steps


def rel(x, y):
    return abs(x - y) / max(abs(y), 1e-300)


def main():
    p = argparse.ArgumentParser()
    for name in ("model", "data", "exported", "log"):
        p.add_argument(name)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--gbs", type=int, required=True)
    p.add_argument("--seq-len", type=int, default=0)
    p.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="sgd")
    p.add_argument("--lr", type=float, default=0.01)  # dapple train's
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--lr-schedule", choices=("constant", "cosine", "linear"), default="constant")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--clip-grad-norm", type=float, default=0.0)
    p.add_argument("--adam-betas", default="0.9,0.999")
    p.add_argument("--adam-eps", type=float, default=1e-8)
    p.add_argument("--no-decay-on-norm-and-bias", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    model = torch.jit.load(a.model).double()
    model.train()
    opt = make_optimizer(a, model)
    theirs = dapple_steps(a.log)
    worst = {"loss": 0.0, "lr": 0.0, "grad_norm": 0.0}
    clipped = 0
    for t, (x, y) in enumerate(batches(a.data, a.gbs, a.steps, a.seq_len)):
        lr = lr_at(a, t)
        for g in opt.param_groups:
            g["lr"] = lr
        loss = F.cross_entropy(model(x).flatten(0, -2), y.flatten())
        opt.zero_grad()
        loss.backward()
        mine = theirs.get(t, {})
        if a.clip_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad_norm).item()
            clipped += norm > a.clip_grad_norm
            worst["grad_norm"] = max(worst["grad_norm"], rel(mine.get("grad_norm", 1e300), norm))
        opt.step()
        worst["loss"] = max(worst["loss"], abs(mine.get("loss", 1e300) - loss.item()))
        worst["lr"] = max(worst["lr"], rel(mine.get("lr", 1e300), lr))
    exported = dict(torch.jit.load(a.exported).named_parameters())
    param_diff = 0.0
    for name, q in model.named_parameters():
        q = q.detach()
        diff = (exported[name].detach().double() - q).abs().max() / q.abs().max().clamp(min=1e-12)
        param_diff = max(param_diff, diff.item())
    print(json.dumps({"steps": a.steps, "dapple_steps": len(theirs),
                      "max_loss_diff": worst["loss"], "max_lr_rel_diff": worst["lr"],
                      "max_grad_norm_rel_diff": worst["grad_norm"],
                      "max_param_rel_diff": param_diff, "clipped_steps": clipped}))


if __name__ == "__main__":
    sys.exit(main())
