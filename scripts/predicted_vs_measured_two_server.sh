#!/usr/bin/env bash
# Predicted vs measured on the two-server network of scripts/netns.sh:
# profiles a model here, calibrates the two namespaces (2 servers x 2 ranks, shaped link),
# plans and simulates four plans (data parallelism, a straight pipeline, a 2 x 2 hybrid
# whose stage boundary crosses the link, the planner's choice) and data parallelism without
# overlap, trains each for real across the namespaces, and writes
# docs/predicted-vs-measured-two-server.md and one Perfetto trace holding every plan's
# simulated and measured timeline. Needs root (network namespaces); exit 4 where they are not
# permitted. Usage:
#   sudo scripts/predicted_vs_measured_two_server.sh [path/to/dapple] [doc.md]
#     (defaults: build/tools/dapple/dapple, docs/predicted-vs-measured-two-server.md)
# Environment: MODEL_OPTS (default "--opt input=784 --opt hidden=1024 --opt layers=4
# --opt classes=10"), GBS (512: ops of 4-30 ms, longer than the kernel's time slice; see
# docs/two-server.md for 128), STEPS (16), WARMUP (4 steps of each run left out),
# ROUNDS (3: every plan is trained ROUNDS times, round-robin, and the kept steps pooled, so
# that a change of the machine's load falls on every plan alike), BUCKET_MB (allreduce bucket
# of `plan`, `simulate` and `train`, 4: the MLP's 16 MB of gradients in 5 buckets, so that overlap has
# something to overlap), RATE (tbf rate of the link, 1gbit), DELAY (netem delay, netns.sh's
# default), SPEED (device speed given to calibrate; default: calibrate measures it with every
# rank computing at once), PREFIX (dpvm) and SUBNET (10.79.0) of the namespaces,
# TRACE_LIMIT_KB (300: a larger trace stays in out/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dapple=$(realpath "${1:-$root/build/tools/dapple/dapple}")
doc=${2:-$root/docs/predicted-vs-measured-two-server.md}
model_opts=${MODEL_OPTS:-"--opt input=784 --opt hidden=1024 --opt layers=4 --opt classes=10"}
gbs=${GBS:-512}
steps=${STEPS:-16}
warmup=${WARMUP:-4}
rounds=${ROUNDS:-3}
bucket_mb=${BUCKET_MB:-4}
rate=${RATE:-1gbit}
prefix=${PREFIX:-dpvm}
subnet=${SUBNET:-10.79.0}
per_server=2
cores=$(nproc)
speed=${SPEED:-}
trace_limit_kb=${TRACE_LIMIT_KB:-300}
out=$root/out/predicted-vs-measured-two-server
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.jsonl "$out"/*.txt "$out"/*.log

netns_args=(--prefix "$prefix" --subnet "$subnet" --rate "$rate")
[[ -z "${DELAY:-}" ]] || netns_args+=(--delay "$DELAY")
two_server=("$root/scripts/two-server.sh" --dapple "$dapple" --keep-up --per-server "$per_server"
            "${netns_args[@]}")

# The namespaces stay up for the whole run (every job uses --keep-up) and go at the end.
rc=0
"$root/scripts/netns.sh" "${netns_args[@]}" up >&2 || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "predicted_vs_measured_two_server.sh: cannot bring the namespaces up (exit $rc)" >&2
  exit "$rc"
fi
trap '"$root/scripts/netns.sh" "${netns_args[@]}" down' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# (a) Profile, one thread per process as each training process gets one thread.
echo "profiling mlp $model_opts ..." >&2
# shellcheck disable=SC2086
batches=1; b=1; while (( b < gbs )); do b=$((b * 2)); batches+=",$b"; done  # 1, 2, 4 .. gbs
"$dapple" profile --model mlp $model_opts --batch 32 --batches "$batches" \
  --threads 1 --repeat 5 -o "$out/profile.json" >&2

# (b) The cluster: measured on the namespaces just now.
echo "calibrating the two-server network ($rate) ..." >&2
"$root/scripts/calibrate-two-server.sh" --dapple "$dapple" --keep-up --per-server "$per_server" \
  "${netns_args[@]}" -o "$out/cluster.json" -- ${speed:+--speed "$speed"} --budget 10 --timeout 40 \
  >"$out/calibrate.log" 2>&1 || { cat "$out/calibrate.log" >&2; exit 1; }
cluster=$out/cluster.json

# (c) Plans. The hybrid (2 stages x 2 replicas, stage 0 on server 0 and stage 1 on server 1)
# is no planner's output: its boundary is the layer split that balances the profile's
# compute, its micro-batch size the simulator's best.
sim() {  # sim NAME [simulate options]: the JSON summary and the simulated trace
  local n=$1; shift
  "$dapple" simulate --profile "$out/profile.json" --cluster "$cluster" --plan "$out/plan-$n.json" \
    --json --trace "$out/sim-$n.trace.json" --bucket-mb "$bucket_mb" "$@" >"$out/sim-$n.json"
}
plan() {  # plan NAME [plan options]
  local n=$1; shift
  "$dapple" plan --profile "$out/profile.json" --cluster "$cluster" --global-batch "$gbs" \
    --no-baselines --bucket-mb "$bucket_mb" -o "$out/plan-$n.json" "$@" >"$out/plan-$n.txt"
}
plan dp --planner dp
plan straight --planner straight
plan dapple
python3 - "$out" "$gbs" "$dapple" "$cluster" "$bucket_mb" <<'PY'
import json, subprocess, sys
out, gbs, dapple, cluster, bucket_mb = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
prof = json.load(open(f"{out}/profile.json"))
ids = [l["id"] for l in prof["layers"]]
cost = [l["forward_ms"] + l["backward_ms"] for l in prof["layers"]]
split = min(range(1, len(ids)), key=lambda k: max(sum(cost[:k]), sum(cost[k:])))
best = None
for m in (2 ** k for k in range(2, 16) if 2 ** k <= gbs // 2):  # 4 .. gbs / 2 (M >= 2)
    if gbs % m:
        continue
    plan = {"format": "dapple-plan/1", "planner": "hand: 2 stages x 2 replicas across the link",
            "global_batch_size": gbs, "micro_batch_size": m, "num_micro_batches": gbs // m,
            "schedule": "dapple-a", "allreduce_overlap": True,
            "stages": [{"first_layer_id": ids[0], "last_layer_id": ids[split - 1], "devices": [0, 1]},
                       {"first_layer_id": ids[split], "last_layer_id": ids[-1], "devices": [2, 3]}]}
    path = f"{out}/plan-hybrid-m{m}.json"
    json.dump(plan, open(path, "w"), indent=2)
    r = subprocess.run([dapple, "simulate", "--profile", f"{out}/profile.json", "--cluster",
                        cluster, "--plan", path, "--json", "--bucket-mb", bucket_mb],
                       capture_output=True, text=True,
                       check=True)
    ms = json.loads(r.stdout)["iteration_ms"]
    print(f"hybrid m={m}: simulated {ms:.1f} ms", file=sys.stderr)
    if best is None or ms < best[0]:
        best = (ms, plan)
json.dump(best[1], open(f"{out}/plan-hybrid.json", "w"), indent=2)
PY
cp "$out/plan-dp.json" "$out/plan-dp-no-overlap.json"
plans=(dp dp-no-overlap straight hybrid dapple)
for p in "${plans[@]}"; do
  if [[ $p == *-no-overlap ]]; then sim "$p" --no-overlap; else sim "$p"; fi
done
for r in $(seq 1 "$rounds"); do
  for p in "${plans[@]}"; do
    extra=()
    [[ $p != *-no-overlap ]] || extra=(--no-overlap)
    echo "round $r/$rounds: training plan $p on 2 x $per_server processes ..." >&2
    # shellcheck disable=SC2086
    "${two_server[@]}" train --model mlp $model_opts --plan "$out/plan-$p.json" \
      --steps "$steps" --data synthetic --log-json --quiet --bucket-mb "$bucket_mb" \
      --trace "$out/train-$p.trace.json" "${extra[@]}" >"$out/train-$p.r$r.jsonl" \
      2>"$out/train-$p.r$r.log" || { cat "$out/train-$p.r$r.log" >&2; exit 1; }
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# (d) The document and the trace.
python3 - "$out" "$doc" "$gbs" "$steps" "$warmup" "$model_opts" "$rate" "$speed" "$cores" \
  "$load_before" "$load_after" "$trace_limit_kb" "$rounds" "$bucket_mb" "${plans[@]}" <<'PY'
import datetime, json, os, statistics, sys
(out, doc, gbs, steps, warmup, model_opts, rate, speed, cores, lb, la,
 trace_limit_kb, rounds, bucket_mb) = sys.argv[1:15]
plans = sys.argv[15:]
warmup, steps, rounds = int(warmup), int(steps), int(rounds)
cluster = json.load(open(f"{out}/cluster.json"))
rows = []
for p in plans:
    plan = json.load(open(f"{out}/plan-{p}.json"))
    sim = json.load(open(f"{out}/sim-{p}.json"))
    kept, bubbles = [], []
    for r in range(1, rounds + 1):
        lines = [json.loads(l) for l in open(f"{out}/train-{p}.r{r}.jsonl") if l.startswith("{")]
        step_ms = [l["step_ms"] for l in lines if "step_ms" in l and "step" in l]
        kept += step_ms[warmup:] if len(step_ms) > warmup else step_ms
        bubbles.append(next(l["summary"] for l in lines if "summary" in l)["bubble_fraction"])
    shape = " + ".join(f"{s['first_layer_id']}..{s['last_layer_id']} on {s['devices']}"
                       for s in plan["stages"])
    overlap = plan.get("allreduce_overlap", True) and not p.endswith("-no-overlap")
    rows.append(dict(name=p, shape=shape, m=plan["micro_batch_size"], M=plan["num_micro_batches"],
                     sched=plan["schedule"], overlap=overlap, sim=sim["iteration_ms"],
                     meas=statistics.median(kept), lo=min(kept), hi=max(kept),
                     sim_bubble=sim["bubble_fraction"], meas_bubble=statistics.mean(bubbles)))
by = {r["name"]: r for r in rows}
# A plan identical to an earlier one is reported but ranked once; the no-overlap variant
# of data parallelism is compared with data parallelism below, not ranked.
def key(r):
    return (r["shape"], r["m"], r["M"], r["sched"], r["overlap"])
for i, r in enumerate(rows):
    r["same_as"] = next((q["name"] for q in rows[:i] if key(q) == key(r)), None)
ranked = [r for r in rows if r["same_as"] is None and not r["name"].endswith("-no-overlap")]
rank = lambda k: [r["name"] for r in sorted(ranked, key=lambda r: r[k])]
sim_rank, meas_rank = rank("sim"), rank("meas")

# One Perfetto trace: per plan a "simulated" and a "measured" process, side by side.
events = []
for i, p in enumerate(plans):
    for j, src in enumerate(("sim", "train")):
        pid = 2 * i + j + 1
        label = f"{p}: {'simulated' if src == 'sim' else 'measured'}"
        t = json.load(open(f"{out}/{src}-{p}.trace.json"))
        for e in t["traceEvents"]:
            if e.get("ph") == "M" and e.get("name") in ("process_name", "process_sort_index"):
                continue
            e = dict(e, pid=pid)
            events.append(e)
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": label}})
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index",
                       "args": {"sort_index": pid}})
trace_text = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, separators=(",", ":"))
trace_name = os.path.splitext(os.path.basename(doc))[0] + ".trace.json"
small = len(trace_text) <= int(trace_limit_kb) * 1024
trace_path = os.path.join(os.path.dirname(doc) if small else out, trace_name)
with open(trace_path + ".tmp", "w") as f:
    f.write(trace_text)
os.replace(trace_path + ".tmp", trace_path)
stale = os.path.join(os.path.dirname(doc), trace_name)
if not small and os.path.exists(stale):
    os.remove(stale)  # a trace of an earlier run would not match this document

inter, intra = cluster["inter_server"], cluster["intra_server"]
def allreduce_note():  # the allreduce figures of the link kinds, where calibrate wrote them
    parts = []
    for label, link in (("inter-server", inter), ("intra-server", intra)):
        bw, lat = link.get("allreduce_bandwidth_bytes_per_s"), link.get("allreduce_latency_s")
        if bw is not None and lat is not None:
            parts.append(f"{label} {bw / 1e6:.1f} MB/s, {lat * 1e6:.0f} us per step")
    return f"; allreduce {'; '.join(parts)}" if parts else ""
f = open(doc + ".tmp", "w")
w = f.write
w("# Predicted vs measured on the two-server network\n\n")
w("Generated by `scripts/predicted_vs_measured_two_server.sh` on "
  f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC. Do not edit by hand; rerun it "
  "(as root: it builds the namespaces of `scripts/netns.sh`).\n\n")
w(f"- Network: two namespaces (servers) of {sum(s['devices'] for s in cluster['servers'])} "
  f"processes ({' + '.join(str(s['devices']) for s in cluster['servers'])}), the link shaped "
  f"with tc tbf at {rate}; ranks of one server talk over the loopback (unshaped).\n")
emu = cluster.get('emulation')
w(f"- Cluster: `scripts/calibrate-two-server.sh` just before: inter-server "
  f"{inter['bandwidth_bytes_per_s'] / 1e6:.1f} MB/s, {inter['latency_s'] * 1e6:.0f} us; "
  f"intra-server {intra['bandwidth_bytes_per_s'] / 1e6:.0f} MB/s, "
  f"{intra['latency_s'] * 1e6:.0f} us{allreduce_note()}; device speed "
  f"{cluster['device']['speed']:.3f} relative to the profile's device"
  + (f" (given: `--speed {speed}`)" if speed else "")
  + (f"; the 4 processes share this machine's {cores} cores, measured by `calibrate` as the "
     f"compute of {emu['shared_compute']:.2f} devices alone (`emulation.shared_compute`: while "
     "k devices compute at once each runs at min(1, shared_compute / k), docs/cost-model.md), "
     f"a forward or backward that follows idle time takes {emu['resume_s'] * 1e6:.0f} us more "
     "(`emulation.resume_s`, a token ring's chunk against the same chunk alone); a device that "
     f"waits at a receive goes on {emu['wake_s'] * 1e6:.0f} us after its message is in "
     "(`emulation.wake_s`, a busy token ring's mean delivery beyond the link's latency); links "
     f"take the compute of {emu['intra_server_stream_load']:.2f} (intra-server) and "
     f"{emu['inter_server_stream_load']:.2f} (inter-server) devices while they carry bytes "
     "(`emulation.*_stream_load`)" if emu else "")
  + ".\n")
w(f"- Model: `mlp {model_opts}`, float32, synthetic data, global batch {gbs}. Profile: "
  "`dapple profile --batch 32 --batches 1,2,4,..," + str(gbs) + " --threads 1` (one thread, as "
  "each training process).\n")
w("- Plans: `dapple plan --planner dp`, `--planner straight`, the default planner (`dapple`), "
  "and `hybrid`: 2 stages x 2 replicas written by the script, stage 0 on devices 0,1 "
  "(server 0) and stage 1 on devices 2,3 (server 1), split where the profile's compute "
  "balances, the micro-batch size the simulator's best. `dp-no-overlap` is `dp` simulated "
  "and trained with `--no-overlap`. Plans, simulations and training all use the bucket size "
  "below (`--bucket-mb`).\n")
w(f"- Simulated: `dapple simulate --json --trace --bucket-mb {bucket_mb}`. Measured: "
  f"`scripts/two-server.sh train --steps {steps} --log-json --trace --bucket-mb {bucket_mb}`, "
  f"{rounds} runs per plan, the plans in turn; the median step time of steps "
  f"{warmup + 1}..{steps} of every run pooled (the first {warmup} of each are warm-up; "
  "min..max shown); the measured bubble is the trainer's mean over ranks and steps after "
  "the first of 1 - (F+B time) / step time, averaged over the runs.\n")
w(f"- Load average (1, 5, 15 min) before: {lb}; after: {la}, on {cores} cores.")
busy = float(lb.split()[0]) > 0.5 * int(cores)
w(" The machine was busy with other work before the run: the 4 training processes shared "
  "the cores with it, more or less than while `calibrate` measured them, so measured times "
  "carry that noise; rerun on a quiet machine.\n\n" if busy else
  " The 1-minute load was below half the cores before the run.\n\n")
w("| plan | stages (layers on devices) | m x M | schedule | overlap | simulated ms | "
  "measured ms (min..max) | error % | within 15% | simulated bubble | measured bubble |\n")
w("|---|---|---:|---|---|---:|---:|---:|---|---:|---:|\n")
for r in rows:
    err = 100 * (r["sim"] - r["meas"]) / r["meas"]
    r["err"] = err
    name = r["name"] + (f" (= {r['same_as']})" if r["same_as"] else "")
    w(f"| {name} | {r['shape']} | {r['m']} x {r['M']} | {r['sched']} | "
      f"{'yes' if r['overlap'] else 'no'} | {r['sim']:.1f} | {r['meas']:.1f} "
      f"({r['lo']:.1f}..{r['hi']:.1f}) | {err:+.1f} | {'yes' if abs(err) <= 15 else 'NO'} | "
      f"{r['sim_bubble']:.3f} | {r['meas_bubble']:.3f} |\n")
w("\nError % = (simulated - measured) / measured. Identical plans are measured again (a feel "
  "for the run-to-run noise) but ranked once.\n\n")
within = [r["name"] for r in rows if abs(r["err"]) <= 15]
outside = [r["name"] for r in rows if abs(r["err"]) > 15]
w(f"15% check: {len(within)} of {len(rows)} within 15% ({', '.join(within) or 'none'})"
  + (f"; outside: {', '.join(outside)}" if outside else "") + ".\n\n")
w(f"Ranking, fastest first: simulated {' < '.join(sim_rank)}; measured "
  f"{' < '.join(meas_rank)}: the simulator's ranking "
  f"{'matches' if sim_rank == meas_rank else 'does NOT match'} the measured one.\n\n")
if "dp" in by and "dp-no-overlap" in by:
    a, b = by["dp"], by["dp-no-overlap"]
    w("## Allreduce overlapped with the backward (data parallelism)\n\n")
    w("| | without overlap ms | with overlap ms | drop ms | drop % |\n|---|---:|---:|---:|---:|\n")
    for k, label in (("sim", "simulated"), ("meas", "measured")):
        d = b[k] - a[k]
        w(f"| {label} | {b[k]:.1f} | {a[k]:.1f} | {d:.1f} | {100 * d / b[k]:.1f} |\n")
    dm, ds = b["meas"] - a["meas"], b["sim"] - a["sim"]
    if dm > 0 and ds > 0:
        verdict = (f"drops by {dm:.1f} ms; the simulator predicts a drop of {ds:.1f} ms, "
                   f"{100 * ds / dm:.0f}% of the measured one")
    elif dm > 0:
        verdict = f"drops by {dm:.1f} ms, but the simulator predicts no drop ({ds:+.1f} ms)"
    else:
        verdict = (f"does not drop ({-dm:+.1f} ms); the simulator predicts {ds:.1f} ms")
    w(f"\nWith overlap, data parallelism's measured iteration time {verdict}.\n\n")
w("## Timelines\n\n")
if small:
    w(f"[`{trace_name}`]({trace_name}) ({len(trace_text) // 1024} KB): open it in "
      "https://ui.perfetto.dev. One process per plan and source (`<plan>: simulated`, "
      "`<plan>: measured`, the measured one the last training step), one track per device.\n")
else:
    w(f"The merged trace ({len(trace_text) // 1024} KB, above {trace_limit_kb} KB) is not "
      f"committed: the script writes it to `out/predicted-vs-measured-two-server/{trace_name}`; "
      "open it in https://ui.perfetto.dev. One process per plan and source.\n")
f.close()
os.replace(doc + ".tmp", doc)
print(open(doc).read())
PY
