// Per-layer checkpoints: pickled dicts of tensors, atomic writes, a `latest` pointer.
#include "dapple/runtime/checkpoint/checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"

namespace dapple {
namespace {

// Layer names become file names: keep [A-Za-z0-9_.-], replace the rest.
std::string FileName(const std::string& layer) {
  std::string s = layer;
  for (char& c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    if (!ok) c = '_';
  }
  return s + ".pt";
}

// torch::jit::pickle_save's archive, written record by record into `sink`: pickle_save
// builds the whole archive in one growing buffer, which held a layer's tensors two or three
// times over at the peak of a checkpoint (malloc keeps what it freed, Note [Freed memory
// stays]). The pickle itself is small: the tensors' values are records of their own.
void PickleSave(const c10::IValue& value, const ByteSink& sink) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickled.insert(pickled.end(), data, data + size); });
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    sink(static_cast<const char*>(data), size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
}

std::vector<char> ReadBytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) ThrowInput("{}: cannot open the checkpoint file", p.string());
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

std::filesystem::path CheckpointStepDir(const std::filesystem::path& dir, int64_t step) {
  return dir / fmt::format("step-{}", step);
}

LayerSnapshot SnapshotLayer(const std::string& layer, torch::nn::Module& module,
                            torch::optim::Optimizer* opt, OptimizerKind kind,
                            SnapshotValues values) {
  if (opt == nullptr) return SnapshotLayer(layer, module, nullptr, values);
  WholeParamStates states(*opt, kind);
  return SnapshotLayer(layer, module, &states, values);
}

LayerSnapshot SnapshotLayer(const std::string& layer, torch::nn::Module& module,
                            ParamStateStore* states, SnapshotValues values) {
  // .cpu() of a host tensor is the tensor itself; of a device tensor, a host copy.
  auto on_host = [values](const torch::Tensor& t) {
    torch::Tensor host = t.detach().cpu();
    return values == SnapshotValues::kShared ? host : host.clone();
  };
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    torch::Tensor p = item.value();
    dict.insert("param/" + item.key(), on_host(p));
    if (states == nullptr) continue;
    for (const auto& [field, t] : states->Export(p)) {
      dict.insert("state/" + item.key() + "/" + field, on_host(t));
    }
  }
  // Note [Buffers in checkpoints]: running statistics (BatchNorm's running_mean,
  // running_var, num_batches_tracked) are state too; without them a resumed run would
  // normalise differently in evaluation from an uninterrupted one.
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    dict.insert("buffer/" + item.key(), on_host(item.value()));
  }
  return {layer, dict};
}

int64_t WriteLayerSnapshot(const std::filesystem::path& dir, int64_t step,
                           const LayerSnapshot& snapshot) {
  auto folder = CheckpointStepDir(dir, step);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) ThrowInput("{}: cannot create the checkpoint folder: {}", folder.string(), ec.message());
  const auto path = folder / FileName(snapshot.layer);
  WriteFileAtomic(path,
                  [&](const ByteSink& sink) { PickleSave(c10::IValue(snapshot.tensors), sink); });
  // What is on the disk now, for the writer's confirmation (Note [Checkpoint commit]).
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

int64_t SaveLayer(const std::filesystem::path& dir, int64_t step, const std::string& layer,
                  torch::nn::Module& module, torch::optim::Optimizer* opt, OptimizerKind kind) {
  return WriteLayerSnapshot(dir, step, SnapshotLayer(layer, module, opt, kind));
}

std::filesystem::path LayerFile(const std::filesystem::path& step_dir, const std::string& layer) {
  return step_dir / FileName(layer);
}

void CommitCheckpoint(const std::filesystem::path& dir, const CheckpointMeta& meta) {
  Json j = {{"format", "dapple-checkpoint/1"},
            {"step", meta.step},
            {"model", meta.model},
            {"optimizer", meta.optimizer},
            {"dtype", meta.dtype},
            {"layers", meta.layers},
            {"losses", meta.losses}};
  if (!meta.recipe.empty()) j["recipe"] = meta.recipe;
  if (!meta.files.empty()) {  // Note [Checkpoint checksums]
    Json files = Json::object();
    for (const auto& [layer, sum] : meta.files)
      files[layer] = {{"bytes", sum.bytes}, {"crc32", sum.crc32}};
    j["files"] = files;
  }
  auto folder = CheckpointStepDir(dir, meta.step);
  WriteFileAtomic(folder / "meta.json", j.dump(2) + "\n");
  SyncDirectory(dir);  // the step folder's own entry, before `latest` names it
  WriteFileAtomic(dir / "latest", folder.filename().string() + "\n");
}

std::optional<std::filesystem::path> LatestCheckpoint(const std::filesystem::path& dir) {
  std::ifstream in(dir / "latest");
  std::string name;
  if (!in || !(in >> name)) return std::nullopt;
  return dir / name;
}

