#!/usr/bin/env bash
# The main job: sets everything up, then measures this machine once (`dapple calibrate`, reused
# while the machine stays the same), profiles a small real model as each training process will
# run it, plans it on the measured `local` cluster, simulates the plan and trains it for real
# with one process per device on Fashion-MNIST. The last line puts the simulated step time and
# bubble next to the measured ones. Outputs land in out/ (open the traces in
# https://ui.perfetto.dev). Usage: scripts/quickstart.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
scripts/install-deps.sh
scripts/build.sh
dapple=build/tools/dapple/dapple
mkdir -p out

# Note: a step of this size (~50 ms here) is mostly compute, as a pipeline's steps are on real
# devices; with hidden=256 and a global batch of 64 a step takes ~3 ms on 2 shared cores,
# and fixed costs the profile cannot see (a process waking from a sleep, the time slices of
# two processes on two cores) make it measure 1.5-2x the simulation (docs/journal/2026-12-02-first-hour.md).
model=(--model mlp --opt hidden=1024 --opt layers=4)
gbs=256

echo "== 1/5 calibrate this machine (once; out/calibrate.log)"
"$dapple" calibrate >out/calibrate.log 2>&1 || { cat out/calibrate.log; exit 1; }
tail -n 1 out/calibrate.log

echo "== 2/5 profile ${model[*]} as each training process runs it"
"$dapple" profile "${model[@]}" --batch 32 --optimizer adam --data fashion-mnist -o out/mlp-profile.json

echo "== 3/5 plan: global batch $gbs on this machine (cluster 'local')"
"$dapple" plan --profile out/mlp-profile.json --cluster local --global-batch "$gbs" \
  --no-baselines -o out/mlp-plan.json

echo "== 4/5 simulate the plan (out/simulated-trace.json, out/simulated.svg)"
"$dapple" simulate --profile out/mlp-profile.json --cluster local --plan out/mlp-plan.json \
  --trace out/simulated-trace.json --svg out/simulated.svg | tail -n 3

# One process per device of `local` (as calibrated: one per core, at least 2), so that each
# gets the threads the profile timed with; ranks the plan leaves out wait idle.
nproc_local=$(( $(nproc) > 2 ? $(nproc) : 2 ))
echo "== 5/5 train for $steps steps on Fashion-MNIST with $nproc_local processes (out/measured-trace.json)"
"$dapple" train "${model[@]}" --plan out/mlp-plan.json --data fashion-mnist --steps "$steps" \
  --nproc "$nproc_local" --optimizer adam --lr 0.001 --eval --trace out/measured-trace.json
