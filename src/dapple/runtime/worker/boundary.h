// What crosses a stage boundary (Note [Boundary tensors]): the specs of the tensors a stage
// receives and sends, found by probing the stage's own layers (stage-local: no process runs
// another stage's layers), and the packing of several tensors into one message.
//
// Note [Boundary tensors]: a layer returns one tensor or a flat tuple. A tensor whose first
// dimension is the batch ("batched") is split by rows between the replicas of the next
// stage and concatenated, like a single activation; any other tensor (a mask, positions)
// goes whole to every receiver. Gradients travel back for the batched floating-point
// tensors only; a whole tensor must not depend on trained parameters (StageWorker checks).
// One tensor is sent as itself; several are packed into one byte message, each segment
// padded to 8 bytes so that it can be viewed back in its own dtype. A tensor travels in its
// wire dtype (bf16 for the float32 tensors of a bf16 model, Note [Mixed precision] in
// models/mixed_precision.h): senders cast to it, receivers get it and cast back (FromWire).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dapple/models/mixed_precision.h"
#include "dapple/models/model.h"

namespace dapple {

struct TensorSpec {
  std::vector<int64_t> shape;  // without the batch dimension when batched, else the whole shape
  torch::Dtype dtype = torch::kFloat32;
  bool batched = true;
  // The precision of the model that computes it (JSON `precision`, float32 when absent).
  Precision precision = Precision::kFloat32;
  // Whether a gradient travels back for this tensor.
  bool CarriesGradient() const { return batched && c10::isFloatingType(dtype); }
  // The dtype of the tensor, and of its gradient, in a message.
  torch::Dtype Wire() const { return WireDtype(dtype, precision); }
};
using BoundarySpec = std::vector<TensorSpec>;

// The model's input, what the first stage reads from the data.
BoundarySpec ModelInputSpec(const Model& model);

// The outputs of held layers [first, last] (in model.precision) given inputs as `input`
// describes: runs them on
// zero inputs of 2 and of 3 samples (a tensor is batched when its first dimension follows),
// in evaluation mode without gradients, so that no buffer (BatchNorm statistics) changes;
// the training mode is restored. Throws InputError naming the layer when it fails.
BoundarySpec ProbeStage(Model& model, int first, int last, const BoundarySpec& input,
                        torch::Device device);

// Tensors of `rows` samples as `spec` describes (uninitialised unless `zeros`).
Activations MakeActivations(const BoundarySpec& spec, int64_t rows, torch::Device device,
                            bool zeros);

// Text form for the rendezvous store; the parser throws Error on malformed text.
std::string BoundarySpecToJson(const BoundarySpec& spec);
BoundarySpec BoundarySpecFromJson(const std::string& text);

// One message of the tensors of `spec` (only those where `select` is true) for `rows`
// samples: Pack concatenates them (REQUIRES: each in its Wire() dtype), Unpack views a
// received message as tensors in their Wire() dtypes.
torch::Tensor Pack(const Activations& tensors);
torch::Tensor MessageBuffer(const BoundarySpec& spec, const std::vector<bool>& select, int64_t rows,
                            torch::Device device);
Activations Unpack(const torch::Tensor& message, const BoundarySpec& spec,
                   const std::vector<bool>& select, int64_t rows);

// The selected tensors of `spec` in a message, `received`, in their own dtypes (through
// autograd: a received activation that requires grad gets its gradient in the wire dtype).
Activations FromWire(Activations received, const BoundarySpec& spec,
                     const std::vector<bool>& select);

int64_t Bytes(const torch::Tensor& t);
int64_t Bytes(const Activations& a);

}  // namespace dapple
