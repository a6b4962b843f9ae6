#!/usr/bin/env bash
# The loss curves of docs/your-model.md ("Warm-up, cosine decay and clipping"): the example GPT
# (examples/gpt_kjv.py) trained for 300 steps on 2 stages with AdamW (betas 0.9,0.95, decay 0.1
# off biases and norms) at a constant rate and with the recipe (30 warm-up steps, cosine to
# 0.001, gradient norm clipped to 1), at two peak rates; then docs/recipe-loss-curves.svg.
# Usage: scripts/recipe_curves.sh [dapple] [out folder]
set -euo pipefail
cd "$(dirname "$0")/.."
dapple=${1:-build/tools/dapple/dapple}
out=${2:-out/recipe}
mkdir -p "$out"
[ -f "$out/gpt.pt" ] || .venv/bin/python examples/gpt_kjv.py "$out"
cat > "$out/plan.json" <<'PLAN'
{"format": "dapple-plan/1", "planner": "hand", "global_batch_size": 32, "micro_batch_size": 8,
 "num_micro_batches": 4, "schedule": "dapple-a",
 "stages": [{"first_layer_id": "embed", "last_layer_id": "block1", "devices": [0]},
            {"first_layer_id": "block2", "last_layer_id": "head", "devices": [1]}]}
PLAN
common=(--model "$out/gpt.pt" --plan "$out/plan.json" --data "$out/train.bin"
        --eval-data "$out/eval.bin" --eval --eval-samples 512 --seq-len 64
        --loss cross-entropy --steps 300 --nproc 2 --optimizer adamw --weight-decay 0.1
        --adam-betas 0.9,0.95 --no-decay-on-norm-and-bias --log-json)
recipe=(--lr-schedule cosine --warmup-steps 30 --min-lr 0.001 --clip-grad-norm 1.0)
curves=()
for lr in 0.03 0.01; do
  "$dapple" train "${common[@]}" --lr "$lr" --clip-grad-norm inf > "$out/constant-$lr.log"
  "$dapple" train "${common[@]}" --lr "$lr" "${recipe[@]}" > "$out/recipe-$lr.log"
  curves+=("lr $lr constant=$out/constant-$lr.log" "lr $lr recipe=$out/recipe-$lr.log")
done
grep -H '"eval"' "$out"/*.log
.venv/bin/python scripts/loss_curves_svg.py docs/recipe-loss-curves.svg "${curves[@]}" \
  --title "GPT (examples/gpt_kjv.py), AdamW, 2 stages, global batch 32" --ymax 3.2
