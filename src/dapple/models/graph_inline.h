// The first steps of Note [Layers from the graph] (graph_cut.h): the forward graph inlined
// with the submodule each top-level operation came from, and the module's attributes lifted
// out as graph inputs.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dapple/models/graph_cut.h"

namespace dapple::internal {

struct InlinedForward {
  std::shared_ptr<torch::jit::Graph> graph;
  // The dotted path of the submodule whose code each node (in nested blocks too) came from;
  // "" (or no entry) for the top module's own operations.
  std::unordered_map<torch::jit::Node*, std::string> origin;
};

// forward's graph with every method and function call inlined (self is still input 0).
InlinedForward InlineForward(const torch::jit::Module& top, const std::string& file);

// Replaces every read of a module attribute by a graph input (tensors and training flags, in
// `lifted` order, appended after the forward's own inputs) or a constant (any other value),
// and removes the self input. Throws InputError naming `file` when the module is used in
// another way (an attribute assigned, a submodule passed as a value).
void LiftAttributes(const torch::jit::Module& top, torch::jit::Graph& graph,
                    std::vector<AttrRef>* lifted, const std::string& file);

// The submodule at dotted `path` ("" is `top`). REQUIRES: it exists.
torch::jit::Module SubmoduleAt(const torch::jit::Module& top, const std::string& path);

}  // namespace dapple::internal
