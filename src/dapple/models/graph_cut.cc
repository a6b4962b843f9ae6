// CutForwardGraph: see graph_cut.h (Note [Layers from the graph]).
#include "dapple/models/graph_cut.h"

#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>

#include <algorithm>
#include <map>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/graph_inline.h"
#include "dapple/models/graph_layer_build.h"
#include "dapple/models/unit_runs.h"

namespace dapple {
namespace {

using internal::ForEachUse;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

bool IsContainer(const torch::jit::Module& m) {
  auto name = m.type()->name();
  if (!name || name->qualifiedName().find("torch.nn.modules.container") == std::string::npos)
    return false;
  const std::string& base = name->name();
  return base == "Sequential" || base == "ModuleList" || base == "ModuleDict";
}

// The unit (Note [Layers from the graph]) of the submodule at `path`; "" for the top module.
std::string UnitOf(const torch::jit::Module& top, const std::string& path, bool expand) {
  torch::jit::Module m = top;
  std::string unit;
  size_t start = 0;
  while (start < path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    std::string part = path.substr(start, dot - start);
    m = m.attr(part).toModule();
    unit += (unit.empty() ? "" : ".") + part;
    if (!expand || !IsContainer(m)) break;
    start = dot + 1;
  }
  return unit;
}

using Run = internal::UnitRun<Node*>;

// The forward's top-level operations (no constants) grouped into runs of one unit each
// (unit_runs.h).
std::vector<Run> RunsOf(const std::vector<Node*>& nodes, const internal::InlinedForward& f,
                        const torch::jit::Module& top, bool expand) {
  return internal::UnitRunsOf(nodes, [&](Node* n) {
    auto it = f.origin.find(n);
    return it == f.origin.end() ? std::string() : UnitOf(top, it->second, expand);
  });
}

// Whether a run reads any parameter or buffer (an input at or after `first_attr` that is a
// tensor).
bool ReadsTensors(const Run& run, const Graph& g, size_t first_attr) {
  bool found = false;
  for (Node* n : run.nodes) {
    ForEachUse(n, [&](Value* v) {
      found |= v->node() == g.param_node() && v->offset() >= first_attr &&
               v->type()->kind() != c10::TypeKind::BoolType;  // not a training flag
    });
  }
  return found;
}

// `target` and every value computed from it by `nodes` (in program order).
std::set<Value*> ComputedFrom(const std::vector<Node*>& nodes, Value* target) {
  std::set<Value*> from{target};
  for (Node* n : nodes) {
    bool depends = false;
    ForEachUse(n, [&](Value* v) { depends |= from.count(v) > 0; });
    if (depends)
      for (Value* o : n->outputs()) from.insert(o);
  }
  return from;
}

// The nodes after the last one that came from a submodule: the loss part of a
// forward(input, target). Throws when an operation before it depends on the target
// (`from_target`).
std::vector<Node*> SplitLoss(std::vector<Node*>* nodes, const internal::InlinedForward& f,
                             const std::set<Value*>& from_target, const std::string& file) {
  size_t split = 0;
  for (size_t i = 0; i < nodes->size(); ++i)
    if (auto it = f.origin.find((*nodes)[i]); it != f.origin.end() && !it->second.empty())
      split = i + 1;
  for (size_t i = 0; i < split; ++i) {
    Node* n = (*nodes)[i];
    bool depends = false;
    ForEachUse(n, [&](Value* v) { depends |= from_target.count(v) > 0; });
    if (depends) {
      ThrowInput(
          "{}: forward uses its second argument (the target) before its last submodule call "
          "({}); dapple feeds the target to the loss after the model",
          file, n->kind().toQualString());
    }
  }
  std::vector<Node*> loss(nodes->begin() + static_cast<std::ptrdiff_t>(split), nodes->end());
  nodes->resize(split);
  return loss;
}

// The value forward returns as the loss: its only output, or the element of the returned
// tuple computed from the target (`from_target`).
Value* LossOutput(Graph& g, const std::set<Value*>& from_target, const std::string& file) {
  Value* out = g.outputs()[0];
  std::vector<Value*> candidates{out};
  if (out->node()->kind() == c10::prim::TupleConstruct) candidates = out->node()->inputs().vec();
  for (Value* c : candidates)
    if (from_target.count(c) && c->type()->kind() == c10::TypeKind::TensorType) return c;
  ThrowInput("{}: forward(input, target) returns nothing computed from the target to train on",
             file);
}

// The model's output when forward computes no loss: one tensor.
Value* ModelOutput(Graph& g, const std::string& file) {
  Value* out = g.outputs()[0];
  if (out->node()->kind() == c10::prim::TupleConstruct) {
    ThrowInput("{}: forward returns {} values; the loss takes one tensor", file,
               out->node()->inputs().size());
  }
  if (out->type()->kind() != c10::TypeKind::TensorType)
    ThrowInput("{}: forward returns a {}; it must return a tensor", file, out->type()->str());
  return out;
}

// Whether `x` is the indices of an embedding anywhere in `block`.
bool FeedsEmbedding(torch::jit::Block* block, Value* x) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::aten::embedding && n->inputs().size() > 1 && n->input(1) == x)
      return true;
    for (torch::jit::Block* sub : n->blocks())
      if (FeedsEmbedding(sub, x)) return true;
  }
  return false;
}

}  // namespace

