// The live values at each cut of an inlined forward, and each layer's graph built from its
// operations (Note [Layers from the graph] in graph_cut.h).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dapple/models/graph_cut.h"

namespace dapple::internal {

// Calls `fn` on every value `n` reads: its inputs, and those of the nodes and returns of its
// blocks, recursively.
void ForEachUse(torch::jit::Node* n, const std::function<void(torch::jit::Value*)>& fn);

class LayerGraphBuilder {
 public:
  // `g`: the inlined forward with attributes lifted: inputs `x`, then `target` (or none), then
  // one per `lifted` attribute from `first_attr` on.
  LayerGraphBuilder(torch::jit::Graph& g, torch::jit::Value* x, torch::jit::Value* target,
                    std::vector<AttrRef> lifted, size_t first_attr, std::string file);

  // Takes the layers' operations in order (`groups`), the loss part's and the value the model
  // returns (its output, or the loss). Merges neighbouring groups until only tensors cross
  // every cut; returns, for each group left, the index of the first group it took.
  std::vector<size_t> Cut(std::vector<std::vector<torch::jit::Node*>>* groups,
                          const std::vector<torch::jit::Node*>& loss_nodes,
                          torch::jit::Value* final_value);

  // Layer k's graph (its name unset). REQUIRES: Cut was called.
  GraphLayer Build(size_t k) const;
  // The loss part's graph: the last layer's output and the target in, the loss out.
  GraphLayer BuildLoss() const;

 private:
  // The values defined before group c and used in it or after (c = groups: the loss part, or
  // the model's output).
  std::vector<torch::jit::Value*> LiveAt(size_t c) const;
  GraphLayer BuildGraph(const std::vector<torch::jit::Node*>& nodes,
                        const std::vector<torch::jit::Value*>& inputs,
                        const std::vector<torch::jit::Value*>& outputs) const;

  torch::jit::Graph& g_;
  torch::jit::Value* x_;
  torch::jit::Value* target_;
  std::vector<AttrRef> lifted_;
  size_t first_attr_;
  std::string file_;
  std::vector<std::vector<torch::jit::Node*>> groups_;
  std::vector<torch::jit::Node*> loss_nodes_;
  torch::jit::Value* final_ = nullptr;
  // Every value defined by a group: its group (-1 for x) and its place in program order.
  std::unordered_map<torch::jit::Value*, int> def_;
  std::unordered_map<torch::jit::Value*, int> order_;
  std::unordered_map<torch::jit::Value*, int> last_use_;
};

}  // namespace dapple::internal
