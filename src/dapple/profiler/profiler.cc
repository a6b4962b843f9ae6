// The layer profiler: see profiler.h.
#include "dapple/profiler/profiler.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string_view>

#include "dapple/common/core_sets.h"
#include "dapple/common/error.h"
#include "dapple/common/machine.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/models/data.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/profiler/counting_allocator.h"

namespace dapple {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double Bytes(const torch::Tensor& t) { return static_cast<double>(t.numel() * t.element_size()); }

struct LayerTimes {
  double forward_ms = 0, backward_ms = 0, activation_bytes = 0, saved_bytes = 0;
  double input_ms = 0, weight_ms = 0;  // the backward split as the zb schedules run it
};

// Note [Cold caches]: timed back to back, a layer finds its weights in the caches. In
// training on CPU devices that share a machine, the other stages' processes (and the other
// layers of its own stage) evict them between its ops, and at small batches the weights'
// trip from memory dominates: the MLP 784-1024x4-10 at batch 16 trained its ops 1.25-1.6x
// slower than a warm profile, about what a cold one gives (docs/two-server.md). With
// ProfilerOptions::cold_caches every timed op follows EvictCpuCaches(), as the update always
// does (Note [Cold update]); large batches, bound by compute, do not change.

class LayerRunner {
 public:
  LayerRunner(const Model& m, int layer, const Activations& input, const torch::Tensor& target)
      : m_(m), layer_(layer), input_(input), target_(target) {}

