// The layer profiler (docs/design.md section 1, part 1): runs a zoo model layer by layer on
// this CPU and fills a Profile (format/profile.h) with per-layer times and sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "dapple/common/core_sets.h"
#include "dapple/format/profile.h"
#include "dapple/models/model.h"
#include "dapple/runtime/optim/optimizer.h"

namespace dapple {

struct ProfilerOptions {
  int batch_size = 0;            // the profile batch size (PBS), > 0
  std::vector<int> batch_sizes;  // optional extra sizes for *_by_batch; PBS is added
  // Note [Sizes the model refuses] (profiler.cc): true when batch_sizes were chosen for the
  // user rather than by the user; a size of them the model refuses is then left out.
  bool batch_sizes_optional = false;
  int warmup = 2;        // untimed runs before the timed ones, >= 0
  int repeat = 5;        // timed runs; the median is reported, > 0
  uint64_t seed = 1;     // of the synthetic input batch
  bool progress = true;  // a progress line on stderr, rewritten in place (a terminal)
  // Note [Cold caches] (profiler.cc): write 64 MiB before every timed forward and backward,
  // so that a layer's weights come from memory, as when other stages' processes share the
  // machine's caches.
  bool cold_caches = false;
  // Note [Slowest device core] (profiler.cc): when two or more are given, every time is
  // measured with the calling thread on each of these core sets in turn (one per device,
  // common/core_sets.h) and the slowest is kept. Meant for one compute thread per device:
  // libtorch's other threads stay where they are.
  std::vector<CoreSet> core_sets;
  // The optimizer whose update update_ms times (dapple train's default: SGD, momentum 0.9).
  OptimizerOptions optimizer;
  // Where the model's layers are (the caller moves them): on a GPU the times come from CUDA
  // events after the warm-up (Note [Timing on the device], device_timer.h), saved_bytes from
  // the caching allocator, and each layer's peak allocated bytes go into the metadata
  // ("device_peak_bytes"). Has not run on a GPU yet.
  torch::Device device = torch::Device(torch::kCPU);
};

// Profiles `model` (its layers in training mode, as the runtime runs them, in
// model.precision: Note [Mixed precision]; the profile records it). Per layer:
//  - forward_ms: median time of the layer's forward with autograd recording, on a
//    detached copy of its input that requires grad (as a pipeline stage receives it;
//    the first layer's input is the data and does not);
//  - backward_input_ms / backward_weight_ms: the backward split as zb-h1 runs it, timed
//    separately on a fresh forward: autograd::grad from a gradient of ones to the layer's
//    input with the graph kept (0 for the first layer), then autograd::backward to the
//    layer's parameters only (0 without parameters); their sum is usually a little more
//    than backward_ms;
//  - backward_ms: median time of the backward of that layer alone, from a gradient of
//    ones on its output; the last layer's forward and backward include the loss;
//  - update_ms: median time of one update (step() and zero_grad(), the runtime's STEP) of
//    `o.optimizer` (built as the runtime builds it, MakeOptimizer) over copies of the
//    layer's parameters with gradients of ones, each after writing 64 MiB so that the
//    parameters and optimizer state come from memory as in training, after max(warmup, 1)
//    untimed updates (the first one allocates the optimizer's state); 0 for a layer without
//    parameters. The model's own parameters are not touched;
//  - activation_bytes: bytes of the output as it crosses a stage boundary (WireBytes:
//    float32 tensors in bf16 under bf16 precision); parameter_bytes: of its parameters;
//  - saved_bytes: CPU memory the forward allocated that stays alive while the output and
//    its autograd graph do (the output and everything saved for backward beyond the input
//    and parameters), measured by a counting CPU allocator.
// With o.cold_caches, each timed forward and backward follows a 64 MiB write, as update_ms.
// Inputs are a synthetic batch run through the layers before. Threads are whatever the
// caller set; metadata records them with the CPU, the BLAS, libtorch and the
// optimizer ("optimizer": sgd, adam or adamw, as `dapple train --optimizer`).
// REQUIRES: o.batch_size > 0, o.repeat > 0, o.warmup >= 0 (InputError otherwise).
Profile ProfileModel(const Model& model, const ProfilerOptions& o);

}  // namespace dapple
