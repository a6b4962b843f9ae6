#!/usr/bin/env bash
# Stage-local models (docs/runtime.md "Each process holds only its stage"): a GPT whose
# parameters and Adam state do not fit one device of the cluster is planned on 4 devices and
# trained for a few steps with 4 processes; per stage, what each rank holds (parameters,
# optimizer state), its peak resident memory, and the planner's per-device estimate, next to
# the whole model's training state. A benchmark, not a test: the figures depend on the machine.
#
#   scripts/bench_stage_memory.sh [path/to/dapple] [hidden] [layers]
set -euo pipefail
cd "$(dirname "$0")/.."
dapple=${1:-build/tools/dapple/dapple}
hidden=${2:-512}
layers=${3:-8}
out=${OUT:-out/stage-memory}
mkdir -p "$out"
model=(--model gpt --opt hidden="$hidden" --opt heads=8 --opt layers="$layers" --opt seq=64 --opt vocab=128)

"$dapple" profile "${model[@]}" --batch 4 --batches 1,2,4 --threads 1 --optimizer adam \
  --warmup 1 --repeat 2 -o "$out/profile.json" >/dev/null 2>&1
params=$(.venv/bin/python -c "import json; p=json.load(open('$out/profile.json')); print(sum(l.get('parameter_bytes',0) for l in p['layers']))")
# The training process's own memory on this machine (Note [Process memory]), as `dapple
# calibrate` measures it (into out/, so that the cached `local` stays as it is).
DAPPLE_CACHE_DIR="$out/cache" "$dapple" calibrate --nproc 2 -o "$out/calibrated.json" \
  >"$out/calibrate.log" 2>&1 || { cat "$out/calibrate.log"; exit 1; }
process=$(.venv/bin/python -c "import json,sys; print(int(json.load(open(sys.argv[1]))['device'].get('process_memory_bytes', 0)))" \
  "$out/calibrated.json")
# Devices that hold about 45% of the model's parameters + gradients + Adam state (4 copies)
# beside the process's own: no device can hold the whole model, so the planner must cut it.
memory=$(.venv/bin/python -c "print(int(float($params) * 4 * 0.45) + 16 * 2**20 + $process)")
cat >"$out/cluster.json" <<JSON
{"format": "dapple-cluster/1", "name": "four-small", "servers": [{"devices": 4}],
 "device": {"memory_bytes": $memory, "speed": 1.0, "process_memory_bytes": $process},
 "intra_server": {"bandwidth_bytes_per_s": 2e9, "latency_s": 2e-5}}
JSON
"$dapple" plan --profile "$out/profile.json" --cluster "$out/cluster.json" --global-batch 16 \
  --no-baselines --schedule dapple-a -o "$out/plan.json" >/dev/null
devices=$(.venv/bin/python -c "import json; p=json.load(open('$out/plan.json')); print(sum(len(s['devices']) for s in p['stages']))")
"$dapple" train "${model[@]}" --plan "$out/plan.json" --steps 3 --nproc "$devices" \
  --optimizer adam --lr 0.001 --data kjv --log-json >"$out/train.jsonl"
.venv/bin/python - "$out" "$params" "$memory" <<'PY'
import json, sys
out, params, memory = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
plan = json.load(open(f"{out}/plan.json"))
summary = [json.loads(l)["summary"] for l in open(f"{out}/train.jsonl") if l.startswith('{"summary"')][0]
mib = lambda b: b / 2**20
print(f"whole model: parameters {mib(params):.1f} MiB, with gradients and Adam state {mib(4 * params):.1f} MiB; "
      f"device memory {mib(memory):.1f} MiB")
print("| stage | layers | replicas | parameters MiB | Adam state MiB | planned stage MiB | planned process MiB | peak resident MiB | peak resident / planned | above the start MiB | above start / planned stage |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s, st in enumerate(summary["stages"]):
    p = plan["stages"][s]
    stage, process = st['planned_peak_memory_bytes'], st.get('planned_process_memory_bytes', 0)
    print(f"| {s} | {p['first_layer_id']}..{p['last_layer_id']} | {st['replicas']} | "
          f"{mib(st['parameter_bytes']):.1f} | {mib(st['optimizer_state_bytes']):.1f} | "
          f"{mib(stage):.1f} | {mib(process):.1f} | {mib(st['peak_resident_bytes']):.1f} | "
          f"{st['peak_resident_bytes'] / (stage + process):.2f} | "
          f"{mib(st['peak_resident_above_start_bytes']):.1f} | "
          f"{st['peak_resident_above_start_bytes'] / stage:.2f} |")
PY