  // The layer's outputs that carry a gradient (or, for the last layer, the loss) with
  // their autograd graph.
  Activations Forward() {
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

  // `cold`: EvictCpuCaches() before every timed forward and backward (Note [Cold caches]).
  LayerTimes Measure(int warmup, int repeat, bool cold) {
    LayerTimes t;
    std::vector<double> fwd, bwd;
    auto cool = [cold] {
      if (cold) EvictCpuCaches();
    };
    for (int r = 0; r < warmup + repeat; ++r) {
      cool();
      auto a = Clock::now();
      Activations y = Forward();
      auto b = Clock::now();
      if (r >= warmup) fwd.push_back(Ms(a, b));
    }
    for (int r = 0; r < warmup + repeat; ++r) {
      Activations y = Forward();
      Activations grad;
      for (const auto& t : y) grad.push_back(torch::ones_like(t));
      cool();
      auto a = Clock::now();
      if (!y.empty()) torch::autograd::backward(y, grad);
      auto b = Clock::now();
      if (r >= warmup) bwd.push_back(Ms(a, b));
    }
    // The split (Note [Splitting the backward at layer outputs] in runtime/split_backward.cc):
    // the input gradient with the graph kept, then the weight gradients from the output.
    std::vector<double> in_ms, w_ms;
    std::vector<torch::Tensor> params;
    for (const torch::Tensor& p : m_.Parameters(layer_, layer_))
      if (p.requires_grad()) params.push_back(p);
    for (int r = 0; r < warmup + repeat; ++r) {
      Activations y = Forward();
      Activations grad;
      for (const auto& t : y) grad.push_back(torch::ones_like(t));
      cool();
      auto a = Clock::now();
      if (!y.empty() && !x_.empty())
        torch::autograd::grad(y, x_, grad, /*retain_graph=*/true, /*create_graph=*/false,
                              /*allow_unused=*/true);
      auto b = Clock::now();
      if (!y.empty() && !params.empty())
        torch::autograd::backward(y, grad, /*retain_graph=*/false, /*create_graph=*/false, params);
      auto c = Clock::now();
      if (r >= warmup) {
        in_ms.push_back(Ms(a, b));
        w_ms.push_back(Ms(b, c));
      }
    }
    {
      Activations y;
      ScopedAllocationCounter counter;
      int64_t before = counter.live_bytes();
      y = Forward();
      t.saved_bytes = static_cast<double>(counter.live_bytes() - before);
      y.clear();
    }
    for (auto& p : m_.Parameters(layer_, layer_)) p.mutable_grad() = torch::Tensor();
    t.forward_ms = Median(fwd);
    t.backward_ms = Median(bwd);
    t.input_ms = Median(in_ms);
    t.weight_ms = Median(w_ms);
    t.activation_bytes = output_bytes_;
    return t;
  }

 private:
  const Model& m_;
  int layer_;
  Activations input_;
  torch::Tensor target_;
  Activations x_;  // the inputs of the last Forward() that need a gradient
  double output_bytes_ = 0;
};

// Note [Cold update]: in training the update runs after the backward and the allreduce,
// which have streamed activations and gradients through the caches, so a layer's
// parameters and optimizer state come from memory. Timed back to back, the steps of one
// layer find them in cache and run 3x faster than that (MLP 784-1024x4-10 with SGD on
// this machine: 1.1 ms warm, 3.7 ms cold, 4-5 ms for the STEP in `dapple train`). So
// every timed step is preceded by EvictCpuCaches() (a 64 MiB write, twice this machine's
// 32 MiB L3).

// Median time of one optimizer update (step and zero_grad, the runtime's STEP) over layer
// `layer`'s parameters: see profiler.h. On copies, so profiling leaves the model as it was
// built.
double MeasureUpdateMs(const Model& m, int layer, const ProfilerOptions& o) {
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& p : m.Parameters(layer, layer))
    params.push_back(p.detach().clone().requires_grad_(p.requires_grad()));
  if (params.empty()) return 0;
  std::unique_ptr<torch::optim::Optimizer> opt = MakeOptimizer(o.optimizer, params);
  const int warmup = std::max(o.warmup, 1);  // the first step allocates the state
  std::vector<double> times;
  for (int r = 0; r < warmup + o.repeat; ++r) {
    for (torch::Tensor& p : params) {  // gradients of ones (zero_grad zeroes or drops them)
      if (p.grad().defined())
        p.mutable_grad().fill_(1);
      else
        p.mutable_grad() = torch::ones_like(p);
    }
    EvictCpuCaches();  // Note [Cold update]
    auto a = Clock::now();
    opt->step();
    opt->zero_grad(/*set_to_none=*/false);  // in place, as the runtime's STEP
    auto b = Clock::now();
    if (r >= warmup) times.push_back(Ms(a, b));
  }
  return Median(times);
}

std::string OptimizerDescription(const OptimizerOptions& o) {
  std::string wd = o.weight_decay < 0 ? "default" : fmt::format("{}", o.weight_decay);
  if (o.kind == OptimizerKind::kSgd)
    return fmt::format("lr {}, momentum {}, weight decay {}", o.lr, o.momentum, wd);
  return fmt::format("lr {}, weight decay {}", o.lr, wd);
}

// The slower of two measurements, time by time (sizes are the same on every core).
LayerTimes Slower(LayerTimes a, const LayerTimes& b) {
  a.forward_ms = std::max(a.forward_ms, b.forward_ms);
  a.backward_ms = std::max(a.backward_ms, b.backward_ms);
  a.input_ms = std::max(a.input_ms, b.input_ms);
  a.weight_ms = std::max(a.weight_ms, b.weight_ms);
  return a;
}
double Slower(double a, double b) { return std::max(a, b); }

// Note [Slowest device core]: with ProfilerOptions::core_sets, `measure` runs once with the
// calling thread on each set in turn, layer by layer (so that a core whose speed drifts over
// minutes is sampled close in time to the others), and the slowest is kept: synchronous data
// parallelism and a balanced pipeline wait for their slowest device.
template <typename T, typename Measure>
T OnSlowestCore(const ProfilerOptions& o, Measure measure) {
  if (o.core_sets.size() < 2) return measure();
  std::optional<T> slowest;
  for (const CoreSet& set : o.core_sets) {
    if (!PinCallingThread(set)) ThrowInput("profile: cannot run on cores {}", FormatCores(set));
    T t = measure();
    slowest = slowest ? Slower(*slowest, t) : t;
  }
  return *slowest;
}

// Gives the calling thread back the cores it had (the profiler moves it between cores).
class CoresRestorer {
 public:
  CoresRestorer() : cores_(AllowedCores()) {}
  ~CoresRestorer() {
    if (!cores_.empty()) (void)PinCallingThread(cores_);
  }
  CoresRestorer(const CoresRestorer&) = delete;
  CoresRestorer& operator=(const CoresRestorer&) = delete;

