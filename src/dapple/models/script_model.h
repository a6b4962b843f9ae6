// Users' own models as TorchScript files (torch.jit.script(model).save("model.pt"), or
// torch.jit.trace), taken as written: the forward graph is cut into layers (Note [Layers from
// the graph] in graph_cut.h); their names are the layer ids of profiles and plans. See
// docs/your-model.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dapple/models/model.h"

namespace torch::jit {
struct Module;
}

namespace dapple {

struct ScriptModelOptions {
  // "cross-entropy", "nll", "mse", "bce-logits"; empty: the module's own
  // loss(output, target) method.
  std::string loss;
  std::vector<int64_t> input_shape;  // one sample, without the batch dimension
  torch::Dtype input_dtype = torch::kFloat32;
  // Layers are the elements of nn.Sequential/ModuleList/ModuleDict containers at any depth;
  // false: the top-level children.
  bool expand = true;
  // torch.export programs: the units are the modules this many levels down (0: the rule
  // above; Note [Layers from module paths] in export_cut.h).
  int depth = 0;
};

// Whether `model` names a TorchScript file rather than a zoo model (ends in .pt or .pth).
bool IsTorchScriptPath(const std::string& model);

// Converts `top`'s floating-point parameters and buffers to `dtype`; integer buffers
// (BatchNorm's num_batches_tracked) keep their dtype.
void ToFloatingDtype(torch::jit::Module& top, torch::Dtype dtype);

// The built-in losses, for --help and errors.
std::vector<std::string> BuiltInLosses();
// The built-in loss `name`; another name throws InputError naming `file`.
std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> BuiltInLoss(
    const std::string& name, const std::string& file);

// Loads `path`, cuts its forward into layers and returns it as a Model in `dtype` whose held
// layers are those in `held`; the parameters and buffers no held layer reads are freed. Bad
// input throws InputError with one line naming the file and what is wrong.
Model LoadScriptModel(const std::filesystem::path& path, const ScriptModelOptions& options,
                      torch::Dtype dtype, LayerRange held);

}  // namespace dapple
