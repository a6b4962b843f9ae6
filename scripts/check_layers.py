#!/usr/bin/env python3
"""Lists every include that runs back up the layers of the code (docs/design.md section 9).

The layers, lowest first, are LAYERS below; inside plan/ the order is PLAN_LEVELS, inside
runtime/ RUNTIME_LEVELS. A file may include a file of its own unit (a layer, inside plan/ a
sub-folder or a file with its header, inside runtime/ a sub-folder) or of a unit on a lower
level; units side by side on one level include neither each other nor anything above. A file
of plan/ or runtime/ that the table does not place is an error too, so that a new file is
given its place. Prints `file:line: includes X (unit a above unit b)`
for each and exits 1 when there is one.

  check_layers.py [repository root]
"""
import pathlib
import re
import sys

# The layers of src/dapple/ and tools/, lowest first; a row's layers are side by side.
LAYERS = [
    ["common"],
    ["format"],
    ["cost"],
    ["schedule"],
    ["sim"],
    ["plan"],
    ["cpu"],
    ["models"],
    ["cuda"],  # libdapple_cuda.so, loaded by the runtime on demand
    ["runtime"],
    ["profiler", "calibrate"],
    ["tools"],
]

# Inside src/dapple/plan/, lowest first: sub-folders (ending in /) and files by stem (a
# header with its .cc). The entry, planner.h, is the top; its option and result types lie
# at the bottom (plan_options.h) so that every part may take them.
PLAN_LEVELS = [
    # What a plan's costs are made of: the API's types, the latency L, the work on the
    # cores, the choice of the layers that re-compute, one stage's figures.
    ["plan_options", "pipeline_latency", "parallel_for", "recompute_choice", "stage_cost"],
    ["shard_memo"],                  # the stage figures kept per planner call
    ["plan_costs"],                  # a plan's costs as the planner sees them
    # The DP; the cheap answers to "is this plan slower than t?"; a V's cut into chunks.
    ["dp/", "search/", "v_cut"],
    ["baselines/", "interleaving"],  # the baseline planners; plans with chunks
    ["refine/"],                     # the local search after the proposals
    ["proposals"],                   # what one planner call shares, and the proposals
    ["size_searches", "v_search"],   # each micro-batch size alone; the V shapes' search
    ["family_search", "schedule_offers"],  # per schedule family; offers on the winners
    ["planner"],                     # the entry: RunPlanner
]

# The sub-folders of src/dapple/runtime/, lowest first (docs/runtime.md, "Files").
RUNTIME_LEVELS = [
    ["comm/"],                    # devices, the communicator and its transports, the rank grid
    ["optim/"],                   # optimizers, their sharding, clipping, the learning rate
    ["checkpoint/", "worker/"],   # checkpoints and recipes; the stage worker and chunks
    ["launch/"],                  # the local launcher and its restarts
    ["train/"],                   # the options, the entry and one rank's run in phases
]

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCES = (".h", ".cc")


def levels(rows):
  return {unit: i for i, row in enumerate(rows) for unit in row}


LAYER_LEVEL = levels(LAYERS)
PLAN_LEVEL = levels(PLAN_LEVELS)
RUNTIME_LEVEL = levels(RUNTIME_LEVELS)
# The layers with a table inside: (table name, its levels).
INNER = {"plan": ("PLAN_LEVELS", PLAN_LEVEL), "runtime": ("RUNTIME_LEVELS", RUNTIME_LEVEL)}


def layer_of(root, path):
  """The layer of `path` (a file of src/dapple/ or tools/), or None."""
  rel = path.relative_to(root).parts
  if rel[0] == "tools":
    return "tools"
  if rel[:2] == ("src", "dapple") and len(rel) > 3:
    return rel[2]
  return None


def inner_unit(root, layer, path):
  """The unit of a file of src/dapple/<layer>/: its sub-folder (with /) or its stem."""
  rel = path.relative_to(root / "src" / "dapple" / layer).parts
  return rel[0] + "/" if len(rel) > 1 else pathlib.Path(rel[0]).stem


def resolve(root, path, include):
  if include.startswith("dapple/"):
    return root / "src" / include
  return path.parent / include


def problems(root):
  """(file, line, message) of each include that runs back up, and each unplaced file."""
  out = []
  files = sorted(p for d in ("src", "tools") for p in (root / d).rglob("*")
                 if p.suffix in SOURCES and p.is_file())
  for path in files:
    layer = layer_of(root, path)
    if layer is None:
      continue
    if layer not in LAYER_LEVEL:
      out.append((path, 1, f"layer {layer} is not in check_layers.py's LAYERS"))
      continue
    inner = INNER.get(layer)
    if inner and inner_unit(root, layer, path) not in inner[1]:
      out.append((path, 1, f"{layer} unit {inner_unit(root, layer, path)} is not in {inner[0]}"))
      continue
    for n, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
      m = INCLUDE.match(text)
      if not m:
        continue
      target = resolve(root, path, m.group(1))
      if not target.is_relative_to(root):
        continue
      to_layer = layer_of(root, target)
      if to_layer is None or to_layer == layer:
        if inner and target.is_relative_to(root / "src" / "dapple" / layer):
          level = inner[1]
          src, dst = inner_unit(root, layer, path), inner_unit(root, layer, target)
          if src != dst and level.get(dst, len(level)) >= level[src]:
            out.append((path, n, f"includes {m.group(1)} ({layer} unit {dst} is not below {src})"))
        continue
      if LAYER_LEVEL.get(to_layer, len(LAYERS)) >= LAYER_LEVEL[layer]:
        out.append((path, n, f"includes {m.group(1)} (layer {to_layer} is not below {layer})"))
  return out


def main():
  root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                      pathlib.Path(__file__).resolve().parent.parent).resolve()
  found = problems(root)
  for path, line, message in found:
    print(f"{path.relative_to(root)}:{line}: {message}")
  if found:
    print(f"{len(found)} include(s) against the layers (docs/design.md section 9)")
  return 1 if found else 0


if __name__ == "__main__":
  sys.exit(main())
