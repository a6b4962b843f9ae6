// The planner's question about a plan, "is it slower than t?", and the shortcuts that
// answer it cheaply with the simulator's BoundedRun (Note [Uncontended first] in
// slower_than.cc). The answer is always the exact simulator's; only the cost differs.
#pragma once

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/sim/simulator.h"

namespace dapple {

// The plan's simulation without a timeline (on `lowered`, its lowered schedule), which
// may stop once it proves the plan slower than t: then `stopped`, and iteration_ms a lower
// bound that ProvesLonger than t. For an infinite t, Simulate's result. With
// `uncontended_first` the question goes first to a run without contention; a caller that
// expects the plan to be faster (so that the first run would not settle the question)
// turns it off: the answer is the same either way.
// With `checked`, BoundedRun's.
SimResult SimulateSlowerThan(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                             double t, bool uncontended_first = true,
                             const ListsChecked* checked = nullptr);
// The same on plan.schedule's lowered schedule.
SimResult SimulateSlowerThan(const Plan& plan, const CostModel& cost, double t,
                             bool uncontended_first = true);

}  // namespace dapple
