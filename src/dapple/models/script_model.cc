// LoadScriptModel: a TorchScript module cut into layers (see script_model.h).
#include "dapple/models/script_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/nn/functional/loss.h>
#include <torch/script.h>

#include <map>
#include <optional>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/graph_cut.h"
#include "dapple/models/lazy_archive.h"
#include "dapple/models/script_layer.h"

namespace dapple {
namespace {

// The line of an exception's text that says what went wrong: a TorchScript error's
// "RuntimeError: ..." line (its first line only says that an operation failed), else the
// first line.
std::string FirstLine(const std::string& s) {
  auto error = s.rfind("Error: ");
  auto start = error != std::string::npos ? s.rfind('\n', error) : std::string::npos;
  start = start == std::string::npos ? s.find_first_not_of(" \n") : start + 1;
  if (start == std::string::npos) return "";
  return s.substr(start, s.find('\n', start) - start);
}

torch::Tensor ProbeInput(const ScriptModelOptions& o, torch::Dtype dtype) {
  std::vector<int64_t> shape{3};
  shape.insert(shape.end(), o.input_shape.begin(), o.input_shape.end());
  torch::manual_seed(12345);
  if (c10::isFloatingType(o.input_dtype)) return torch::randn(shape, torch::dtype(dtype));
  if (o.input_dtype == torch::kBool) return torch::randint(0, 2, shape).to(torch::kBool);
  return torch::randint(0, 2, shape, torch::dtype(o.input_dtype));  // ids valid in any table
}

std::shared_ptr<LazyArchive> LoadFile(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) ThrowInput("{}: no such file", path.string());
  try {
    return std::make_shared<LazyArchive>(path.string());
  } catch (const std::exception& e) {
    ThrowInput(
        "{}: not a TorchScript archive (write one with torch.jit.script(model).save(path); a "
        "state_dict or a legacy torch.save file cannot be loaded): {}",
        path.string(), FirstLine(e.what()));
  }
}

// Parameters that several layers read (tied weights), by tensor identity.
std::vector<SharedParameter> FindShared(const std::vector<NamedLayer>& layers) {
  std::map<const void*, SharedParameter> uses;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i)
    for (const auto& p : layers[i].module->named_parameters(/*recurse=*/true))
      uses[p.value().unsafeGetTensorImpl()].uses.push_back({i, p.key()});
  std::vector<SharedParameter> shared;
  for (auto& [impl, s] : uses) {
    bool several_layers = false;
    for (const auto& u : s.uses) several_layers |= u.first != s.uses.front().first;
    if (several_layers) shared.push_back(std::move(s));
  }
  return shared;
}

}  // namespace

