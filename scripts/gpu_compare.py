#!/usr/bin/env python3
"""Compares two `dapple train --log-json` outputs step by step (scripts/gpu_check.sh):
every step's loss within a relative tolerance (|a - b| <= tol * max(1, |a|)), and the final
summary's step time side by side. Prints one line; exit 1 when a loss differs or a log holds no
steps.
  scripts/gpu_compare.py NAME TOL reference.log candidate.log [resumed]
With `resumed` the candidate continued a checkpoint: its steps are the reference's last ones.
"""
import json
import sys


def steps(path):
    losses, summary = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            if "step" in j and "loss" in j:
                losses[j["step"]] = j["loss"]
            elif "summary" in j:
                summary = j["summary"]
    return losses, summary


def main():
    name, tol, ref_path, cand_path = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    ref, ref_sum = steps(ref_path)
    cand, cand_sum = steps(cand_path)
    resumed = len(sys.argv) > 5 and sys.argv[5] == "resumed"
    same = set(cand) <= set(ref) if resumed else set(cand) == set(ref)
    if not cand or not same:
        print(f"{name}: FAIL: steps differ ({sorted(ref)} vs {sorted(cand)})")
        return 1
    ref = {s: ref[s] for s in cand}
    worst = max(abs(ref[s] - cand[s]) / max(1.0, abs(ref[s])) for s in ref)
    ms = lambda s: s.get("step_ms", float("nan")) if s else float("nan")  # noqa: E731
    verdict = "ok" if worst <= tol else "FAIL"
    print(f"{name}: {verdict}: {len(ref)} steps, largest relative loss difference {worst:.3g} "
          f"(tolerance {tol:g}); final loss {ref[max(ref)]:.9g} vs {cand[max(cand)]:.9g}; "
          f"step {ms(ref_sum):.2f} ms vs {ms(cand_sum):.2f} ms")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
