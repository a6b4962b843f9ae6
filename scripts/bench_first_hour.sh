#!/usr/bin/env bash
# The first hour's check: the quickstart's and the GPT walkthrough's simulated against measured step
# times, with the defaults a new user gets (no extra flags), on this machine. Prints the load
# average before and after each run (other processes on the cores change the measured side
# only) and the `predicted vs measured` line of each `dapple train`. Needs a built build/ (the
# quickstart's own install and build steps are left out). Outputs in out/first-hour/.
# Usage: scripts/bench_first_hour.sh [quickstart steps (300)] [gpt steps (100)]
set -euo pipefail
cd "$(dirname "$0")/.."
qs_steps=${1:-300}
gpt_steps=${2:-100}
dapple=${DAPPLE:-build/tools/dapple/dapple}
out=out/first-hour
mkdir -p "$out"
load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }
# The same Python loop pinned to each core in turn: a virtual machine's cores need not run
# alike (Note [Devices as cores] in src/dapple/common/core_sets.h).
cores() {
  local line="core speeds (s for one loop):"
  for c in $(seq 0 $(( $(nproc) - 1 ))); do
    line+=" cpu$c $(taskset -c "$c" .venv/bin/python -c 'import time
t = time.perf_counter(); s = 0
for i in range(3000000): s += i * i
print(f"{time.perf_counter() - t:.2f}")')"
  done
  echo "$line"
}

echo "== calibrate (reused while this machine's cache is current)"
"$dapple" calibrate | tail -n 1

# The quickstart's model and batch (scripts/quickstart.sh), then the smaller MLP it trained
# before (hidden 256, global batch 64: ~3 ms steps, where the fixed costs show).
for shape in "1024 256" "256 64"; do
  read -r hidden gbs <<<"$shape"
  echo "== quickstart: mlp hidden=$hidden layers=4, global batch $gbs, Fashion-MNIST, $qs_steps steps"
  mlp=(--model mlp --opt hidden="$hidden" --opt layers=4)
  "$dapple" profile "${mlp[@]}" --batch 32 --optimizer adam -o "$out/mlp-$hidden-profile.json" >/dev/null
  "$dapple" plan --profile "$out/mlp-$hidden-profile.json" --cluster local --global-batch "$gbs" \
    --no-baselines -o "$out/mlp-$hidden-plan.json" >/dev/null
  n=$(( $(nproc) > 2 ? $(nproc) : 2 ))  # the devices of `local`, as the quickstart trains
  cores
  load
  "$dapple" train "${mlp[@]}" --plan "$out/mlp-$hidden-plan.json" --data fashion-mnist \
    --steps "$qs_steps" --nproc "$n" --optimizer adam --lr 0.001 --quiet |
    grep -E "^(done|predicted)"
  load
done

echo "== GPT walkthrough: profile --batch 8, plan --global-batch 32, train --nproc 2 --data kjv"
cores
"$dapple" profile --model gpt --batch 8 -o "$out/gpt-profile.json" >/dev/null
"$dapple" plan --profile "$out/gpt-profile.json" --cluster local --global-batch 32 \
  -o "$out/gpt-plan.json" >/dev/null
load
"$dapple" train --model gpt --plan "$out/gpt-plan.json" --nproc 2 --data kjv --steps "$gpt_steps" \
  --quiet | grep -E "^(done|predicted)"
load
