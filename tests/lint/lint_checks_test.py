#!/usr/bin/env python3
"""Tests of the lint checks themselves: each must pass on good code and fail on bad code.

scripts/check_function_length.py: a function of 80 lines passes, one of 81 fails and is
named with its length. scripts/check_layers.py: a tree whose includes go down passes; an
include up the layers, an include up inside plan/ or runtime/, one between side-by-side
layers and a plan/ or runtime/ file the table does not place each fail. The fixtures are written to a temporary
folder, so no tool reading the repository takes them for code.

  lint_checks_test.py [repository root]
"""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                    pathlib.Path(__file__).resolve().parent.parent.parent)
FAILURES = []


def run(script, *args):
  p = subprocess.run([sys.executable, str(ROOT / "scripts" / script)] + [str(a) for a in args],
                     capture_output=True, text=True)
  return p.returncode, p.stdout + p.stderr


def expect(name, cond, output):
  if not cond:
    FAILURES.append(f"{name}:\n{output}")
  print(f"{'ok  ' if cond else 'FAIL'} {name}")


def function_of(lines, name):
  """C++ text of a function `name` spanning exactly `lines` lines, header to brace."""
  body = [f"  x += {i};" for i in range(lines - 3)]
  return "\n".join([f"int {name}(int x) {{", *body, "  return x;", "}", ""])


def test_function_length(tmp):
  ok, long = tmp / "ok.cc", tmp / "long.cc"
  ok.write_text(function_of(80, "EightyLines"))
  long.write_text("namespace n {\n" + function_of(81, "EightyOneLines") + "}  // namespace n\n")
  rc, out = run("check_function_length.py", ok)
  expect("an 80-line function passes", rc == 0, out)
  rc, out = run("check_function_length.py", ok, long)
  expect("an 81-line function fails, named with its length",
         rc == 1 and "EightyOneLines is 81 lines" in out and "EightyLines " not in out, out)
  rc, out = run("check_function_length.py", "--max", "81", long)
  expect("--max 81 lets it pass", rc == 0, out)


def write(root, files):
  for rel, includes in files.items():
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#pragma once\n" + "".join(f'#include "{i}"\n' for i in includes))


def test_layers(tmp):
  good = {
      "src/dapple/common/error.h": [],
      "src/dapple/format/plan.h": ["dapple/common/error.h"],
      "src/dapple/plan/plan_costs.h": ["dapple/format/plan.h", "dapple/plan/stage_cost.h"],
      "src/dapple/plan/stage_cost.h": [],
      "src/dapple/plan/dp/dp_costs.h": ["dapple/plan/plan_costs.h", "dapple/plan/dp/x.h"],
      "src/dapple/plan/dp/x.h": [],
      "src/dapple/plan/planner.h": ["dapple/plan/dp/dp_costs.h"],
      "src/dapple/runtime/comm/c.h": [],
      "src/dapple/runtime/worker/w.h": ["dapple/runtime/comm/c.h", "dapple/plan/planner.h"],
      "tools/dapple/cmd.cc": ["dapple/plan/planner.h", "local.h"],
      "tools/dapple/local.h": [],
  }
  write(tmp / "good", good)
  rc, out = run("check_layers.py", tmp / "good")
  expect("includes down the layers pass", rc == 0, out)
  cases = {
      "an include up the layers": ("src/dapple/common/json.h", "dapple/format/plan.h",
                                   "layer format is not below common"),
      "an include up inside plan/": ("src/dapple/plan/dp/y.h", "dapple/plan/planner.h",
                                     "plan unit planner is not below dp/"),
      "an include between side-by-side layers": ("src/dapple/profiler/p.h",
                                                 "dapple/calibrate/c.h",
                                                 "layer calibrate is not below profiler"),
      "an include between side-by-side plan units": ("src/dapple/plan/search/s.h",
                                                     "dapple/plan/dp/x.h",
                                                     "plan unit dp/ is not below search/"),
      "an include up inside runtime/": ("src/dapple/runtime/comm/d.h",
                                        "dapple/runtime/worker/w.h",
                                        "runtime unit worker/ is not below comm/"),
  }
  for i, (name, (rel, include, message)) in enumerate(cases.items()):
    root = tmp / f"bad{i}"
    write(root, good)
    write(root, {rel: [include]})
    rc, out = run("check_layers.py", root)
    expect(f"{name} fails", rc == 1 and f"{rel}:2: includes {include}" in out and message in out,
           out)
  root = tmp / "unplaced"
  write(root, good)
  write(root, {"src/dapple/plan/new_part.h": []})
  rc, out = run("check_layers.py", root)
  expect("a plan/ file the table does not place fails",
         rc == 1 and "plan unit new_part is not in PLAN_LEVELS" in out, out)
  root = tmp / "unplaced_runtime"
  write(root, good)
  write(root, {"src/dapple/runtime/loose.h": []})
  rc, out = run("check_layers.py", root)
  expect("a runtime/ file the table does not place fails",
         rc == 1 and "runtime unit loose is not in RUNTIME_LEVELS" in out, out)


def main():
  with tempfile.TemporaryDirectory() as d:
    (pathlib.Path(d) / "length").mkdir()
    test_function_length(pathlib.Path(d) / "length")
    test_layers(pathlib.Path(d))
  if FAILURES:
    print("\n".join(FAILURES))
  return 1 if FAILURES else 0


if __name__ == "__main__":
  sys.exit(main())
