// CutExportedGraph: see export_cut.h (Note [Layers from module paths]).
#include "dapple/models/export_cut.h"

#include <algorithm>
#include <map>
#include <set>

#include "dapple/common/error.h"

namespace dapple {
namespace {

bool IsContainerType(const std::string& type) {
  for (const char* c : {"Sequential", "ModuleList", "ModuleDict"})
    if (type == std::string("torch.nn.modules.container.") + c) return true;
  return false;
}

// The unit of a node: its outermost module, and inside containers their element; "" for
// the top module's own nodes. With `depth` d > 0, the module d levels down (containers not
// counted), or the deepest one above it for a node of a module that has no deeper ones (a
// top-level head; a parent's own nodes, which read no parameters and so join a neighbour).
std::string UnitOfNode(const ExportNode& n, bool expand, int depth) {
  if (n.module_stack.empty()) return "";
  if (depth > 0) {
    int level = 0;
    std::string deepest;
    for (const auto& [path, type] : n.module_stack) {
      if (IsContainerType(type)) continue;
      deepest = path;
      if (++level == depth) break;
    }
    return deepest;
  }
  size_t i = 0;
  while (expand && IsContainerType(n.module_stack[i].second) && i + 1 < n.module_stack.size()) ++i;
  return n.module_stack[i].first;
}

// Calls `fn` on every value id `a` reads.
template <typename F>
void ForEachRead(const ExportNode& n, F fn) {
  for (const ExportArg& a : n.args)
    for (int v : a.values)
      if (v >= 0) fn(v);
}

struct ModuleRun {
  std::string unit;
  std::vector<int> nodes;
};

std::vector<ModuleRun> ModuleRunsOf(const ExportGraph& g, const std::vector<int>& nodes,
                                    bool expand, int depth) {
  std::vector<ModuleRun> runs;
  for (int k : nodes) {
    std::string unit = UnitOfNode(g.nodes[k], expand, depth);
    if (runs.empty()) {
      runs.push_back({unit, {}});
    } else if (!unit.empty() && unit != runs.back().unit) {
      if (runs.back().unit.empty()) {
        runs.back().unit = unit;  // leading glue
      } else {
        runs.push_back({unit, {}});
      }
    }
    runs.back().nodes.push_back(k);
  }
  if (runs.empty()) runs.push_back({"", {}});
  if (runs.front().unit.empty()) runs.front().unit = "forward";
  return runs;
}

// Runs that read no parameter or buffer join the run before them (the first, the one after).
void MergeParameterlessRuns(std::vector<ModuleRun>* runs, const ExportGraph& g) {
  std::set<int> trained;
  for (const ExportTensorInput& t : g.tensors)
    if (t.kind != ExportTensorInput::Kind::kConstant) trained.insert(t.value);
  for (size_t i = 0; i < runs->size() && runs->size() > 1;) {
    bool reads = false;
    for (int k : (*runs)[i].nodes)
      ForEachRead(g.nodes[k], [&](int v) { reads |= trained.count(v) > 0; });
    if (reads) {
      ++i;
      continue;
    }
    ModuleRun& r = (*runs)[i];
    ModuleRun& into = i == 0 ? (*runs)[1] : (*runs)[i - 1];
    into.nodes.insert(i == 0 ? into.nodes.begin() : into.nodes.end(), r.nodes.begin(),
                      r.nodes.end());
    runs->erase(runs->begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// Unique layer names: a unit's second run is "unit~2".
std::vector<std::string> UniqueLayerNames(const std::vector<ModuleRun>& runs) {
  std::map<std::string, int> seen;
  std::vector<std::string> names;
  for (const ModuleRun& r : runs) {
    int k = ++seen[r.unit];
    names.push_back(k == 1 ? r.unit : r.unit + "~" + std::to_string(k));
  }
  return names;
}

// Whether `n` reads a size of `t` (sym_size), not its values.
bool ReadsSizeOf(const ExportNode& n, int t) {
  return n.target == "torch.ops.aten.sym_size.int" && !n.args.empty() &&
         n.args[0].values == std::vector<int>{t};
}

// The values computed from `target`'s values (its sizes are the batch's, not its values).
std::set<int> ValuesFrom(const ExportGraph& g, int target) {
  std::set<int> from{target};
  for (const ExportNode& n : g.nodes) {
    if (ReadsSizeOf(n, target)) continue;
    bool depends = false;
    ForEachRead(n, [&](int v) { depends |= from.count(v) > 0; });
    if (depends)
      for (const auto& out : n.outputs) from.insert(out.begin(), out.end());
  }
  return from;
}

// Splits the nodes after the last submodule's off as the loss part.
std::vector<int> SplitLossNodes(const ExportGraph& g, std::vector<int>* nodes,
                                const std::set<int>& from_target, const std::string& file) {
  size_t split = 0;
  for (size_t i = 0; i < nodes->size(); ++i)
    if (!g.nodes[(*nodes)[i]].module_stack.empty()) split = i + 1;
  for (size_t i = 0; i < split; ++i) {
    const ExportNode& n = g.nodes[(*nodes)[i]];
    bool depends = false;
    ForEachRead(n, [&](int v) { depends |= from_target.count(v) > 0; });
    if (depends) {
      ThrowInput(
          "{}: forward uses its second argument (the target) before its last submodule call "
          "({}); dapple feeds the target to the loss after the model",
          file, n.target);
    }
  }
  std::vector<int> loss(nodes->begin() + static_cast<std::ptrdiff_t>(split), nodes->end());
  nodes->resize(split);
  return loss;
}

// Moves the integers out of `layer`'s live values: those it reads become sizes read from a
// tensor it receives (Note [Sizes at a cut]).
void ReadSizesAtStart(const ExportGraph& g, ExportLayer* layer, const std::string& file) {
  auto is_int = [&](int v) { return g.sym_exprs.count(v) > 0; };
  std::vector<int> tensors_in;
  for (int v : layer->live_in)
    if (!is_int(v)) tensors_in.push_back(v);
  for (int v : layer->live_in) {
    if (!is_int(v)) continue;
    bool found = false;
    for (int t : tensors_in) {
      auto dims = g.dim_exprs.find(t);
      if (dims == g.dim_exprs.end()) continue;
      for (size_t d = 0; d < dims->second.size() && !found; ++d)
        if (dims->second[d] == g.sym_exprs.at(v)) {
          layer->sizes.push_back({v, t, static_cast<int>(d)});
          found = true;
        }
      if (found) break;
    }
    if (!found) {
      ThrowInput("{}: layer {} uses the size {} ({}), which no tensor it receives has", file,
                 layer->name, g.value_names[v], g.sym_exprs.at(v));
    }
  }
  layer->live_in = tensors_in;
  std::erase_if(layer->live_out, is_int);
}

}  // namespace

ExportCut CutExportedGraph(const ExportGraph& g, bool expand, int depth, const std::string& file) {
  const size_t args = g.user_inputs.size();
  if (args < 1 || args > 2) {
    ThrowInput(
        "{}: forward takes {} inputs; dapple feeds one input, and the target as a second one "
        "to a forward that computes its own loss",
        file, args);
  }
  const int x = g.user_inputs[0];
  const int target = args == 2 ? g.user_inputs[1] : -1;
  // Sizes of the target are read where they are used, from a tensor with the same symbolic
  // dimension (Note [Sizes at a cut]): the target reaches only the loss part.
  std::vector<int> nodes;
  std::vector<int> target_sizes;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (target >= 0 && ReadsSizeOf(g.nodes[k], target)) {
      for (const auto& out : g.nodes[k].outputs)
        target_sizes.insert(target_sizes.end(), out.begin(), out.end());
    } else {
      nodes.push_back(static_cast<int>(k));
    }
  }
  ExportCut cut;
  // Token ids: the input (or a reshape of it) indexes an embedding; the first such table
  // bounds the ids.
  const std::set<int> from_input = ValuesFrom(g, x);
  for (const ExportNode& n : g.nodes) {
    if (n.target != "torch.ops.aten.embedding.default" || n.args.size() < 2 ||
        n.args[1].kind != ExportArg::Kind::kTensor || !from_input.count(n.args[1].values[0]))
      continue;
    for (size_t i = 0; i < g.tensors.size() && !cut.token_input; ++i)
      if (n.args[0].values == std::vector<int>{g.tensors[i].value}) {
        cut.token_input = true;
        cut.token_table = static_cast<int>(i);
      }
  }
  int final_value = -1;
  std::vector<int> loss_nodes;
  if (target >= 0) {
    const std::set<int> from_target = ValuesFrom(g, target);
    for (int out : g.user_outputs)
      if (final_value < 0 && from_target.count(out)) final_value = out;
    if (final_value < 0)
      ThrowInput("{}: forward(input, target) returns nothing computed from the target", file);
    loss_nodes = SplitLossNodes(g, &nodes, from_target, file);
  } else {
    if (g.user_outputs.size() != 1)
      ThrowInput("{}: forward returns {} values; the loss takes one tensor", file,
                 g.user_outputs.size());
    final_value = g.user_outputs[0];
  }
  std::vector<ModuleRun> runs = ModuleRunsOf(g, nodes, expand, depth);
  MergeParameterlessRuns(&runs, g);
  const std::vector<std::string> names = UniqueLayerNames(runs);

  // Where each value is defined (-1: the input) and the last group reading it (the loss part
  // and the final value count as group `groups`).
  const int groups = static_cast<int>(runs.size());
  std::map<int, int> def{{x, -1}}, last_use;
  std::map<int, int> order{{x, -1}};
  for (int v : target_sizes) def[v] = order[v] = -1;
  for (int c = 0; c <= groups; ++c) {
    const std::vector<int>& part = c < groups ? runs[c].nodes : loss_nodes;
    for (int k : part) {
      ForEachRead(g.nodes[k], [&](int v) {
        if (def.count(v) && def[v] < c) last_use[v] = std::max(last_use[v], c);
      });
      for (const auto& out : g.nodes[k].outputs)
        for (int v : out) {
          def[v] = c;
          order[v] = k;
        }
    }
  }
  if (target < 0 || def.count(final_value))
    last_use[final_value] = std::max(last_use[final_value], groups);
  auto live_at = [&](int c) {
    std::vector<std::pair<int, int>> live;  // (order, value)
    for (const auto& [v, d] : def)
      if (d < c && last_use.count(v) && last_use[v] >= c) live.push_back({order[v], v});
    std::sort(live.begin(), live.end());
    std::vector<int> ids;
    for (const auto& [o, v] : live) ids.push_back(v);
    return ids;
  };
  std::map<int, int> tensor_index;
  for (size_t i = 0; i < g.tensors.size(); ++i)
    tensor_index[g.tensors[i].value] = static_cast<int>(i);
  auto tensors_of = [&](const std::vector<int>& part) {
    std::set<int> read;
    for (int k : part)
      ForEachRead(g.nodes[k], [&](int v) {
        if (auto it = tensor_index.find(v); it != tensor_index.end()) read.insert(it->second);
      });
    return std::vector<int>(read.begin(), read.end());
  };
  for (int c = 0; c < groups; ++c) {
    ExportLayer layer{
        names[c], runs[c].nodes, live_at(c), live_at(c + 1), tensors_of(runs[c].nodes), {}};
    ReadSizesAtStart(g, &layer, file);
    cut.layers.push_back(std::move(layer));
  }
  std::vector<int> out = live_at(groups);
  std::erase_if(out, [&](int v) { return g.sym_exprs.count(v) > 0; });
  if (out.size() != 1) {
    ThrowInput("{}: the {} uses {} values of the model; dapple passes one tensor to it", file,
               target >= 0 ? "loss computed in forward" : "model's output", out.size());
  }
  if (target >= 0) {
    cut.loss =
        ExportLayer{"loss", loss_nodes, live_at(groups), {final_value}, tensors_of(loss_nodes), {}};
    cut.loss->live_in.push_back(target);
    ReadSizesAtStart(g, &*cut.loss, file);
  }
  return cut;
}

}  // namespace dapple
