#!/usr/bin/env bash
# The shape of the paper's Table 7 on this machine: under a fixed memory limit per process
# (a cgroup v1 memory group each), the largest BERT (encoder layers) that `dapple train`
# runs for 2 steps on 1, 2 and 4 processes (an even straight pipeline, one process per stage),
# without and with --recompute. Stage-local models make the largest trainable model grow with
# the number of stages. A benchmark, not a test. Needs root and the cgroup v1 memory
# controller (/sys/fs/cgroup/memory).
#
#   scripts/bench_largest_bert.sh [path/to/dapple] [limit MiB per process]
# Environment: PROCS (default "1 2 4": the rows), START (default 8: the first layer count
# tried; the search doubles it until a run fails, then bisects), TIMEOUT (default 30: each
# run's --timeout-s; raise it on a busy machine, where a slow peer would count as not fitting).
set -euo pipefail
cd "$(dirname "$0")/.."
dapple=$(realpath "${1:-build/tools/dapple/dapple}")
limit_mib=${2:-700}
cg=/sys/fs/cgroup/memory
[ -w "$cg" ] || { echo "bench_largest_bert: $cg is not writable (needs root and cgroup v1)" >&2; exit 2; }
out=${OUT:-out/largest-bert}
mkdir -p "$out"
hidden=${HIDDEN:-256}
opts=(--model bert --opt hidden="$hidden" --opt heads=4 --opt seq=128 --opt vocab=1000)
m=4

# plan P L: an even straight pipeline of the L+2 layers (embed, block0.., head) on P devices.
plan() {
  /usr/bin/python3 - "$1" "$2" "$m" <<'PY'
import json, sys
p, l, m = map(int, sys.argv[1:])
names = ["embed"] + [f"block{i}" for i in range(l)] + ["head"]
cuts = [round(i * len(names) / p) for i in range(p + 1)]
stages = [{"first_layer_id": names[cuts[s]], "last_layer_id": names[cuts[s + 1] - 1],
           "devices": [s]} for s in range(p)]
M = 2 * p
print(json.dumps({"format": "dapple-plan/1", "planner": "hand", "global_batch_size": m * M,
                  "micro_batch_size": m, "num_micro_batches": M, "schedule": "dapple-a",
                  "stages": stages}))
PY
}

# fits P L RECOMPUTE: 0 when every rank trains 2 steps inside its memory group.
fits() {
  local p=$1 l=$2 rc=$3 port=$((20000 + RANDOM % 20000)) pids=() ok=0
  plan "$p" "$l" >"$out/plan.json"
  for ((r = 0; r < p; r++)); do
    local g="$cg/dapple_bert_$$_$r"
    mkdir -p "$g"
    echo $((limit_mib * 1048576)) >"$g/memory.limit_in_bytes"
    (
      echo $BASHPID >"$g/cgroup.procs"
      RANK=$r LOCAL_RANK=$r WORLD_SIZE=$p MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 exec "$dapple" train "${opts[@]}" --opt layers="$l" \
        --plan "$out/plan.json" --steps 2 --optimizer adam --timeout-s "${TIMEOUT:-30}" --quiet \
        $([ "$rc" = 1 ] && echo --recompute) >"$out/rank$r.log" 2>&1
    ) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || ok=1; done
  for ((r = 0; r < p; r++)); do rmdir "$cg/dapple_bert_$$_$r" 2>/dev/null || true; done
  return $ok
}

largest() {  # P RECOMPUTE: binary search on the layer count
  local p=$1 rc=$2 lo=0 hi=${START:-8}
  while fits "$p" "$hi" "$rc"; do lo=$hi; hi=$((hi * 2)); done
  while ((hi - lo > 1)); do
    local mid=$(((lo + hi) / 2))
    if fits "$p" "$mid" "$rc"; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}

echo "BERT hidden $hidden, seq 128, micro-batch $m, 2P micro-batches; $limit_mib MiB per process"
echo "| processes | largest BERT (layers) | with --recompute |"
echo "|---:|---:|---:|"
for p in ${PROCS:-1 2 4}; do
  echo "| $p | $(largest "$p" 0) | $(largest "$p" 1) |"
done
