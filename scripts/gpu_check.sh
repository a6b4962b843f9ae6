#!/usr/bin/env bash
# The GPU check (docs/gpu.md): the one script a session with a lent GPU machine runs, within
# about 8 minutes on one H100. Nothing of it has run on a GPU yet.
#
# It uses the binaries of scripts/gpu_bundle.sh (.gpu/, carried to the GPU machine, with
# torch's lib/ of the machine's python3 on LD_LIBRARY_PATH), else those of build/. Then:
#   1. gpu_tests (they skip without a GPU);
#   2. without a GPU: `--device cuda` must be refused in one line (exit 2), and the CPU
#      comparisons below run on the CPU alone (a one-stage against a two-stage plan, and the
#      staged transport against plain Gloo), so that the script's own path is checked;
#   3. with a GPU: `dapple profile --device cuda` of the GPT; a one-stage, a two-stage and a
#      two-replica plan trained on the GPU (two processes share it: Gloo staged through host
#      copies) against the same training on the CPU, float64 within 1e-9 and float32 within
#      1e-4 (relative, per step's loss); a checkpoint saved on the GPU resumed on the CPU; the
#      step time against PyTorch's own single-GPU training of the same GPT
#      (bench/peers/single_gpt.py), side by side with the ratio;
#   4. with two GPUs or more: the two-stage and two-replica plans on two GPUs (NCCL) against
#      the CPU.
# Everything goes to $OUT (default out/gpu-check): gpu_check.log, summary.txt (one line per
# check, "ok", "FAIL" or "skip"), the GPU profile and run_logs.tar.gz (every run's log).
# Exit 1 when a check failed.
#   scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/out/gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
summary=$OUT/summary.txt
: >"$summary"
failed=0
note() { echo "$*" | tee -a "$summary"; }
check() {  # check NAME COMMAND...: one summary line from the command's status
  local name=$1
  shift
  if "$@"; then note "$name: ok"; else note "$name: FAIL" && failed=1; fi
}

py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
if [ -x .gpu/bin/dapple-torch ]; then
  bin=.gpu/bin
  # torch's lib/, and the CUDA runtime torch loads (dapple calls it too: without it there the
  # loader would take the toolkit's, through the RUNPATH of this machine's build).
  torch_dir=$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  export LD_LIBRARY_PATH=$PWD/.gpu/lib:$torch_dir/lib:$torch_dir/../nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  gpu_tests=.gpu/bin/gpu_tests
  note "binaries: the bundle .gpu (built from $(cat .gpu/commit 2>/dev/null), torch $(cat .gpu/torch_version 2>/dev/null))"
elif [ -x build/tools/dapple/dapple-torch ]; then
  bin=build/tools/dapple
  gpu_tests=build/tests/gpu_tests
  note "binaries: build/"
else
  echo "gpu_check: no binaries: scripts/gpu_bundle.sh here first (or build)" >&2
  exit 2
fi
dapple=$PWD/$bin/dapple
gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
note "machine: $(nproc) cores, $gpus CUDA device(s)$(command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1 | sed 's/^/: /')"
note "torch: $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)"

work=$(mktemp -d)
# The runs' logs, packed into $OUT/run_logs.tar.gz at the end (the device tool brings back
# at most 8 files).
logs=$work/logs
mkdir -p "$logs"
trap 'tar -czf "$OUT/run_logs.tar.gz" -C "$work" logs; rm -rf "$work"' EXIT
# The GPT of the comparisons: small enough that float64 on the CPU takes seconds.
gpt=(--model gpt --opt hidden=128 --opt heads=4 --opt layers=4 --opt seq=64 --opt vocab=128)
plan() {  # plan NAME STAGES_JSON: a plan of micro-batch 4 x 4 micro-batches
  printf '{"format": "dapple-plan/1", "planner": "hand", "global_batch_size": 16,
    "micro_batch_size": 4, "num_micro_batches": 4, "schedule": "dapple-a", "stages": %s}\n' \
    "$2" >"$work/$1.json"
}
plan one '[{"first_layer_id": "embed", "last_layer_id": "head", "devices": [0]}]'
plan two '[{"first_layer_id": "embed", "last_layer_id": "block1", "devices": [0]},
  {"first_layer_id": "block2", "last_layer_id": "head", "devices": [1]}]'
