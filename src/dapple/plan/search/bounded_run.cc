// BoundedRun: see bounded_run.h.
//
// Note [Runs without contention]
// In a run without contention every transfer starts when it is ready. Each time in such
// a run is a max of sums over the same instructions as in the contended run, where a
// transfer starts at its ready time or later, and rounding is monotone, so no time of it
// is later than the contended run's: when it proves the plan slower than t (by its end or
// by its own stop bound), so would the contended run. Without links to take in turn it
// skips the waiting list and the queue of finishes, so it costs less. Not with shared
// compute, whose stretching is not monotone in the start times.
#include "dapple/plan/search/bounded_run.h"

#include <algorithm>
#include <limits>

#include "dapple/plan/search/stop_bound.h"
#include "dapple/sim/prepared_run.h"

namespace dapple {
namespace {

// The bound that proves the plan slower than setup.stop_above_ms, if the run without
// contention proves it.
std::optional<double> UncontendedProof(internal::EngineSetup& setup) {
  setup.contended = false;
  const internal::EngineResult free = internal::RunEngine(setup);
  setup.contended = true;
  double bound = free.bound_ms;
  if (!free.stopped)
    for (const auto& d : free.devices) bound = std::max(bound, d.end_ms);
  if (free.stopped || internal::ProvesLonger(bound, setup.stop_above_ms)) return bound;
  return std::nullopt;
}

}  // namespace

struct BoundedRun::State {
  internal::PreparedRun prepared;
  internal::StopBound bound;
};

BoundedRun::BoundedRun(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                       const ListsChecked* checked)
    : plan_(plan), cost_(cost) {
  internal::CheckShape(plan, lowered, checked != nullptr);
  state_ = std::make_unique<State>(
      State{internal::Prepare(plan, lowered, cost, {.twins = true}, checked), {}});
  state_->prepared.setup.watcher = &state_->bound;
}

BoundedRun::~BoundedRun() = default;

SimResult BoundedRun::Run(double t) {
  internal::PreparedRun& p = state_->prepared;
  p.setup.stop_above_ms = t;
  internal::EngineResult run = internal::RunOnce(p.setup, cost_);
  SimResult result = p.result;
  if (run.stopped) {
    result.stopped = true;
    result.iteration_ms = run.bound_ms;
    return result;
  }
  internal::FillDevices(plan_, cost_, p, run, result);
  return result;
}

std::optional<SimResult> BoundedRun::SlowerWithoutContention(double t) {
  internal::PreparedRun& p = state_->prepared;
  if (cost_.Emulation() || !(t < std::numeric_limits<double>::infinity())) return std::nullopt;
  p.setup.stop_above_ms = t;
  const std::optional<double> bound = UncontendedProof(p.setup);
  if (!bound) return std::nullopt;
  SimResult result = p.result;
  result.stopped = true;
  result.iteration_ms = *bound;
  return result;
}

}  // namespace dapple
