// ModelCli: see model_cli.h.
#include "model_cli.h"

#include <sstream>

#include "dapple/common/error.h"

namespace dapple {

void AddModelCliOptions(CLI::App* cmd, ModelCli* cli) {
  cmd->add_option("--loss", cli->loss,
                  "Users' models (.pt, .pt2): cross-entropy | nll | mse | bce-logits (default: the "
                  "module's own loss(output, target) method)");
  cmd->add_option(
      "--input-shape", cli->input_shape,
      "Users' models (.pt, .pt2): one input sample's shape, e.g. 1,28,28 (default: from "
      "--data)");
  cmd->add_option("--input-dtype", cli->input_dtype,
                  "Users' models (.pt, .pt2): float32 | float64 | int64 (token ids)")
      ->capture_default_str();
  cmd->add_option("--layer-depth", cli->layer_depth,
                  "torch.export programs (.pt2): layers are the modules this many levels down, "
                  "containers not counted (default: top-level children and container elements)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seq-len", cli->seq_len,
                  "Token files (--data PATH.bin): tokens per sample window");
}

ScriptModelOptions ScriptOptionsOf(const ModelCli& cli, const std::string& model,
                                   const std::string& data) {
  ScriptModelOptions o;
  o.loss = cli.loss;
  o.depth = cli.layer_depth;
  if (!cli.input_shape.empty()) {
    std::stringstream in(cli.input_shape);
    std::string item;
    while (std::getline(in, item, ',')) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != item.size() || v <= 0)
        ThrowInput("--input-shape: expected positive integers separated by commas, got '{}'",
                   cli.input_shape);
      o.input_shape.push_back(v);
    }
    if (cli.input_dtype == "float32") {
      o.input_dtype = torch::kFloat32;
    } else if (cli.input_dtype == "float64") {
      o.input_dtype = torch::kFloat64;
    } else if (cli.input_dtype == "int64") {
      o.input_dtype = torch::kInt64;
    } else {
      ThrowInput("--input-dtype: expected float32, float64 or int64, got '{}'", cli.input_dtype);
    }
  } else if (IsDataFilePath(data)) {
    auto [shape, dtype] = DataFileSample(data, cli.seq_len);
    o.input_shape = shape;
    o.input_dtype = dtype;
  } else if (IsTorchScriptPath(model) || IsExportedProgramPath(model)) {
    ThrowInput("{}: the input sample shape is unknown: pass --data PATH or --input-shape", model);
  }
  return o;
}

}  // namespace dapple
