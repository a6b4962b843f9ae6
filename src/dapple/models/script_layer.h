// A layer of a TorchScript model (Note [Layers from the graph] in graph_cut.h) as the runtime
// holds it: a libtorch nn::Module with the parameters and buffers its graph reads, and the
// graph's interpreter.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dapple/models/graph_cut.h"

namespace dapple {

// The tensors a layer reads, under their dotted names in the model ("layer1.0.conv1.weight"),
// for the optimizer, checkpoints and mode switches: the module's own tensors, not copies.
class ScriptLayerModule : public torch::nn::Module {
 public:
  ScriptLayerModule(const torch::jit::Module& top, const std::vector<AttrRef>& attrs);
  // Sets the training flag of every submodule whose flag the layer reads (dropout,
  // BatchNorm).
  void train(bool on = true) override;

 private:
  std::vector<torch::jit::Module> flag_owners_;
};

// Runs a layer's graph: its inputs, then its attributes read from the model at each call.
class GraphLayerRunner {
 public:
  GraphLayerRunner(const torch::jit::Module& top, const GraphLayer& layer);
  std::vector<c10::IValue> Run(std::vector<c10::IValue> inputs) const;

 private:
  std::shared_ptr<torch::jit::Code> code_;
  std::vector<std::pair<torch::jit::Module, std::string>> attrs_;
};

}  // namespace dapple
