#!/usr/bin/env bash
# Which OpenBLAS kernel (OPENBLAS_CORETYPE) computes fastest on this CPU, side by side:
# `dapple profile` of a model at several batch sizes under each core type, in interleaved
# rounds (so that the machine's noise falls on all alike), and `dapple train` of two 2-process
# plans (2 stages at micro-batch 16; data parallelism at 64 per replica). Prints the medians
# and each core type's ratio to the first one. Speeds are never asserted; this is the evidence
# for the default that the launcher and `dapple profile` pick (src/dapple/common/openblas_core.h).
#   scripts/bench_openblas_core.sh [dapple-binary] [rounds]
# Environment: CORETYPES (default "SkylakeX Haswell Zen"), MODEL_OPTS (an MLP 784-1024x4-10),
# BATCHES (1,16,64,256).
set -euo pipefail
bin=$(realpath "${1:-build/tools/dapple/dapple}")
rounds=${2:-3}
coretypes=${CORETYPES:-SkylakeX Haswell Zen}
model_opts=${MODEL_OPTS:---opt input=784 --opt hidden=1024 --opt layers=4 --opt classes=10}
batches=${BATCHES:-1,16,64,256}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/plan-pipe.json" <<'JSON'
{"format": "dapple-plan/1", "micro_batch_size": 16, "num_micro_batches": 8, "schedule": "dapple-a",
 "stages": [{"first_layer_id": "fc0", "last_layer_id": "fc1", "devices": [0]},
            {"first_layer_id": "fc2", "last_layer_id": "head", "devices": [1]}]}
JSON
cat >"$tmp/plan-dp.json" <<'JSON'
{"format": "dapple-plan/1", "micro_batch_size": 128, "num_micro_batches": 1, "schedule": "dapple-a",
 "stages": [{"first_layer_id": "fc0", "last_layer_id": "head", "devices": [0, 1]}]}
JSON

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) (2 cores; run on a quiet machine)" >&2
for r in $(seq "$rounds"); do
  for ct in $coretypes; do
    echo "round $r: $ct" >&2
    # shellcheck disable=SC2086
    OPENBLAS_CORETYPE=$ct "$bin" profile --model mlp $model_opts --batch 16 --batches "$batches" \
      --threads 1 --repeat 5 -o "$tmp/profile-$ct-$r.json" >/dev/null 2>"$tmp/profile.log" ||
      { cat "$tmp/profile.log" >&2; exit 1; }
    for p in pipe dp; do
      # shellcheck disable=SC2086
      OPENBLAS_CORETYPE=$ct "$bin" train --model mlp $model_opts --plan "$tmp/plan-$p.json" \
        --nproc 2 --steps 20 --data synthetic --log-json --quiet >"$tmp/train-$p-$ct-$r.jsonl"
    done
  done
done

# shellcheck disable=SC2086  # one argument per core type
python3 - "$tmp" "$rounds" $coretypes <<'PY'
import json, statistics, sys
tmp, rounds, cts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def profile(ct, r):
    p = json.load(open(f"{tmp}/profile-{ct}-{r}.json"))
    n = len(p["batch_sizes"])
    fwd = [sum(l["forward_ms_by_batch"][i] for l in p["layers"]) for i in range(n)]
    bwd = [sum(l["backward_ms_by_batch"][i] for l in p["layers"]) for i in range(n)]
    return p["batch_sizes"], fwd, bwd, p["metadata"].get("openblas_core", "?")
def step_ms(path):
    s = [json.loads(l).get("step_ms") for l in open(path) if l.startswith("{")]
    s = [x for x in s if x is not None][5:]  # the first 5 steps are warm-up
    return statistics.median(s)
rows = {}
for ct in cts:
    runs = [profile(ct, r) for r in range(1, rounds + 1)]
    bs, core = runs[0][0], runs[0][3]
    fwd = [statistics.median(run[1][i] for run in runs) for i in range(len(bs))]
    bwd = [statistics.median(run[2][i] for run in runs) for i in range(len(bs))]
    pipe = statistics.median(step_ms(f"{tmp}/train-pipe-{ct}-{r}.jsonl") for r in range(1, rounds + 1))
    dp = statistics.median(step_ms(f"{tmp}/train-dp-{ct}-{r}.jsonl") for r in range(1, rounds + 1))
    rows[ct] = (core, bs, fwd, bwd, pipe, dp)
ref = rows[cts[0]]
print(f"MLP, medians of {rounds} interleaved rounds; x: time under {cts[0]} / time under the row's "
      "core type (above 1: faster than " + cts[0] + ")\n")
head = " | ".join(f"F+B b={b} ms" for b in ref[1])
print(f"| OPENBLAS_CORETYPE | kernel | {head} | train 2 stages m=16 ms | train dp 2x64 ms |")
print("|---|---|" + "---:|" * (len(ref[1]) + 2))
for ct, (core, bs, fwd, bwd, pipe, dp) in rows.items():
    cells = " | ".join(f"{f + b:.2f} (x{(ref[2][i] + ref[3][i]) / (f + b):.2f})"
                       for i, (f, b) in enumerate(zip(fwd, bwd)))
    print(f"| {ct} | {core} | {cells} | {pipe:.1f} (x{ref[4] / pipe:.2f}) | {dp:.1f} (x{ref[5] / dp:.2f}) |")
PY
