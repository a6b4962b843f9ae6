// A model as an ordered list of named layers (docs/design.md section 1): each layer takes the
// previous layer's outputs (one tensor, or a flat tuple of tensors for TorchScript models)
// and returns its own, plus a loss on the last output. Running the list start to end equals
// running the model, so the runtime can cut it into stages anywhere.
//
// Note [Stage-local models]: a process materialises only the layers of its stage. Every
// layer keeps its name; a layer that is not held has no module and no forward. Zoo layers
// are built from a seed of their own (Note [Per-layer seeds] in model.cc), so a layer has the
// same initial values whichever other layers the process builds; TorchScript and torch.export
// models read only the held layers' parameters and buffers from their file.
//
// A rank learns which layers it holds only from the plan, and the plan is checked against
// the model's layer names (its layer ids are the names). So a rank loads its model once with
// no layer held (the names, shapes, tied parameters; a user's file read and its graph cut
// once), checks the plan against it, and then materialises its stage's layers in place
// (MaterializeLayers) from what that load kept (the archive and the cut), neither reading the
// file's structure nor cutting its graph again. The layers are the same as a load that held
// them from the start: the same values, the same forward.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dapple/common/precision.h"

namespace dapple {

// Model options as given on the command line: "--hidden 64" -> {"hidden", "64"}.
using ModelOptions = std::map<std::string, std::string>;

// What crosses a layer boundary: one tensor, or a flat tuple of tensors such as
// (hidden, mask). At a stage boundary a tensor whose first dimension is the batch is split
// and concatenated by rows; any other tensor goes whole.
using Activations = std::vector<torch::Tensor>;
using LayerForward = std::function<Activations(const Activations&)>;

struct NamedLayer {
  std::string name;  // unique within the model: "embed", "block3", "head", "blocks.0"
  // Parameters and buffers (optimizer, checkpoints, device moves); null when this process
  // does not hold the layer (Note [Stage-local models]).
  std::shared_ptr<torch::nn::Module> module;
  LayerForward forward;  // empty when not held
  bool held() const { return module != nullptr; }
};

// A held layer from a libtorch module with Tensor forward(Tensor).
NamedLayer MakeLayer(std::string name, torch::nn::AnyModule module);

// Which layers BuildModel materialises: [first, last], and the ranges in `more` (a rank of
// an interleaved plan holds one range per chunk); the default is every layer.
struct LayerRange {
  int first = 0;
  int last = -1;                          // -1: to the end
  std::vector<std::pair<int, int>> more;  // further [first, last] ranges
  bool Contains(int i, int num_layers) const {
    if (i >= first && i <= (last < 0 ? num_layers - 1 : last)) return true;
    for (const auto& [a, b] : more)
      if (i >= a && i <= b) return true;
    return false;
  }
  // Whether the range holds none of `num_layers` layers (kNoLayers in model_source.h).
  bool HoldsNone(int num_layers) const {
    for (int i = 0; i < num_layers; ++i)
      if (Contains(i, num_layers)) return false;
    return true;
  }
};

struct Model;
// Materialises the layers in a range of a model loaded with none held, in place (Note
// [Stage-local models]); made by the loader from what it keeps of the load.
using LayerMaterializer = std::function<void(Model&, const LayerRange&)>;

// A parameter that several layers use (tied weights, such as an output head that reuses
// the embedding matrix): (layer index, the parameter's name in that layer) of every use.
struct SharedParameter {
  std::vector<std::pair<int, std::string>> uses;
};

// Note [Packed inputs]: a model whose forward takes several inputs (Hugging Face's
// input_ids and attention_mask) takes them as one tensor, so that data sets, the runtime's
// batches and replica slices, profiling and probes see one input as for any model: each
// sample's parts flattened and concatenated in forward's order, in int64 when every part is
// an integer, else in the model's floating dtype (ids and masks are exact in it). The first
// layer unpacks them.
struct InputPart {
  std::string name;            // forward's argument name: the data file's key for it
  std::vector<int64_t> shape;  // one sample
  torch::Dtype dtype = torch::kInt64;
};

// `parts` ([n, part shape...] each) packed into [n, sum of the parts' sizes] in `dtype`.
torch::Tensor PackInputs(const std::vector<torch::Tensor>& parts, torch::Dtype dtype);
// The parts of a packed [n, ...] tensor, in their shapes and dtypes.
std::vector<torch::Tensor> UnpackInputs(const torch::Tensor& packed,
                                        const std::vector<InputPart>& parts);

struct Model {
  std::string name;  // zoo name ("mlp", "vgg19", "resnet50", "bert", "gpt") or the .pt path
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
  // A forward of several inputs: their parts, packed into the input (Note [Packed inputs]);
  // the first is the token ids of a token model. Empty for one input.
  std::vector<InputPart> input_parts;
  // Parameters used by more than one layer (TorchScript models with tied weights). Within
  // one process they are one tensor; across stages the runtime keeps the copies equal
  // (Note [Tied parameters] in runtime/comm/tied_parameters.h).
  std::vector<SharedParameter> shared_parameters;
  // How the held layers and the loss compute (Note [Mixed precision] in mixed_precision.h);
  // set by UseMixedPrecision.
  Precision precision = Precision::kFloat32;
  // Set by a load that held no layer, until MaterializeLayers uses it: what that load kept to
  // materialise layers later (Note [Stage-local models]).
  LayerMaterializer materialize_layers;

  int num_layers() const { return static_cast<int>(layers.size()); }
  // Runs layers [first, last] on x. REQUIRES: those layers are held.
  Activations ForwardActivations(const Activations& x, int first, int last) const;
  // The same for layers that take and return one tensor.
  torch::Tensor Forward(const torch::Tensor& x, int first, int last) const;
  torch::Tensor Forward(const torch::Tensor& x) const { return Forward(x, 0, num_layers() - 1); }
  // All parameters of layers [first, last], layer by layer, in registration order, each
  // once (a tied parameter is listed at its first use). REQUIRES: those layers are held.
  std::vector<torch::Tensor> Parameters(int first, int last) const;
  // Parameters of the held layers.
  int64_t ParameterCount() const;
  // Sets training (true) or evaluation mode on every held layer.
  void SetTraining(bool on);
};

// Materialises the layers in `held` of `m`, a model loaded with no layer held, in place from
// what its load kept (Note [Stage-local models]): the layers, their values and forward are
// those of a load with `held`; the other layers stay without a module. A range that holds
// none materialises nothing. REQUIRES: `m` was loaded holding no layer and has not been
// materialised since.
void MaterializeLayers(Model& m, const LayerRange& held);

// Builds zoo model `name` with `options` (unknown names/options throw InputError listing
// the known ones), parameters initialised deterministically from `seed` (one seed per
// layer), in `dtype`. Only the layers in `held` are materialised.
Model BuildModel(const std::string& name, const ModelOptions& options, uint64_t seed,
                 torch::Dtype dtype = torch::kFloat32, LayerRange held = {});
std::vector<std::string> ModelNames();
// The options a model accepts, with their defaults, for --help and errors.
ModelOptions DefaultModelOptions(const std::string& name);

}  // namespace dapple
