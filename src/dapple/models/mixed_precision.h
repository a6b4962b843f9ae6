// bf16 mixed precision for a model's layers and loss.
//
// Note [Mixed precision]: with `--precision bf16` the model keeps float32 parameters (the
// master weights: gradients, the optimizer state, allreduces and checkpoints stay float32)
// and computes in bfloat16:
// - every held layer's forward and the loss run under CPU autocast to bfloat16 (libtorch's
//   at::autocast: matmul, linear, conv and friends compute in bf16 on bf16 copies of the
//   weights; losses and reductions autocast keeps in float32 stay float32). Autocast works
//   at the dispatcher, so it reaches TorchScript layers run by the interpreter as well as
//   the zoo's modules;
// - every floating-point output of a layer is cast to bfloat16 (most already are), so the
//   activations a stage keeps and the tensors it sends to the next stage, and the gradients
//   that come back, are bf16: half the bytes. The profile's activation_bytes measure
//   exactly these, so plans made from a bf16 profile count bf16 transfers and memory;
// - autograd runs the backward in the forward's dtypes and casts each weight's gradient
//   back to float32 through the cast, so the gradient of a master weight is float32.
// Autocast caches the bf16 copy of each weight for the forwards that record a graph, so that
// a step's micro-batches cast each weight once; ClearCastCache() must run after the weights
// change (the runtime: at the end of every step, after the update). A forward without a
// graph (re-computation's first pass, evaluation, the boundary probe) drops the cache when
// it leaves, since an entry made there would carry no gradient to the master weight.
// Precision kFloat32 changes nothing: the model computes in its parameters' dtype.
#pragma once

#include "dapple/models/model.h"

namespace dapple {

// Makes `model` compute in `precision`: for kBf16, wraps every held layer's forward and the
// loss as Note [Mixed precision] says and sets model.precision. Throws InputError when the
// parameters are not float32 ("bf16 needs float32 master weights"). kFloat32: no change.
void UseMixedPrecision(Model& model, Precision precision);

// Drops autocast's bf16 weight copies (the calling thread's). Cheap when there are none.
void ClearCastCache();

}  // namespace dapple
