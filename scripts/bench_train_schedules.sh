#!/usr/bin/env bash
# dapple-a vs gpipe, side by side, on the same plan and M with the real runtime (issue 5):
# throughput and peak live activation memory per stage, as ratios.
#   scripts/bench_train_schedules.sh [dapple-binary] [M] [steps]
# Environment: MODEL_FLAGS (default: a 6-layer MLP of width 512), NPROC (2), GBS_PER_MB (16).
set -euo pipefail
bin=${1:-build/tools/dapple/dapple}
M=${2:-8}
steps=${3:-6}
m=${GBS_PER_MB:-16}
model_flags=${MODEL_FLAGS:---model mlp --opt input=784 --opt hidden=512 --opt layers=6}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

plan() {  # plan <schedule>: 2 stages x 1 replica, fc0..fc2 | fc3..head
  cat >"$tmp/$1.json" <<JSON
{"format": "dapple-plan/1", "micro_batch_size": $m, "num_micro_batches": $M, "schedule": "$1",
 "stages": [{"first_layer_id": "fc0", "last_layer_id": "fc2", "devices": [0]},
            {"first_layer_id": "fc3", "last_layer_id": "head", "devices": [1]}]}
JSON
}

for s in gpipe dapple-a; do
  plan "$s"
  "$bin" train $model_flags --plan "$tmp/$s.json" --steps "$steps" --nproc 2 --log-json \
    --data synthetic >"$tmp/$s.out"
done

python3 - "$tmp/gpipe.out" "$tmp/dapple-a.out" "$M" <<'PY'
import json, sys
def summary(path):
    for line in open(path):
        if line.startswith('{') and 'summary' in line:
            return json.loads(line)['summary']
g, d, M = summary(sys.argv[1]), summary(sys.argv[2]), sys.argv[3]
print(f"M = {M}, 2 stages")
print(f"{'schedule':10} {'samples/s':>10} {'ms/step':>9} {'bubble':>7}  peak live activations per stage")
for name, s in (("gpipe", g), ("dapple-a", d)):
    peaks = ", ".join(f"{st['peak_live_micro_batches']} mb / {st['peak_live_activation_bytes']/2**20:.2f} MiB"
                      for st in s['stages'])
    print(f"{name:10} {s['samples_per_s']:10.1f} {s['step_ms']:9.2f} {s['bubble_fraction']:7.3f}  {peaks}")
print(f"throughput dapple-a / gpipe: {d['samples_per_s'] / g['samples_per_s']:.3f}")
for i, (a, b) in enumerate(zip(d['stages'], g['stages'])):
    print(f"stage {i} peak activation memory dapple-a / gpipe: "
          f"{a['peak_live_activation_bytes'] / b['peak_live_activation_bytes']:.3f}")
PY
