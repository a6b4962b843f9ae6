// A TorchScript submodule seen as a libtorch nn::Module (for the optimizer, checkpoints and
// mode switches), sharing its parameters and buffers: the same tensors, not copies.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace dapple {

class ScriptLayerModule : public torch::nn::Module {
 public:
  explicit ScriptLayerModule(torch::jit::Module module);
  // Switches the TorchScript module too (dropout, BatchNorm follow its training flag).
  void train(bool on = true) override;
  torch::jit::Module& script() { return module_; }

 private:
  torch::jit::Module module_;
};

// The submodule of `root` at dotted `path` ("blocks.0"); nullopt when there is none.
c10::optional<torch::jit::Module> FindSubmodule(const torch::jit::Module& root,
                                                const std::string& path);

}  // namespace dapple
