// The grouping both model cuts share (Note [Layers from the graph] in graph_cut.h, Note
// [Layers from module paths] in export_cut.h): a forward's operations in order, each tagged
// with its unit ("" for glue), become runs of one unit; glue joins the run before it (the
// first run when there is none); a run that reads no parameter or buffer joins the run before
// it (the first one, the run after it); a unit's second run is named "unit~2".
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace dapple::internal {

template <typename Node>
struct UnitRun {
  std::string unit;
  std::vector<Node> nodes;
};

// Groups `nodes` by `unit_of(node)` (a string, "" for glue).
template <typename Node, typename UnitOf>
std::vector<UnitRun<Node>> UnitRunsOf(const std::vector<Node>& nodes, UnitOf unit_of) {
  std::vector<UnitRun<Node>> runs;
  for (const Node& n : nodes) {
    std::string unit = unit_of(n);
    if (runs.empty()) {
      runs.push_back({unit, {}});
    } else if (!unit.empty() && unit != runs.back().unit) {
      if (runs.back().unit.empty()) {
        runs.back().unit = unit;  // leading glue
      } else {
        runs.push_back({unit, {}});
      }
    }
    runs.back().nodes.push_back(n);
  }
  if (runs.empty()) runs.push_back({"", {}});
  if (runs.front().unit.empty()) runs.front().unit = "forward";
  return runs;
}

// Merges the runs for which `reads_tensors(run)` is false into a neighbour.
template <typename Node, typename ReadsTensors>
void MergeParameterlessRuns(std::vector<UnitRun<Node>>* runs, ReadsTensors reads_tensors) {
  for (size_t i = 0; i < runs->size() && runs->size() > 1;) {
    UnitRun<Node>& r = (*runs)[i];
    if (reads_tensors(r)) {
      ++i;
      continue;
    }
    UnitRun<Node>& into = i == 0 ? (*runs)[1] : (*runs)[i - 1];
    into.nodes.insert(i == 0 ? into.nodes.begin() : into.nodes.end(), r.nodes.begin(),
                      r.nodes.end());
    runs->erase(runs->begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// Unique layer names: a unit's second run is "unit~2".
template <typename Node>
std::vector<std::string> UniqueLayerNames(const std::vector<UnitRun<Node>>& runs) {
  std::map<std::string, int> seen;
  std::vector<std::string> names;
  for (const UnitRun<Node>& r : runs) {
    int k = ++seen[r.unit];
    names.push_back(k == 1 ? r.unit : r.unit + "~" + std::to_string(k));
  }
  return names;
}

}  // namespace dapple::internal
