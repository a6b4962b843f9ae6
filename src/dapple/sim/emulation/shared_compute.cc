// Note [Shared compute]: when a cluster's devices are processes on one machine (the
// two-server network of scripts/netns.sh, CPU "devices"), they share its cores: while k of
// them compute at once, each runs at min(1, C / k) of its speed alone, C the cluster's
// `emulation.shared_compute` (in devices computing alone; `dapple calibrate` measures it). One
// device speed cannot describe that: data parallelism computes on every device at once, a pipeline
// leaves some idle in its bubbles, and they then run faster. Simulating processor sharing
// exactly would couple every device's clock to every other's; instead the engine runs each
// compute instruction stretched by a factor, and the factors are iterated: an instruction's
// next factor is max(1, k / C), k the mean number of instructions computing during its
// interval in the last run (itself included), damped by half. Communication on such a
// machine also runs on its cores (gloo's copies and sums, the kernel moving the bytes): a
// transfer or allreduce with a compute load (the emulation's stream loads) adds it to k while
// it runs.
#include "dapple/sim/emulation/shared_compute.h"

#include <algorithm>
#include <cmath>

#include "dapple/common/error.h"

namespace dapple::internal {
namespace {

constexpr int kMaxRuns = 40;
constexpr double kSettled = 1e-4;  // largest relative change of a factor

// The integral over time of the number of intervals open, as a function of time.
class Concurrency {
 public:
  Concurrency(const std::vector<std::vector<std::pair<double, double>>>& intervals,
              const std::vector<EngineResult::Load>& comm) {
    std::vector<std::pair<double, double>> edges;
    for (const auto& dev : intervals)
      for (const auto& [a, b] : dev)
        if (b > a) edges.push_back({a, +1.0}), edges.push_back({b, -1.0});
    for (const auto& l : comm)
      edges.push_back({l.start, l.devices}), edges.push_back({l.end, -l.devices});
    std::sort(edges.begin(), edges.end());
    double open = 0;
    double area = 0, last = edges.empty() ? 0 : edges.front().first;
    for (const auto& [t, delta] : edges) {
      area += open * (t - last);
      last = t;
      open += delta;
      times_.push_back(t);
      area_.push_back(area);
      open_.push_back(open);
    }
  }

  // Integral from the first edge up to t.
  double Area(double t) const {
    auto it = std::upper_bound(times_.begin(), times_.end(), t);
    if (it == times_.begin()) return 0;
    const size_t i = static_cast<size_t>(it - times_.begin()) - 1;
    return area_[i] + open_[i] * (t - times_[i]);
  }

 private:
  std::vector<double> times_, area_;
  std::vector<double> open_;  // after the edge at times_[i]
};

}  // namespace

EngineResult RunWithSharedCompute(EngineSetup& setup, double shared_compute) {
  DAPPLE_CHECK(shared_compute > 0);
  const bool record = setup.record_timeline;
  setup.record_timeline = false;
  setup.op_scale.assign(setup.devices.size(), {});
  for (size_t d = 0; d < setup.devices.size(); ++d)
    setup.op_scale[d].assign(setup.stages[setup.devices[d].stage].length, 1.0);
  for (int run = 0; run < kMaxRuns; ++run) {
    EngineResult r = RunEngine(setup);
    Concurrency c(r.compute_intervals, r.comm_load);
    double change = 0;
    for (size_t d = 0; d < setup.devices.size(); ++d) {
      for (size_t pc = 0; pc < setup.op_scale[d].size(); ++pc) {
        const auto [a, b] = r.compute_intervals[d][pc];
        if (!(b > a)) continue;
        const double k = (c.Area(b) - c.Area(a)) / (b - a);
        double& f = setup.op_scale[d][pc];
        const double next = 0.5 * f + 0.5 * std::max(1.0, k / shared_compute);
        change = std::max(change, std::abs(next - f) / f);
        f = next;
      }
    }
    if (change < kSettled) break;
  }
  setup.record_timeline = record;
  return RunEngine(setup);
}

void AddEmulationTerms(const Plan& plan, const EmulationCosts& emulation, EngineSetup& setup) {
  const int S = setup.num_stages, V = S * setup.num_chunks;
  setup.resume_ms = emulation.ResumeMs();
  setup.wake_ms = emulation.WakeMs();
  for (int b = 0; b + 1 < V; ++b) {
    const auto &lo = plan.stages[b].devices, &hi = plan.stages[b + 1].devices;
    setup.routes[b].load = emulation.TransferLoad(lo, hi);
    setup.routes[V - 1 + b].load = emulation.TransferLoad(hi, lo);
  }
  for (int s = 0; s < S; ++s)
    setup.stages[s].allreduce_load = emulation.AllReduceLoad(plan.stages[s].devices);
}

}  // namespace dapple::internal
