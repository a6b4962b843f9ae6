// One layer of a model timed on its own (profiler.h says what each figure means): its
// forward, backward and split backward on a copy of its input, and its optimizer update.
#pragma once

#include <torch/types.h>

#include <vector>

#include "dapple/models/model.h"
#include "dapple/profiler/profiler.h"
#include "dapple/runtime/worker/boundary.h"  // Bytes

namespace dapple {

double Median(std::vector<double> v);

struct LayerTimes {
  double forward_ms = 0, backward_ms = 0, activation_bytes = 0, saved_bytes = 0;
  double input_ms = 0, weight_ms = 0;  // the backward split as the zb schedules run it
  // On a GPU: the caching allocator's peak of allocated bytes while the layer was measured
  // (Note [Memory as a GPU holds it], runtime/comm/device.h); 0 on the CPU.
  double device_peak_bytes = 0;
};

class LayerRunner {
 public:
  // `input` and `target` on the model's device (`device`).
  LayerRunner(const Model& m, int layer, const Activations& input, const torch::Tensor& target,
              const torch::Device& device)
      : m_(m), layer_(layer), input_(input), target_(target), device_(device) {}

  // The layer's outputs that carry a gradient (or, for the last layer, the loss) with
  // their autograd graph.
  Activations Forward();

  // `cold`: EvictCpuCaches() before every timed forward and backward (Note [Cold caches]).
  LayerTimes Measure(int warmup, int repeat, bool cold);

 private:
  // A fresh Forward() and, in `grad`, a gradient of ones for each of its outputs; then, when
  // `cold`, EvictCpuCaches() (the backward timed next starts cold).
  Activations ForwardWithOnes(Activations* grad, bool cold);
  std::vector<double> TimeForward(int warmup, int repeat, bool cold);
  std::vector<double> TimeBackward(int warmup, int repeat, bool cold);
  // The split backward's two parts, input gradient then weight gradients.
  void TimeSplitBackward(int warmup, int repeat, bool cold, std::vector<double>* input_ms,
                         std::vector<double>* weight_ms);
  // What the forward allocates that stays alive with the graph.
  double SavedBytes();

  const Model& m_;
  int layer_;
  Activations input_;
  torch::Tensor target_;
  torch::Device device_;
  Activations x_;  // the inputs of the last Forward() that need a gradient
  double output_bytes_ = 0;
};

// Median time of one optimizer update of `layer`'s parameters (profiler.h), on copies on the
// parameters' device.
double MeasureUpdateMs(const Model& m, int layer, const ProfilerOptions& o);

}  // namespace dapple
