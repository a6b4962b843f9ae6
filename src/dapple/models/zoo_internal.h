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

struct ZooEntry {
  std::string description;  // one line for --help
  ModelOptions defaults;    // every accepted option, with its default
  std::map<std::string, ModelOptions> presets;
  // Builds the layer list from resolved options. Called after torch::manual_seed(seed);
  // the caller converts to the dtype afterwards.
  std::function<Model(const OptionReader&)> build;
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
