// Internal to the zoo: the registry entry each model file provides, and typed access to
// resolved options with errors naming the model and the option.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dapple/models/model.h"

namespace dapple::internal {

// Reads resolved options of one model; a bad value throws InputError naming both.
class OptionReader {
 public:
  OptionReader(std::string model, const ModelOptions& options)
      : model_(std::move(model)), options_(options) {}
  // A positive integer.
  int64_t Int(const std::string& key) const;
  // A non-negative integer.
  int64_t NonNegativeInt(const std::string& key) const;
  // A positive finite number.
  double Positive(const std::string& key) const;
  // One of `choices`.
  std::string Choice(const std::string& key, const std::vector<std::string>& choices) const;

 private:
  const std::string& Raw(const std::string& key) const;
  std::string model_;
  const ModelOptions& options_;
};

// One layer of a zoo model, built on demand (Note [Stage-local models] in model.h).
struct LayerRecipe {
  std::string name;
  std::function<torch::nn::AnyModule()> make;  // called after torch::manual_seed(layer seed)
};

// A zoo model before its layers exist: `model` has everything but its layers.
struct ZooModel {
  Model model;
  std::vector<LayerRecipe> layers;
};

struct ZooEntry {
  std::string description;  // one line for --help
  ModelOptions defaults;    // every accepted option, with its default
  std::map<std::string, ModelOptions> presets;
  // The layer recipes from resolved options; the caller seeds and builds the layers it
  // holds and converts them to the dtype.
  std::function<ZooModel(const OptionReader&)> build;
  std::function<int64_t(const OptionReader&)> count_parameters;
};

ZooEntry MlpEntry();
ZooEntry Vgg19Entry();
ZooEntry ResNet50Entry();
ZooEntry BertEntry();
ZooEntry GptEntry();

// Scales a channel count by a width multiplier: max(1, round(channels * width)).
int64_t Scaled(int64_t channels, double width);

}  // namespace dapple::internal
