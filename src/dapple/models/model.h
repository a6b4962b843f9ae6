// A model as an ordered list of named layers (docs/design.md section 1): each layer is a libtorch
// module taking the previous layer's output tensor and returning one tensor (what crosses a
// stage boundary), plus a loss on the last output. Running the list start to end equals
// running the model, so the runtime can cut it into stages anywhere.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dapple {

// Model options as given on the command line: "--hidden 64" -> {"hidden", "64"}.
using ModelOptions = std::map<std::string, std::string>;

struct NamedLayer {
  std::string name;             // unique within the model: "embed", "block3", "head"
  torch::nn::AnyModule module;  // Tensor forward(Tensor)
};

struct Model {
  std::string name;  // zoo name: "mlp", "vgg19", "resnet50", "bert", "gpt"
  std::vector<NamedLayer> layers;
  // Mean loss over the rows of `output` against `target`. The runtime rescales it so
  // accumulated slice gradients equal the gradient of the mean loss over the global batch.
  std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)> loss;
  // Shape of one input sample and one target sample, and their dtypes, for synthetic data
  // and for receive buffers.
  std::vector<int64_t> input_shape;  // without the batch dimension
  torch::Dtype input_dtype = torch::kFloat32;
  std::vector<int64_t> target_shape;  // without the batch dimension; {} for class labels
  torch::Dtype target_dtype = torch::kInt64;
  int64_t num_classes = 0;  // output classes / vocabulary for synthetic targets
  int64_t vocab_size = 0;   // token models (input_dtype kInt64): ids in [0, vocab_size)

  int num_layers() const { return static_cast<int>(layers.size()); }
  // Runs layers [first, last] on x.
  torch::Tensor Forward(const torch::Tensor& x, int first, int last) const;
  torch::Tensor Forward(const torch::Tensor& x) const { return Forward(x, 0, num_layers() - 1); }
  // All parameters of layers [first, last], layer by layer, in registration order.
  std::vector<torch::Tensor> Parameters(int first, int last) const;
  int64_t ParameterCount() const;
};

// Builds zoo model `name` with `options` (unknown names/options throw InputError listing
// the known ones), parameters initialised deterministically from `seed`, in `dtype`.
Model BuildModel(const std::string& name, const ModelOptions& options, uint64_t seed,
                 torch::Dtype dtype = torch::kFloat32);
std::vector<std::string> ModelNames();
// The options a model accepts, with their defaults, for --help and errors.
ModelOptions DefaultModelOptions(const std::string& name);

}  // namespace dapple