 private:
  CoreSet cores_;
};

// Note [Sizes the model refuses]: a model may refuse a batch size in training, as
// BatchNorm refuses one sample per channel ("Expected more than 1 value per channel when
// training"). The profile's default sizes (1, 2, 4, ...) are a guess at the micro-batches the
// planner will try, so a refused one is left out of the profile with a note (the planner
// extrapolates below the smallest size measured, and may still choose such a micro-batch:
// `dapple plan --micro-batch` fixes it, docs/your-model.md). A size the user asked for that the model refuses is an input error
// naming the layer, the size and the model's own message.
struct RefusedBatch {
  std::string layer, message;
};

// The line of a model's exception that says what went wrong: the last line of a TorchScript
// interpreter's report (after its traceback), else the first line.
std::string ModelErrorLine(const std::exception& e) {
  std::string_view s = e.what();
  if (s.find("TorchScript interpreter") != std::string_view::npos) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
    const auto nl = s.rfind('\n');
    return std::string(nl == std::string_view::npos ? s : s.substr(nl + 1));
  }
  return std::string(s.substr(0, s.find('\n')));
}

// Times every layer at batch size `batch`. Throws RefusedBatch when a layer's own code fails.
std::vector<LayerTimes> ProfileAtBatch(const Model& m, int batch, const ProfilerOptions& o,
                                       int step, int steps) {
  Batch data = MakeDataset("synthetic", m, o.seed, "")->GlobalBatch(0, batch);
  std::vector<LayerTimes> times;
  Activations x{data.inputs};
  for (int i = 0; i < m.num_layers(); ++i) {
    if (o.progress)
      std::fprintf(stderr, "\rprofile %s: batch %d (%d/%d), layer %d/%d %-24s", m.name.c_str(),
                   batch, step, steps, i + 1, m.num_layers(), m.layers[i].name.c_str());
    try {
      LayerRunner runner(m, i, x, data.targets);
      times.push_back(OnSlowestCore<LayerTimes>(
          o, [&] { return runner.Measure(o.warmup, o.repeat, o.cold_caches); }));
      torch::NoGradGuard no_grad;
      x = m.ForwardActivations(x, i, i);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // the model's own: c10::Error, a TorchScript raise
      throw RefusedBatch{m.layers[i].name, ModelErrorLine(e)};
    }
  }
  return times;
}

std::string DtypeName(const Model& m) {
  for (const auto& t : m.Parameters(0, m.num_layers() - 1))
    if (t.is_floating_point()) return c10::toString(t.scalar_type());
  return "none";
}

}  // namespace

