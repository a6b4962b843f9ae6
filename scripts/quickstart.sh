#!/usr/bin/env bash
# The main job: sets everything up, then profiles a small real model on this machine, plans it
# on the `local` cluster (one device per core), simulates the plan and trains it for real with
# one process per device on Fashion-MNIST. Outputs land in out/ (open the traces in
# https://ui.perfetto.dev). Usage: scripts/quickstart.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
scripts/install-deps.sh
scripts/build.sh
dapple=build/tools/dapple/dapple
mkdir -p out

model=(--model mlp --opt hidden=256 --opt layers=4)
gbs=64

echo "== 1/4 profile: ${model[*]} at batch 32 (and 8, 16, 64 for the cost model)"
"$dapple" profile "${model[@]}" --batch 32 --batches 8,16,32,64 --warmup 3 --repeat 10 --threads 1 \
  -o out/mlp-profile.json

echo "== 2/4 plan: global batch $gbs on this machine (cluster 'local')"
"$dapple" plan --profile out/mlp-profile.json --cluster local --global-batch "$gbs" \
  -o out/mlp-plan.json

echo "== 3/4 simulate the plan"
"$dapple" simulate --profile out/mlp-profile.json --cluster local --plan out/mlp-plan.json \
  --trace out/simulated-trace.json --svg out/simulated.svg

nproc_plan=$(/usr/bin/python3 -c 'import json,sys; p=json.load(open("out/mlp-plan.json")); print(sum(len(s["devices"]) for s in p["stages"]))')
echo "== 4/4 train for $steps steps on Fashion-MNIST with $nproc_plan processes"
"$dapple" train "${model[@]}" --plan out/mlp-plan.json --data fashion-mnist --steps "$steps" \
  --nproc "$nproc_plan" --optimizer adam --lr 0.001 --checkpoint-dir out/checkpoints --eval \
  --trace out/measured-trace.json

echo "done: out/mlp-profile.json out/mlp-plan.json out/simulated-trace.json out/measured-trace.json"
