// ExportScriptModel: see export.h.
#include "dapple/runtime/export.h"

#include <torch/script.h>

#include "dapple/common/error.h"
#include "dapple/models/script_layer.h"
#include "dapple/runtime/checkpoint.h"

namespace dapple {

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
  top.to(meta.dtype == "float64" ? torch::kFloat64 : torch::kFloat32);
  OptimizerKind kind = ParseOptimizerKind(meta.optimizer);
  for (const std::string& layer : meta.layers) {
    auto sub = FindSubmodule(top, layer);
    if (!sub) {
      ThrowInput("{}: the checkpoint's layer '{}' is not a submodule of {}",
                 (step_dir / "meta.json").string(), layer, model_path.string());
    }
    ScriptLayerModule mirror(*sub);  // shares the module's tensors
    LoadLayer(step_dir, layer, mirror, nullptr, kind);
  }
  std::filesystem::path tmp = output.string() + ".tmp";
  top.save(tmp.string());
  std::filesystem::rename(tmp, output);
}

}  // namespace dapple
