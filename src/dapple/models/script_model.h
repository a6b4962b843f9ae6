// Users' own models as TorchScript files (torch.jit.script(model).save("model.pt")): the
// module's top-level children, in order, are the layers; their names are the layer ids of
// profiles and plans. See docs/your-model.md for the rules a model must follow.
//
// Note [Chain check]: named_children() is registration order, not call order, and a forward
// that is not a plain chain (a residual around a child) would run child by child without
// error and give another result. So at load the chain of children is run against the
// module's own forward on a probe batch, in evaluation mode (no dropout, no change to
// BatchNorm statistics); a difference refuses the model. A child that is an nn.Sequential
// is expanded into its own children ("blocks.0", "blocks.1", ...) when the expanded chain
// still matches, so that a model can be cut between blocks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dapple/models/model.h"

namespace dapple {

struct ScriptModelOptions {
  // "cross-entropy", "nll", "mse", "bce-logits"; empty: the module's own
  // loss(output, target) method.
  std::string loss;
  std::vector<int64_t> input_shape;  // one sample, without the batch dimension
  torch::Dtype input_dtype = torch::kFloat32;
  bool expand = true;  // expand nn.Sequential children when the chain still matches
};

// Whether `model` names a TorchScript file rather than a zoo model (ends in .pt or .pth).
bool IsTorchScriptPath(const std::string& model);

// The built-in losses, for --help and errors.
std::vector<std::string> BuiltInLosses();

// Loads `path`, checks its chain (Note [Chain check]) and returns it as a Model in `dtype`
// whose held layers are those in `held`; the other layers' parameters and buffers are
// freed. Bad input throws InputError with one line naming the file and what is wrong.
Model LoadScriptModel(const std::filesystem::path& path, const ScriptModelOptions& options,
                      torch::Dtype dtype, LayerRange held);

}  // namespace dapple
