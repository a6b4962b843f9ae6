// Picks the fastest of several proposed plans with the exact simulator: plans that do not
// fit memory are set aside, the others are simulated in order of a lower bound on their
// time until no remaining one can win.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/search/origin.h"
#include "dapple/plan/search/sim_cache.h"
#include "dapple/sim/simulator.h"

namespace dapple {

struct Proposal {
  Plan plan;
  Origin origin;  // who proposed it (origin.h)
  // EvaluatePlan(plan, cost) when whoever made the proposal has it (SelectStarts evaluates
  // each proposal to decide on re-computation): SelectFastest then does not evaluate it
  // again. Whoever changes `plan` empties it.
  std::optional<PlanCosts> costs = std::nullopt;
};

struct Scored {
  Plan plan;  // estimate filled: simulated time and speedup, L, pivot, peak memory
  Origin origin;
  SimResult sim;
  PlanCosts costs;
};

struct Selection {
  std::optional<Scored> best;
  long long simulated = 0;
  // The smallest peak memory per device among the proposals that did not fit (0 if none).
  double leanest_unfit_memory_bytes = 0;
};

// Fastest simulated proposal that fits memory (per the planner's memory rule and the
// simulator's peak); ties go to the earlier proposal. With `ignore_memory`, memory is not
// checked (to tell what the best plans would need). With `cache`, simulations go through it.
// With `faster_than`, only a proposal faster than it is selected (the same one as without
// it when the fastest is; none otherwise): proposals that cannot be are not simulated, and
// the runs may stop once they prove a plan no faster (the caller keeps its own plan then).
Selection SelectFastest(const std::vector<Proposal>& proposals, const CostModel& cost,
                        bool ignore_memory = false, SimCache* cache = nullptr,
                        double faster_than = std::numeric_limits<double>::infinity());

// Whether every device's simulated peak fits its memory (the simulator's half of the
// planner's memory rule; EvaluatePlan's `fits` is the other).
bool SimulatedFits(const SimResult& r, const CostModel& cost);

// SelectFastest of the one proposal `plan` (origin "") whose EvaluatePlan is `costs`,
// which must fit: the plan scored, or nothing when the simulator's peak does not fit or
// when the simulation proved it slower than `stop_above_ms` (SimulateSlowerThan's t, as
// is `uncontended_first`).
std::optional<Scored> ScoreFitting(const Plan& plan, PlanCosts costs, const CostModel& cost,
                                   SimCache* cache = nullptr,
                                   double stop_above_ms = std::numeric_limits<double>::infinity(),
                                   bool uncontended_first = true);

}  // namespace dapple
