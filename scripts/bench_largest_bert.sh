#!/usr/bin/env bash
# The shape of the paper's Table 7 on this machine: under a fixed memory limit per process
# (a cgroup v1 memory group each), the largest BERT (encoder layers) that `dapple train`
# runs for 2 steps with Adam, per row of plan and options, without and with --recompute.
# A benchmark, not a test. Needs root and the cgroup v1 memory controller
# (/sys/fs/cgroup/memory).
#
#   scripts/bench_largest_bert.sh [path/to/dapple] [limit MiB per process]
#
# A row is SxR[/shard][/bf16][@A[,B]]: S stages (an even straight pipeline of the embedding,
# the encoder layers and the head) of R replicas each, on S*R processes (stage s on ranks
# s*R .. s*R+R-1); /shard: every stage's replicas shard Adam's state ("shard_optimizer" in
# the plan); /bf16: --precision bf16; @A,B: the layer counts the search tries first without
# and with --recompute (default START). "4" means 4x1. Every replica holds 4 rows of each
# micro-batch (micro-batch 4R) and there are 2S micro-batches, so a replica of a stage does
# the work of the straight S-stage pipeline's stage.
# Environment: ROWS (default below), RECOMPUTE (default "0 1": the columns, 0 without and 1
# with --recompute), START (default 8), TIMEOUT (default 30: each run's --timeout-s; raise it
# on a busy machine and for bf16 on CPUs without AVX512-BF16), OUT (default out/largest-bert).
# The search tries the start, then steps of 1, 2, 4, ... up (or down) until the answer
# changes, then bisects. A run fits when every rank finishes; it does not when a rank is
# killed by its group's OOM killer. Any other failure (a timeout, an error) ends that cell's
# search: the cell reads "failed", the ranks' logs stay in $OUT/failed-..., and the next cell
# starts, so a slow peer never reads as "does not fit". Each run's outcome and every rank's
# peak (memory.max_usage_in_bytes) go to stderr and $OUT/runs.txt. bf16 on a CPU without
# AVX512-BF16 computes about 10x slower than float32: give it a TIMEOUT to match.
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
rows_per_replica=4

# plan S R L SHARD: S stages of R replicas over the L+2 layers (embed, block0.., head).
plan() {
  .venv/bin/python - "$@" "$rows_per_replica" <<'PY'
import json, sys
s, r, l, shard, rows = map(int, sys.argv[1:])
names = ["embed"] + [f"block{i}" for i in range(l)] + ["head"]
cuts = [round(i * len(names) / s) for i in range(s + 1)]
stages = [{"first_layer_id": names[cuts[k]], "last_layer_id": names[cuts[k + 1] - 1],
           "devices": list(range(k * r, (k + 1) * r))} for k in range(s)]
if shard:
    for st in stages:
        st["shard_optimizer"] = True
m, M = rows * r, 2 * s
print(json.dumps({"format": "dapple-plan/1", "planner": "hand", "global_batch_size": m * M,
                  "micro_batch_size": m, "num_micro_batches": M, "schedule": "dapple-a",
                  "stages": stages}))
PY
}

