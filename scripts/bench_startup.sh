#!/usr/bin/env bash
# Start-up of `dapple`, side by side: an old one-binary dapple (linked with libtorch) against the
# torch-free front door (issue 15, item 4), on `--help` and on the whole `dapple plan` for
# GNMT-16 on paper-a (global batch 1024, as docs/planning-report.md). Runs the two in turn,
# A B A B ..., and prints the median wall time, the median of the pairwise ratios old/new and the
# largest peak resident memory of a run, as a Markdown table.
#   scripts/bench_startup.sh OLD_DAPPLE [NEW_DAPPLE] [RUNS]
# NEW_DAPPLE defaults to build/tools/dapple/dapple, RUNS to 20. The OLD one: build any commit
# before the split (e.g. `git worktree add /tmp/old <commit>` and scripts/build.sh there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
old=$(realpath "$1")
new=$(realpath "${2:-$root/build/tools/dapple/dapple}")
runs=${3:-20}

python3 - "$old" "$new" "$runs" "$root" <<'PY'
import os, statistics, subprocess, sys, time

old, new, runs, root = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
profile = os.path.join(root, "data/profiles/dapple/gnmt-16-pbs-64.txt")
cases = [
    ("dapple --help", ["--help"]),
    ("dapple --version", ["--version"]),
    ("dapple plan GNMT-16 paper-a", ["plan", "--profile", profile, "--cluster", "paper-a",
                                     "--global-batch", "1024", "--json"]),
]

def once(binary, args):
    """Wall seconds and peak resident KiB of one run (os.wait4: this child's own rusage)."""
    start = time.perf_counter()
    p = subprocess.Popen([binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench_startup: {binary} {' '.join(args)} failed")
    return wall, usage.ru_maxrss

print(f"| command | old ms (median of {runs}) | new ms | old/new | old peak MiB | new peak MiB |")
print("|---|---:|---:|---:|---:|---:|")
for name, args in cases:
    once(old, args), once(new, args)  # warm-up: page cache
    o, n, ratios = [], [], []
    for _ in range(runs):
        o.append(once(old, args))
        n.append(once(new, args))
        ratios.append(o[-1][0] / n[-1][0])
    med = lambda xs: statistics.median(xs)
    print(f"| `{name}` | {med([w for w, _ in o]) * 1e3:.1f} | {med([w for w, _ in n]) * 1e3:.1f} "
          f"| {med(ratios):.1f}x | {max(r for _, r in o) / 1024:.0f} "
          f"| {max(r for _, r in n) / 1024:.0f} |")
PY
