// LoadScriptModel: a TorchScript module as a chain of layers (see script_model.h).
#include "dapple/models/script_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/nn/functional/loss.h>
#include <torch/script.h>

#include <map>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/script_layer.h"

namespace dapple {
namespace {

using Children = std::vector<std::pair<std::string, torch::jit::Module>>;

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

bool IsSequential(const torch::jit::Module& m) {
  auto name = m.type()->name();
  return name &&
         name->qualifiedName().find("torch.nn.modules.container.Sequential") != std::string::npos;
}

Children TopChildren(const torch::jit::Module& m, bool expand) {
  Children out;
  for (const auto& c : m.named_children()) {
    if (expand && IsSequential(c.value) && c.value.named_children().size() > 0) {
      for (const auto& g : c.value.named_children())
        out.push_back({c.name + "." + g.name, g.value});
    } else {
      out.push_back({c.name, c.value});
    }
  }
  return out;
}

int Arity(torch::jit::Module& m) {
  return static_cast<int>(m.get_method("forward").function().getSchema().arguments().size()) - 1;
}

// A layer's result as tensors; anything but a tensor or a flat tuple of tensors refuses.
Activations ToActivations(const c10::IValue& v, const std::string& where) {
  if (v.isTensor()) return {v.toTensor()};
  if (v.isTuple()) {
    Activations out;
    for (const auto& e : v.toTupleRef().elements()) {
      if (!e.isTensor())
        ThrowInput(
            "{}: returns a tuple holding a {}; a layer must return a tensor or a flat tuple "
            "of tensors",
            where, e.tagKind());
      out.push_back(e.toTensor());
    }
    return out;
  }
  ThrowInput("{}: returns a {}; a layer must return a tensor or a flat tuple of tensors", where,
             v.tagKind());
}

Activations CallChild(torch::jit::Module& child, const Activations& x, const std::string& where) {
  int arity = Arity(child);
  if (arity != static_cast<int>(x.size())) {
    ThrowInput("{}: forward takes {} argument{} but the previous layer returns {} tensor{}", where,
               arity, arity == 1 ? "" : "s", x.size(), x.size() == 1 ? "" : "s");
  }
  std::vector<c10::IValue> args(x.begin(), x.end());
  return ToActivations(child.forward(args), where);
}

bool SameValues(const Activations& a, const Activations& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].sizes() != b[i].sizes() || a[i].scalar_type() != b[i].scalar_type()) return false;
    if (a[i].is_floating_point() ? !torch::allclose(a[i], b[i], 1e-5, 1e-6) : !a[i].equal(b[i]))
      return false;
  }
  return true;
}

torch::Tensor ProbeInput(const ScriptModelOptions& o, torch::Dtype dtype) {
  std::vector<int64_t> shape{3};
  shape.insert(shape.end(), o.input_shape.begin(), o.input_shape.end());
  torch::manual_seed(12345);
  if (c10::isFloatingType(o.input_dtype)) return torch::randn(shape, torch::dtype(dtype));
  if (o.input_dtype == torch::kBool) return torch::randint(0, 2, shape).to(torch::kBool);
  return torch::randint(0, 2, shape, torch::dtype(o.input_dtype));  // ids valid in any table
}

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

torch::jit::Module LoadFile(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) ThrowInput("{}: no such file", path.string());
  try {
    return torch::jit::load(path.string());
  } catch (const std::exception& e) {
    ThrowInput(
        "{}: not a TorchScript archive (write one with torch.jit.script(model).save(path); a "
        "state_dict or a legacy torch.save file cannot be loaded): {}",
        path.string(), FirstLine(e.what()));
  }
}

