#!/usr/bin/env python3
"""How much of a layer's backward is its weight gradient W, measured with PyTorch itself
(python3-torch, the libtorch of `dapple`) on layers shaped like the zoo's, split as
`dapple profile` and the runtime split it (runtime/worker/split_backward.cc): I = autograd.grad to
the input with the graph kept, then W = autograd.backward to the layer's parameters.
Prints, per layer, B (one backward), I, W, W / (I + W) (what --weight-grad-share stands
for) and (I + W) / B. One thread, median of REPEAT runs.

Usage: scripts/backward_split_share.py [--repeat 21]
"""
import argparse
import statistics
import time

import torch


def layers():
    lin = lambda i, o: torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU())
    yield "mlp fc 784->512 + ReLU, batch 16", lin(784, 512), torch.randn(16, 784)
    yield "mlp fc 512->512 + ReLU, batch 16", lin(512, 512), torch.randn(16, 512)
    yield "mlp fc 512->512 + ReLU, batch 128", lin(512, 512), torch.randn(128, 512)
    yield "mlp wide fc 4096->4096 + ReLU, batch 16", lin(4096, 4096), torch.randn(16, 4096)
    enc = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
    yield "transformer block d128 h4 ffn512, 8 x 64 tokens", enc, torch.randn(8, 64, 128)
    conv = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU())
    yield "conv 3x3 64->64 + ReLU, 16 x 32 x 32", conv, torch.randn(16, 64, 32, 32)
    yield "ReLU alone (no parameters), 16 x 512", torch.nn.ReLU(), torch.randn(16, 512)


def median_ms(fn, repeat):
    times = []
    for _ in range(repeat + 2):
        t = fn()
        times.append(t)
    return statistics.median(times[2:]) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=21)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'layer':52} {'B ms':>8} {'I ms':>8} {'W ms':>8} {'W/(I+W)':>8} {'(I+W)/B':>8}")
    for name, layer, x0 in layers():
        params = [p for p in layer.parameters()]

        def full():
            x = x0.clone().requires_grad_(True)
            y = layer(x)
            g = torch.ones_like(y)
            t = time.perf_counter()
            y.backward(g)
            return time.perf_counter() - t

        split = []

        def part(which):
            x = x0.clone().requires_grad_(True)
            y = layer(x)
            g = torch.ones_like(y)
            t0 = time.perf_counter()
            torch.autograd.grad([y], [x], [g], retain_graph=True)
            t1 = time.perf_counter()
            if params:
                torch.autograd.backward([y], [g], inputs=params)
            t2 = time.perf_counter()
            return t1 - t0 if which == "I" else t2 - t1

        b = median_ms(full, a.repeat)
        i = median_ms(lambda: part("I"), a.repeat)
        w = median_ms(lambda: part("W"), a.repeat)
        print(f"{name:52} {b:8.3f} {i:8.3f} {w:8.3f} {w / (i + w):8.2f} {(i + w) / b:8.2f}")


if __name__ == "__main__":
    main()
