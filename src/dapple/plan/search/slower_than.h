// The planner's question about a plan, "is it slower than t?", and the shortcuts that
// answer it cheaply with the simulator's BoundedRun (Note [Uncontended first] in
// slower_than.cc). The answer is always the exact simulator's; only the cost differs.
#pragma once

#include <mutex>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/sim/simulator.h"

namespace dapple {

// Note [Learning whether to run without contention first]: how often the run without
// contention settles a question depends on the problem: where each device has its server's
// links to itself it settles most, and asking it first saves work; where the devices of a
// server share its links it settles few, and asking it first is work in vain. A planner call keeps
// the odds of its questions (thread-safe) and asks that run first while it settles at least half of
// them (the last 64 to 128 count: the counts are halved at 128); when it does not, still one
// question in 8, to follow the odds. Only the cost depends on it: the answer is the same either
// way.
class UncontendedOdds {
 public:
  // Whether the next question goes to the run without contention first.
  bool Worth();
  // What that run did: settled the question or not.
  void Record(bool settled);

 private:
  std::mutex mu_;
  int tries_ = 0, settled_ = 0;
  unsigned asked_ = 0;
};

// The plan's simulation without a timeline (on `lowered`, its lowered schedule), which
// may stop once it proves the plan slower than t: then `stopped`, and iteration_ms a lower
// bound that ProvesLonger than t. For an infinite t, Simulate's result. With
// `uncontended_first` the question goes first to a run without contention; a caller that
// expects the plan to be faster (so that the first run would not settle the question)
// turns it off: the answer is the same either way.
// With `checked`, BoundedRun's. With `odds`, the run without contention goes first only
// when also `odds->Worth()`, and what it did is recorded there.
SimResult SimulateSlowerThan(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                             double t, bool uncontended_first = true,
                             const ListsChecked* checked = nullptr,
                             UncontendedOdds* odds = nullptr);
// The same on plan.schedule's lowered schedule.
SimResult SimulateSlowerThan(const Plan& plan, const CostModel& cost, double t,
                             bool uncontended_first = true);

}  // namespace dapple
