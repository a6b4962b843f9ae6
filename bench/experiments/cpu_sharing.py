#!/usr/bin/env python3
"""How processes sharing this machine's cores slow each other's compute (docs/two-server.md,
"Why pipelines measure slower than simulated here"). Three experiments, each run as
`bench/experiments/cpu_sharing.py EXPERIMENT` (it starts its own processes):

  ops      one, two (pinned to a core each) and four processes each run the forward and
           backward of a 1024x1024 linear layer at batch 64 for 3 s; median time per op.
           Compare the four-process medians with the throughput ratio: short ops pay a whole
           time slice of another process when preempted, so their median stretches more than
           the mean does.
  ring     four processes pass a token round a ring and compute one chunk (matmuls over their
           own weights) between receiving and sending: one process computes at a time. The
           chunk's time in the ring against alone is the cost of resuming after the others
           ran (cold caches, wake-up).
  pingpong ranks 0 and 1 ping-pong 4 B and 256 KiB while ranks 2 and 3 run matmuls (and
           without them): one-way latency when the receiver has to wait for a core.
  wake     rank 1 computes a chunk (about 3 ms) and sends its clock (time.monotonic, one
           clock on one machine) to rank 0, which waits in recv; the delivery time is rank 0's
           clock at the wake-up minus the sent one. With ranks 2 and 3 computing meanwhile (the
           cores are saturated) and without: the waiting receiver's wake-up cost, mean and
           median, for 4 B and 512 KiB messages.
  allreduce ranks 0 and 1 allreduce 4 MiB in their own group while ranks 2 and 3 idle,
           compute (their matmul rate against one process alone) or allreduce 4 MiB in
           theirs: how much an allreduce on the loopback and compute slow each other.
  traffic  (root) two processes run the ops loop, without and then with a TCP stream across
           the 1 Gbit/s link of scripts/netns.sh (namespaces cpux-s0/s1, brought up and down
           here): what moving the link's packets costs the compute sharing the cores.

PyTorch with gloo (figures below: Debian's python3-torch 1.13); one thread per process. Figures of 2026-11-29 on this 2-core machine are in docs/two-server.md.
"""
import os
import statistics
import subprocess
import sys
import time

PORT = 29731


def spawn(args, ranks, pin=False):
    env = dict(os.environ, MKL_NUM_THREADS="1", OMP_NUM_THREADS="1", WORLD_SIZE=str(ranks))
    procs = []
    for r in range(ranks):
        cmd = [sys.executable, __file__] + args
        if pin:
            cmd = ["taskset", "-c", str(r % os.cpu_count())] + cmd
        procs.append(subprocess.Popen(cmd, env=dict(env, RANK=str(r))))
    if any(p.wait() for p in procs):
        sys.exit("cpu_sharing.py: a worker failed")


def worker_ops(label):
    import torch
    torch.set_num_threads(1)
    lin = torch.nn.Linear(1024, 1024)
    x = torch.randn(64, 1024, requires_grad=True)
    fwd, bwd = [], []
    end = time.time() + 3
    while time.time() < end:
        a = time.perf_counter()
        y = torch.relu(lin(x))
        b = time.perf_counter()
        y.backward(torch.ones_like(y))
        c = time.perf_counter()
        fwd.append(b - a)
        bwd.append(c - b)
    print(f"{label} rank {os.environ['RANK']}: F median {statistics.median(fwd) * 1e3:.2f} ms, "
          f"B median {statistics.median(bwd) * 1e3:.2f} ms, {len(fwd)} iterations in 3 s",
          flush=True)


def init():
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]),
                            init_method=f"tcp://127.0.0.1:{PORT}")
    return torch, dist


