#!/usr/bin/env python3
"""Single-process plain-torch baseline for dapple's `mlp`: one process, gradient accumulation
over M micro-batches (loss scaled by 1/M so the gradient is that of the global-batch mean), one
SGD-with-momentum step. Prints one JSON line (median step time, samples/s).
  .venv/bin/python bench/peers/single_mlp.py --hidden 512 --layers 6 --micro-batch 32 \
      --micro-batches 4 --steps 20 --threads 1
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402  (sets no env by itself)


def main():
    a = pc.parse_args(__doc__)
    pc.set_thread_env(a.threads)
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = pc.build_mlp(a)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    gbs = a.micro_batch * a.micro_batches
    batches = [pc.synthetic_batch(a, gbs, s) for s in range(a.steps)]
    times = []
    for s in range(a.steps):
        t0 = pc.now()
        x, y = batches[s]
        opt.zero_grad(set_to_none=True)
        for xm, ym in zip(x.split(a.micro_batch), y.split(a.micro_batch)):
            (loss_fn(model(xm), ym) / a.micro_batches).backward()
        opt.step()
        times.append(pc.now() - t0)
    pc.report("torch-single", a, times)


if __name__ == "__main__":
    main()
