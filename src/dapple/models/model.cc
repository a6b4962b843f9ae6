// Model methods and the zoo registry: option defaults, presets, parsing and BuildModel.
#include "dapple/models/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/module.h>

#include <cmath>
#include <limits>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/zoo.h"
#include "dapple/models/zoo_internal.h"

namespace dapple {
namespace {

const std::map<std::string, internal::ZooEntry>& Zoo() {
  static const auto* zoo = new std::map<std::string, internal::ZooEntry>{
      {"mlp", internal::MlpEntry()},           {"vgg19", internal::Vgg19Entry()},
      {"resnet50", internal::ResNet50Entry()}, {"bert", internal::BertEntry()},
      {"gpt", internal::GptEntry()},
  };
  return *zoo;
}

const internal::ZooEntry& Entry(const std::string& name) {
  auto it = Zoo().find(name);
  if (it == Zoo().end())
    ThrowInput("unknown model '{}' (known: {})", name, fmt::join(ModelNames(), ", "));
  return it->second;
}

template <typename Map>
std::vector<std::string> Keys(const Map& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  return keys;
}

}  // namespace

NamedLayer MakeLayer(std::string name, torch::nn::AnyModule module) {
  NamedLayer l;
  l.name = std::move(name);
  l.module = module.ptr();
  // AnyModule::forward is not const, though calling it changes no AnyModule state.
  l.forward = [module](const Activations& x) mutable -> Activations {
    DAPPLE_CHECK(x.size() == 1, "a zoo layer takes one tensor");
    return {module.forward(x[0])};
  };
  return l;
}

torch::Tensor PackInputs(const std::vector<torch::Tensor>& parts, torch::Dtype dtype) {
  std::vector<torch::Tensor> flat;
  for (const torch::Tensor& p : parts) flat.push_back(p.reshape({p.size(0), -1}).to(dtype));
  return torch::cat(flat, 1);
}

std::vector<torch::Tensor> UnpackInputs(const torch::Tensor& packed,
                                        const std::vector<InputPart>& parts) {
  std::vector<torch::Tensor> out;
  int64_t offset = 0;
  for (const InputPart& p : parts) {
    std::vector<int64_t> shape{packed.size(0)};
    shape.insert(shape.end(), p.shape.begin(), p.shape.end());
    int64_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    out.push_back(packed.narrow(1, offset, numel).reshape(shape).to(p.dtype));
    offset += numel;
  }
  return out;
}

Activations Model::ForwardActivations(const Activations& x, int first, int last) const {
  DAPPLE_CHECK(0 <= first && first <= last && last < num_layers());
  Activations y = x;
  for (int i = first; i <= last; ++i) {
    DAPPLE_CHECK(layers[i].held(), "layer " + layers[i].name + " is not held by this process");
    y = layers[i].forward(y);
  }
  return y;
}

torch::Tensor Model::Forward(const torch::Tensor& x, int first, int last) const {
  Activations y = ForwardActivations(Activations{x}, first, last);
  DAPPLE_CHECK(y.size() == 1, "layer " + layers[last].name + " returns more than one tensor");
  return y[0];
}

std::vector<torch::Tensor> Model::Parameters(int first, int last) const {
  DAPPLE_CHECK(0 <= first && first <= last && last < num_layers());
  std::vector<torch::Tensor> params;
  std::set<const void*> seen;
  for (int i = first; i <= last; ++i) {
    DAPPLE_CHECK(layers[i].held(), "layer " + layers[i].name + " is not held by this process");
    for (const auto& p : layers[i].module->parameters())
      if (seen.insert(p.unsafeGetTensorImpl()).second) params.push_back(p);
  }
  return params;
}

int64_t Model::ParameterCount() const {
  int64_t n = 0;
  std::set<const void*> seen;
  for (const auto& l : layers)
    if (l.held())
      for (const auto& p : l.module->parameters())
        if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
  return n;
}

void Model::SetTraining(bool on) {
  for (auto& l : layers)
    if (l.held()) l.module->train(on);
}

void MaterializeLayers(Model& m, const LayerRange& held) {
  DAPPLE_CHECK(m.materialize_layers != nullptr,
               "model " + m.name + " was loaded with layers held, or materialised already");
  for (const auto& l : m.layers)
    DAPPLE_CHECK(!l.held(), "model " + m.name + ": layer " + l.name + " is held already");
  // Cleared first: what the load kept is freed once the held layers are made.
  LayerMaterializer materialize = std::move(m.materialize_layers);
  m.materialize_layers = nullptr;
  materialize(m, held);
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : Zoo()) names.push_back(name);
  return names;
}

ModelOptions DefaultModelOptions(const std::string& name) {
  ModelOptions defaults = Entry(name).defaults;
  defaults["preset"] = "";
  return defaults;
}

std::map<std::string, ModelOptions> ModelPresets(const std::string& name) {
  return Entry(name).presets;
}

