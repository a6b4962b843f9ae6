// ExportScriptModel: see export.h.
#include "dapple/runtime/checkpoint/export.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/script.h>

#include <algorithm>
#include <map>

#include "dapple/common/error.h"
#include "dapple/models/exported_program.h"
#include "dapple/models/script_model.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

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

// Note [A state_dict back]: the trained values of an exported program go back as a dict of
// tensors by fully qualified name in torch.save's zip format: data.pkl pickled without
// TorchScript's type tags (torch::pickle_save adds them, and torch.load's default
// weights_only=True refuses them), the storages under data/. A tied weight appears under
// each of its names, as in the module's own state_dict. Floating-point values keep the
// training dtype; load_state_dict converts them into the module's.
void ExportStateDict(const std::filesystem::path& model_path, const std::filesystem::path& step_dir,
                     const std::filesystem::path& output) {
  CheckpointMeta meta = ReadCheckpointMeta(step_dir);
  c10::Dict<std::string, torch::Tensor> state;
  for (const std::string& layer : meta.layers) {
    LayerState st = ReadLayer(step_dir, layer);
    for (const auto& [name, value] : st.params) state.insert_or_assign(name, value);
    for (const auto& [name, value] : st.buffers) state.insert_or_assign(name, value);
  }
  // The names of a tied weight that the graph never reads (export keeps one of them).
  ExportArchive archive(model_path.string(),
                        meta.dtype == "float64" ? torch::kFloat64 : torch::kFloat32);
  std::map<std::string, torch::Tensor> by_record;
  for (const auto& entry : state)
    if (auto names = archive.Names();
        std::find(names.begin(), names.end(), entry.key()) != names.end())
      by_record[archive.RecordOf(entry.key())] = entry.value();
  for (const std::string& name : archive.Names())
    if (!state.contains(name))
      if (auto it = by_record.find(archive.RecordOf(name)); it != by_record.end())
        state.insert(name, it->second);
  if (output.extension() == ".pt2") {  // Note [A program back] in models/exported_program.h
    std::map<std::string, torch::Tensor> values;
    for (const auto& entry : state) values[entry.key()] = entry.value();
    std::filesystem::path tmp = output.string() + ".tmp.pt2";
    archive.WriteWithWeights(values, tmp.string());
    std::filesystem::rename(tmp, output);
    return;
  }
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickled.insert(pickled.end(), data, data + size); },
      /*tensor_table=*/nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(state));
  pickler.stop();
  std::filesystem::path tmp = output.string() + ".tmp";
  {
    caffe2::serialize::PyTorchStreamWriter writer(tmp.string());
    torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                       writer);
    writer.writeEndOfFile();
  }
  std::filesystem::rename(tmp, output);
}

}  // namespace

void ExportScriptModel(const std::filesystem::path& model_path,
                       const std::filesystem::path& step_dir, const std::filesystem::path& output) {
  if (IsExportedProgramPath(model_path.string()))
    return ExportStateDict(model_path, step_dir, output);
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
