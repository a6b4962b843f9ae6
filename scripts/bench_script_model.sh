#!/usr/bin/env bash
# The zoo MLP against the same MLP written in PyTorch and saved as TorchScript, side by
# side: the same plan (2 stages), sizes, data, steps and threads; whole `dapple train`
# commands, A (TorchScript) and B (zoo) in turn. Prints the median wall times, the median of
# the pairwise ratios A/B, and each run's own mean step time.
#   scripts/bench_script_model.sh [path/to/dapple] [runs] [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
dapple=$(realpath "${1:-build/tools/dapple/dapple}")
runs=${2:-5}
steps=${3:-60}
out=${OUT:-out/bench-script-model}
mkdir -p "$out"
# The layer class comes from tests/torch/script_models.py: TorchScript compiles from its source file.
.venv/bin/python - "$out" "$PWD/tests/torch" <<'PY'
import sys, torch, torch.nn as nn
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from script_models import Dense  # the test models' layer: Linear on the flattened input, ReLU

m = nn.Sequential()
m.add_module("fc0", Dense(784, 1024, True))
m.add_module("fc1", Dense(1024, 1024, True))
m.add_module("fc2", Dense(1024, 1024, True))
m.add_module("head", Dense(1024, 10, False))
torch.jit.script(m).save(f"{out}/mlp.pt")
g = torch.Generator().manual_seed(0)
torch.save({"input": torch.randn(2048, 784, generator=g),
            "target": torch.randint(0, 10, (2048,), generator=g)}, f"{out}/data.pt")
PY
cat >"$out/plan.json" <<'JSON'
{"format": "dapple-plan/1", "planner": "hand", "global_batch_size": 128, "micro_batch_size": 32,
 "num_micro_batches": 4, "schedule": "dapple-a",
 "stages": [{"first_layer_id": "fc0", "last_layer_id": "fc1", "devices": [0]},
            {"first_layer_id": "fc2", "last_layer_id": "head", "devices": [1]}]}
JSON
common="--plan $out/plan.json --steps $steps --nproc 2 --quiet"
script="$dapple train --model $out/mlp.pt --data $out/data.pt --loss cross-entropy $common"
zoo="$dapple train --model mlp --opt input=784 --opt hidden=1024 --opt layers=3 --opt classes=10 --data synthetic $common"
.venv/bin/python - "$runs" "$script" "$zoo" "$out" <<'PY'
import statistics, subprocess, sys, time
runs, a_cmd, b_cmd, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def timed(cmd, log):
    with open(log, "a") as f:
        start = time.monotonic()
        subprocess.run(cmd, shell=True, stdout=f, stderr=subprocess.STDOUT, check=True, timeout=1200)
        return time.monotonic() - start
a, b = [], []
for _ in range(runs):  # A and B in turn, so that the machine's load falls on both alike
    a.append(timed(a_cmd, f"{out}/script.txt"))
    b.append(timed(b_cmd, f"{out}/zoo.txt"))
print(f"wall s, median of {runs}: TorchScript {statistics.median(a):.2f}, zoo {statistics.median(b):.2f}; "
      f"median of the pairwise ratios A/B {statistics.median(x / y for x, y in zip(a, b)):.3f}")
PY
echo "mean step time per run (ms), TorchScript then zoo:"
grep -o '([0-9.]* ms/step)' "$out/script.txt" | tr -d '(' | cut -d' ' -f1 | tr '\n' ' '; echo
grep -o '([0-9.]* ms/step)' "$out/zoo.txt" | tr -d '(' | cut -d' ' -f1 | tr '\n' ' '; echo
