// One layer timed on its own: see layer_runner.h. Times come from DeviceTimer (Note [Timing on
// the device]); on a GPU, which has not run yet (docs/gpu.md), from CUDA events.
#include "dapple/profiler/layer_runner.h"

#include <torch/autograd.h>

#include <algorithm>
#include <memory>

#include "dapple/cpu/blas_env.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/profiler/counting_allocator.h"
#include "dapple/profiler/device_timer.h"
#include "dapple/runtime/comm/device.h"
#include "dapple/runtime/optim/optimizer.h"

namespace dapple {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Note [Cold caches]: timed back to back, a layer finds its weights in the caches. In
// training on CPU devices that share a machine, the other stages' processes (and the other
// layers of its own stage) evict them between its ops, and at small batches the weights'
// trip from memory dominates: the MLP 784-1024x4-10 at batch 16 trained its ops 1.25-1.6x
// slower than a warm profile, about what a cold one gives (docs/two-server.md). With
// ProfilerOptions::cold_caches every timed op follows EvictCpuCaches(), as the update always
// does (Note [Cold update]); large batches, bound by compute, do not change.

Activations LayerRunner::Forward() {
  // A stage receives its input detached and needs its gradient, except the first layer,
  // whose input is the data (no gradient, as in training).
  Activations x;
  for (const auto& t : input_) {
    x.push_back(t.detach());
    if (x.back().is_floating_point() && layer_ > 0) x.back().requires_grad_(true);
  }
  x_.clear();
  for (const auto& t : x)
    if (t.requires_grad()) x_.push_back(t);
  Activations y = m_.ForwardActivations(x, layer_, layer_);
  output_bytes_ = static_cast<double>(WireBytes(y, m_.precision));  // as sent (bf16: halved)
  if (layer_ == m_.num_layers() - 1) return {m_.loss(y.at(0), target_)};
  Activations with_grad;
  for (const auto& t : y)
    if (t.requires_grad()) with_grad.push_back(t);
  return with_grad;
}

Activations LayerRunner::ForwardWithOnes(Activations* grad, bool cold) {
  Activations y = Forward();
  grad->clear();
  for (const auto& t : y) grad->push_back(torch::ones_like(t));
  if (cold) EvictCpuCaches();
  return y;
}

std::vector<double> LayerRunner::TimeForward(int warmup, int repeat, bool cold) {
  std::vector<double> ms;
  DeviceTimer timer(device_);
  for (int r = 0; r < warmup + repeat; ++r) {
    if (cold) EvictCpuCaches();
    timer.Start();
    Activations y = Forward();
    const double t = timer.Lap();
    if (r >= warmup) ms.push_back(t);
  }
  return ms;
}

std::vector<double> LayerRunner::TimeBackward(int warmup, int repeat, bool cold) {
  std::vector<double> ms;
  DeviceTimer timer(device_);
  for (int r = 0; r < warmup + repeat; ++r) {
    Activations grad;
    Activations y = ForwardWithOnes(&grad, cold);
    timer.Start();
    if (!y.empty()) torch::autograd::backward(y, grad);
    const double t = timer.Lap();
    if (r >= warmup) ms.push_back(t);
  }
  return ms;
}

// The split (Note [Splitting the backward at layer outputs] in runtime/worker/split_backward.cc):
// the input gradient with the graph kept, then the weight gradients from the output.
void LayerRunner::TimeSplitBackward(int warmup, int repeat, bool cold,
                                    std::vector<double>* input_ms, std::vector<double>* weight_ms) {
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& p : m_.Parameters(layer_, layer_))
    if (p.requires_grad()) params.push_back(p);
  DeviceTimer timer(device_);
  for (int r = 0; r < warmup + repeat; ++r) {
    Activations grad;
    Activations y = ForwardWithOnes(&grad, cold);
    timer.Start();
    if (!y.empty() && !x_.empty())
      torch::autograd::grad(y, x_, grad, /*retain_graph=*/true, /*create_graph=*/false,
                            /*allow_unused=*/true);
    const double in = timer.Lap();
    if (!y.empty() && !params.empty())
      torch::autograd::backward(y, grad, /*retain_graph=*/false, /*create_graph=*/false, params);
    const double w = timer.Lap();
    if (r >= warmup) {
      input_ms->push_back(in);
      weight_ms->push_back(w);
    }
  }
}

// On the CPU a counting allocator sees the forward's allocations; on a GPU the caching
// allocator's count of allocated bytes does.
double LayerRunner::SavedBytes() {
  Activations y;
  if (device_.is_cuda()) {
    SynchronizeDevice(device_);
    const int64_t before = DeviceAllocatedBytes(device_);
    y = Forward();
    SynchronizeDevice(device_);
    return static_cast<double>(DeviceAllocatedBytes(device_) - before);
  }
  ScopedAllocationCounter counter;
  const int64_t before = counter.live_bytes();
  y = Forward();
  return static_cast<double>(counter.live_bytes() - before);
}

LayerTimes LayerRunner::Measure(int warmup, int repeat, bool cold) {
  ResetPeakDeviceMemory(device_);
  LayerTimes t;
  t.forward_ms = Median(TimeForward(warmup, repeat, cold));
  t.backward_ms = Median(TimeBackward(warmup, repeat, cold));
  std::vector<double> in_ms, w_ms;
  TimeSplitBackward(warmup, repeat, cold, &in_ms, &w_ms);
  t.input_ms = Median(in_ms);
  t.weight_ms = Median(w_ms);
  t.saved_bytes = SavedBytes();
  for (auto& p : m_.Parameters(layer_, layer_)) p.mutable_grad() = torch::Tensor();
  t.activation_bytes = output_bytes_;
  t.device_peak_bytes = static_cast<double>(PeakDeviceMemory(device_).peak_allocated_bytes);
  return t;
}

// Note [Cold update]: in training the update runs after the backward and the allreduce,
// which have streamed activations and gradients through the caches, so a layer's
// parameters and optimizer state come from memory. Timed back to back, the steps of one
// layer find them in cache and run 3x faster than that (MLP 784-1024x4-10 with SGD on
// this machine: 1.1 ms warm, 3.7 ms cold, 4-5 ms for the STEP in `dapple train`). So
// every timed step is preceded by EvictCpuCaches() (a 64 MiB write, twice this machine's
// 32 MiB L3).
double MeasureUpdateMs(const Model& m, int layer, const ProfilerOptions& o) {
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& p : m.Parameters(layer, layer))
    params.push_back(p.detach().clone().requires_grad_(p.requires_grad()));
  if (params.empty()) return 0;
  std::unique_ptr<torch::optim::Optimizer> opt = MakeOptimizer(o.optimizer, params);
  const int warmup = std::max(o.warmup, 1);  // the first step allocates the state
  std::vector<double> times;
  DeviceTimer timer(o.device);
  for (int r = 0; r < warmup + o.repeat; ++r) {
    for (torch::Tensor& p : params) {  // gradients of ones (zero_grad zeroes or drops them)
      if (p.grad().defined())
        p.mutable_grad().fill_(1);
      else
        p.mutable_grad() = torch::ones_like(p);
    }
    EvictCpuCaches();  // Note [Cold update]
    timer.Start();
    opt->step();
    opt->zero_grad(/*set_to_none=*/false);  // in place, as the runtime's STEP
    const double t = timer.Lap();
    if (r >= warmup) times.push_back(t);
  }
  return Median(times);
}

}  // namespace dapple
