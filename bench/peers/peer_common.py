"""Shared pieces of the PyTorch peer benchmarks (the .venv's torch, the release dapple builds
against): dapple's `mlp` model, thread setup, timing.

The model mirrors src/dapple/models/mlp.cc exactly: `layers` x (flatten, Linear, ReLU), then a
Linear head, cross-entropy loss.
"""
import argparse
import json
import os
import socket
import statistics
import time


def free_port():
    """A TCP port free on the loopback now, for MASTER_PORT."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_thread_env(threads):
    """Thread counts as `dapple train --nproc` sets them; before torch loads."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def parse_args(description, extra=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--input", type=int, default=784)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--micro-batch", type=int, default=32, help="rows per micro-batch (global)")
    p.add_argument("--micro-batches", type=int, default=4, help="M; global batch = M * micro-batch")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2, help="steps excluded from the timing")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    if extra:
        extra(p)
    a = p.parse_args()
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    return a


def build_mlp(a):
    import torch.nn as nn

    class Dense(nn.Module):  # dapple's DenseImpl: Linear on the flattened input, then ReLU
        def __init__(self, n_in, n_out, relu):
            super().__init__()
            self.linear = nn.Linear(n_in, n_out)
            self.relu = relu

        def forward(self, x):
            x = self.linear(x.flatten(1))
            return x.relu() if self.relu else x

    layers, width = [], a.input
    for _ in range(a.layers):
        layers.append(Dense(width, a.hidden, True))
        width = a.hidden
    layers.append(Dense(width, a.classes, False))
    return nn.Sequential(*layers)


def synthetic_batch(a, rows, step):
    """A fixed-seed random batch (inputs N(0,1), labels uniform), different per step."""
    import torch
    g = torch.Generator().manual_seed(a.seed * 1000003 + step)
    x = torch.randn(rows, a.input, generator=g)
    y = torch.randint(0, a.classes, (rows,), generator=g)
    return x, y


def report(name, a, step_s, extra=None):
    """Prints one JSON line: median step time (ms) and samples/s over the timed steps."""
    timed = step_s[a.warmup:]
    med = statistics.median(timed)
    gbs = a.micro_batch * a.micro_batches
    out = {"peer": name, "step_ms": med * 1e3, "samples_per_s": gbs / med,
           "mean_step_ms": statistics.mean(timed) * 1e3, "global_batch": gbs,
           "micro_batches": a.micro_batches, "steps_timed": len(timed), "threads": a.threads, "torch": _torch_version()}
    out.update(extra or {})
    print(json.dumps(out), flush=True)


def _torch_version():
    import torch
    return torch.__version__


now = time.perf_counter
