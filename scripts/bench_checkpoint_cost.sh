#!/usr/bin/env bash
# What checkpointing costs: the same `dapple train` run with a checkpoint every
# step, every 10 steps, and never, side by side in one call: each round runs every variant
# once, in turn, so that a drift of the machine's speed touches them all alike. Saving is
# asynchronous by default (Note [Asynchronous checkpoints]: a step stalls for the copy to
# memory, a background writer pickles, writes, reads back for the CRC-32, fsyncs and commits);
# the `sync` variants (--sync-checkpoints) stall for the whole save, for comparison.
#
# The step time is what a user waits for: the interval between consecutive step lines of rank
# 0's --log-json output, timestamped as they arrive (a save stalls the step after it), averaged
# over the steps after the first. Reported per variant: the median over the rounds of that mean,
# its ratio to `never` taken round by round (median), and the median wall time of the process.
#   scripts/bench_checkpoint_cost.sh [path/to/dapple] [rounds] [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
dapple=$(realpath "${1:-build/tools/dapple/dapple}")
rounds=${2:-3}
steps=${3:-30}
out=${OUT:-out/bench-checkpoint-cost}
rm -rf "$out" && mkdir -p "$out"
cat >"$out/plan.json" <<'JSON'
{"format": "dapple-plan/1", "planner": "hand", "global_batch_size": 128, "micro_batch_size": 32,
 "num_micro_batches": 4, "schedule": "dapple-a",
 "stages": [{"first_layer_id": "fc0", "last_layer_id": "fc1", "devices": [0]},
            {"first_layer_id": "fc2", "last_layer_id": "head", "devices": [1]}]}
JSON
# The MLP 784-1024x3-10 with Adam: 3.0 M parameters, 36 MB of state per checkpoint.
run="$dapple train --model mlp --opt input=784 --opt hidden=1024 --opt layers=3 --opt classes=10 \
--data synthetic --optimizer adam --plan $out/plan.json --steps $steps --nproc 2 --log-json"
echo "$steps steps of the MLP 784-1024x3-10 (Adam, 2 processes), $rounds rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
RUN="$run" OUTDIR="$out" ROUNDS="$rounds" python3 - <<'PY'
import os, shlex, shutil, statistics, subprocess, time

run, out, rounds = shlex.split(os.environ["RUN"]), os.environ["OUTDIR"], int(os.environ["ROUNDS"])
variants = [
    ("never", []),
    ("every step", ["--checkpoint-every", "1"]),
    ("every 10 steps", ["--checkpoint-every", "10"]),
    ("every step, sync", ["--checkpoint-every", "1", "--sync-checkpoints"]),
    ("every 10, sync", ["--checkpoint-every", "10", "--sync-checkpoints"]),
]

def once(extra, ckpt):
    shutil.rmtree(ckpt, ignore_errors=True)
    cmd = run + (["--checkpoint-dir", ckpt] + extra if extra else [])
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stamps = [time.monotonic() for line in p.stdout if line.startswith('{"loss"')
              or line.startswith('{"step"')]
    if p.wait() != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    wall = time.monotonic() - t0
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return 1000 * sum(gaps) / len(gaps), wall

results = {name: [] for name, _ in variants}
for r in range(rounds):
    for name, extra in variants:
        results[name].append(once(extra, os.path.join(out, "ckpt")))
never = [ms for ms, _ in results["never"]]
print(f"{'checkpoint':<18}{'step ms':>9}{'vs never':>10}{'wall s':>8}")
for name, _ in variants:
    ms = [m for m, _ in results[name]]
    ratio = statistics.median(a / b for a, b in zip(ms, never))
    wall = statistics.median(w for _, w in results[name])
    print(f"{name:<18}{statistics.median(ms):>9.1f}{ratio:>9.2f}x{wall:>8.2f}")
PY
du -sh "$out/ckpt/step-$steps" 2>/dev/null | sed 's/^/one checkpoint: /'
