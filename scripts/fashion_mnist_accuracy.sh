#!/usr/bin/env bash
# Fashion-MNIST: a pipelined + replicated run (2 stages, 2:1 replicas, dapple-a) against a
# single-process run with the same seed, global batch and steps; prints both test accuracies.
#   scripts/fashion_mnist_accuracy.sh [dapple-binary] [steps]
set -euo pipefail
bin=${1:-build/tools/dapple/dapple}
steps=${2:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="--model mlp --opt input=784 --opt hidden=256 --opt layers=2 --opt classes=10"
common="$model --data fashion-mnist --steps $steps --optimizer adam --lr 0.001 --seed 1 --quiet --log-json --eval"

cat >"$tmp/single.json" <<JSON
{"format": "dapple-plan/1", "micro_batch_size": 128, "num_micro_batches": 1, "schedule": "gpipe",
 "stages": [{"first_layer_id": "fc0", "last_layer_id": "head", "devices": [0]}]}
JSON
cat >"$tmp/pipe.json" <<JSON
{"format": "dapple-plan/1", "micro_batch_size": 32, "num_micro_batches": 4, "schedule": "dapple-a",
 "stages": [{"first_layer_id": "fc0", "last_layer_id": "fc0", "devices": [0, 1]},
            {"first_layer_id": "fc1", "last_layer_id": "head", "devices": [2]}]}
JSON
"$bin" train $common --plan "$tmp/single.json" --checkpoint-dir "$tmp/c1" >"$tmp/single.out"
"$bin" train $common --plan "$tmp/pipe.json" --nproc 3 --checkpoint-dir "$tmp/c2" >"$tmp/pipe.out"
python3 - "$tmp/single.out" "$tmp/pipe.out" <<'PY'
import json, sys
def get(path, key):
    for line in open(path):
        if line.startswith('{') and key in line:
            return json.loads(line)[key]
for name, path in (("single process", sys.argv[1]), ("2 stages 2:1, dapple-a", sys.argv[2])):
    e, s = get(path, "eval"), get(path, "summary")
    print(f"{name:24} test accuracy {e['accuracy']:.4f}  test loss {e['loss']:.4f}  "
          f"final train loss {s['final_loss']:.4f}  {s['samples_per_s']:.0f} samples/s")
PY
