// LoadModel: see model_source.h.
#include "dapple/models/model_source.h"

#include <atomic>

#include "dapple/common/error.h"
#include "dapple/models/export_model.h"

namespace dapple {
namespace {

std::atomic<int> load_count{0};

}  // namespace

int ModelLoads() { return load_count.load(); }

Model LoadModel(const ModelSource& source, uint64_t seed, torch::Dtype dtype, LayerRange held) {
  ++load_count;
  if (!source.is_script()) return BuildModel(source.model, source.options, seed, dtype, held);
  if (!source.options.empty()) {
    ThrowInput("{}: zoo model options ({}=...) do not apply to a TorchScript model", source.model,
               source.options.begin()->first);
  }
  if (source.script.depth > 0 && !IsExportedProgramPath(source.model))
    ThrowInput("{}: --layer-depth applies to torch.export programs (.pt2)", source.model);
  if (IsExportedProgramPath(source.model))
    return LoadExportedModel(source.model, source.script, dtype, held);
  return LoadScriptModel(source.model, source.script, dtype, held);
}

}  // namespace dapple
