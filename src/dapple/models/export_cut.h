// An exported program's graph cut into layers (Note [Layers from module paths]).
//
// Note [Layers from module paths]: every node of an exported graph carries the stack of
// modules it ran in (nn_module_stack). The layers are the units of the module hierarchy as
// the TorchScript cut makes them (Note [Layers from the graph] in graph_cut.h): a top-level
// child, or, inside an nn.Sequential, nn.ModuleList or nn.ModuleDict, each of its elements
// ("layer1.0", "blocks.2"); a ModuleList is never called, so its elements head their nodes'
// stacks themselves. Consecutive nodes of one unit form a layer; nodes of the top module
// (glue: positions, x + y, a flatten) join the layer before them; a unit that reads no
// parameter or buffer joins the layer before it. A cut carries every value defined before it
// and used after it (relayed through the layers between); forward's inputs (input_ids,
// attention_mask) are defined before the first layer. Without --loss, a forward of two or
// more inputs takes its target last (labels) and computes its own loss: the nodes after the
// last submodule's form the loss part, which takes the last layer's output and the target;
// of forward's outputs (a tuple or a dataclass, flattened), the one computed from the
// target is the loss.
//
// Note [Sizes at a cut]: a program exported with a dynamic batch dimension computes the batch
// size once (sym_size) and reshapes with it in every block. Only tensors cross cuts, and a
// stage's replicas each take a slice of the batch, so a layer reads such a size again from
// a tensor it receives whose dimension has the same symbolic expression.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "dapple/models/exported_program.h"

namespace dapple {

struct ExportLayer {
  std::string name;
  std::vector<int> nodes;     // indices into the graph's nodes, in order
  std::vector<int> live_in;   // value ids at its start (the loss part: output, target)
  std::vector<int> live_out;  // value ids at its end (the loss part: the loss)
  std::vector<int> tensors;   // indices into the graph's tensors that its nodes read
  // Integers (symbolic sizes such as the batch) used here but computed before: each read at
  // the layer's start from a dimension of a tensor it receives (value, tensor value, dim),
  // so that a stage's replicas see their own batch slice (Note [Sizes at a cut]).
  std::vector<std::array<int, 3>> sizes;
};

struct ExportCut {
  // forward's inputs that the model takes, in order (the first layer receives them packed,
  // Note [Packed inputs] in export_model.h), and the target (-1: none): value ids.
  std::vector<int> inputs;
  int target = -1;
  std::vector<ExportLayer> layers;
  std::optional<ExportLayer> loss;
  bool token_input = false;  // the input feeds an embedding as indices
  int token_table = -1;      // that embedding's table: an index into the graph's tensors
};

struct ExportCutOptions {
  bool expand = true;  // false: top-level children only
  // d > 0: the units are the modules d levels down (containers not counted: depth 2 of
  // Hugging Face's GPT2LMHeadModel is transformer.wte, transformer.h.0, ..., lm_head).
  int depth = 0;
  // No --loss: a forward of two or more inputs takes its target last and computes its loss.
  bool own_loss = false;
};

// Cuts `g` as Note [Layers from module paths] says. Throws InputError naming `file` for a
// graph that cannot be cut.
ExportCut CutExportedGraph(const ExportGraph& g, const ExportCutOptions& options,
                           const std::string& file);

}  // namespace dapple
