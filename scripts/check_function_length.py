#!/usr/bin/env python3
"""Lists every C++ function longer than the limit (80 lines, from the line that names it to
its closing brace), member functions and functions in headers included.

Universal Ctags finds the definitions and their ends (`--fields=+ne`). A long function is
split by meaning into named helpers, one concept each; there is no allow-list. Prints
`file:line: Function is N lines (limit 80)` for each and exits 1 when there is one.

  check_function_length.py [--max N] [PATH ...]

PATHs are files or folders (default: the repository's src/ and tools/).
"""
import argparse
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIMIT = 80


def functions(paths):
  """(file, name, first line, last line) of each function definition under `paths`."""
  ctags = shutil.which("ctags")
  if not ctags:
    sys.exit("check_function_length: Universal Ctags (ctags) is not installed")
  cmd = [ctags, "-R", "--languages=C++", "--map-C++=+.h", "--kinds-C++=f", "--fields=+ne",
         "--sort=no", "-o", "-"] + [str(p) for p in paths]
  out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
  for row in out.splitlines():
    cols = row.split("\t")
    fields = dict(c.split(":", 1) for c in cols[3:] if ":" in c)
    if "line" in fields and "end" in fields:
      yield cols[1], cols[0], int(fields["line"]), int(fields["end"])


def too_long(paths, limit):
  """(file, line, name, length) of each function over `limit` lines, longest first."""
  found = [(f, first, name, last - first + 1) for f, name, first, last in functions(paths)
           if last - first + 1 > limit]
  return sorted(found, key=lambda x: (-x[3], x[0], x[1]))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--max", type=int, default=LIMIT, help="the most lines a function may have")
  ap.add_argument("paths", nargs="*", type=pathlib.Path,
                  default=[ROOT / "src", ROOT / "tools"])
  args = ap.parse_args()
  missing = [p for p in args.paths if not p.exists()]
  if missing:
    sys.exit(f"check_function_length: no such path: {missing[0]}")
  found = too_long(args.paths, args.max)
  for f, line, name, length in found:
    path = pathlib.Path(f).resolve()
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else f
    print(f"{shown}:{line}: {name} is {length} lines (limit {args.max})")
  if found:
    print(f"{len(found)} function(s) over {args.max} lines: split each by meaning "
          f"into named helpers")
  return 1 if found else 0


if __name__ == "__main__":
  sys.exit(main())