ModelOptions ResolveModelOptions(const std::string& name, const ModelOptions& options) {
  const internal::ZooEntry& entry = Entry(name);
  ModelOptions resolved = entry.defaults;
  for (const auto& [key, value] : options) {
    if (key != "preset" && !entry.defaults.count(key))
      ThrowInput("model {}: unknown option '{}' (known: preset, {})", name, key,
                 fmt::join(Keys(entry.defaults), ", "));
  }
  auto preset = options.find("preset");
  if (preset != options.end() && !preset->second.empty()) {
    auto it = entry.presets.find(preset->second);
    if (it == entry.presets.end())
      ThrowInput("model {}: unknown preset '{}' (known: {})", name, preset->second,
                 fmt::join(Keys(entry.presets), ", "));
    for (const auto& [key, value] : it->second) resolved[key] = value;
  }
  for (const auto& [key, value] : options)
    if (key != "preset") resolved[key] = value;
  return resolved;
}

int64_t CountModelParameters(const std::string& name, const ModelOptions& options) {
  ModelOptions resolved = ResolveModelOptions(name, options);
  return Entry(name).count_parameters(internal::OptionReader(name, resolved));
}

// Note [Per-layer seeds]: layer i is built right after torch::manual_seed(LayerSeed(seed,
// i)), so its initial values do not depend on which other layers a process builds
// (Note [Stage-local models]): a stage-local rank and a single process that builds every
// layer start from the same weights.
static uint64_t LayerSeed(uint64_t seed, int layer) {
  // splitmix64 of (seed, layer): distinct layers get unrelated streams.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(layer) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (z ^ (z >> 31)) & 0x7FFFFFFFFFFFFFFFull;
}

// Layer i of a zoo model from its recipe (Note [Per-layer seeds]).
static NamedLayer BuildZooLayer(const internal::LayerRecipe& recipe, uint64_t seed, int i,
                                torch::Dtype dtype) {
  torch::manual_seed(LayerSeed(seed, i));
  NamedLayer layer = MakeLayer(recipe.name, recipe.make());
  layer.module->to(dtype);
  return layer;
}

Model BuildModel(const std::string& name, const ModelOptions& options, uint64_t seed,
                 torch::Dtype dtype, LayerRange held) {
  if (dtype != torch::kFloat32 && dtype != torch::kFloat64)
    ThrowInput("model {}: dtype must be float32 or float64", name);
  ModelOptions resolved = ResolveModelOptions(name, options);
  internal::ZooModel zoo = Entry(name).build(internal::OptionReader(name, resolved));
  Model model = std::move(zoo.model);
  model.name = name;
  const int n = static_cast<int>(zoo.layers.size());
  for (int i = 0; i < n; ++i) {
    if (held.Contains(i, n)) {
      model.layers.push_back(BuildZooLayer(zoo.layers[i], seed, i, dtype));
    } else {
      model.layers.push_back({zoo.layers[i].name, nullptr, {}});
    }
  }
  if (model.input_dtype != torch::kInt64) model.input_dtype = dtype;
  if (model.target_dtype != torch::kInt64) model.target_dtype = dtype;
  if (held.HoldsNone(n)) {  // Note [Stage-local models]: the recipes build the held layers later
    auto recipes =
        std::make_shared<const std::vector<internal::LayerRecipe>>(std::move(zoo.layers));
    model.materialize_layers = [recipes, seed, dtype](Model& m, const LayerRange& range) {
      const int count = m.num_layers();
      for (int i = 0; i < count; ++i)
        if (range.Contains(i, count)) m.layers[i] = BuildZooLayer((*recipes)[i], seed, i, dtype);
    };
  }
  return model;
}

ModelOptions ParseModelFlags(const std::vector<std::string>& words) {
  ModelOptions options;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = words[i];
    bool dashed = w.rfind("--", 0) == 0;
    if (dashed) w = w.substr(2);
    auto eq = w.find('=');
    if (eq != std::string::npos && eq > 0) {
      options[w.substr(0, eq)] = w.substr(eq + 1);
    } else if (dashed && !w.empty() && i + 1 < words.size()) {
      options[w] = words[++i];
    } else {
      ThrowInput("model option '{}': expected --key value or key=value", words[i]);
    }
  }
  return options;
}

namespace internal {

const std::string& OptionReader::Raw(const std::string& key) const {
  auto it = options_.find(key);
  DAPPLE_CHECK(it != options_.end(), model_ + " reads undeclared option " + key);
  return it->second;
}

int64_t OptionReader::NonNegativeInt(const std::string& key) const {
  const std::string& s = Raw(key);
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || v < 0)
    ThrowInput("model {}: option {}: expected a non-negative integer, got '{}'", model_, key, s);
  return v;
}

int64_t OptionReader::Int(const std::string& key) const {
  int64_t v = NonNegativeInt(key);
  if (v == 0) ThrowInput("model {}: option {}: must be positive, got 0", model_, key);
  return v;
}

double OptionReader::Positive(const std::string& key) const {
  const std::string& s = Raw(key);
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || !(v > 0) || !std::isfinite(v))
    ThrowInput("model {}: option {}: expected a positive number, got '{}'", model_, key, s);
  return v;
}

std::string OptionReader::Choice(const std::string& key,
                                 const std::vector<std::string>& choices) const {
  const std::string& s = Raw(key);
  for (const auto& c : choices)
    if (s == c) return s;
  ThrowInput("model {}: option {}: expected one of {}, got '{}'", model_, key,
             fmt::join(choices, ", "), s);
}

int64_t Scaled(int64_t channels, double width) {
  return std::max<int64_t>(1, std::llround(channels * width));
}

}  // namespace internal
}  // namespace dapple