GraphCut CutForwardGraph(const torch::jit::Module& top, const GraphCutOptions& options,
                         const std::string& file) {
  internal::InlinedForward f = internal::InlineForward(top, file);
  Graph& g = *f.graph;
  const size_t args = g.inputs().size() - 1;
  if (args < 1 || args > 2) {
    ThrowInput(
        "{}: forward takes {} arguments; dapple feeds one input, and the target as a second "
        "one to a forward that computes its own loss",
        file, args);
  }
  const bool has_target = args == 2;
  if (has_target && g.inputs()[2]->type()->kind() == c10::TypeKind::OptionalType) {
    g.inputs()[2]->setType(c10::TensorType::get());  // settles `if target is None` branches
  }
  std::vector<AttrRef> lifted;
  internal::LiftAttributes(top, g, &lifted, file);
  torch::jit::PeepholeOptimize(f.graph);
  torch::jit::ConstantPropagation(f.graph);
  torch::jit::LowerSimpleTuples(f.graph);
  torch::jit::EliminateDeadCode(f.graph);

  Value* x = g.inputs()[0];
  Value* target = has_target ? g.inputs()[1] : nullptr;
  std::vector<Node*> nodes;
  for (Node* n : g.nodes())
    if (n->kind() != c10::prim::Constant) nodes.push_back(n);

  GraphCut cut;
  cut.token_input = FeedsEmbedding(g.block(), x);
  std::vector<Node*> loss_nodes;
  Value* final_value = nullptr;
  if (has_target) {
    const std::set<Value*> from_target = ComputedFrom(nodes, target);
    final_value = LossOutput(g, from_target, file);
    loss_nodes = SplitLoss(&nodes, f, from_target, file);
  } else {
    final_value = ModelOutput(g, file);
  }
  std::vector<Run> runs = RunsOf(nodes, f, top, options.expand);
  internal::MergeParameterlessRuns(&runs, [&](const Run& r) { return ReadsTensors(r, g, args); });

  internal::LayerGraphBuilder builder(g, x, target, lifted, args, file);
  std::vector<std::vector<Node*>> groups;
  for (const Run& r : runs) groups.push_back(r.nodes);
  std::vector<size_t> merged_into = builder.Cut(&groups, loss_nodes, final_value);
  std::vector<std::string> names = internal::UniqueLayerNames(runs);
  for (size_t k = 0; k < groups.size(); ++k) {
    GraphLayer layer = builder.Build(k);
    layer.name = names[merged_into[k]];
    cut.layers.push_back(std::move(layer));
  }
  if (has_target) cut.loss = builder.BuildLoss();
  return cut;
}

}  // namespace dapple