plan dp2 '[{"first_layer_id": "embed", "last_layer_id": "head", "devices": [0, 1]}]'
nproc_of() { case $1 in one) echo 1 ;; *) echo 2 ;; esac; }
train() {  # train LOG PLAN DEVICE DTYPE [more flags]: a logged run of $STEPS (6) steps
  local log=$1 p=$2 device=$3 dtype=$4
  shift 4
  timeout 300 "$dapple" train "${gpt[@]}" --plan "$work/$p.json" --nproc "$(nproc_of "$p")" \
    --steps "${STEPS:-6}" --data synthetic --dtype "$dtype" --device "$device" --log-json --timeout-s 60 \
    "$@" >"$logs/$log.log" 2>&1 || { echo "gpu_check: $log failed:" && tail -5 "$logs/$log.log"; }
}
# shellcheck disable=SC2317  # called through check
refused() {  # --device cuda on a machine without a GPU: one line, exit 2
  local err rc
  err=$("$dapple" train "${gpt[@]}" --plan "$work/one.json" --steps 1 --device cuda 2>&1)
  rc=$?
  echo "  $err"
  [ "$rc" -eq 2 ] && [ "$(echo "$err" | wc -l)" -eq 1 ] && [[ $err == *"--device cuda"* ]]
}
compare() { "$py" scripts/gpu_compare.py "$@" | tee -a "$summary" | grep -q ': ok:' || failed=1; }

check "gpu_tests" "$gpu_tests" --gtest_brief=1

if [ "$gpus" -eq 0 ]; then
  check "--device cuda without a GPU: one line, exit 2" refused
  # The comparisons' own path, on the CPU: the same training under two plans, and through
  # the staged transport (Note [Transport by device]) against plain Gloo.
  train cpu_one_f64 one cpu float64
  train cpu_two_f64 two cpu float64
  DAPPLE_TEST_STAGE_THROUGH_HOST=1 train cpu_two_f64_staged two cpu float64
  compare "cpu: one stage vs two stages, float64" 1e-9 "$logs/cpu_one_f64.log" "$logs/cpu_two_f64.log"
  compare "cpu: Gloo vs staged through host copies, float64" 0 "$logs/cpu_two_f64.log" \
    "$logs/cpu_two_f64_staged.log"
  note "GPU checks: skip (no CUDA device)"
  echo "gpu_check: done, $([ $failed -eq 0 ] && echo 'all passed' || echo 'FAILURES')"
  exit $failed
fi

# 3a. The profile on the GPU (Note [Timing on the device]).
check "profile --device cuda" timeout 120 "$dapple" profile "${gpt[@]}" --batch 8 --batches 4,8 \
  --device cuda -o "$OUT/gpt_profile_cuda.json"
[ -f "$OUT/gpt_profile_cuda.json" ] && "$py" - "$OUT/gpt_profile_cuda.json" <<'PY' | tee -a "$summary"
import json, sys
p = json.load(open(sys.argv[1]))
print("  profile device:", p.get("device"), "| peaks:", p.get("metadata", {}).get("device_peak_bytes"))
for l in p["layers"]:
    print(f"  {l['name']:8} fwd {l['forward_ms']:.3f} ms  bwd {l['backward_ms']:.3f} ms  saved {l.get('saved_bytes', 0):.0f} B")
PY

