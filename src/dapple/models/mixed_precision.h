// bf16 mixed precision for a model's layers and loss.
//
// Note [Mixed precision]: with `--precision bf16` the model keeps float32 parameters (the
// master weights: gradients, the optimizer state, allreduces and checkpoints stay float32)
// and computes in bfloat16:
// - every held layer's forward and the loss run under CPU autocast to bfloat16 (libtorch's
//   at::autocast: matmul, linear, conv and friends compute in bf16 on bf16 copies of the
//   weights; ops that autocast keeps in float32, such as losses, stay float32). Autocast works
//   at the dispatcher, so it reaches TorchScript layers run by the interpreter as well as the
//   zoo's modules. A layer's outputs keep the dtypes autocast gives them: bf16 after a linear
//   map, float32 where a float32 tensor meets a bf16 one (a residual stream), since libtorch
//   1.13's CPU layer_norm refuses a bf16 input with float32 weights;
// - a float32 tensor crosses a stage boundary in bfloat16 (WireDtype): half the bytes. The
//   receiver keeps the bf16 tensor (the stage input it holds, and the leaf whose gradient it
//   sends back, in bf16) and feeds its layers a float32 copy made through autograd; a
//   gradient received in bf16 is cast to its output's dtype. The profile's activation_bytes
//   are these wire bytes (WireBytes), so plans made from a bf16 profile count bf16 transfers;
//   its times are the bf16 layers';
// - autograd runs the backward in the forward's dtypes and casts each weight's gradient back
//   to float32 through the cast, so the gradient of a master weight is float32.
// Autocast caches the bf16 copy of each weight for the forwards that record a graph, so that
// a step's micro-batches cast each weight once; ClearCastCache() must run after the weights
// change (the runtime: at the end of every step, after the update). A forward without a
// graph (re-computation's first pass, evaluation, the boundary probe) drops the cache when
// it leaves, since an entry made there would carry no gradient to the master weight.
// Precision kFloat32 changes nothing: the model computes in its parameters' dtype.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "dapple/models/model.h"

namespace dapple {

// Makes `model` compute in `precision`: for kBf16, wraps every held layer's forward and the
// loss in autocast as Note [Mixed precision] says and sets model.precision. Throws InputError
// when the parameters are not float32. kFloat32: no change.
void UseMixedPrecision(Model& model, Precision precision);

// The dtype a tensor of `dtype` crosses a stage boundary in: bfloat16 for float32 under
// kBf16, else `dtype`.
torch::Dtype WireDtype(torch::Dtype dtype, Precision precision);
// `a` with each tensor in its WireDtype (through autograd when it has a graph).
Activations ToWire(Activations a, Precision precision);
// Bytes of `a` in its WireDtypes.
int64_t WireBytes(const Activations& a, Precision precision);

// Drops autocast's bf16 weight copies (the calling thread's). Cheap when there are none.
void ClearCastCache();

}  // namespace dapple
