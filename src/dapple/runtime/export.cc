// ExportScriptModel: see export.h.
#include "dapple/runtime/export.h"

#include <fmt/ranges.h>
#include <torch/script.h>

#include <map>

#include "dapple/common/error.h"
#include "dapple/models/script_model.h"
#include "dapple/runtime/checkpoint.h"

namespace dapple {
namespace {

// The module's parameters and buffers by dotted name ("layer1.0.conv1.weight").
std::map<std::string, torch::Tensor> TensorsByName(const torch::jit::Module& top) {
  std::map<std::string, torch::Tensor> named;
  for (const auto& p : top.named_parameters(/*recurse=*/true)) named[p.name] = p.value;
  for (const auto& b : top.named_buffers(/*recurse=*/true))
    if (b.value.defined()) named[b.name] = b.value;
  return named;
}

// Copies a checkpoint's values into the module's tensors of the same names, each keeping its
// dtype (an integer buffer stays an integer).
void CopyInto(const std::map<std::string, torch::Tensor>& from,
              std::map<std::string, torch::Tensor>& into, const std::string& file,
              const std::string& model) {
  for (const auto& [name, value] : from) {
    auto it = into.find(name);
    if (it == into.end())
      ThrowInput("{}: {} is not a parameter or buffer of {}", file, name, model);
    if (it->second.sizes() != value.sizes()) {
      ThrowInput("{}: {} has shape {} but the model's has {}", file, name,
                 fmt::join(value.sizes(), "x"), fmt::join(it->second.sizes(), "x"));
    }
    it->second.copy_(value);
  }
}

}  // namespace

void ExportScriptModel(const std::filesystem::path& model_path,
                       const std::filesystem::path& step_dir, const std::filesystem::path& output) {
  CheckpointMeta meta = ReadCheckpointMeta(step_dir);
  torch::jit::Module top;
  try {
    top = torch::jit::load(model_path.string());
  } catch (const std::exception& e) {
    std::string what = e.what();
    ThrowInput("{}: not a TorchScript archive: {}", model_path.string(),
               what.substr(0, what.find('\n')));
  }
  ToFloatingDtype(top, meta.dtype == "float64" ? torch::kFloat64 : torch::kFloat32);
  std::map<std::string, torch::Tensor> named = TensorsByName(top);
  torch::NoGradGuard no_grad;
  for (const std::string& layer : meta.layers) {
    LayerState st = ReadLayer(step_dir, layer);
    std::string file = (step_dir / layer).string();
    CopyInto(st.params, named, file, model_path.string());
    CopyInto(st.buffers, named, file, model_path.string());
  }
  std::filesystem::path tmp = output.string() + ".tmp";
  top.save(tmp.string());
  std::filesystem::rename(tmp, output);
}

}  // namespace dapple
