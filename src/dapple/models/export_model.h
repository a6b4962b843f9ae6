// Users' models as programs saved by torch.export (`torch.export.save(torch.export.export(
// model.train(), args), "model.pt2")`), cut into layers by module path (Note [Layers from
// module paths] in export_cut.h) and run through the dispatcher (Note [Exported programs run
// through the dispatcher] in exported_program.h). See docs/torch-export.md.
#pragma once

#include <filesystem>

#include "dapple/models/model.h"
#include "dapple/models/script_model.h"

namespace dapple {

// Loads `path` as a Model in `dtype` whose held layers are those in `held`: only their
// parameters and buffers are read from the archive (Note [Stage-local models]). The options
// are the TorchScript door's (loss, input sample, expansion). Bad input throws InputError
// with one line naming the file and what is wrong.
Model LoadExportedModel(const std::filesystem::path& path, const ScriptModelOptions& options,
                        torch::Dtype dtype, LayerRange held);

}  // namespace dapple
