#!/usr/bin/env bash
# bf16 mixed precision against float32 on the quickstart's job (scripts/quickstart.sh: the MLP
# 784-1024x4-10, global batch 256, Adam, Fashion-MNIST, one process per device of `local`):
# profiles and plans it in each precision, then trains both side by side, alternating
# float32 and bf16 runs of the same steps (same seed and batches) so that a change in the
# machine's load falls on both. Prints per run the mean and median step, the final loss and
# the plan's simulated step, then the bf16/float32 speedup (median of the rounds), the final
# losses' relative difference and the bf16 measured/simulated ratio; bf16 also runs on the
# float32 plan, so that the compute alone differs. Also times the model's
# ops alone in Python (one thread, the micro-batch the bf16 plan chose) to show where bf16 gains
# or loses. Needs a built build/. Outputs in out/precision/.
# Usage: scripts/bench_precision.sh [steps (60)] [rounds (3)]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-60}
rounds=${2:-3}
dapple=${DAPPLE:-build/tools/dapple/dapple}
out=out/precision
mkdir -p "$out"
model=(--model mlp --opt hidden=1024 --opt layers=4)
gbs=256
n=$(( $(nproc) > 2 ? $(nproc) : 2 ))  # the devices of `local`, as the quickstart trains
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$dapple" calibrate | tail -n 1

for p in float32 bf16; do
  echo "== profile and plan in $p"
  "$dapple" profile "${model[@]}" --batch 32 --optimizer adam --precision "$p" \
    -o "$out/profile-$p.json" >/dev/null
  "$dapple" plan --profile "$out/profile-$p.json" --cluster local --global-batch "$gbs" \
    --no-baselines -o "$out/plan-$p.json" | tail -n 4
done

train() {  # precision plan round
  "$dapple" train "${model[@]}" --plan "$out/plan-$2.json" --data fashion-mnist --steps "$steps" \
    --nproc "$n" --optimizer adam --lr 0.001 --seed 1 --precision "$1" --log-json \
    >"$out/train-$1-$2-$3.jsonl" 2>"$out/train-$1-$2-$3.err"
}
for r in $(seq 1 "$rounds"); do
  train float32 float32 "$r"
  train bf16 bf16 "$r"
  train bf16 float32 "$r"  # the same plan as float32: the compute alone differs
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

.venv/bin/python - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def read(name, r):
    s = m = None
    for line in open(f"{out}/train-{name}-{r}.jsonl"):
        j = json.loads(line) if line.startswith("{") else {}
        s = j.get("summary", s)
        m = j.get("predicted_vs_measured", m)
    return s, m
for p in ("float32", "bf16"):
    plan = json.load(open(f"{out}/plan-{p}.json"))
    shape = " | ".join(f"{st['first_layer_id']}..{st['last_layer_id']} on {st['devices']}"
                       for st in plan["stages"])
    print(f"plan from the {p} profile: {plan['schedule']}, micro-batch "
          f"{plan['micro_batch_size']}, {shape}, simulated {plan['estimate']['iteration_ms']:.2f} ms")
runs = {}
for name in ("float32-float32", "bf16-bf16", "bf16-float32"):
    runs[name] = []
    for r in range(1, rounds + 1):
        s, m = read(name, r)
        peak = max(st["peak_live_activation_bytes"] for st in s["stages"])
        runs[name].append((m["measured_step_ms"], m["measured_median_step_ms"],
                           m["simulated_step_ms"], s["final_loss"], peak))
        print(f"{name} (precision-plan) round {r}: step {m['measured_step_ms']:.2f} ms (median "
              f"{m['measured_median_step_ms']:.2f}), simulated {m['simulated_step_ms']:.2f} ms, "
              f"final loss {s['final_loss']:.4f}, peak live activations {peak / 2**20:.2f} MiB")
med = lambda name, k: statistics.median(x[k] for x in runs[name])
f32 = "float32-float32"
for name in ("bf16-bf16", "bf16-float32"):
    print(f"{name}: speedup over float32 {med(f32, 0) / med(name, 0):.2f}x by mean step "
          f"({med(f32, 0):.2f} / {med(name, 0):.2f} ms), {med(f32, 1) / med(name, 1):.2f}x by "
          f"median; final loss {med(name, 3):.4f} vs {med(f32, 3):.4f} "
          f"({abs(med(name, 3) - med(f32, 3)) / med(f32, 3) * 100:.1f}%); measured / simulated "
          f"{med(name, 0) / med(name, 2):.2f} (float32: {med(f32, 0) / med(f32, 2):.2f})")
EOF

# The ops alone, one thread: a linear layer's forward and backward at the bf16 plan's per-replica
# micro-batch, in float32 and under autocast (what dapple's bf16 layers run).
mb=$(.venv/bin/python -c "import json; p = json.load(open('$out/plan-bf16.json')); print(p['micro_batch_size'] // len(p['stages'][0]['devices']))")
.venv/bin/python - "$mb" <<'EOF'
import sys, time, torch
torch.set_num_threads(1)
mb = int(sys.argv[1])
def t(f, n=50):
    for _ in range(5): f()
    a = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - a) / n * 1e3
for rows in sorted({mb, 32, 256}):
    lin = torch.nn.Linear(1024, 1024)
    x = torch.randn(rows, 1024, requires_grad=True)
    def fwd_bwd(bf16):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = lin(x)
        y.float().sum().backward()
    w16 = lin.weight.detach().bfloat16()
    x16 = x.detach().bfloat16()
    print(f"linear 1024x1024, batch {rows}: forward+backward float32 {t(lambda: fwd_bwd(False)):.3f} ms, "
          f"bf16 autocast {t(lambda: fwd_bwd(True)):.3f} ms; matmul alone float32 "
          f"{t(lambda: x.detach() @ lin.weight.detach().T):.3f} ms, bf16 {t(lambda: x16 @ w16.T):.3f} ms; "
          f"weight cast {t(lambda: lin.weight.detach().bfloat16()):.3f} ms")
EOF
