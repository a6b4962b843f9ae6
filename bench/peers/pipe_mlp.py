#!/usr/bin/python3
"""torch GPipe peer for dapple's `mlp`: torch.distributed.pipeline.sync.Pipe with 2 partitions
(the first --split Dense layers, then the rest) and chunks = M, checkpoint='never' (dapple does
not recompute by default), one process, rpc initialised with one worker. Loss = mean over the
global batch, SGD with momentum. Prints one JSON line.

On CPU, Pipe 1.13 accepts the partitions (all on 'cpu') but runs them on ONE worker thread:
create_workers() keeps one thread per distinct device, and every CPU partition is device 'cpu';
the backward goes through autograd's single CPU thread. So on CPU Pipe is gradient
accumulation with pipeline bookkeeping, not a pipeline; --threads gives torch intra-op threads.
  /usr/bin/python3 bench/peers/pipe_mlp.py --hidden 512 --layers 6 --micro-batch 32 \
      --micro-batches 4 --steps 20 --threads 2 --split 3
"""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402


def main():
    a = pc.parse_args(__doc__, lambda p: p.add_argument(
        "--split", type=int, default=-1, help="Dense layers in partition 0 (default: half)"))
    pc.set_openblas_env(a.threads)
    import torch
    import torch.distributed.rpc as rpc
    from torch.distributed.pipeline.sync import Pipe
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    rpc.init_rpc("worker", rank=0, world_size=1)
    dense = list(pc.build_mlp(a))
    k = a.split if a.split >= 0 else (len(dense) + 1) // 2
    model = Pipe(torch.nn.Sequential(torch.nn.Sequential(*dense[:k]),
                                     torch.nn.Sequential(*dense[k:])),
                 chunks=a.micro_batches, checkpoint="never")
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
    gbs = a.micro_batch * a.micro_batches
    batches = [pc.synthetic_batch(a, gbs, s) for s in range(a.steps)]
    times = []
    for s in range(a.steps):
        t0 = pc.now()
        x, y = batches[s]
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x).local_value(), y).backward()
        opt.step()
        times.append(pc.now() - t0)
    pc.report("torch-pipe", a, times, {"partitions": 2, "split": k,
                                       "devices": [str(d) for d in model.devices]})
    rpc.shutdown()


if __name__ == "__main__":
    main()
