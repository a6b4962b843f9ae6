// CutExportedGraph: see export_cut.h (Note [Layers from module paths]).
#include "dapple/models/export_cut.h"

#include <algorithm>
#include <map>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/unit_runs.h"

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

using ModuleRun = internal::UnitRun<int>;

// Whether the nodes of `r` read a parameter or buffer (of `trained`, their value ids).
bool ReadsTrained(const ModuleRun& r, const ExportGraph& g, const std::set<int>& trained) {
  bool reads = false;
  for (int k : r.nodes) ForEachRead(g.nodes[k], [&](int v) { reads |= trained.count(v) > 0; });
  return reads;
}

// The nodes grouped into runs of one unit; a run without parameters or buffers joins a
// neighbour (unit_runs.h).
std::vector<ModuleRun> LayerRunsOf(const ExportGraph& g, const std::vector<int>& nodes, bool expand,
                                   int depth) {
  std::vector<ModuleRun> runs =
      internal::UnitRunsOf(nodes, [&](int k) { return UnitOfNode(g.nodes[k], expand, depth); });
  std::set<int> trained;
  for (const ExportTensorInput& t : g.tensors)
    if (t.kind != ExportTensorInput::Kind::kConstant) trained.insert(t.value);
  internal::MergeParameterlessRuns(&runs,
                                   [&](const ModuleRun& r) { return ReadsTrained(r, g, trained); });
  return runs;
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

// The roles of forward's inputs: without --loss (`own_loss`) the last of two or more is the
// target; the others are the model's inputs.
void SetInputRoles(const ExportGraph& g, bool own_loss, const std::string& file, ExportCut* cut) {
  if (g.user_inputs.empty()) ThrowInput("{}: forward takes no tensor input", file);
  cut->inputs = g.user_inputs;
  if (own_loss && g.user_inputs.size() >= 2) {
    cut->target = g.user_inputs.back();
    cut->inputs.pop_back();
  }
}

// Token ids: the first input (or a reshape of it) indexes an embedding; the first such
// table bounds the ids.
void FindTokenTable(const ExportGraph& g, ExportCut* cut) {
  const std::set<int> from_input = ValuesFrom(g, cut->inputs[0]);
  for (const ExportNode& n : g.nodes) {
    if (n.target != "torch.ops.aten.embedding.default" || n.args.size() < 2 ||
        n.args[1].kind != ExportArg::Kind::kTensor || !from_input.count(n.args[1].values[0]))
      continue;
    for (size_t i = 0; i < g.tensors.size() && !cut->token_input; ++i)
      if (n.args[0].values == std::vector<int>{g.tensors[i].value}) {
        cut->token_input = true;
        cut->token_table = static_cast<int>(i);
      }
  }
}

// The value the loss takes (the model's output) or, for a forward computing its own loss,
// the loss; the loss part's nodes are split off `nodes`.
int FinalValue(const ExportGraph& g, int target, std::vector<int>* nodes,
               std::vector<int>* loss_nodes, const std::string& file) {
  if (target < 0) {
    if (g.user_outputs.size() != 1)
      ThrowInput(
          "{}: forward returns {} values; the loss takes one tensor (a forward that computes "
          "its own loss takes its target last, and no --loss)",
          file, g.user_outputs.size());
    return g.user_outputs[0];
  }
  const std::set<int> from_target = ValuesFrom(g, target);
  int final_value = -1;
  for (int out : g.user_outputs)
    if (final_value < 0 && from_target.count(out)) final_value = out;
  if (final_value < 0)
    ThrowInput("{}: forward(..., {}) returns nothing computed from the target", file,
               g.value_names[target]);
  *loss_nodes = SplitLossNodes(g, nodes, from_target, file);
  return final_value;
}

// Where each value is defined and last read, by group: the layers' runs 0 .. groups-1, the
// loss part and the final value group `groups`; the inputs are defined before group 0.
class LiveValues {
 public:
  LiveValues(const ExportGraph& g, const std::vector<ModuleRun>& runs,
             const std::vector<int>& loss_nodes, const std::vector<int>& before, int final_value,
             bool has_target) {
    const int groups = static_cast<int>(runs.size());
    for (int v : before) def_[v] = order_[v] = -1;
    for (int c = 0; c <= groups; ++c) {
      for (int k : c < groups ? runs[c].nodes : loss_nodes) {
        ForEachRead(g.nodes[k], [&](int v) {
          if (def_.count(v) && def_[v] < c) last_use_[v] = std::max(last_use_[v], c);
        });
        for (const auto& out : g.nodes[k].outputs)
          for (int v : out) def_[v] = c, order_[v] = k;
      }
    }
    if (!has_target || def_.count(final_value))
      last_use_[final_value] = std::max(last_use_[final_value], groups);
  }

  // The values defined before group `c` and read at or after it, in the order defined.
  std::vector<int> At(int c) const {
    std::vector<std::pair<int, int>> live;  // (order, value)
    for (const auto& [v, d] : def_)
      if (auto u = last_use_.find(v); d < c && u != last_use_.end() && u->second >= c)
        live.push_back({order_.at(v), v});
    std::sort(live.begin(), live.end());
    std::vector<int> ids;
    for (const auto& [o, v] : live) ids.push_back(v);
    return ids;
  }

 private:
  std::map<int, int> def_, last_use_, order_;
};

// The indices into the graph's tensors that `nodes` read.
std::vector<int> TensorsRead(const ExportGraph& g, const std::vector<int>& nodes) {
  std::map<int, int> index;
  for (size_t i = 0; i < g.tensors.size(); ++i) index[g.tensors[i].value] = static_cast<int>(i);
  std::set<int> read;
  for (int k : nodes)
    ForEachRead(g.nodes[k], [&](int v) {
      if (auto it = index.find(v); it != index.end()) read.insert(it->second);
    });
  return {read.begin(), read.end()};
}

}  // namespace

