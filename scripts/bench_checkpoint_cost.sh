#!/usr/bin/env bash
# What checkpointing costs (issue 17): the same `dapple train` run with a checkpoint every K
# steps (A) against none (B), side by side with farm-bench (whole commands in turn, the ratio
# taken pair by pair). Saving is synchronous (docs/runtime.md, Checkpoints): every save pickles,
# writes, reads back for the CRC-32, and fsyncs each layer file, then commits.
#   scripts/bench_checkpoint_cost.sh [path/to/dapple] [runs] [steps] [K]
set -euo pipefail
cd "$(dirname "$0")/.."
dapple=$(realpath "${1:-build/tools/dapple/dapple}")
runs=${2:-5}
steps=${3:-40}
every=${4:-5}
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
--data synthetic --optimizer adam --plan $out/plan.json --steps $steps --nproc 2 --quiet"
echo "checkpoint every $every of $steps steps (A) vs none (B), $runs pairs"
farm-bench -n "$runs" --timeout 1800 \
  --vs "sh -c 'exec $run >>$out/none.txt 2>&1'" -- \
  sh -c "rm -rf $out/ckpt; exec $run --checkpoint-dir $out/ckpt --checkpoint-every $every >>$out/every.txt 2>&1"
du -sh "$out/ckpt" 2>/dev/null | sed 's/^/the last run'"'"'s checkpoints: /'
