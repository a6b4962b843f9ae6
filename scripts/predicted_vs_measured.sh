#!/usr/bin/env bash
# Predicted vs measured on this machine: profiles a model here, plans and simulates a few
# plans on the local cluster (or the calibrated one), trains each for real with
# `dapple train`, and writes docs/predicted-vs-measured.md (simulated and measured
# iteration time and bubble fraction per plan, and whether the rankings agree).
# Usage: scripts/predicted_vs_measured.sh [path/to/dapple] [doc.md]
#   (defaults: build/tools/dapple/dapple, docs/predicted-vs-measured.md)
# Environment: MODEL_OPTS (default "--opt input=784 --opt hidden=1024 --opt layers=4
# --opt classes=10"), GBS (128), STEPS (20), WARMUP (5 steps left out of the median),
# CACHES (cold: profile and calibrate with --cold-caches, Note [Cold caches] in profiler.cc;
# warm: without).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dapple=$(realpath "${1:-$root/build/tools/dapple/dapple}")
doc=${2:-$root/docs/predicted-vs-measured.md}
model_opts=${MODEL_OPTS:-"--opt input=784 --opt hidden=1024 --opt layers=4 --opt classes=10"}
gbs=${GBS:-128}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
caches=${CACHES:-cold}
case $caches in
  cold) cold_flag=--cold-caches ;;
  warm) cold_flag= ;;
  *) echo "CACHES must be cold or warm, got '$caches'" >&2; exit 2 ;;
esac
out=$root/out/predicted-vs-measured
mkdir -p "$out"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# (a) Profile, one thread per process as in training on 2 devices of 2 cores; several
# batch sizes so that small micro-batches are modelled from measurements.
echo "profiling mlp $model_opts ..." >&2
# shellcheck disable=SC2086
"$dapple" profile --model mlp $model_opts --batch 32 --batches 1,2,4,8,16,32,64,128 \
  --threads 1 --repeat 7 $cold_flag -o "$out/profile.json" >&2

# The cluster: calibrated when `dapple calibrate` works here, else the `local` preset.
cluster=local
cluster_note="the \`local\` preset (link figures are constants)"
# shellcheck disable=SC2086
if "$dapple" calibrate --nproc 2 $cold_flag -o "$out/local.json" >"$out/calibrate.log" 2>&1; then
  cluster=$out/local.json
  cluster_note="\`dapple calibrate --nproc 2${cold_flag:+ $cold_flag} -o out/local.json\` (measured here just before)"
else
  echo "calibrate failed (see $out/calibrate.log); using the local preset" >&2
fi

# (b) Plans: pure data parallel on 2 devices, a 2-stage straight pipeline (the planner's
# micro-batch size, and m = 16 for a deeper pipeline), and the planner's choice.
plans=(dp straight straight-m16 dapple)
plan_args() {
  case "$1" in
    straight-m16) echo "--planner straight --micro-batch 16" ;;
    *) echo "--planner $1" ;;
  esac
}
for p in "${plans[@]}"; do
  # shellcheck disable=SC2046
  "$dapple" plan --profile "$out/profile.json" --cluster "$cluster" --global-batch "$gbs" \
    $(plan_args "$p") --no-baselines -o "$out/plan-$p.json" >"$out/plan-$p.txt"
  "$dapple" simulate --profile "$out/profile.json" --cluster "$cluster" \
    --plan "$out/plan-$p.json" --json >"$out/sim-$p.json"
  nproc=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print(len({d for s in p["stages"] for d in s["devices"]}))' "$out/plan-$p.json")
  echo "training plan $p on $nproc processes ..." >&2
  # shellcheck disable=SC2086
  "$dapple" train --model mlp $model_opts --plan "$out/plan-$p.json" --nproc "$nproc" \
    --steps "$steps" --data synthetic --log-json --quiet >"$out/train-$p.jsonl"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# (c) The document.
COLD_FLAG=$cold_flag python3 - "$out" "$doc" "$gbs" "$steps" "$warmup" "$model_opts" "$cluster_note" \
  "$load_before" "$load_after" "${plans[@]}" <<'PY'