def worker_ring(weights):
    torch, dist = init()
    rank, ws = dist.get_rank(), dist.get_world_size()
    w = [torch.randn(1024, 1024) for _ in range(weights)]
    x, y = torch.randn(64, 1024), torch.empty(64, 1024)

    def chunk():
        for m in w:
            torch.mm(x, m, out=y)
    for _ in range(5):
        chunk()
    tok = torch.zeros(65536)
    dist.barrier()
    alone = []
    if rank == 0:
        for _ in range(30):
            a = time.perf_counter()
            chunk()
            alone.append(time.perf_counter() - a)
    dist.barrier()
    ring = []
    for it in range(30):
        if rank or it:
            dist.recv(tok, (rank - 1) % ws)
        a = time.perf_counter()
        chunk()
        ring.append(time.perf_counter() - a)
        if not (rank == ws - 1 and it == 29):
            dist.send(tok, (rank + 1) % ws)
    t = torch.tensor([statistics.median(ring)], dtype=torch.float64)
    dist.all_reduce(t)
    if rank == 0:
        a, r = statistics.median(alone), t.item() / ws
        print(f"ring, {weights} weight(s) of 4 MiB per process: chunk alone {a * 1e3:.2f} ms, "
              f"in the ring {r * 1e3:.2f} ms ({r / a:.2f}x, +{(r - a) * 1e3:.2f} ms)", flush=True)
    dist.destroy_process_group()


def compute_until_barrier(torch, dist, load):
    """Ranks 2 and up: run matmuls (when `load`) until ranks 0 and 1 reach the final barrier."""
    a = torch.randn(512, 512)
    work = dist.barrier(async_op=True)
    while load and not work.is_completed():
        a = (a @ a) * 1e-3
    work.wait()


