// The multi-layer perceptron: flatten, `layers` hidden Linear+ReLU layers, a Linear head.
// Default sizes fit Fashion-MNIST (784 inputs, 10 classes).
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "dapple/models/zoo_internal.h"

namespace dapple::internal {
namespace {

// Linear(in, out) on the flattened input, then ReLU unless it is the head.
class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in, int64_t out, bool relu)
      : linear_(register_module("linear", torch::nn::Linear(in, out))), relu_(relu) {}
  torch::Tensor forward(torch::Tensor x) {
    x = linear_(x.flatten(1));
    return relu_ ? torch::relu(x) : x;
  }

 private:
  torch::nn::Linear linear_;
  bool relu_;
};

ZooModel BuildMlp(const OptionReader& o) {
  int64_t in = o.Int("input"), hidden = o.Int("hidden"), classes = o.Int("classes");
  int64_t n = o.NonNegativeInt("layers");
  ZooModel z;
  Model& m = z.model;
  int64_t width = in;
  for (int64_t i = 0; i < n; ++i) {
    z.layers.push_back(
        {"fc" + std::to_string(i),
         [=] { return torch::nn::AnyModule(std::make_shared<DenseImpl>(width, hidden, true)); }});
    width = hidden;
  }
  z.layers.push_back(
      {"head",
       [=] { return torch::nn::AnyModule(std::make_shared<DenseImpl>(width, classes, false)); }});
  m.loss = [](const torch::Tensor& out, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(out, target);
  };
  m.input_shape = {in};
  m.target_shape = {};
  m.num_classes = classes;
  return z;
}

int64_t CountMlp(const OptionReader& o) {
  int64_t in = o.Int("input"), hidden = o.Int("hidden"), classes = o.Int("classes");
  int64_t n = o.NonNegativeInt("layers");
  int64_t width = n > 0 ? hidden : in;
  int64_t count = width * classes + classes;
  if (n > 0) count += in * hidden + hidden + (n - 1) * (hidden * hidden + hidden);
  return count;
}

}  // namespace

ZooEntry MlpEntry() {
  ZooEntry e;
  e.description = "multi-layer perceptron (input -> layers x hidden -> classes)";
  e.defaults = {{"input", "784"}, {"hidden", "256"}, {"layers", "2"}, {"classes", "10"}};
  e.presets = {{"fashion-mnist", {{"input", "784"}, {"hidden", "512"}, {"layers", "2"}}},
               {"wide", {{"hidden", "4096"}, {"layers", "8"}}}};
  e.build = BuildMlp;
  e.count_parameters = CountMlp;
  return e;
}

}  // namespace dapple::internal