bool IsTorchScriptPath(const std::string& model) {
  auto ends = [&](const std::string& suffix) {
    return model.size() > suffix.size() &&
           model.compare(model.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".pt") || ends(".pth");
}

void ToFloatingDtype(torch::jit::Module& top, torch::Dtype dtype) {
  torch::NoGradGuard no_grad;
  for (auto p : top.named_parameters(/*recurse=*/true))
    if (p.value.is_floating_point()) p.value.set_data(p.value.to(dtype));
  for (auto b : top.named_buffers(/*recurse=*/true))
    if (b.value.defined() && b.value.is_floating_point()) b.value.set_data(b.value.to(dtype));
}

std::vector<std::string> BuiltInLosses() { return {"cross-entropy", "nll", "mse", "bce-logits"}; }

std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> BuiltInLoss(
    const std::string& name, const std::string& file) {
  namespace F = torch::nn::functional;
  if (name == "cross-entropy")
    return [](const torch::Tensor& out, const torch::Tensor& target) {
      return F::cross_entropy(out.flatten(0, -2), target.flatten());
    };
  if (name == "nll")
    return [](const torch::Tensor& out, const torch::Tensor& target) {
      return F::nll_loss(out.flatten(0, -2), target.flatten());
    };
  if (name == "mse")
    return [](const torch::Tensor& out, const torch::Tensor& target) {
      return F::mse_loss(out, target);
    };
  if (name == "bce-logits")
    return [](const torch::Tensor& out, const torch::Tensor& target) {
      return F::binary_cross_entropy_with_logits(out, target);
    };
  ThrowInput("{}: --loss {}: expected one of {}", file, name, fmt::join(BuiltInLosses(), ", "));
}

// Note [Graph executor]: a freshly loaded module's first calls run through the profiling
// executor, 90-200 ms each for a small GPT, and would land in the profile's warm-up and the
// first training steps. Layers run their graphs in the interpreter directly; the module's own
// methods (a loss method) are switched to the plain executor once for the process.
namespace {

GraphCut CutOrExplain(const torch::jit::Module& top, const ScriptModelOptions& o,
                      const std::string& file) {
  try {
    return CutForwardGraph(top, GraphCutOptions{o.expand}, file);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    ThrowInput("{}: cannot cut forward into layers: {}", file, FirstLine(e.what()));
  }
}

LayerForward ForwardOf(std::shared_ptr<GraphLayerRunner> run, std::string where) {
  return [run = std::move(run), where = std::move(where)](const Activations& x) {
    std::vector<c10::IValue> in(x.begin(), x.end());
    Activations out;
    for (const c10::IValue& v : run->Run(std::move(in))) {
      if (!v.isTensor())
        ThrowInput("{}: returns a {} where a tensor was expected", where, v.tagKind());
      out.push_back(v.toTensor());
    }
    return out;
  };
}

// The loss: forward's own (from the target), the module's loss method, or a built-in one.
void SetLoss(Model* m, const torch::jit::Module& top, const GraphCut& cut,
             const ScriptModelOptions& o, const std::string& file) {
  if (cut.loss) {
    if (!o.loss.empty())
      ThrowInput("{}: forward(input, target) computes its own loss; drop --loss {}", file, o.loss);
    auto run = std::make_shared<GraphLayerRunner>(top, *cut.loss);
    m->loss = [run](const torch::Tensor& output, const torch::Tensor& target) {
      return run->Run({output, target}).at(0).toTensor();
    };
    return;
  }
  if (!o.loss.empty()) {
    m->loss = BuiltInLoss(o.loss, file);
    return;
  }
  if (!top.find_method("loss")) {
    ThrowInput("{}: the module has no loss(output, target) method; pass --loss {}", file,
               fmt::join(BuiltInLosses(), "|"));
  }
  m->loss = [top](const torch::Tensor& output, const torch::Tensor& target) mutable {
    return top.get_method("loss")({output, target}).toTensor();
  };
}

// The parameters and buffers a layer reads.
std::vector<torch::Tensor> LayerTensors(const NamedLayer& layer) {
  std::vector<torch::Tensor> t = layer.module->parameters();
  for (const auto& b : layer.module->buffers()) t.push_back(b);
  return t;
}

// Note [Probing with zeros]: a model's output shape (hence its targets') is learnt by running
// its layers on a probe batch. Run on the values, that would read every layer's tensors from
// the archive, also in a process that holds one stage or none (the launcher; a rank, whose
// load holds no layer until its plan is checked, Note [Stage-local models] in model.h), and
// malloc keeps what is freed (Note [Freed memory stays]): each process would hold the whole
// model at its start. Only shapes are wanted, so the layers a load does not hold run on zeros
// in pages that take no memory (LazyArchive::StandIn), freed after each layer; the held ones
// run on their values, read once.

// Runs the layers in evaluation mode (no BatchNorm statistic changes) on `input`: the output,
// or the exception of the layer that failed, with the layer's name.
struct ProbeRun {
  std::optional<torch::Tensor> output;
  std::string failed_layer, error;
};

ProbeRun ProbeLayers(Model* m, LazyArchive& archive, const torch::Tensor& input,
                     const std::set<const void*>& keep, torch::Dtype dtype) {
  Activations y{input};
  for (const auto& layer : m->layers) {
    for (const auto& t : LayerTensors(layer)) {
      if (keep.count(t.unsafeGetTensorImpl()))
        archive.Materialize(t, dtype);
      else
        archive.StandIn(t, dtype);
    }
    try {
      y = layer.forward(y);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      return {std::nullopt, layer.name, e.what()};
    }
    for (const auto& t : LayerTensors(layer))
      if (!keep.count(t.unsafeGetTensorImpl())) archive.Release(t);
  }
  return {y.at(0), "", ""};
}

// Sets the target's shape, dtype and classes from the model's output on a probe batch, and
// reads the tensors of the held layers (`keep`) from the archive (Note [Probing with zeros]).
void ProbeOutput(Model* m, LazyArchive& archive, const std::set<const void*>& keep,
                 const ScriptModelOptions& o, torch::Dtype dtype, bool own_loss,
                 const std::string& file) {
  m->SetTraining(false);
  torch::NoGradGuard no_grad;
  ScriptModelOptions probe = o;
  probe.input_dtype = m->input_dtype;
  const ProbeRun run = ProbeLayers(m, archive, ProbeInput(probe, dtype), keep, dtype);
  if (!run.output) {
    ThrowInput("{}: layer {} fails on a batch of samples shaped [{}] ({}): {}", file,
               run.failed_layer, fmt::join(o.input_shape, ", "), c10::toString(m->input_dtype),
               FirstLine(run.error));
  }
  m->SetTraining(true);
  const torch::Tensor& out = *run.output;
  std::vector<int64_t> out_sample(out.sizes().begin() + std::min<int64_t>(1, out.dim()),
                                  out.sizes().end());
  if (own_loss && !c10::isFloatingType(m->input_dtype)) {
    m->target_shape = m->input_shape;  // a language model: the next token of every position
    m->target_dtype = torch::kInt64;
    m->num_classes = out.dim() > 1 ? out.size(-1) : 0;
  } else if (o.loss == "cross-entropy" || o.loss == "nll") {
    m->target_shape.assign(out_sample.begin(), out_sample.end() - (out_sample.empty() ? 0 : 1));
    m->target_dtype = torch::kInt64;
    m->num_classes = out.dim() > 1 ? out.size(-1) : 0;
  } else {
    m->target_shape = out_sample;  // a guess for synthetic targets; --data gives the real ones
    m->target_dtype = dtype;
  }
}

// The rows of the first embedding table bound token ids (synthetic data, token files).
int64_t VocabSize(const torch::jit::Module& top) {
  for (const auto& sub : top.modules()) {
    auto type = sub.type()->name();
    if (!type || type->qualifiedName().find("Embedding") == std::string::npos) continue;
    for (const auto& p : sub.named_parameters(false))
      if (p.name == "weight" && p.value.dim() == 2) return p.value.size(0);
  }
  return 0;
}

// Layer `g` of the model, held: its tensors (still to be read, as the archive holds them) and
// its graph's interpreter.
NamedLayer HeldScriptLayer(const torch::jit::Module& top, const GraphLayer& g,
                           const std::string& file) {
  NamedLayer layer;
  layer.name = g.name;
  layer.module = std::make_shared<ScriptLayerModule>(top, g.attrs);
  layer.forward = ForwardOf(std::make_shared<GraphLayerRunner>(top, g), file + ": layer " + g.name);
  return layer;
}

// Note [Stage-local models]: the held layers of a model loaded with none, from the archive and
// the cut of that load: made as the load makes its held layers, their tensors read.
LayerMaterializer ScriptLayerMaterializer(std::shared_ptr<LazyArchive> archive,
                                          std::shared_ptr<const GraphCut> cut, std::string file,
                                          torch::Dtype dtype) {
  return [archive, cut, file, dtype](Model& m, const LayerRange& held) {
    const torch::jit::Module top = archive->module();
    const int n = m.num_layers();
    for (int i = 0; i < n; ++i) {
      if (!held.Contains(i, n)) continue;
      m.layers[i] = HeldScriptLayer(top, cut->layers.at(i), file);
      for (const auto& t : LayerTensors(m.layers[i])) archive->Materialize(t, dtype);
    }
  };
}

// The parameters and buffers the held layers read.
std::set<const void*> HeldTensors(const Model& m, LayerRange held) {
  std::set<const void*> keep;
  for (int i = 0; i < m.num_layers(); ++i)
    if (held.Contains(i, m.num_layers()))
      for (const auto& t : LayerTensors(m.layers[i])) keep.insert(t.unsafeGetTensorImpl());
  return keep;
}

// Note [Stage-local models]: frees every parameter and buffer no held layer reads.
void FreeUnheld(LazyArchive& archive, const std::set<const void*>& keep) {
  torch::jit::Module& top = archive.module();
  for (const auto& p : top.named_parameters(true))
    if (!keep.count(p.value.unsafeGetTensorImpl())) archive.Release(p.value);
  for (const auto& b : top.named_buffers(true))
    if (b.value.defined() && !keep.count(b.value.unsafeGetTensorImpl())) archive.Release(b.value);
}

}  // namespace

Model LoadScriptModel(const std::filesystem::path& path, const ScriptModelOptions& o,
                      torch::Dtype dtype, LayerRange held) {
  const std::string file = path.string();
  if (dtype != torch::kFloat32 && dtype != torch::kFloat64)
    ThrowInput("{}: dtype must be float32 or float64", file);
  torch::jit::setGraphExecutorOptimize(false);
  std::shared_ptr<LazyArchive> archive = LoadFile(path);
  torch::jit::Module top = archive->module();
  GraphCut cut = CutOrExplain(top, o, file);

  Model m;
  m.name = file;
  m.input_shape = o.input_shape;
  m.input_dtype = c10::isFloatingType(o.input_dtype) ? dtype : o.input_dtype;
  if (cut.token_input && c10::isFloatingType(o.input_dtype)) m.input_dtype = torch::kInt64;
  if (m.input_shape.empty() && c10::isFloatingType(m.input_dtype))
    ThrowInput("{}: the input sample shape is unknown: pass --data or --input-shape", file);
  if (m.input_dtype == torch::kInt64) m.vocab_size = VocabSize(top);
  SetLoss(&m, top, cut, o, file);
  std::vector<torch::Tensor> loss_tensors;  // a forward's own loss reads them in any process
  if (cut.loss) {
    ScriptLayerModule loss_module(top, cut.loss->attrs);
    loss_tensors = loss_module.parameters();
    for (const auto& b : loss_module.buffers()) loss_tensors.push_back(b);
    for (const auto& t : loss_tensors) archive->Materialize(t, dtype);
  }
  for (const GraphLayer& g : cut.layers) m.layers.push_back(HeldScriptLayer(top, g, file));
  top.train();
  std::set<const void*> keep = HeldTensors(m, held);
  for (const auto& t : loss_tensors) keep.insert(t.unsafeGetTensorImpl());
  ProbeOutput(&m, *archive, keep, o, dtype, cut.loss.has_value(), file);
  m.shared_parameters = FindShared(m.layers);
  const int n = m.num_layers();
  for (int i = 0; i < n; ++i) {
    if (held.Contains(i, n)) continue;
    m.layers[i].module = nullptr;
    m.layers[i].forward = {};
  }
  FreeUnheld(*archive, keep);
  if (held.HoldsNone(n)) {
    m.materialize_layers = ScriptLayerMaterializer(
        archive, std::make_shared<const GraphCut>(std::move(cut)), file, dtype);
  }
  return m;
}

}  // namespace dapple
