#!/usr/bin/env python3
"""torch DistributedDataParallel peer for dapple's `mlp`: 2 (--nproc) local processes over gloo,
MASTER_ADDR=127.0.0.1 and a free port. Each rank holds its share of every micro-batch (as
dapple's 1-stage x N-replica plan does), accumulates over M micro-batches under no_sync() and
allreduces on the last (DDP averages, and each rank's loss is the mean over its rows scaled by
1/M, so the gradient is that of the global-batch mean). SGD with momentum. Rank 0 prints one
JSON line; step time is the max over ranks of each step, median over steps.
  .venv/bin/python bench/peers/ddp_mlp.py --hidden 512 --layers 6 --micro-batch 32 \
      --micro-batches 4 --steps 20 --threads 1 --nproc 2
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402


def run(rank, a):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.nproc)
    torch.manual_seed(a.seed)
    model = DDP(pc.build_mlp(a))  # broadcasts rank 0's parameters
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    gbs = a.micro_batch * a.micro_batches
    rows = a.micro_batch // a.nproc
    if rows * a.nproc != a.micro_batch:
        raise SystemExit(f"--micro-batch {a.micro_batch} must divide by --nproc {a.nproc}")
    batches = []
    for s in range(a.steps):  # every rank builds the same global batch and keeps its slices
        x, y = pc.synthetic_batch(a, gbs, s)
        batches.append([(xm[rank * rows:(rank + 1) * rows], ym[rank * rows:(rank + 1) * rows])
                        for xm, ym in zip(x.split(a.micro_batch), y.split(a.micro_batch))])
    times = []
    dist.barrier()
    for s in range(a.steps):
        t0 = pc.now()
        opt.zero_grad(set_to_none=True)
        for i, (xm, ym) in enumerate(batches[s]):
            if i + 1 < len(batches[s]):
                with model.no_sync():
                    (loss_fn(model(xm), ym) / a.micro_batches).backward()
            else:
                (loss_fn(model(xm), ym) / a.micro_batches).backward()
        opt.step()
        times.append(pc.now() - t0)
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        pc.report("torch-ddp", a, t.tolist(), {"nproc": a.nproc, "backend": "gloo"})
    dist.destroy_process_group()


def main():
    a = pc.parse_args(__doc__, lambda p: p.add_argument("--nproc", type=int, default=2))
    pc.set_thread_env(a.threads)  # inherited by the spawned processes
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(pc.free_port())
    import torch.multiprocessing as mp
    mp.spawn(run, args=(a,), nprocs=a.nproc, join=True)


if __name__ == "__main__":
    main()
