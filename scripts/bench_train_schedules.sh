#!/usr/bin/env bash
# dapple-a vs gpipe, side by side, on the same plan and M with the real runtime:
# throughput and peak live activation memory per stage, as ratios.
#   scripts/bench_train_schedules.sh [dapple-binary] [M] [steps]
# Environment: MODEL_FLAGS (default: a 6-layer MLP of width 512), NPROC (2), GBS_PER_MB (16).
#
# With ZB=1: zb-h1 vs dapple-a instead, on 2 and 3 processes (one stage each,
# the MLP's 7 layers cut 3+4 and 2+2+3), ROUNDS rounds (default 3) alternating the two
# schedules; prints per process count the median step time of each, the measured ratio
# dapple-a / zb-h1 and the simulator's predicted ratio from a profile measured here first
# (`dapple profile --threads 1`, this machine calibrated as 2 and as 3 devices, `dapple
# simulate --json`).
#
# With INTERLEAVED=1: interleaved 1F1B with v = 2 chunks vs dapple-a on 2
# processes, an 8-layer MLP (7 hidden layers) cut 4+4 for dapple-a and 2+2+2+2 into chunks
# (fc0-1 and fc4-5 on process 0, fc2-3 and fc6-head on process 1); the same rounds, medians
# and simulated ratio as ZB=1.
# With VSHAPE=1: the V shapes zb-v, v-half and v-min vs dapple-a on the same model and 2
# processes, the chunks in a V (fc0-1 and fc6-head on process 0, fc2-3 and fc4-5 on
# process 1); the same rounds, medians and simulated ratios.
set -euo pipefail
bin=${1:-build/tools/dapple/dapple}
if [[ ${INTERLEAVED:-0} == 1 || ${VSHAPE:-0} == 1 ]]; then
  if [[ ${VSHAPE:-0} == 1 ]]; then
    chunked="zb-v v-half v-min"
  else
    chunked="interleaved"
  fi
  M=${2:-8}
  steps=${3:-8}
  m=${GBS_PER_MB:-16}
  rounds=${ROUNDS:-3}
  model_opts="--opt input=784 --opt hidden=512 --opt layers=7"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # shellcheck disable=SC2086
  "$bin" profile --model mlp $model_opts --batch "$m" --threads 1 --repeat 7 \
    -o "$tmp/profile.json" 2>/dev/null
  stage() { echo "{\"first_layer_id\": \"$1\", \"last_layer_id\": \"$2\", \"devices\": [$3]}"; }
  cat >"$tmp/dapple-a.json" <<JSON
{"format": "dapple-plan/1", "micro_batch_size": $m, "num_micro_batches": $M,
 "schedule": "dapple-a", "stages": [$(stage fc0 fc3 0), $(stage fc4 head 1)]}
JSON
  for s in $chunked; do
    # Chunk 2 and 3 on processes 0 and 1 (interleaved) or 1 and 0 (in a V).
    c2=0 c3=1
    [[ $s == interleaved ]] || { c2=1 c3=0; }
    cat >"$tmp/$s.json" <<JSON
{"format": "dapple-plan/1", "micro_batch_size": $m, "num_micro_batches": $M,
 "schedule": "$s", "virtual_stages": 2,
 "stages": [$(stage fc0 fc1 0), $(stage fc2 fc3 1), $(stage fc4 fc5 $c2), $(stage fc6 head $c3)]}
JSON
  done
  for s in dapple-a $chunked; do
    "$bin" simulate --profile "$tmp/profile.json" --cluster local --plan "$tmp/$s.json" \
      --json >"$tmp/sim-$s.json"
  done
  for r in $(seq "$rounds"); do
    for s in dapple-a $chunked; do
      # shellcheck disable=SC2086
      "$bin" train --model mlp $model_opts --plan "$tmp/$s.json" --steps "$steps" \
        --nproc 2 --log-json --quiet --data synthetic >"$tmp/t-$s-$r.out"
    done
  done
  python3 - "$tmp" "$rounds" "$M" "$m" "$(cut -d' ' -f1-3 /proc/loadavg)" $chunked <<'PY'
import json, statistics, sys
tmp, rounds, M, m, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
chunked = sys.argv[6:]
def summary(path):
    for line in open(path):
        if line.startswith('{') and 'summary' in line:
            return json.loads(line)['summary']
print(f"M = {M} micro-batches of {m}, 2 processes, {rounds} rounds, load after: {load}")
ms, peaks = {}, {}
for s in ["dapple-a"] + chunked:
    runs = [summary(f"{tmp}/t-{s}-{r}.out") for r in range(1, rounds + 1)]
    ms[s] = statistics.median(x["step_ms"] for x in runs)
    peaks[s] = [st["peak_live_micro_batches"] for st in runs[0]["stages"]]
