#!/usr/bin/env bash
# Simulated iteration time of pure data parallelism on paper-a (16 devices) with and
# without the allreduce overlapped with the backward, for every shipped DAPPLE profile:
# prints the markdown table of docs/schedules.md ("Allreduce overlapped with the backward").
# Usage: scripts/allreduce_overlap_table.sh [path/to/dapple]   (default build/tools/dapple/dapple)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dapple=${1:-$root/build/tools/dapple/dapple}
profiles=$root/data/profiles/dapple
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The paper's global batch sizes per model family (Table 3 of the paper); others alike.
gbs_of() {
  case "$1" in
    vgg*) echo 2048 ;; gnmt*) echo 1024 ;; bert*) echo 64 ;; xlnet*) echo 128 ;; amoeba*) echo 128 ;;
    *) echo 256 ;;
  esac
}

echo "| profile | GBS | m x M | buckets | allreduce ms | exposed ms | no overlap ms | overlap ms | gain |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for f in "$profiles"/*.txt; do
  name=$(basename "$f" .txt)
  [[ $name == *-pbs-* ]] || continue  # no profile batch size in the name (vgg16.txt)
  gbs=$(gbs_of "$name")
  note=""
  if ! "$dapple" plan --profile "$f" --cluster paper-a --global-batch "$gbs" --planner dp \
      --no-baselines -o "$tmp/plan.json" >/dev/null 2>"$tmp/err"; then
    # Does not fit 16 GB per device: plan with the memory check off (marked with *).
    "$dapple" plan --profile "$f" --cluster paper-a --global-batch "$gbs" --planner dp \
      --no-baselines --memory-gb 1000 -o "$tmp/plan.json" >/dev/null
    note="*"
  fi
  "$dapple" simulate --profile "$f" --cluster paper-a --plan "$tmp/plan.json" --json \
    >"$tmp/on.json" 2>/dev/null
  "$dapple" simulate --profile "$f" --cluster paper-a --plan "$tmp/plan.json" --json --no-overlap \
    >"$tmp/off.json" 2>/dev/null
  python3 - "$name$note" "$gbs" "$tmp/on.json" "$tmp/off.json" <<'PY'
import json, sys
name, gbs, on, off = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
st = on["stages"][0]
t_on, t_off = on["iteration_ms"], off["iteration_ms"]
print(f"| {name} | {gbs} | {on['micro_batch_size']} x {on['num_micro_batches']} | "
      f"{st['allreduce_buckets']} | {st['allreduce_ms']:.1f} | {st['allreduce_exposed_ms']:.1f} | "
      f"{t_off:.1f} | {t_on:.1f} | {100 * (t_off - t_on) / t_off:.1f}% |")
PY
done