Profile ProfileModel(const Model& m, const ProfilerOptions& o) {
  DAPPLE_CHECK(m.num_layers() > 0);
  if (o.batch_size <= 0) ThrowInput("profile: batch size must be positive, got {}", o.batch_size);
  if (o.repeat <= 0) ThrowInput("profile: repeat must be positive, got {}", o.repeat);
  if (o.warmup < 0) ThrowInput("profile: warmup must be >= 0, got {}", o.warmup);
  std::vector<int> sizes = o.batch_sizes;
  for (int b : sizes)
    if (b <= 0) ThrowInput("profile: batch sizes must be positive, got {}", b);
  bool by_batch = !sizes.empty();
  sizes.push_back(o.batch_size);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

  for (auto& layer : m.layers) layer.module->train();
  CoresRestorer restore_cores;
  Profile p;
  p.model = m.name;
  p.precision = m.precision;  // Note [Mixed precision]: times and activations in it
  p.batch_size = o.batch_size;
  int threads = at::get_num_threads();
  p.device = fmt::format("cpu: {}, {} threads", CpuModelName(), threads);
  for (const auto& layer : m.layers) {
    LayerProfile lp;
    lp.id = layer.name;
    lp.name = layer.name;
    for (const auto& t : layer.module->parameters()) lp.parameter_bytes += Bytes(t);
    p.layers.push_back(lp);
  }
  std::vector<int> kept;  // the sizes the model accepts
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<LayerTimes> times;
    try {
      times =
          ProfileAtBatch(m, sizes[s], o, static_cast<int>(s) + 1, static_cast<int>(sizes.size()));
    } catch (const RefusedBatch& r) {  // Note [Sizes the model refuses]
      if (!o.batch_sizes_optional || sizes[s] == o.batch_size)
        ThrowInput("profile: layer {} refuses batch {}: {}", r.layer, sizes[s], r.message);
      if (o.progress) std::fprintf(stderr, "\n");
      std::fprintf(stderr,
                   "dapple: note: batch %d left out of the profile: layer %s refuses it (%s)\n",
                   sizes[s], r.layer.c_str(), r.message.c_str());
      continue;
    }
    kept.push_back(sizes[s]);
    for (int i = 0; i < m.num_layers(); ++i) {
      LayerProfile& lp = p.layers[i];
      if (by_batch) {
        lp.forward_ms_by_batch.push_back(times[i].forward_ms);
        lp.backward_ms_by_batch.push_back(times[i].backward_ms);
        lp.backward_input_ms_by_batch.push_back(times[i].input_ms);
        lp.backward_weight_ms_by_batch.push_back(times[i].weight_ms);
      }
      if (sizes[s] == o.batch_size) {
        lp.forward_ms = times[i].forward_ms;
        lp.backward_ms = times[i].backward_ms;
        lp.backward_input_ms = times[i].input_ms;
        lp.backward_weight_ms = times[i].weight_ms;
        lp.activation_bytes = times[i].activation_bytes;
        lp.saved_bytes = times[i].saved_bytes;
      }
    }
  }
  for (int i = 0; i < m.num_layers(); ++i) {
    if (o.progress)
      std::fprintf(stderr, "\rprofile %s: %s update, layer %d/%d %-24s", m.name.c_str(),
                   ToString(o.optimizer.kind).c_str(), i + 1, m.num_layers(),
                   m.layers[i].name.c_str());
    p.layers[i].update_ms = OnSlowestCore<double>(o, [&] { return MeasureUpdateMs(m, i, o); });
  }
  if (o.progress) std::fprintf(stderr, "\rprofile %s: done%60s\n", m.name.c_str(), "");
  if (by_batch) p.batch_sizes = kept;
  p.input_bytes =
      Bytes(MakeDataset("synthetic", m, o.seed, "")->GlobalBatch(0, o.batch_size).inputs);
  p.metadata = {{"cpu", CpuModelName()},
                {"threads", std::to_string(threads)},
                {"blas", BlasName()},
                {"libtorch", TORCH_VERSION},
                {"dtype", DtypeName(m)},
                {"precision", ToString(m.precision)},
                {"warmup", std::to_string(o.warmup)},
                {"repeat", std::to_string(o.repeat)},
                {"timing", "median of repeat runs per layer; last layer includes the loss"},
                {"backward_split",
                 "backward_input_ms: autograd::grad to the layer input, graph kept; "
                 "backward_weight_ms: then autograd::backward to the layer's parameters"},
                {"caches", o.cold_caches ? "cold: 64 MiB written before every timed op"
                                         : "warm: runs back to back"},
                {"saved_bytes", "counting CPU allocator: forward allocations alive with the graph"},
                {"optimizer", ToString(o.optimizer.kind)},
                {"optimizer_options", OptimizerDescription(o.optimizer)},
                {"update_ms",
                 "median of repeat optimizer step + zero_grad per layer, on parameter copies "
                 "with gradients of ones, caches evicted before each (64 MiB written)"},
                {"input_seed", std::to_string(o.seed)}};
  if (o.core_sets.size() >= 2)
    p.metadata["cores"] =
        FormatCoreSets(o.core_sets) + " (every time the slowest of these cores' medians)";
  p.settings =
      ProfileSettings{threads, sizes, ToString(o.optimizer.kind), o.cold_caches, ThisMachine()};
  ValidateProfile(p, "profile of " + m.name);
  return p;
}

}  // namespace dapple
