// `dapple export`: a user's TorchScript module with the weights of a dapple checkpoint,
// loadable by torch.jit.load in Python.
#pragma once

#include <filesystem>

namespace dapple {

// Writes the module of `model_path` with the layer values (parameters, and buffers where
// the checkpoint holds them) of checkpoint folder `step_dir` to `output`, atomically. The
// layers are those the checkpoint's meta.json names, as `dapple train` cut the module.
// Throws InputError naming the file when a layer or a parameter is missing or differs.
// For an exported program (`model_path` ends in .pt2) the output is a state_dict file that
// `model.load_state_dict(torch.load(output))` reads into the original Python module, or,
// when `output` ends in .pt2, the program with the trained weights for torch.export.load.
void ExportScriptModel(const std::filesystem::path& model_path,
                       const std::filesystem::path& step_dir, const std::filesystem::path& output);

}  // namespace dapple