import datetime, json, os, statistics, sys
out, doc, gbs, steps, warmup, model_opts, cluster_note, lb, la = sys.argv[1:10]
cold_flag = os.environ.get("COLD_FLAG", "")
plans = sys.argv[10:]
warmup = int(warmup)
rows = []
for p in plans:
    plan = json.load(open(f"{out}/plan-{p}.json"))
    sim = json.load(open(f"{out}/sim-{p}.json"))
    lines = [json.loads(l) for l in open(f"{out}/train-{p}.jsonl") if l.startswith("{")]
    step_ms = [l["step_ms"] for l in lines if "step_ms" in l and "step" in l]
    summary = next(l["summary"] for l in lines if "summary" in l)
    measured = statistics.median(step_ms[warmup:] if len(step_ms) > warmup else step_ms)
    shape = " + ".join(f"{s['first_layer_id']}..{s['last_layer_id']} x{len(s['devices'])}"
                       for s in plan["stages"])
    rows.append(dict(name=p, shape=shape, m=plan["micro_batch_size"], M=plan["num_micro_batches"],
                     sched=plan["schedule"], overlap=plan.get("allreduce_overlap", True),
                     sim=sim["iteration_ms"], meas=measured, sim_bubble=sim["bubble_fraction"],
                     meas_bubble=summary["bubble_fraction"], n=len(step_ms)))
# A plan identical to an earlier one (the planner often picks data parallelism) is
# reported but left out of the ranking.
def key(r):
    return (r["shape"], r["m"], r["M"], r["sched"], r["overlap"])
for i, r in enumerate(rows):
    r["same_as"] = next((q["name"] for q in rows[:i] if key(q) == key(r)), None)
distinct = [r for r in rows if r["same_as"] is None]
rank = lambda k: [r["name"] for r in sorted(distinct, key=lambda r: r[k])]
sim_rank, meas_rank = rank("sim"), rank("meas")
with open(doc + ".tmp", "w") as f:
    f.write("# Predicted vs measured on this machine\n\n")
    f.write("Generated by `scripts/predicted_vs_measured.sh` on "
            f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC. Do not edit by hand; rerun it.\n\n")
    f.write(f"- Model: `mlp {model_opts}`, float32, synthetic data, global batch {gbs}.\n")
    f.write("- Profile: `dapple profile --batch 32 --batches 1,2,4,8,16,32,64,128 --threads 1"
            f"{' ' + cold_flag if cold_flag else ''}` (one thread, as each of the 2 training "
            "processes gets one core"
            + ("; cold caches: every timed op follows a 64 MiB write, as in training where the "
               "other process evicts the weights" if cold_flag else "") + ").\n")
    f.write(f"- Cluster: {cluster_note}.\n")
    f.write(f"- Measured: `dapple train --steps {steps} --log-json`, median step time of steps "
            f"{warmup + 1}..{steps} (the first {warmup} are warm-up); the measured bubble is "
            "the trainer's mean over ranks and steps after the first of 1 - (F+B time) / step time.\n")
    f.write(f"- Load average (1, 5, 15 min) before: {lb}; after: {la}. The machine has "
            "2 cores shared with other engineers' builds and tests, so the measured times "
            "include interference.\n\n")
    f.write("| plan | stages (layers x replicas) | m x M | schedule | overlap | simulated ms | "
            "measured ms | error % | simulated bubble | measured bubble |\n")
    f.write("|---|---|---:|---|---|---:|---:|---:|---:|---:|\n")
    for r in rows:
        err = 100 * (r["sim"] - r["meas"]) / r["meas"]
        name = r["name"] + (f" (= {r['same_as']})" if r["same_as"] else "")
        f.write(f"| {name} | {r['shape']} | {r['m']} x {r['M']} | {r['sched']} | "
                f"{'yes' if r['overlap'] else 'no'} | {r['sim']:.1f} | {r['meas']:.1f} | "
                f"{err:+.0f} | {r['sim_bubble']:.3f} | {r['meas_bubble']:.3f} |\n")
    f.write("\nError % = (simulated - measured) / measured.\n\n")
    f.write("Identical plans are measured again (a feel for the run-to-run noise) but "
            "ranked once.\n\n")
    f.write(f"Ranking, fastest first: simulated {' < '.join(sim_rank)}; measured "
            f"{' < '.join(meas_rank)}: the simulator's ranking "
            f"{'matches' if sim_rank == meas_rank else 'does NOT match'} the measured one.\n")
import os
os.replace(doc + ".tmp", doc)
print(open(doc).read())
PY
