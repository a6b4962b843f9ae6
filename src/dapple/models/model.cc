// Model methods and the zoo registry: option defaults, presets, parsing and BuildModel.
#include "dapple/models/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/module.h>

#include <cmath>
#include <limits>

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

torch::Tensor Model::Forward(const torch::Tensor& x, int first, int last) const {
  DAPPLE_CHECK(0 <= first && first <= last && last < num_layers());
  torch::Tensor y = x;
  // AnyModule::forward is not const, though calling it changes no AnyModule state.
  for (int i = first; i <= last; ++i)
    y = const_cast<torch::nn::AnyModule&>(layers[i].module).forward(y);
  return y;
}

std::vector<torch::Tensor> Model::Parameters(int first, int last) const {
  DAPPLE_CHECK(0 <= first && first <= last && last < num_layers());
  std::vector<torch::Tensor> params;
  for (int i = first; i <= last; ++i)
    for (const auto& p : layers[i].module.ptr()->parameters()) params.push_back(p);
  return params;
}

int64_t Model::ParameterCount() const {
  int64_t n = 0;
  for (const auto& p : Parameters(0, num_layers() - 1)) n += p.numel();
  return n;
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

Model BuildModel(const std::string& name, const ModelOptions& options, uint64_t seed,
                 torch::Dtype dtype) {
  if (dtype != torch::kFloat32 && dtype != torch::kFloat64)
    ThrowInput("model {}: dtype must be float32 or float64", name);
  ModelOptions resolved = ResolveModelOptions(name, options);
  torch::manual_seed(seed);
  Model model = Entry(name).build(internal::OptionReader(name, resolved));
  model.name = name;
  for (auto& layer : model.layers) layer.module.ptr()->to(dtype);
  if (model.input_dtype != torch::kInt64) model.input_dtype = dtype;
  if (model.target_dtype != torch::kInt64) model.target_dtype = dtype;
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