sim = {s: json.load(open(f"{tmp}/sim-{s}.json"))["iteration_ms"] for s in ms}
print(f"{'schedule':>12} {'measured ms':>12} {'simulated ms':>13} {'measured a/s':>13} "
      f"{'simulated a/s':>14}  peak live mb per group (chunk-micro-batches)")
for s in ["dapple-a"] + chunked:
    print(f"{s:>12} {ms[s]:12.2f} {sim[s]:13.2f} {ms['dapple-a'] / ms[s]:13.3f} "
          f"{sim['dapple-a'] / sim[s]:14.3f}  {peaks[s]}")
PY
  exit 0
fi
if [[ ${ZB:-0} == 1 ]]; then
  M=${2:-8}
  steps=${3:-8}
  m=${GBS_PER_MB:-16}
  rounds=${ROUNDS:-3}
  model_opts=${MODEL_OPTS:-"--opt input=784 --opt hidden=512 --opt layers=6"}
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # shellcheck disable=SC2086
  "$bin" profile --model mlp $model_opts --batch "$m" --threads 1 --repeat 7 \
    -o "$tmp/profile.json" 2>/dev/null
  zb_plan() {  # zb_plan <nproc> <schedule>
    local stages
    if [[ $1 == 2 ]]; then
      stages='{"first_layer_id": "fc0", "last_layer_id": "fc2", "devices": [0]},
              {"first_layer_id": "fc3", "last_layer_id": "head", "devices": [1]}'
    else
      stages='{"first_layer_id": "fc0", "last_layer_id": "fc1", "devices": [0]},
              {"first_layer_id": "fc2", "last_layer_id": "fc3", "devices": [1]},
              {"first_layer_id": "fc4", "last_layer_id": "head", "devices": [2]}'
    fi
    cat >"$tmp/p$1-$2.json" <<JSON
{"format": "dapple-plan/1", "micro_batch_size": $m, "num_micro_batches": $M, "schedule": "$2",
 "stages": [$stages]}
JSON
  }
  for n in 2 3; do
    # This machine as n devices, measured (the cached `local` has one per core): calibrated
    # into the temporary folder, so the user's cache stays as it is.
    DAPPLE_CACHE_DIR="$tmp/cache" "$bin" calibrate --nproc "$n" -o "$tmp/cluster$n.json" \
      >/dev/null
    for s in dapple-a zb-h1; do
      zb_plan "$n" "$s"
      "$bin" simulate --profile "$tmp/profile.json" --cluster "$tmp/cluster$n.json" \
        --plan "$tmp/p$n-$s.json" --json >"$tmp/sim$n-$s.json"
    done
    for r in $(seq "$rounds"); do
      for s in dapple-a zb-h1; do
        # shellcheck disable=SC2086
        "$bin" train --model mlp $model_opts --plan "$tmp/p$n-$s.json" --steps "$steps" \
          --nproc "$n" --log-json --quiet --data synthetic >"$tmp/t$n-$s-$r.out"
      done
    done
  done
  python3 - "$tmp" "$rounds" "$M" "$m" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, statistics, sys
tmp, rounds, M, m, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def summary(path):
    for line in open(path):
        if line.startswith('{') and 'summary' in line:
            return json.loads(line)['summary']
print(f"M = {M} micro-batches of {m}, {rounds} rounds, load after: {load}")
print(f"{'procs':>5} {'dapple-a ms':>12} {'zb-h1 ms':>9} {'measured a/zb':>14} "
      f"{'simulated a/zb':>15}  peak live mb per stage (dapple-a | zb-h1)")
for n in (2, 3):
    ms = {}
    peaks = {}
    for s in ("dapple-a", "zb-h1"):
        runs = [summary(f"{tmp}/t{n}-{s}-{r}.out") for r in range(1, rounds + 1)]
        ms[s] = statistics.median(x["step_ms"] for x in runs)
        peaks[s] = [st["peak_live_micro_batches"] for st in runs[0]["stages"]]
    sim = {s: json.load(open(f"{tmp}/sim{n}-{s}.json"))["iteration_ms"] for s in ms}
    print(f"{n:>5} {ms['dapple-a']:12.2f} {ms['zb-h1']:9.2f} {ms['dapple-a'] / ms['zb-h1']:14.3f} "
          f"{sim['dapple-a'] / sim['zb-h1']:15.3f}  {peaks['dapple-a']} | {peaks['zb-h1']}")
PY
  exit 0
fi
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