# 3b. Every plan on the GPU against the CPU. On one GPU the two processes of plans two and dp2
# share it (Gloo staged through host copies); on two GPUs or more they use NCCL.
for dtype in float64 float32; do
  tol=$([ $dtype = float64 ] && echo 1e-9 || echo 1e-4)
  for p in one two dp2; do
    train "cpu_${p}_$dtype" "$p" cpu "$dtype"
    train "cuda_${p}_$dtype" "$p" cuda "$dtype"
    compare "one GPU: plan $p, $dtype, CPU vs CUDA" "$tol" "$logs/cpu_${p}_$dtype.log" \
      "$logs/cuda_${p}_$dtype.log"
  done
done
grep -ho '"gpu_peak_[a-z_]*": *[0-9]*' "$logs"/cuda_*_float32.log | sort -u | head -4 |
  sed 's/^/  memory: /' | tee -a "$summary"

# 3c. A checkpoint saved on the GPU, resumed on the CPU (Note [A device per process]).
rm -rf "$work/ckpt"
STEPS=3 train cuda_first3 two cuda float64 --checkpoint-dir "$work/ckpt"
train cpu_resumed two cpu float64 --resume --checkpoint-dir "$work/ckpt"
compare "checkpoint: saved on CUDA, resumed on the CPU, float64" 1e-9 \
  "$logs/cpu_two_float64.log" "$logs/cpu_resumed.log" resumed

# 3d. Step time against PyTorch's own training of the same GPT on the GPU.
big=(--opt hidden=512 --opt heads=8 --opt layers=8 --opt seq=256 --opt vocab=128)
printf '{"format": "dapple-plan/1", "planner": "hand", "global_batch_size": 32,
  "micro_batch_size": 8, "num_micro_batches": 4, "schedule": "dapple-a", "stages":
  [{"first_layer_id": "embed", "last_layer_id": "head", "devices": [0]}]}\n' >"$work/big.json"
timeout 300 "$dapple" train --model gpt "${big[@]}" --plan "$work/big.json" --nproc 1 \
  --steps 30 --data synthetic --device cuda --log-json --quiet >"$logs/cuda_big.log" 2>&1
timeout 300 "$py" bench/peers/single_gpt.py --device cuda --hidden 512 --heads 8 --layers 8 \
  --seq 256 --vocab 128 --micro-batch 8 --micro-batches 4 --steps 30 --warmup 5 \
  >"$logs/torch_big.log" 2>&1
"$py" - "$logs/cuda_big.log" "$logs/torch_big.log" <<'PY' | tee -a "$summary"
import json, sys
d = t = None
for line in open(sys.argv[1]):
    if line.startswith("{") and "summary" in line:
        summary = json.loads(line)["summary"]
        d = summary.get("median_step_ms", summary["step_ms"])
for line in open(sys.argv[2]):
    if line.startswith("{"):
        t = json.loads(line)["step_ms"]
if d and t:
    print(f"step time (median), GPT 512x8 seq 256, batch 8 x 4, one GPU: dapple {d:.2f} ms, "
          f"PyTorch {t:.2f} ms, dapple / PyTorch {d / t:.2f}")
else:
    print(f"step time: FAIL (dapple {d}, PyTorch {t}; see cuda_big.log, torch_big.log)")
PY

# 4. Two GPUs or more: 3b ran plans two and dp2 over NCCL; the staged fallback on them too.
if [ "$gpus" -ge 2 ]; then
  grep -h "CUDA tensors over" "$logs"/cuda_two_float64.log | head -1 | sed 's/^/  /' | tee -a "$summary"
  for p in two dp2; do
    DAPPLE_CUDA_TRANSPORT=staged train "staged_${p}_float64" "$p" cuda float64
    compare "two GPUs, staged through host copies: plan $p, float64, CPU vs CUDA" 1e-9 \
      "$logs/cpu_${p}_float64.log" "$logs/staged_${p}_float64.log"
  done
else
  note "NCCL on several GPUs: skip (one GPU; two ranks of one NCCL communicator cannot share it)"
fi
echo "gpu_check: done, $([ $failed -eq 0 ] && echo 'all passed' || echo 'FAILURES')"
exit $failed
