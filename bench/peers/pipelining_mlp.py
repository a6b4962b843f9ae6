#!/usr/bin/env python3
"""torch.distributed.pipelining peer for dapple's `mlp` (PyTorch 2's pipeline parallelism): 2
local processes over gloo, one per pipeline rank, the model's Dense layers cut by hand into
stages, M micro-batches per step, SGD with momentum. The loss of each micro-batch is the mean
over its rows divided by M, so that the gradient is the global-batch mean's, as dapple's.
  --schedule gpipe: ScheduleGPipe, 2 stages (the first --split Dense layers, then the rest);
  --schedule 1f1b:  Schedule1F1B, the same 2 stages;
  --schedule zbv:   ScheduleZBVZeroBubble, 4 stages in a V (rank 0 holds stages 0 and 3, rank 1
                    stages 1 and 2), the Dense layers cut into 4 runs of near-equal length.
                    Over gloo it fails at its first exchange: stages 1 and 2 on rank 1 send to
                    each other, a gloo send from a rank to itself ("Pair is not connected").
Rank 1 (or, for zbv, rank 0) computes the loss. Rank 0 prints one JSON line; step time is the
max over ranks of each step, median over steps.
  .venv/bin/python bench/peers/pipelining_mlp.py --hidden 512 --layers 6 --micro-batch 32 \\
      --micro-batches 4 --steps 20 --threads 1 --schedule 1f1b
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402


def cuts(n, parts, first=-1):
    """Start indices of `parts` runs of n layers; `first` fixes the first run's length."""
    if first >= 0 and parts == 2:
        return [0, first, n]
    return [n * k // parts for k in range(parts)] + [n]


def run(rank, a):
    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining as pp
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(a.seed)
    dense = list(pc.build_mlp(a))
    v = a.schedule == "zbv"
    num_stages = 4 if v else 2
    bounds = cuts(len(dense), num_stages, -1 if v else a.split)
    mine = [3 * rank, 3 - rank] if v else [rank]  # a V: 0 1 | 1 2 ... rank 0 holds 0 and 3
    stages, params = [], []
    for s in mine:
        module = torch.nn.Sequential(*dense[bounds[s]:bounds[s + 1]])
        params += list(module.parameters())
        # Shapes given, not inferred: the inference's first exchange fails over gloo on
        # the CPU for a V ("Pair is not connected"), and costs a step's start otherwise.
        x = torch.zeros(a.micro_batch, a.input if s == 0 else a.hidden)
        with torch.no_grad():
            y = module(x)
        stages.append(pp.PipelineStage(module, s, num_stages, torch.device("cpu"),
                                       input_args=x, output_args=y))
    ce = torch.nn.CrossEntropyLoss()

    def loss_fn(out, target):
        return ce(out, target) / a.micro_batches

    if v:
        schedule = pp.ScheduleZBVZeroBubble(stages, a.micro_batches, loss_fn=loss_fn)
    else:
        kind = pp.ScheduleGPipe if a.schedule == "gpipe" else pp.Schedule1F1B
        schedule = kind(stages[0], a.micro_batches, loss_fn=loss_fn)
    holds_first = 0 in mine
    holds_last = num_stages - 1 in mine
    opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum)
    gbs = a.micro_batch * a.micro_batches
    batches = [pc.synthetic_batch(a, gbs, s) for s in range(a.steps)]
    times = []
    dist.barrier()
    for s in range(a.steps):
        t0 = pc.now()
        x, y = batches[s]
        opt.zero_grad(set_to_none=True)
        args = (x,) if holds_first else ()
        kwargs = {"target": y, "losses": []} if holds_last else {}
        schedule.step(*args, **kwargs)
        opt.step()
        times.append(pc.now() - t0)
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        pc.report(f"torch-pipelining-{a.schedule}", a, t.tolist(),
                  {"stages": num_stages, "cuts": bounds, "backend": "gloo"})
    dist.destroy_process_group()


def main():
    def extra(p):
        p.add_argument("--schedule", choices=("gpipe", "1f1b", "zbv"), default="1f1b")
        p.add_argument("--split", type=int, default=-1,
                       help="Dense layers in stage 0 of 2 (default: half)")
    a = pc.parse_args(__doc__, extra)
    pc.set_thread_env(a.threads)  # inherited by the spawned processes
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(pc.free_port())
    import torch.multiprocessing as mp
    mp.spawn(run, args=(a,), nprocs=2, join=True)


if __name__ == "__main__":
    main()
