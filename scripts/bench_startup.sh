#!/usr/bin/env bash
# Start-up of `dapple`, side by side: an old one-binary dapple (linked with libtorch) against the
# torch-free front door, on `--help` and on the whole `dapple plan` for
# GNMT-16 on paper-a (global batch 1024, as docs/planning-report.md). Runs the two in turn,
# A B A B ..., and prints the median wall and CPU (user + system) time, the median of the
# pairwise wall ratios old/new and the peak resident memory of one more run (/usr/bin/time), as
# a Markdown table. On a loaded machine a short command's wall time is mostly waiting for a
# core: read the CPU time there.
#   scripts/bench_startup.sh OLD_DAPPLE [NEW_DAPPLE] [RUNS]
# NEW_DAPPLE defaults to build/tools/dapple/dapple, RUNS to 20. The OLD one: build any commit
# before the split (e.g. `git worktree add /tmp/old <commit>` and scripts/build.sh there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
old=$(realpath "$1")
new=$(realpath "${2:-$root/build/tools/dapple/dapple}")
runs=${3:-20}

python3 - "$old" "$new" "$runs" "$root" <<'PY'
import os, statistics, subprocess, sys, tempfile, time

old, new, runs, root = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
profile = os.path.join(root, "data/profiles/dapple/gnmt-16-pbs-64.txt")
cases = [
    ("dapple --help", ["--help"]),
    ("dapple --version", ["--version"]),
    ("dapple plan GNMT-16 paper-a", ["plan", "--profile", profile, "--cluster", "paper-a",
                                     "--global-batch", "1024", "--json"]),
]

def once(binary, args):
    """Wall seconds and CPU seconds of one run (os.wait4: this child's own rusage)."""
    start = time.perf_counter()
    p = subprocess.Popen([binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench_startup: {binary} {' '.join(args)} failed")
    return wall, usage.ru_utime + usage.ru_stime

def peak_mib(binary, args):
    """Peak resident memory of one run, as /usr/bin/time -v reports it (a child forked from
    python would count python's pages too)."""
    with tempfile.NamedTemporaryFile("r") as f:
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f.name, binary] + args, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return int(f.read().split()[-1]) / 1024

print(f"| command | old wall ms (median of {runs}) | new wall ms | old/new wall | old CPU ms "
      "| new CPU ms | old peak MiB | new peak MiB |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
med = statistics.median
for name, args in cases:
    once(old, args), once(new, args)  # warm-up: page cache
    o, n = [], []
    for _ in range(runs):
        o.append(once(old, args))
        n.append(once(new, args))
    ratio = med([a[0] / b[0] for a, b in zip(o, n)])
    print(f"| `{name}` | {med([r[0] for r in o]) * 1e3:.1f} | {med([r[0] for r in n]) * 1e3:.1f} "
          f"| {ratio:.1f}x | {med([r[1] for r in o]) * 1e3:.0f} | {med([r[1] for r in n]) * 1e3:.0f} "
          f"| {peak_mib(old, args):.0f} | {peak_mib(new, args):.0f} |")
PY