ExportCut CutExportedGraph(const ExportGraph& g, const ExportCutOptions& o,
                           const std::string& file) {
  ExportCut cut;
  SetInputRoles(g, o.own_loss, file, &cut);
  const int target = cut.target;
  // Sizes of the target are read where they are used, from a tensor with the same symbolic
  // dimension (Note [Sizes at a cut]): the target reaches only the loss part.
  std::vector<int> nodes, before = cut.inputs;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (target >= 0 && ReadsSizeOf(g.nodes[k], target)) {
      for (const auto& out : g.nodes[k].outputs)
        before.insert(before.end(), out.begin(), out.end());
    } else {
      nodes.push_back(static_cast<int>(k));
    }
  }
  FindTokenTable(g, &cut);
  std::vector<int> loss_nodes;
  const int final_value = FinalValue(g, target, &nodes, &loss_nodes, file);
  const std::vector<ModuleRun> runs = LayerRunsOf(g, nodes, o.expand, o.depth);
  const std::vector<std::string> names = internal::UniqueLayerNames(runs);
  const int groups = static_cast<int>(runs.size());
  const LiveValues live(g, runs, loss_nodes, before, final_value, target >= 0);
  for (int c = 0; c < groups; ++c) {
    ExportLayer layer{
        names[c], runs[c].nodes, live.At(c), live.At(c + 1), TensorsRead(g, runs[c].nodes), {}};
    ReadSizesAtStart(g, &layer, file);
    cut.layers.push_back(std::move(layer));
  }
  std::vector<int> out = live.At(groups);
  std::erase_if(out, [&](int v) { return g.sym_exprs.count(v) > 0; });
  if (out.size() != 1) {
    ThrowInput("{}: the {} uses {} values of the model; dapple passes one tensor to it", file,
               target >= 0 ? "loss computed in forward" : "model's output", out.size());
  }
  if (target >= 0) {
    cut.loss = ExportLayer{
        "loss", loss_nodes, live.At(groups), {final_value}, TensorsRead(g, loss_nodes), {}};
    cut.loss->live_in.push_back(target);
    ReadSizesAtStart(g, &*cut.loss, file);
  }
  return cut;
}

}  // namespace dapple
