// Where a model comes from: a zoo name with its options, or a user's TorchScript file.
// Every command that takes --model goes through LoadModel.
#pragma once

#include <cstdint>
#include <string>

#include "dapple/models/exported_program.h"
#include "dapple/models/model.h"
#include "dapple/models/script_model.h"

namespace dapple {

struct ModelSource {
  // zoo name, or a path ending in .pt/.pth (IsTorchScriptPath) or .pt2 (IsExportedProgramPath)
  std::string model;
  ModelOptions options;       // zoo options
  ScriptModelOptions script;  // a user's file: loss, input sample, expansion
  bool is_script() const { return IsTorchScriptPath(model) || IsExportedProgramPath(model); }
};

// The model with the layers in `held` materialised (Note [Stage-local models]). Zoo models
// are initialised from `seed`; TorchScript models keep their file's values. A range that
// holds no layer (kNoLayers) gives the names, shapes and tied parameters, and a model whose
// layers MaterializeLayers (model.h) makes later without loading again. Bad input throws
// InputError naming the model and what is wrong.
Model LoadModel(const ModelSource& source, uint64_t seed, torch::Dtype dtype, LayerRange held = {});

// A LayerRange that holds no layer (names only, for plan checks).
inline const LayerRange kNoLayers{1, 0, {}};

// How many times this process has called LoadModel: a zoo model built, a user's file read and
// its graph cut. A rank of `dapple train` loads its model once (Note [Stage-local models]).
int ModelLoads();

}  // namespace dapple
