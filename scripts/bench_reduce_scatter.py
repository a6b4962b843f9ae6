#!/usr/bin/env python3
"""Reduce-scatter over c10d's Gloo, two ways, side by side in one run (Note [Optimizer sharding],
runtime/optim/sharded_optimizer.h):
  alltoall: dapple's, Gloo's alltoall of the buffer then a local sum of the r received parts;
  gloo:     Gloo's own reduce_scatter_tensor (PyTorch 2).
Each rank is one process of one thread on the loopback, as dapple's ranks are.

  .venv/bin/python scripts/bench_reduce_scatter.py [--ranks 2 4] [--mib 1 8 32] [--rounds 20]
prints one line per (ranks, size): the median seconds of each and their ratio gloo / alltoall.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def by_alltoall(buf, r):
    received = torch.empty_like(buf)
    dist.all_to_all_single(received, buf)
    return received.view(r, -1).sum(0)


def by_gloo(buf, r):
    out = torch.empty(buf.numel() // r, dtype=buf.dtype)
    dist.reduce_scatter_tensor(out, buf)
    return out


def worker(rank, r, sizes, rounds, port, results):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=r)
    for mib in sizes:
        n = mib * 2**20 // 4 // r * r
        g = torch.Generator().manual_seed(rank)
        buf = torch.randn(n, generator=g)
        a, b = by_alltoall(buf, r), by_gloo(buf, r)  # warm-up, and the two agree
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-5):
            raise SystemExit(f"rank {rank}: the two reduce-scatters differ at {mib} MiB")
        times = {"alltoall": [], "gloo": []}
        for _ in range(rounds):
            for name, f in (("alltoall", by_alltoall), ("gloo", by_gloo)):
                dist.barrier()
                t = time.perf_counter()
                f(buf, r)
                times[name].append(time.perf_counter() - t)
        if rank == 0:
            results.put((r, mib, statistics.median(times["alltoall"]),
                         statistics.median(times["gloo"])))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--mib", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--rounds", type=int, default=20)
    a = p.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, median of {a.rounds} rounds")
    print("ranks  MiB   alltoall s   gloo s   gloo/alltoall")
    ctx = mp.get_context("spawn")
    for i, r in enumerate(a.ranks):
        results = ctx.Queue()
        mp.spawn(worker, args=(r, a.mib, a.rounds, 29700 + i, results), nprocs=r)
        while not results.empty():
            r_, mib, t_a, t_g = results.get()
            print(f"{r_:5d} {mib:4d} {t_a:12.5f} {t_g:8.5f} {t_g / t_a:15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