def worker_pingpong(load, nbytes):
    torch, dist = init()
    rank = dist.get_rank()
    t = torch.zeros(max(1, nbytes // 4))
    dist.barrier()
    if rank < 2:
        one_way = []
        for _ in range(200):
            a = time.perf_counter()
            if rank == 0:
                dist.send(t, 1)
                dist.recv(t, 1)
            else:
                dist.recv(t, 0)
                dist.send(t, 0)
            one_way.append((time.perf_counter() - a) / 2)
        dist.barrier()
        if rank == 0:
            one_way.sort()
            print(f"ping-pong {nbytes} B, {'2 ranks computing' if load else 'idle'}: one-way "
                  f"min {one_way[0] * 1e3:.3f}, median {one_way[100] * 1e3:.3f}, "
                  f"p90 {one_way[180] * 1e3:.3f} ms", flush=True)
    else:
        compute_until_barrier(torch, dist, load)
    dist.destroy_process_group()


def worker_wake(load, nbytes):
    torch, dist = init()
    rank = dist.get_rank()
    t = torch.zeros(max(2, nbytes // 8), dtype=torch.float64)
    dist.barrier()
    if rank < 2:
        w = torch.randn(1024, 1024)
        x = torch.randn(64, 1024)
        delays = []
        for _ in range(150):
            if rank == 1:
                for _ in range(12):
                    x = (x @ w) * 1e-3
                t[0] = time.monotonic()
                dist.send(t, 0)
            else:
                dist.recv(t, 1)
                delays.append(time.monotonic() - t[0].item())
        dist.barrier()
        if rank == 0:
            delays = sorted(delays[10:])
            n = len(delays)
            print(f"wake {nbytes} B, {'2 ranks computing' if load else 'others idle'}: delivery "
                  f"mean {statistics.mean(delays) * 1e3:.3f}, median {delays[n // 2] * 1e3:.3f}, "
                  f"p90 {delays[9 * n // 10] * 1e3:.3f} ms", flush=True)
    else:
        compute_until_barrier(torch, dist, load)
    dist.destroy_process_group()


def worker_allreduce(other):
    """Ranks 0 and 1 allreduce 4 MiB in their own group, 40 times; ranks 2 and 3 meanwhile
    `other`: idle, compute (matmuls, counted) or allreduce 4 MiB in theirs."""
    torch, dist = init()
    rank = dist.get_rank()
    pair = [dist.new_group([0, 1]), dist.new_group([2, 3])][rank // 2]
    t = torch.ones(1 << 20)
    a = torch.randn(512, 512)
    for _ in range(3):
        dist.all_reduce(t, group=pair)
    dist.barrier()
    if rank < 2:
        times = []
        for _ in range(40):
            s = time.perf_counter()
            dist.all_reduce(t, group=pair)
            times.append(time.perf_counter() - s)
        done = dist.barrier(async_op=True)
    else:
        done = dist.barrier(async_op=True)
        n, s = 0, time.perf_counter()
        while not done.is_completed():
            if other == "compute":
                a = (a @ a) * 1e-3
            elif other == "allreduce":
                dist.all_reduce(t, group=pair)
            else:
                time.sleep(1e-3)
            n += 1
        rate = n / (time.perf_counter() - s)
    done.wait()
    if rank == 0:
        times = sorted(times[5:])
        print(f"allreduce 4 MiB over 2 ranks, ranks 2-3 {other}: mean "
              f"{statistics.mean(times) * 1e3:.2f}, median {times[len(times) // 2] * 1e3:.2f} ms",
              flush=True)
    if rank == 2 and other != "idle":
        print(f"  rank 2: {rate:.0f} {other} ops/s", flush=True)
    dist.destroy_process_group()


def worker_spin(seconds):
    """Rank 2's matmul rate alone, the reference for `allreduce compute`."""
    import torch
    torch.set_num_threads(1)
    a = torch.randn(512, 512)
    n, s = 0, time.perf_counter()
    while time.perf_counter() - s < seconds:
        a = (a @ a) * 1e-3
        n += 1
    print(f"  alone: {n / (time.perf_counter() - s):.0f} compute ops/s", flush=True)


def sink(port):
    import socket
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    conn, _ = srv.accept()
    while conn.recv(1 << 20):
        pass


def source(addr, port, seconds):
    import socket
    conn = socket.create_connection((addr, port))
    buf, n, end = b"x" * (1 << 20), 0, time.time() + seconds
    while time.time() < end:
        conn.sendall(buf)
        n += len(buf)
    conn.close()
    print(f"stream across the link: {n / seconds / 1e6:.1f} MB/s", flush=True)


def traffic():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    netns = [os.path.join(root, "scripts", "netns.sh"), "--prefix", "cpux", "--subnet",
             "10.77.0", "--rate", "1gbit"]
    subprocess.run(netns + ["up"], check=True, stdout=subprocess.DEVNULL)
    try:
        spawn(["ops", "two, no traffic"], 2)
        addr = subprocess.run(netns + ["addr", "s1"], check=True, capture_output=True,
                              text=True).stdout.strip()
        snk = subprocess.Popen(netns + ["exec", "s1", sys.executable, __file__, "sink", "29778"])
        time.sleep(0.5)
        src = subprocess.Popen(netns + ["exec", "s0", sys.executable, __file__, "source", addr,
                                        "29778", "5"])
        time.sleep(0.3)
        spawn(["ops", "two, 1 Gbit/s stream"], 2)
        src.wait()
        snk.wait()
    finally:
        subprocess.run(netns + ["down"], stdout=subprocess.DEVNULL)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "sink":
        return sink(int(sys.argv[2]))
    if len(sys.argv) > 1 and sys.argv[1] == "source":
        return source(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    if "RANK" in os.environ:  # a worker
        kind = sys.argv[1]
        if kind == "ops":
            worker_ops(sys.argv[2])
        elif kind == "ring":
            worker_ring(int(sys.argv[2]))
        elif kind == "allreduce":
            worker_allreduce(sys.argv[2])
        elif kind == "spin":
            worker_spin(float(sys.argv[2]))
        elif kind == "wake":
            worker_wake(sys.argv[2] == "1", int(sys.argv[3]))
        else:
            worker_pingpong(sys.argv[2] == "1", int(sys.argv[3]))
        return
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "ops":
        spawn(["ops", "alone"], 1)
        spawn(["ops", "two, pinned"], 2, pin=True)
        spawn(["ops", "four"], 4)
    elif what == "ring":
        for weights in (1, 2, 4):
            spawn(["ring", str(weights)], 4)
    elif what == "wake":
        for load in ("0", "1"):
            for nbytes in ("4", "524288"):
                spawn(["wake", load, nbytes], 4)
    elif what == "allreduce":
        spawn(["spin", "1"], 1)
        for other in ("idle", "compute", "allreduce"):
            spawn(["allreduce", other], 4)
    elif what == "traffic":
        traffic()
    elif what == "pingpong":
        for load in ("0", "1"):
            for nbytes in ("4", "262144"):
                spawn(["pingpong", load, nbytes], 4)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
