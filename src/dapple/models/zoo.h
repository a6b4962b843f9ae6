// The model zoo's registry: each model's options with defaults, named presets (the paper's
// sizes), and its parameter count computed from the options without building the model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dapple/models/model.h"

namespace dapple {

// Named option sets of `name` ("paper", "bert48", ...); applied with the option
// preset=NAME, explicit options override them. Unknown model -> InputError.
std::map<std::string, ModelOptions> ModelPresets(const std::string& name);

// The options BuildModel would use: defaults, then the preset named by options["preset"],
// then the explicit options. Unknown option or preset -> InputError listing the known ones.
ModelOptions ResolveModelOptions(const std::string& name, const ModelOptions& options);

// Parameter count of model `name` with `options` (resolved as above), computed by formula:
// cheap even for presets too large to build. Equals BuildModel(...).ParameterCount().
int64_t CountModelParameters(const std::string& name, const ModelOptions& options);

// Turns command-line words into options: "--hidden 64", "--hidden=64" and "hidden=64" all
// give {"hidden", "64"}. A word that fits none of these -> InputError.
ModelOptions ParseModelFlags(const std::vector<std::string>& words);

}  // namespace dapple