CheckpointMeta ReadCheckpointMeta(const std::filesystem::path& step_dir) {
  auto path = step_dir / "meta.json";
  Json j = ReadJsonFile(path);
  JsonField f(j, path.string());
  if (f["format"].String() != "dapple-checkpoint/1") f["format"].Fail("not dapple-checkpoint/1");
  CheckpointMeta m;
  m.step = f["step"].NonNegativeInt();
  m.model = f["model"].String();
  m.optimizer = f["optimizer"].String();
  m.dtype = f["dtype"].String();
  for (size_t i = 0; i < f["layers"].size(); ++i) m.layers.push_back(f["layers"][i].String());
  for (size_t i = 0; i < f["losses"].size(); ++i) m.losses.push_back(f["losses"][i].Number());
  if (f.Has("recipe")) {  // absent in checkpoints written before recipes
    f["recipe"].ExpectObject();
    for (const auto& [name, value] : j["recipe"].items())
      m.recipe[name] = f["recipe"][name].String();
  }
  if (f.Has("files")) {  // absent in checkpoints written before sums
    f["files"].ExpectObject();
    for (const auto& [layer, sum] : j["files"].items()) {
      JsonField g = f["files"][layer];
      // Sizes and CRC-32s are integers below 2^53: exact as JSON numbers.
      const double bytes = g["bytes"].NonNegative(), crc = g["crc32"].NonNegative();
      if (crc > 4294967295.0) g["crc32"].Fail("not a CRC-32 (above 2^32 - 1)");
      m.files[layer] = {static_cast<int64_t>(bytes), static_cast<uint32_t>(crc)};
    }
  }
  return m;
}

LayerState ReadLayer(const std::filesystem::path& step_dir, const std::string& layer) {
  auto path = step_dir / FileName(layer);
  c10::IValue v;
  try {
    v = torch::jit::pickle_load(ReadBytes(path));
  } catch (const c10::Error& e) {
    ThrowInput("{}: not a layer checkpoint: {}", path.string(), e.what_without_backtrace());
  }
  if (!v.isGenericDict()) ThrowInput("{}: not a layer checkpoint (no dict)", path.string());
  LayerState out;
  for (const auto& entry : v.toGenericDict()) {
    std::string key = entry.key().toStringRef();
    torch::Tensor t = entry.value().toTensor();
    if (key.rfind("param/", 0) == 0) {
      out.params[key.substr(6)] = t;
    } else if (key.rfind("buffer/", 0) == 0) {
      out.buffers[key.substr(7)] = t;
      out.has_buffers = true;
    } else if (key.rfind("state/", 0) == 0) {
      auto rest = key.substr(6);
      auto slash = rest.rfind('/');
      if (slash == std::string::npos) ThrowInput("{}: malformed key {}", path.string(), key);
      out.optimizer[rest.substr(0, slash)][rest.substr(slash + 1)] = t;
    } else {
      ThrowInput("{}: unexpected key {}", path.string(), key);
    }
  }
  return out;
}

void LoadLayer(const std::filesystem::path& step_dir, const std::string& layer,
               torch::nn::Module& module, ParamStateStore* states) {
  LayerState st = ReadLayer(step_dir, layer);
  auto path = (step_dir / FileName(layer)).string();
  torch::NoGradGuard no_grad;
  auto named = module.named_parameters(true);
  if (named.size() != st.params.size()) {
    ThrowInput("{}: {} parameters but layer {} has {}", path, st.params.size(), layer,
               named.size());
  }
  for (const auto& item : named) {
    auto it = st.params.find(item.key());
    if (it == st.params.end()) ThrowInput("{}: no parameter {}", path, item.key());
    torch::Tensor p = item.value();
    if (it->second.sizes() != p.sizes()) {
      ThrowInput("{}: parameter {} has shape {} but the model's has {}", path, item.key(),
                 fmt::join(it->second.sizes(), "x"), fmt::join(p.sizes(), "x"));
    }
    p.copy_(it->second);
    if (states == nullptr) continue;
    auto sit = st.optimizer.find(item.key());
    std::map<std::string, torch::Tensor> state;
    if (sit != st.optimizer.end()) {
      for (const auto& [field, t] : sit->second) state[field] = t.to(p.device());
    }
    try {
      states->Import(p, state);
    } catch (const std::out_of_range&) {
      ThrowInput("{}: optimizer state of {} does not fit optimizer {}", path, item.key(),
                 ToString(states->kind()));
    }
  }
  LoadBuffers(st, path, layer, module);
}

void LoadBuffers(const LayerState& st, const std::string& path, const std::string& layer,
                 torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  auto named = module.named_buffers(true);
  if (!st.has_buffers) {
    // Written before checkpoints held buffers: the parameters still load, the buffers keep
    // the values they have.
    if (named.size() > 0) {
      std::fprintf(stderr,
                   "%s: no buffers (a checkpoint from before buffers were saved): layer %s "
                   "keeps its current %s\n",
                   path.c_str(), layer.c_str(), named.begin()->key().c_str());
    }
    return;
  }
  if (named.size() != st.buffers.size()) {
    ThrowInput("{}: {} buffers but layer {} has {}", path, st.buffers.size(), layer, named.size());
  }
  for (const auto& item : named) {
    auto it = st.buffers.find(item.key());
    if (it == st.buffers.end()) ThrowInput("{}: no buffer {}", path, item.key());
    torch::Tensor b = item.value();
    if (it->second.sizes() != b.sizes() || it->second.scalar_type() != b.scalar_type()) {
      ThrowInput("{}: buffer {} is {} {} but the model's is {} {}", path, item.key(),
                 fmt::join(it->second.sizes(), "x"), c10::toString(it->second.scalar_type()),
                 fmt::join(b.sizes(), "x"), c10::toString(b.scalar_type()));
    }
    b.copy_(it->second);
  }
}

}  // namespace dapple
