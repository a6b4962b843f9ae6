// The options `dapple profile` and `dapple train` share for a user's TorchScript model and
// data file (--loss, --input-shape, --input-dtype, --seq-len), declared once, and how they
// turn into ScriptModelOptions (docs/your-model.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "dapple/models/data.h"
#include "dapple/models/exported_program.h"
#include "dapple/models/script_model.h"

namespace dapple {

struct ModelCli {
  std::string loss;
  std::string input_shape;  // "1,28,28"
  std::string input_dtype = "float32";
  int64_t seq_len = 0;
  int layer_depth = 0;
};

// Declares the options on `cmd`, storing into *cli (which must outlive parsing).
void AddModelCliOptions(CLI::App* cmd, ModelCli* cli);

// The script options for `model`: the input sample from --input-shape/--input-dtype, or
// else from data file `data` when it is one. Throws InputError naming the flag.
ScriptModelOptions ScriptOptionsOf(const ModelCli& cli, const std::string& model,
                                   const std::string& data);

}  // namespace dapple