# fits S R L SHARD BF16 RECOMPUTE: 0 when every rank trains 2 steps inside its memory group,
# 1 when a rank ran out of memory; exits on any other failure.
fits() {
  local s=$1 r=$2 l=$3 shard=$4 bf16=$5 rc=$6 port=$((20000 + RANDOM % 20000)) pids=()
  local p=$((s * r)) extra=() status=() oom=0 failed=-1 peaks=""
  [ "$bf16" = 1 ] && extra+=(--precision bf16)
  [ "$rc" = 1 ] && extra+=(--recompute)
  plan "$s" "$r" "$l" "$shard" >"$out/plan.json"
  for ((k = 0; k < p; k++)); do
    local g="$cg/dapple_bert_$$_$k"
    mkdir -p "$g"
    echo $((limit_mib * 1048576)) >"$g/memory.limit_in_bytes"
    (
      echo $BASHPID >"$g/cgroup.procs"
      RANK=$k LOCAL_RANK=$k WORLD_SIZE=$p MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 exec "$dapple" train "${opts[@]}" --opt layers="$l" \
        --plan "$out/plan.json" --steps 2 --optimizer adam --timeout-s "${TIMEOUT:-30}" --quiet \
        "${extra[@]}" >"$out/rank$k.log" 2>&1
    ) &
    pids+=($!)
  done
  for ((k = 0; k < p; k++)); do
    local e=0
    wait "${pids[$k]}" || e=$?
    status+=("$e")
  done
  for ((k = 0; k < p; k++)); do
    local g="$cg/dapple_bert_$$_$k" kills
    kills=$(awk '$1 == "oom_kill" { print $2 }' "$g/memory.oom_control")
    peaks+=" $(($(cat "$g/memory.max_usage_in_bytes") / 1048576))"
    if [ "${kills:-0}" -gt 0 ]; then oom=1; elif [ "${status[$k]}" != 0 ] && [ $failed -lt 0 ]; then failed=$k; fi
    rmdir "$g" 2>/dev/null || true
  done
  local verdict=fits
  if [ $oom = 1 ]; then verdict="out of memory"; elif [ $failed -ge 0 ]; then verdict="failed"; fi
  echo "${s}x$r shard=$shard bf16=$bf16 recompute=$rc layers=$l: $verdict; peak MiB per rank:$peaks" |
    tee -a "$out/runs.txt" >&2
  if [ "$verdict" = failed ]; then
    local keep="$out/failed-${s}x$r-shard$shard-bf16$bf16-recompute$rc-layers$l"
    mkdir -p "$keep" && cp "$out"/rank*.log "$keep/"
    echo "bench_largest_bert: rank $failed failed without running out of memory" \
      "(exit ${status[$failed]}; raise TIMEOUT if it timed out; logs in $keep):" >&2
    for ((k = 0; k < p; k++)); do
      [ "${status[$k]}" = 0 ] || echo "  rank $k: $(grep -m 1 -i error "$keep/rank$k.log" || tail -n 1 "$keep/rank$k.log")" >&2
    done
    exit 1  # leaves the search of this cell (a subshell), which reads "failed"
  fi
  [ $oom = 0 ]
}

# largest S R SHARD BF16 RECOMPUTE START: the largest layer count that fits.
largest() {
  local args=("${@:1:5}") at=$6 step=1 lo hi
  if fits "${args[@]:0:2}" "$at" "${args[@]:2}"; then
    lo=$at hi=$((at + 1))
    while fits "${args[@]:0:2}" "$hi" "${args[@]:2}"; do lo=$hi step=$((step * 2)) hi=$((lo + step)); done
  else
    hi=$at lo=$((at - 1))
    while ((lo > 0)) && ! fits "${args[@]:0:2}" "$lo" "${args[@]:2}"; do
      hi=$lo step=$((step * 2)) lo=$((hi - step > 0 ? hi - step : 0))
    done
  fi
  while ((hi - lo > 1)); do
    local mid=$(((lo + hi) / 2))
    if fits "${args[@]:0:2}" "$mid" "${args[@]:2}"; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}

default_rows="1 2 4 1x2 1x2/shard 1x4 1x4/shard 2x2 2x2/shard 1/bf16 2/bf16 4/bf16"
echo "BERT hidden $hidden, seq 128, Adam, 2 steps; $rows_per_replica rows of each micro-batch per replica," \
  "2S micro-batches; $limit_mib MiB per process"
echo "| processes | stages x replicas | Adam state | precision | largest BERT (layers) | with --recompute |"
echo "|---:|---|---|---|---:|---:|"
for row in ${ROWS:-$default_rows}; do
  spec=${row%%@*} starts=${START:-8}
  [[ $row == *@* ]] && starts=${row#*@}
  start0=${starts%%,*} start1=${starts#*,}
  shape=${spec%%/*} s=${shape%%x*} r=1
  [[ $shape == *x* ]] && r=${shape#*x}
  shard=0 bf16=0
  [[ $spec == */shard* ]] && shard=1
  [[ $spec == */bf16* ]] && bf16=1
  cells=()
  for rc in 0 1; do
    cell=-
    if [[ " ${RECOMPUTE:-0 1} " == *" $rc "* ]]; then
      cell=$(largest "$s" "$r" "$shard" "$bf16" "$rc" "$([ $rc = 0 ] && echo "$start0" || echo "$start1")") ||
        cell=failed
    fi
    cells+=("$cell")
  done
  echo "| $((s * r)) | $s x $r | $([ $shard = 1 ] && echo sharded || echo replicated)" \
    "| $([ $bf16 = 1 ] && echo bf16 || echo float32) | ${cells[0]} | ${cells[1]} |"
done
