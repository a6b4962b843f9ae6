// Runs of one plan for a search that only needs to know whether it is faster than a time
// t: set up once (as Simulate, without a timeline), then asked with t. Its shortcuts, each
// giving the plain Simulate's answer: twin replicas (Note [Twin replicas] in
// sim/event_engine.cc), a run that stops once the stop bound proves the plan slower (Note
// [Stopping above a time] in stop_bound.cc), and a run without contention (Note [Runs
// without contention] in bounded_run.cc). Whether and in which order to ask them is the
// search's choice (slower_than.h).
#pragma once

#include <memory>
#include <optional>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/sim/simulator.h"

namespace dapple {

class BoundedRun {
 public:
  // With `checked` (which must outlive the object), the lists are not checked again and
  // their facts are not gathered again.
  BoundedRun(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
             const ListsChecked* checked = nullptr);
  ~BoundedRun();
  BoundedRun(const BoundedRun&) = delete;
  BoundedRun& operator=(const BoundedRun&) = delete;

  // The contended run, which may stop as soon as it proves the iteration longer than t:
  // then `stopped` and iteration_ms a lower bound of the time (ProvesLonger than t); else
  // Simulate's result. It never stops with emulated devices (CostModel::Emulation).
  SimResult Run(double t);
  // A run in which every transfer starts when it is ready, whatever links it needs, and
  // which may stop likewise: cheaper, and no time of it later than the contended run's, so
  // when it proves the iteration longer than t, so would the contended run. That proof as
  // a stopped result; none when it does not prove it, with shared compute, or for an
  // infinite t.
  std::optional<SimResult> SlowerWithoutContention(double t);

 private:
  struct State;
  const Plan& plan_;
  const CostModel& cost_;
  std::unique_ptr<State> state_;
};

}  // namespace dapple
