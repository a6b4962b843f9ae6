// A TorchScript module's forward cut into layers (Note [Layers from the graph]).
//
// Note [Layers from the graph]: dapple takes a model as its author wrote it. The module's
// forward is inlined into one graph of operations (every method and submodule call, at any
// depth), each operation tagged with the submodule whose code it came from. The layers are the
// units of the module hierarchy: a top-level child, or, inside an nn.Sequential, nn.ModuleList
// or nn.ModuleDict (at any depth), each of its elements ("layer1.0", "features.3",
// "blocks.2"). Consecutive operations of one unit form a layer; operations outside any
// submodule (torch.flatten, x + y, a mask made in forward) join the layer before them; a
// unit without parameters (an activation, a pooling) joins the layer before it, so that a
// cut never separates an operation from the parameters it follows.
//
// A cut between layer i and i+1 carries every value defined before it and used after it
// (the live values): a residual stream, a mask, an encoder's output that a decoder several
// layers later concatenates. Values that skip layers are relayed: each layer returns the
// live values at its end, so a stage sends what crosses its last cut and the profile's
// output bytes of a layer are what its cut carries. Only tensors cross cuts; where another
// value (a number, a list) would, the two layers become one.
//
// Parameters and buffers are lifted out of the graph: a layer's graph takes its live values
// and then the tensors (and training flags) it reads, which the caller fetches from the
// module at every call, so optimizer updates and mode switches are seen without copies.
//
// A forward(input, target) computes its own loss: the operations that depend on the target,
// and those after the last submodule's, form the loss graph, which takes the last layer's
// output and the target; when forward returns a tuple, the element computed from the target
// is the loss.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dapple {

// An attribute a layer reads: the submodule's dotted path ("" for the top module) and name.
struct AttrRef {
  std::string path;
  std::string name;
  std::string FullName() const { return path.empty() ? name : path + "." + name; }
};

struct GraphLayer {
  std::string name;  // the unit: "conv1", "layer1.0", "blocks.3"; "unit~2" for a unit's 2nd run
  // Inputs: the live values at its start (num_live_in), then one per attribute in `attrs`.
  // Outputs: the live values at its end.
  std::shared_ptr<torch::jit::Graph> graph;
  size_t num_live_in = 0;
  std::vector<AttrRef> attrs;
};

struct GraphCut {
  std::vector<GraphLayer> layers;
  // forward(input, target): inputs are the last layer's output, the target, then `attrs`;
  // the output is the loss.
  std::optional<GraphLayer> loss;
  // The input feeds an embedding as indices (token ids).
  bool token_input = false;
};

struct GraphCutOptions {
  // Expand nn.Sequential/ModuleList/ModuleDict into their elements; false: top-level children
  // only.
  bool expand = true;
};

// Cuts `top`'s forward as Note [Layers from the graph] says. Throws InputError naming `file`
// and what to change when the model cannot be cut (a submodule passed around as a value, an
// attribute assigned in forward, more than two forward arguments).
GraphCut CutForwardGraph(const torch::jit::Module& top, const GraphCutOptions& options,
                         const std::string& file);

}  // namespace dapple
