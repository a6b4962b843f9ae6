// LoadExportedModel: see export_model.h.
#include "dapple/models/export_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/export_cut.h"
#include "dapple/models/exported_program.h"

namespace dapple {
namespace {

// The parameters and buffers a layer reads, under their dotted names in the model, in a tree
// of modules mirroring the model's (checkpoints, the optimizer and mode switches see them).
class ExportLayerModule : public torch::nn::Module {
 public:
  void Add(const std::string& fqn, const torch::Tensor& t, bool parameter) {
    size_t dot = fqn.rfind('.');
    torch::nn::Module* owner = At(dot == std::string::npos ? "" : fqn.substr(0, dot));
    std::string name = dot == std::string::npos ? fqn : fqn.substr(dot + 1);
    if (parameter) {
      owner->register_parameter(name, t, /*requires_grad=*/true);
    } else {
      owner->register_buffer(name, t);
    }
  }

 private:
  torch::nn::Module* At(const std::string& path) {
    if (path.empty()) return this;
    if (auto it = tree_.find(path); it != tree_.end()) return it->second;
    size_t dot = path.rfind('.');
    torch::nn::Module* parent = At(dot == std::string::npos ? "" : path.substr(0, dot));
    auto child = std::make_shared<torch::nn::Module>();
    parent->register_module(dot == std::string::npos ? path : path.substr(dot + 1), child);
    return tree_[path] = child.get();
  }
  std::map<std::string, torch::nn::Module*> tree_;
};

// Runs a layer (or the loss part) of the graph on its live values.
class LayerRunner {
 public:
  LayerRunner(std::shared_ptr<ExportArchive> archive, ExportLayer layer,
              std::vector<std::pair<int, torch::Tensor>> tensors, const torch::nn::Module* mode)
      : archive_(std::move(archive)),
        layer_(std::move(layer)),
        tensors_(std::move(tensors)),
        mode_(mode) {
    std::set<int> written;
    for (int k : layer_.nodes)
      for (int v : archive_->graph().nodes[k].writes) written.insert(v);
    for (int v : layer_.live_in) copy_in_.push_back(written.count(v) > 0);
  }

  Activations Run(const Activations& in) const {
    const ExportGraph& g = archive_->graph();
    std::vector<c10::IValue> env(static_cast<size_t>(g.num_values()));
    if (in.size() != layer_.live_in.size())
      ThrowInput("layer {}: takes {} tensors, given {}", layer_.name, layer_.live_in.size(),
                 in.size());
    // A layer that writes into a value it receives works on a copy of it.
    for (size_t i = 0; i < in.size(); ++i)
      env[layer_.live_in[i]] = copy_in_[i] ? in[i].clone() : in[i];
    for (const auto& [v, t] : tensors_) env[v] = t;
    for (const auto& [v, t, d] : layer_.sizes) env[v] = env[t].toTensor().size(d);
    RunNodes(g, layer_.nodes, mode_ == nullptr || mode_->is_training(), &env);
    Activations out;
    for (int v : layer_.live_out) out.push_back(env[v].toTensor());
    return out;
  }

