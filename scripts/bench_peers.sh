#!/usr/bin/env bash
# dapple train vs PyTorch 2.11's own (the .venv's torch) on the same MLP and batch, side by side
# in one run and interleaved (A, B, A, B ...) to share the machine's noise (docs/benchmarks.md):
#   dp:     dapple 1 stage x 2 replicas vs torch DistributedDataParallel (gloo, 2 procs)
#   pp:     dapple 2 stages x 1, gpipe  vs torch.distributed.pipelining ScheduleGPipe (2 procs)
#           dapple 2 stages x 1, dapple-a (1F1B) vs Schedule1F1B (2 procs)
#   single: dapple 1 device             vs plain torch, one process
# ScheduleZBVZeroBubble is not run: over gloo its first exchange fails (bench/peers/pipelining_mlp.py).
#   scripts/bench_peers.sh [dapple-binary] [rounds]
# Environment: HIDDEN (512), LAYERS (6), MB (32 rows per micro-batch), M (4), STEPS (20),
# WARMUP (2 steps not timed).
# Every process gets 1 thread (OMP/MKL_NUM_THREADS=1, torch.set_num_threads(1)) so two
# processes fit the 2 cores.
set -euo pipefail
bin=${1:-build/tools/dapple/dapple}
rounds=${2:-3}
hidden=${HIDDEN:-512} layers=${LAYERS:-6} mb=${MB:-32} M=${M:-4}
steps=${STEPS:-20} warmup=${WARMUP:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
py=.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

split=$(((layers + 1) / 2))  # Dense layers in stage 0: fc0..fc{split-1} | fc{split}..head
plan() {  # plan <name> <schedule> <stages json>
  cat >"$tmp/$1.json" <<JSON
{"format": "dapple-plan/1", "micro_batch_size": $mb, "num_micro_batches": $M, "schedule": "$2",
 "stages": $3}
JSON
}
plan dp gpipe '[{"first_layer_id": "fc0", "last_layer_id": "head", "devices": [0, 1]}]'
plan single gpipe '[{"first_layer_id": "fc0", "last_layer_id": "head", "devices": [0]}]'
two='[{"first_layer_id": "fc0", "last_layer_id": "fc'$((split - 1))'", "devices": [0]},
      {"first_layer_id": "fc'$split'", "last_layer_id": "head", "devices": [1]}]'
plan pp-gpipe gpipe "$two"
plan pp-dapple-a dapple-a "$two"

common=(--hidden "$hidden" --layers "$layers" --micro-batch "$mb" --micro-batches "$M"
        --steps "$steps" --warmup "$warmup")
dapple() {  # dapple <name> <nproc>: one JSON line {"name", "round", "step_ms" ...} from the log
  "$bin" train --model mlp --opt hidden="$hidden" --opt layers="$layers" --plan "$tmp/$1.json" \
    --steps "$steps" --nproc "$2" --data synthetic --optimizer sgd --lr 0.01 --momentum 0.9 \
    --log-json >"$tmp/out"
  echo "{\"name\": \"dapple-$1\", \"round\": $r, \"log\": $(grep '"step"' "$tmp/out" |
    $py -c 'import json,sys; print(json.dumps([json.loads(l) for l in sys.stdin]))')}"
}
peer() {  # peer <name> <script> [args]: the peer's JSON line, tagged
  local name=$1 script=$2; shift 2
  echo "{\"name\": \"$name\", \"round\": $r, \"peer\": $($py "$here/bench/peers/$script" \
    "${common[@]}" "$@" 2>/dev/null | tail -1)}"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 0; r < rounds; r++)); do
  dapple dp 2 >>"$tmp/results"
  peer torch-ddp ddp_mlp.py --threads 1 --nproc 2 >>"$tmp/results"
  dapple pp-gpipe 2 >>"$tmp/results"
  peer torch-pipelining-gpipe pipelining_mlp.py --threads 1 --schedule gpipe --split "$split" \
    >>"$tmp/results"
  dapple pp-dapple-a 2 >>"$tmp/results"
  peer torch-pipelining-1f1b pipelining_mlp.py --threads 1 --schedule 1f1b --split "$split" \
    >>"$tmp/results"
  dapple single 1 >>"$tmp/results"
  peer torch-single single_mlp.py --threads 1 >>"$tmp/results"
  echo "round $((r + 1))/$rounds done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

$py - "$tmp/results" "$warmup" "$mb" "$M" "$hidden" "$layers" <<'PY'
import collections, json, statistics, sys
path, warmup, mb, M, hidden, layers = sys.argv[1], *map(int, sys.argv[2:])
gbs = mb * M
runs = collections.defaultdict(dict)  # name -> round -> samples/s (median step over timed steps)
for line in open(path):
    j = json.loads(line)
    if "log" in j:
        ms = statistics.median(s["step_ms"] for s in j["log"] if s["step"] >= warmup)
    else:
        ms = j["peer"]["step_ms"]
    runs[j["name"]][j["round"]] = gbs * 1000.0 / ms
med = {n: statistics.median(v.values()) for n, v in runs.items()}
print(f"mlp hidden={hidden} layers={layers}, global batch {gbs} = {M} x {mb}; "
      f"samples/s, median over rounds of the median timed step")
print(f"{'run':22} {'samples/s':>10} {'ms/step':>9}  per round")
for n, v in runs.items():
    rounds = " ".join(f"{x:.0f}" for x in v.values())
    print(f"{n:22} {med[n]:10.1f} {gbs * 1000 / med[n]:9.2f}  {rounds}")
def ratio(a, b):  # median over rounds of the per-round ratio (the pair ran back to back)
    if a not in runs or b not in runs:
        return
    r = [runs[a][k] / runs[b][k] for k in runs[a] if k in runs[b]]
    print(f"throughput {a} / {b}: {statistics.median(r):.3f} "
          f"(rounds: {', '.join(f'{x:.2f}' for x in r)})")
ratio("dapple-dp", "torch-ddp")
ratio("dapple-pp-gpipe", "torch-pipelining-gpipe")
ratio("dapple-pp-dapple-a", "torch-pipelining-1f1b")
ratio("dapple-single", "torch-single")
PY
