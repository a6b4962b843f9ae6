// The layer profiler: see profiler.h.
#include "dapple/profiler/profiler.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/module.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "dapple/common/core_sets.h"
#include "dapple/common/error.h"
#include "dapple/common/machine.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/models/data.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/profiler/layer_runner.h"
#include "dapple/runtime/comm/device.h"

namespace dapple {
namespace {

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
// `dapple plan --micro-batch` fixes it, docs/your-model.md). A size the user asked for that the
// model refuses is an input error naming the layer, the size and the model's own message.
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
  const torch::Tensor targets = data.targets.to(o.device);
  std::vector<LayerTimes> times;
  Activations x{data.inputs.to(o.device)};
  for (int i = 0; i < m.num_layers(); ++i) {
    if (o.progress)
      std::fprintf(stderr, "\rprofile %s: batch %d (%d/%d), layer %d/%d %-24s", m.name.c_str(),
                   batch, step, steps, i + 1, m.num_layers(), m.layers[i].name.c_str());
    try {
      LayerRunner runner(m, i, x, targets, o.device);
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

// The batch sizes to measure: o.batch_sizes and the profile batch size, sorted, once each.
std::vector<int> SizesToMeasure(const ProfilerOptions& o) {
  if (o.batch_size <= 0) ThrowInput("profile: batch size must be positive, got {}", o.batch_size);
  if (o.repeat <= 0) ThrowInput("profile: repeat must be positive, got {}", o.repeat);
  if (o.warmup < 0) ThrowInput("profile: warmup must be >= 0, got {}", o.warmup);
  std::vector<int> sizes = o.batch_sizes;
  for (int b : sizes)
    if (b <= 0) ThrowInput("profile: batch sizes must be positive, got {}", b);
  sizes.push_back(o.batch_size);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

// The profile's header and its layers' names and parameter sizes, before any timing.
Profile EmptyProfile(const Model& m, const ProfilerOptions& o, int threads) {
  Profile p;
  p.model = m.name;
  p.precision = m.precision;  // Note [Mixed precision]: times and activations in it
  p.batch_size = o.batch_size;
  p.device = o.device.is_cuda() ? fmt::format("{}: {}", o.device.str(), DeviceName(o.device))
                                : fmt::format("cpu: {}, {} threads", CpuModelName(), threads);
  for (const auto& layer : m.layers) {
    LayerProfile lp;
    lp.id = layer.name;
    lp.name = layer.name;
    for (const auto& t : layer.module->parameters()) lp.parameter_bytes += Bytes(t);
    p.layers.push_back(lp);
  }
  return p;
}

// One batch size's times into the profile: the *_by_batch lists, and the profile batch
// size's own figures.
void RecordTimes(const std::vector<LayerTimes>& times, bool by_batch, bool profile_batch,
                 Profile& p) {
  for (size_t i = 0; i < times.size(); ++i) {
    LayerProfile& lp = p.layers[i];
    if (by_batch) {
      lp.forward_ms_by_batch.push_back(times[i].forward_ms);
      lp.backward_ms_by_batch.push_back(times[i].backward_ms);
      lp.backward_input_ms_by_batch.push_back(times[i].input_ms);
      lp.backward_weight_ms_by_batch.push_back(times[i].weight_ms);
    }
    if (profile_batch) {
      lp.forward_ms = times[i].forward_ms;
      lp.backward_ms = times[i].backward_ms;
      lp.backward_input_ms = times[i].input_ms;
      lp.backward_weight_ms = times[i].weight_ms;
      lp.activation_bytes = times[i].activation_bytes;
      lp.saved_bytes = times[i].saved_bytes;
    }
  }
}

// Times every size the model accepts; returns those sizes. On a GPU the profile batch
// size's per-layer peaks go into `peaks`.
std::vector<int> MeasureBatches(const Model& m, const ProfilerOptions& o,
                                const std::vector<int>& sizes, bool by_batch, Profile& p,
                                std::vector<double>* peaks) {
  std::vector<int> kept;
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
    RecordTimes(times, by_batch, sizes[s] == o.batch_size, p);
    if (sizes[s] == o.batch_size)
      for (const LayerTimes& t : times) peaks->push_back(t.device_peak_bytes);
  }
  return kept;
}

void MeasureUpdates(const Model& m, const ProfilerOptions& o, Profile& p) {
  for (int i = 0; i < m.num_layers(); ++i) {
    if (o.progress)
      std::fprintf(stderr, "\rprofile %s: %s update, layer %d/%d %-24s", m.name.c_str(),
                   ToString(o.optimizer.kind).c_str(), i + 1, m.num_layers(),
                   m.layers[i].name.c_str());
    p.layers[i].update_ms = OnSlowestCore<double>(o, [&] { return MeasureUpdateMs(m, i, o); });
  }
  if (o.progress) std::fprintf(stderr, "\rprofile %s: done%60s\n", m.name.c_str(), "");
}

std::map<std::string, std::string> ProfileMetadata(const Model& m, const ProfilerOptions& o,
                                                   int threads) {
  std::map<std::string, std::string> meta = {
      {"cpu", CpuModelName()},
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
      {"caches",
       o.cold_caches ? "cold: 64 MiB written before every timed op" : "warm: runs back to back"},
      {"saved_bytes", "counting CPU allocator: forward allocations alive with the graph"},
      {"optimizer", ToString(o.optimizer.kind)},
      {"optimizer_options", OptimizerDescription(o.optimizer)},
      {"update_ms",
       "median of repeat optimizer step + zero_grad per layer, on parameter copies "
       "with gradients of ones, caches evicted before each (64 MiB written)"},
      {"input_seed", std::to_string(o.seed)}};
  if (o.core_sets.size() >= 2)
    meta["cores"] =
        FormatCoreSets(o.core_sets) + " (every time the slowest of these cores' medians)";
  if (o.device.is_cuda()) {  // Note [Timing on the device]
    meta["device"] = fmt::format("{}: {}", o.device.str(), DeviceName(o.device));
    meta["timing"] = "CUDA events around each op after the warm-up; median of repeat runs";
    meta["saved_bytes"] = "CUDA caching allocator: allocated bytes alive after the forward";
  }
  return meta;
}

}  // namespace

Profile ProfileModel(const Model& m, const ProfilerOptions& o) {
  DAPPLE_CHECK(m.num_layers() > 0);
  const std::vector<int> sizes = SizesToMeasure(o);
  const bool by_batch = !o.batch_sizes.empty();
  for (auto& layer : m.layers) layer.module->train();
  CoresRestorer restore_cores;
  const int threads = at::get_num_threads();
  Profile p = EmptyProfile(m, o, threads);
  std::vector<double> peaks;  // on a GPU: each layer's peak allocated bytes
  const std::vector<int> kept = MeasureBatches(m, o, sizes, by_batch, p, &peaks);
  MeasureUpdates(m, o, p);
  if (by_batch) p.batch_sizes = kept;
  p.input_bytes =
      Bytes(MakeDataset("synthetic", m, o.seed, "")->GlobalBatch(0, o.batch_size).inputs);
  p.metadata = ProfileMetadata(m, o, threads);
  if (o.device.is_cuda())
    p.metadata["device_peak_bytes"] = fmt::format("{}", fmt::join(peaks, ","));
  p.settings =
      ProfileSettings{threads, sizes, ToString(o.optimizer.kind), o.cold_caches, ThisMachine()};
  ValidateProfile(p, "profile of " + m.name);
  return p;
}

}  // namespace dapple