// Parameters that several layers share (tied weights), by tensor identity.
std::vector<SharedParameter> FindShared(const Children& children) {
  std::map<const void*, SharedParameter> uses;
  for (int i = 0; i < static_cast<int>(children.size()); ++i)
    for (const auto& p : children[i].second.named_parameters(/*recurse=*/true))
      uses[p.value.unsafeGetTensorImpl()].uses.push_back({i, p.name});
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

std::vector<std::string> BuiltInLosses() { return {"cross-entropy", "nll", "mse", "bce-logits"}; }

// Note [Graph executor]: a freshly loaded module's first calls run through the profiling
// executor, 90-200 ms each for a small GPT, and would land in the profile's warm-up and the
// first training steps. dapple runs the layers one by one on CPU, where the optimised
// executor gains nothing measurable, so it is switched off once for the process.
Model LoadScriptModel(const std::filesystem::path& path, const ScriptModelOptions& o,
                      torch::Dtype dtype, LayerRange held) {
  const std::string file = path.string();
  if (dtype != torch::kFloat32 && dtype != torch::kFloat64)
    ThrowInput("{}: dtype must be float32 or float64", file);
  torch::jit::setGraphExecutorOptimize(false);
  torch::jit::Module top = LoadFile(path);
  top.to(dtype);
  if (top.named_children().size() == 0) {
    ThrowInput(
        "{}: the module has no children; dapple cuts a model between its top-level "
        "children (an nn.Sequential, or submodules called one after another)",
        file);
  }
  if (o.input_shape.empty() && !c10::isIntegralType(o.input_dtype, /*includeBool=*/true))
    ThrowInput("{}: the input sample shape is unknown: pass --data or --input-shape", file);

  // Note [Chain check].
  top.eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = ProbeInput(o, dtype);
  Activations whole;
  try {
    whole = ToActivations(top.forward({x}), file + ": forward");
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    ThrowInput("{}: forward fails on a batch of samples shaped [{}] ({}): {}", file,
               fmt::join(o.input_shape, ", "), c10::toString(o.input_dtype), FirstLine(e.what()));
  }
  auto chain_matches = [&](Children& children) {
    Activations y{x};
    for (auto& [name, child] : children) y = CallChild(child, y, file + ": layer " + name);
    return SameValues(y, whole);
  };
  Children children = TopChildren(top, o.expand);
  if (!chain_matches(children)) {
    Children plain = TopChildren(top, false);
    if (!o.expand || plain.size() == children.size() || !chain_matches(plain)) {
      std::vector<std::string> names;
      for (const auto& c : plain) names.push_back(c.first);
      ThrowInput(
          "{}: the module's forward is not its children called one after another in "
          "registration order ({}); dapple needs a chain (no residual around a child, no "
          "reordering)",
          file, fmt::join(names, ", "));
    }
    children = std::move(plain);
  }
  if (whole.size() != 1) {
    ThrowInput("{}: the last layer ({}) returns {} tensors; the loss takes one", file,
               children.back().first, whole.size());
  }
  top.train();

  Model m;
  m.name = file;
  m.input_shape = o.input_shape;
  m.input_dtype = c10::isFloatingType(o.input_dtype) ? dtype : o.input_dtype;
  const torch::Tensor& out = whole[0];
  std::vector<int64_t> out_sample(out.sizes().begin() + 1, out.sizes().end());
  if (o.loss.empty()) {
    if (!top.find_method("loss")) {
      ThrowInput("{}: the module has no loss(output, target) method; pass --loss {}", file,
                 fmt::join(BuiltInLosses(), "|"));
    }
    m.loss = [top](const torch::Tensor& output, const torch::Tensor& target) mutable {
      return top.get_method("loss")({output, target}).toTensor();
    };
    m.target_shape = out_sample;  // a guess for synthetic targets; --data gives the real ones
    m.target_dtype = dtype;
  } else {
    m.loss = BuiltInLoss(o.loss, file);
    if (o.loss == "cross-entropy" || o.loss == "nll") {
      m.target_shape.assign(out_sample.begin(), out_sample.end() - (out_sample.empty() ? 0 : 1));
      m.target_dtype = torch::kInt64;
      m.num_classes = out.dim() > 1 ? out.size(-1) : 0;
    } else {
      m.target_shape = out_sample;
      m.target_dtype = dtype;
    }
  }
  m.shared_parameters = FindShared(children);
  // Token models: the first embedding table's rows bound the ids (synthetic data, token
  // files).
  if (!c10::isFloatingType(m.input_dtype)) {
    for (const auto& sub : children.front().second.modules()) {
      auto type = sub.type()->name();
      if (!type || type->qualifiedName().find("Embedding") == std::string::npos) continue;
      for (const auto& p : sub.named_parameters(false))
        if (p.name == "weight" && p.value.dim() == 2) m.vocab_size = p.value.size(0);
      if (m.vocab_size > 0) break;
    }
  }

  // Note [Stage-local models]: free what this process does not hold, except tensors a held
  // layer shares.
  const int n = static_cast<int>(children.size());
  std::set<const void*> keep;
  for (int i = 0; i < n; ++i) {
    if (!held.Contains(i, n)) continue;
    for (const auto& p : children[i].second.named_parameters(true))
      keep.insert(p.value.unsafeGetTensorImpl());
    for (const auto& b : children[i].second.named_buffers(true))
      keep.insert(b.value.unsafeGetTensorImpl());
  }
  for (int i = 0; i < n; ++i) {
    auto& [name, child] = children[i];
    if (!held.Contains(i, n)) {
      for (auto p : child.named_parameters(true))
        if (!keep.count(p.value.unsafeGetTensorImpl()))
          p.value.set_data(torch::empty({0}, p.value.options()));
      for (auto b : child.named_buffers(true))
        if (!keep.count(b.value.unsafeGetTensorImpl()))
          b.value.set_data(torch::empty({0}, b.value.options()));
      m.layers.push_back({name, nullptr, {}});
      continue;
    }
    NamedLayer layer;
    layer.name = name;
    layer.module = std::make_shared<ScriptLayerModule>(child);
    std::string where = file + ": layer " + name;
    layer.forward = [child, where](const Activations& a) mutable {
      return CallChild(child, a, where);
    };
    m.layers.push_back(std::move(layer));
  }
  return m;
}

}  // namespace dapple
