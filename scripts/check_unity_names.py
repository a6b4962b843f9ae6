#!/usr/bin/env python3
"""Lists file-local names that two files of one build target define (Note [Unity builds]).

A unity build compiles a target's .cc files in batches, one translation unit per batch, so
two files of a target that define the same name in an anonymous namespace (or `static`)
clash there, though each compiles alone. This finds such names without compiling: the
definitions at column 0 inside `namespace {` ... `}  // namespace` (the project's
clang-format style), per folder of sources (one folder is one target). Prints each clash
and exits 1 when there is one. Usage: check_unity_names.py [repository root]
"""
import collections
import pathlib
import re
import sys

# A definition at column 0: a function (name before "("), a variable or constant (name
# before "=" or "{" or ";"), or a type.
TYPE = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:struct|class|enum(?:\s+class)?|union)\s+(\w+)")
FUNC = re.compile(r"^(?!using\b|namespace\b|return\b|typedef\b|template\b)[A-Za-z_][\w:<>,\s\*&]*?[\s\*&](\w+)\s*\(")
VAR = re.compile(r"^(?!using\b|namespace\b|typedef\b|template\b)[A-Za-z_][\w:<>,\s\*&]*?[\s\*&](\w+)\s*(?:=|\{|;|\[)")
MACRO_CALL = re.compile(r"^[A-Z][A-Z0-9_]*\s*\(")  # TEST(...), INSTANTIATE_...(...)


def local_names(path):
  names = set()
  depth = 0  # anonymous namespaces open
  for line in path.read_text(errors="replace").splitlines():
    if re.match(r"^namespace\s*\{", line):
      depth += 1
      continue
    if depth and re.match(r"^\}\s*//\s*namespace\s*$", line):
      depth -= 1
      continue
    static = line.startswith("static ")
    if not (depth or static) or not line or line[0] in " \t#/}{)" or MACRO_CALL.match(line):
      continue
    for pattern in (TYPE, FUNC, VAR):
      m = pattern.match(line)
      if m and "::" not in m.group(0).split("(")[0].split()[-1]:
        names.add(m.group(1))
        break
  return names


def main():
  root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
  folders = collections.defaultdict(list)
  for top in ("src", "tests", "tools", "bench"):
    for cc in sorted((root / top).rglob("*.cc")):
      folders[cc.parent].append(cc)
  clashes = 0
  for folder, files in sorted(folders.items()):
    where = collections.defaultdict(list)
    for f in files:
      for name in local_names(f):
        where[name].append(f.name)
    for name, fs in sorted(where.items()):
      if len(fs) > 1:
        clashes += 1
        print(f"{folder.relative_to(root)}: '{name}' is file-local in {', '.join(fs)}")
  if clashes:
    print(f"{clashes} file-local names defined in more than one file of a target: a unity "
          "build (Note [Unity builds] in CMakeLists.txt) would not compile; rename them")
  return 1 if clashes else 0


if __name__ == "__main__":
  sys.exit(main())
