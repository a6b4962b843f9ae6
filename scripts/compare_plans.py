#!/usr/bin/env python3
"""Runs the planning report's cases (scripts/planning_report.py: every profile of
data/profiles/dapple on paper-a, b and c at the report's global batch) with two dapple
binaries in turn and compares their `dapple plan --json` without the planning times: a
planner change that should keep every plan shows 0 differing cases. Prints each case that
differs (the two iteration times) and the sums of the wall times.

  scripts/compare_plans.py OLD_DAPPLE NEW_DAPPLE [extra dapple plan flags, e.g. --no-overlap]
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import planning_report as report  # noqa: E402


def without_times(x):
    if isinstance(x, dict):
        return {k: without_times(v) for k, v in x.items()
                if k not in ("planning_seconds", "profile")}
    if isinstance(x, list):
        return [without_times(v) for v in x]
    return x


def run(binary, profile, preset, gbs, extra):
    cmd = [binary, "plan", "--profile", profile, "--cluster", preset, "--global-batch",
           str(gbs), "--json"] + report.pbs_flag(os.path.basename(profile)) + extra
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    out = json.loads(p.stdout) if p.returncode == 0 else p.stderr.strip()[-300:]
    return out, wall


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old, new, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    prof_dir = os.path.join(report.ROOT, "data", "profiles", "dapple")
    walls = [0.0, 0.0]
    cases = differ = 0
    for f in sorted(x for x in os.listdir(prof_dir) if x.endswith(".txt")):
        for preset in report.PRESETS:
            gbs = report.global_batch(f)
            a, wa = run(old, os.path.join(prof_dir, f), preset, gbs, extra)
            b, wb = run(new, os.path.join(prof_dir, f), preset, gbs, extra)
            walls[0] += wa
            walls[1] += wb
            cases += 1
            if without_times(a) != without_times(b):
                differ += 1
                ia = a["iteration_ms"] if isinstance(a, dict) else a
                ib = b["iteration_ms"] if isinstance(b, dict) else b
                print(f"differs: {f} on {preset}: {ia} -> {ib}", flush=True)
    print(f"{cases} cases, {differ} differ; wall old {walls[0]:.1f} s, new {walls[1]:.1f} s, "
          f"new / old {walls[1] / walls[0]:.3f}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
