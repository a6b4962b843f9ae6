#!/usr/bin/env python3
"""Planning time of two dapple binaries, side by side, on the planning report's commands
(scripts/planning_report.py: every profile of data/profiles/dapple on paper-a, b and c at
the report's global batch). A benchmark, not a test.

Per command: one warm-up run of each, then PAIRS pairs A B, A B, ... (alternated, so that
a change of load falls on both). Each run's wall seconds, CPU seconds (user + system of the
process and its threads) and `planning_seconds` (the DAPPLE planner's own time, from
--json). Prints per command the median wall seconds of A's runs and of B's, the median of
the pair ratios B / A of each, then the median over the commands and the sums, and whether
the plans differ (as scripts/compare_plans.py compares them, with both iteration times
where they differ).

  scripts/bench_planning_time.py A_DAPPLE B_DAPPLE [--pairs N] [--only SUBSTRING]
                                 [-- extra dapple plan flags]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_plans  # noqa: E402
import planning_report as report  # noqa: E402


def run(binary, profile, preset, gbs, extra):
    """(wall s, CPU s, planning s, plan JSON without times) of one `dapple plan` run."""
    cmd = [binary, "plan", "--profile", profile, "--cluster", preset, "--global-batch",
           str(gbs), "--json"] + report.pbs_flag(os.path.basename(profile)) + extra
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.strip()[-300:]}")
    out = json.loads(p.stdout)
    planning = out.get("result", {}).get("planning_seconds", 0.0)
    return wall, cpu, planning, (out.get("iteration_ms"), compare_plans.without_times(out))


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--only", default="", help="only the profiles whose name has this")
    args = ap.parse_args(argv)
    prof_dir = os.path.join(report.ROOT, "data", "profiles", "dapple")
    names = ["wall", "cpu", "planning"]
    ratios = {k: [] for k in names}
    sums = {k: [0.0, 0.0] for k in names}
    differ = 0
    print(f"{'command':<48} {'A wall':>7} {'B wall':>7} {'wall B/A':>9} {'cpu B/A':>8} "
          f"{'plan B/A':>9}  plans")
    for f in sorted(x for x in os.listdir(prof_dir) if x.endswith(".txt") and args.only in x):
        for preset in report.PRESETS:
            gbs = report.global_batch(f)
            path = os.path.join(prof_dir, f)
            plans = [run(b, path, preset, gbs, extra)[3] for b in (args.a, args.b)]  # warm-up
            same = plans[0][1] == plans[1][1]
            differ += 0 if same else 1
            verdict = "same" if same else f"differ: {plans[0][0]:.1f} -> {plans[1][0]:.1f} ms"
            pair = {k: [] for k in names}
            walls = ([], [])  # seconds of A's runs and B's
            for _ in range(args.pairs):
                ra = run(args.a, path, preset, gbs, extra)
                rb = run(args.b, path, preset, gbs, extra)
                walls[0].append(ra[0])
                walls[1].append(rb[0])
                for i, k in enumerate(names):
                    pair[k].append(rb[i] / ra[i] if ra[i] > 0 else float("nan"))
                    sums[k][0] += ra[i] / args.pairs
                    sums[k][1] += rb[i] / args.pairs
            med = {k: statistics.median(v) for k, v in pair.items()}
            for k in names:
                ratios[k].append(med[k])
            print(f"{f + ' ' + preset:<48} {statistics.median(walls[0]):>7.3f} "
                  f"{statistics.median(walls[1]):>7.3f} {med['wall']:>9.3f} {med['cpu']:>8.3f} "
                  f"{med['planning']:>9.3f}  {verdict}", flush=True)
    print(f"{len(ratios['wall'])} commands, {differ} with different plans")
    for k in names:
        print(f"{k}: median of ratios B/A {statistics.median(ratios[k]):.3f}; "
              f"sums A {sums[k][0]:.2f} s, B {sums[k][1]:.2f} s, B/A {sums[k][1] / sums[k][0]:.3f}")


if __name__ == "__main__":
    main()