 private:
  std::shared_ptr<ExportArchive> archive_;
  ExportLayer layer_;
  std::vector<std::pair<int, torch::Tensor>> tensors_;
  const torch::nn::Module* mode_;
  std::vector<bool> copy_in_;
};

// Reads the tensors `layer` reads from the archive, registering parameters and buffers in
// `module` (when given).
std::vector<std::pair<int, torch::Tensor>> ReadTensors(ExportArchive& archive,
                                                       const ExportLayer& layer,
                                                       ExportLayerModule* module) {
  std::vector<std::pair<int, torch::Tensor>> tensors;
  for (int i : layer.tensors) {
    const ExportTensorInput& in = archive.graph().tensors[i];
    torch::Tensor t = archive.Read(in.fqn);
    tensors.push_back({in.value, t});
    if (module && in.kind != ExportTensorInput::Kind::kConstant)
      module->Add(in.fqn, t, in.kind == ExportTensorInput::Kind::kParameter);
  }
  return tensors;
}

// Parameters several layers read (tied weights): one fqn read by two layers, or two fqns
// sharing one record of the archive (torch.export.save stores a tied weight once).
std::vector<SharedParameter> FindTiedParameters(const ExportArchive& archive,
                                                const ExportCut& cut) {
  std::map<std::string, SharedParameter> uses;
  for (int l = 0; l < static_cast<int>(cut.layers.size()); ++l)
    for (int i : cut.layers[l].tensors) {
      const ExportTensorInput& in = archive.graph().tensors[i];
      if (in.kind == ExportTensorInput::Kind::kParameter)
        uses[archive.RecordOf(in.fqn)].uses.push_back({l, in.fqn});
    }
  std::vector<SharedParameter> shared;
  for (auto& [record, s] : uses) {
    bool several_layers = false;
    for (const auto& u : s.uses) several_layers |= u.first != s.uses.front().first;
    if (several_layers) shared.push_back(std::move(s));
  }
  return shared;
}

// The target's shape, dtype and classes: a forward's own target as the export saw it (the
// classes from the model's output), else from the model's output and the loss.
void SetTarget(Model* m, const ExportGraph& g, const ExportCut& cut, const ScriptModelOptions& o,
               torch::Dtype dtype) {
  std::vector<int64_t> out;
  if (auto it = g.sample_shapes.find(cut.layers.back().live_out.at(0)); it != g.sample_shapes.end())
    out = it->second;
  const int64_t classes = out.empty() ? 0 : out.back();
  if (cut.target >= 0) {
    auto shape = g.sample_shapes.find(cut.target);
    auto type = g.input_dtypes.find(cut.target);
    const bool labels = type != g.input_dtypes.end() ? !c10::isFloatingType(type->second)
                                                     : !c10::isFloatingType(m->input_dtype);
    // Without a known shape: a language model's next token of every position.
    m->target_shape = shape != g.sample_shapes.end() ? shape->second
                      : labels                       ? m->input_shape
                                                     : out;
    m->target_dtype = labels ? torch::kInt64 : dtype;
    m->num_classes = labels ? classes : 0;
  } else if (o.loss == "cross-entropy" || o.loss == "nll") {
    m->target_shape.assign(out.begin(), out.end() - (out.empty() ? 0 : 1));
    m->target_dtype = torch::kInt64;
    m->num_classes = classes;
  } else {
    m->target_shape = out;
    m->target_dtype = m->input_dtype;
  }
}

// A forward of several inputs takes them packed (Note [Packed inputs]): their parts as the
// export saw them.
void SetInputParts(Model* m, const ExportGraph& g, const ExportCut& cut, torch::Dtype dtype,
                   const std::string& file) {
  bool all_integer = true;
  int64_t size = 0;
  for (int v : cut.inputs) {
    size_t i = std::find(g.user_inputs.begin(), g.user_inputs.end(), v) - g.user_inputs.begin();
    auto shape = g.sample_shapes.find(v);
    if (shape == g.sample_shapes.end())
      ThrowInput(
          "{}: input {} has a dynamic size other than the batch; dapple packs the inputs of a "
          "forward of several inputs by their exported sizes",
          file, g.InputName(i));
    InputPart part{g.InputName(i), shape->second, g.input_dtypes.at(v)};
    if (c10::isFloatingType(part.dtype)) part.dtype = dtype;
    all_integer &= !c10::isFloatingType(part.dtype);
    int64_t numel = 1;
    for (int64_t d : part.shape) numel *= d;
    size += numel;
    m->input_parts.push_back(std::move(part));
  }
  m->input_shape = {size};
  m->input_dtype = all_integer ? torch::kInt64 : dtype;
}

// The first layer's forward when the model takes its inputs packed: it unpacks them.
LayerForward UnpackingForward(std::shared_ptr<LayerRunner> run, const ExportCut& cut,
                              const std::vector<InputPart>& parts) {
  std::vector<size_t> index;  // the part of each of the layer's inputs
  for (int v : cut.layers[0].live_in)
    index.push_back(std::find(cut.inputs.begin(), cut.inputs.end(), v) - cut.inputs.begin());
  return [run, index, parts](const Activations& x) {
    std::vector<torch::Tensor> unpacked = UnpackInputs(x.at(0), parts);
    Activations in;
    for (size_t i : index) in.push_back(unpacked.at(i));
    return run->Run(in);
  };
}

void SetExportLoss(Model* m, std::shared_ptr<ExportArchive> archive, const ExportCut& cut,
                   const ScriptModelOptions& o, const std::string& file) {
  if (!cut.loss) {
    if (o.loss.empty())
      ThrowInput("{}: forward computes no loss; pass --loss {}", file,
                 fmt::join(BuiltInLosses(), "|"));
    m->loss = BuiltInLoss(o.loss, file);
    return;
  }
  auto tensors = ReadTensors(*archive, *cut.loss, nullptr);
  auto run = std::make_shared<LayerRunner>(archive, *cut.loss, std::move(tensors), nullptr);
  m->loss = [run](const torch::Tensor& output, const torch::Tensor& target) {
    return run->Run({output, target}).at(0);
  };
}

// Layer i of the cut, held: its tensors read from the archive. The first layer of a model
// that takes its inputs packed unpacks them.
NamedLayer HeldExportLayer(std::shared_ptr<ExportArchive> archive, const ExportCut& cut, int i,
                           const std::vector<InputPart>& input_parts) {
  NamedLayer layer;
  layer.name = cut.layers[i].name;
  auto module = std::make_shared<ExportLayerModule>();
  auto tensors = ReadTensors(*archive, cut.layers[i], module.get());
  auto run =
      std::make_shared<LayerRunner>(archive, cut.layers[i], std::move(tensors), module.get());
  layer.forward = i == 0 && !input_parts.empty()
                      ? UnpackingForward(run, cut, input_parts)
                      : [run](const Activations& x) { return run->Run(x); };
  layer.module = std::move(module);
  return layer;
}

// Note [Stage-local models]: the held layers of a model loaded with none, from the archive and
// the cut of that load, made as the load makes its held layers. That load left the tensors it
// read (the loss's) in the archive's memory, so that a tied weight is one tensor here too.
LayerMaterializer ExportLayerMaterializer(std::shared_ptr<ExportArchive> archive,
                                          std::shared_ptr<const ExportCut> cut) {
  return [archive, cut](Model& m, const LayerRange& held) {
    const int n = m.num_layers();
    for (int i = 0; i < n; ++i)
      if (held.Contains(i, n)) m.layers[i] = HeldExportLayer(archive, *cut, i, m.input_parts);
    archive->ForgetRead();
  };
}

}  // namespace

Model LoadExportedModel(const std::filesystem::path& path, const ScriptModelOptions& o,
                        torch::Dtype dtype, LayerRange held) {
  const std::string file = path.string();
  if (!std::filesystem::is_regular_file(path)) ThrowInput("{}: no such file", file);
  if (dtype != torch::kFloat32 && dtype != torch::kFloat64)
    ThrowInput("{}: dtype must be float32 or float64", file);
  auto archive = std::make_shared<ExportArchive>(file, dtype);
  const ExportGraph& g = archive->graph();
  ExportCut cut = CutExportedGraph(g, {o.expand, o.depth, o.loss.empty()}, file);
  Model m;
  m.name = file;
  m.input_shape = o.input_shape;
  m.input_dtype = c10::isFloatingType(o.input_dtype) ? dtype : o.input_dtype;
  if (cut.token_input) m.input_dtype = torch::kInt64;
  if (cut.inputs.size() > 1) SetInputParts(&m, g, cut, dtype, file);
  if (m.input_shape.empty() && c10::isFloatingType(m.input_dtype))
    ThrowInput("{}: the input sample shape is unknown: pass --data or --input-shape", file);
  if (m.input_dtype == torch::kInt64 && cut.token_table >= 0)
    m.vocab_size = archive->Sizes(g.tensors[cut.token_table].fqn).at(0);
  SetExportLoss(&m, archive, cut, o, file);
  SetTarget(&m, g, cut, o, dtype);
  const int n = static_cast<int>(cut.layers.size());
  for (int i = 0; i < n; ++i) {
    if (held.Contains(i, n)) {
      m.layers.push_back(HeldExportLayer(archive, cut, i, m.input_parts));
    } else {
      m.layers.push_back({cut.layers[i].name, nullptr, {}});
    }
  }
  m.shared_parameters = FindTiedParameters(*archive, cut);
  if (held.HoldsNone(n)) {
    m.materialize_layers =
        ExportLayerMaterializer(archive, std::make_shared<const ExportCut>(std::move(cut)));
  } else {
    archive->ForgetRead();
  }
  return m;
}

}  // namespace dapple
