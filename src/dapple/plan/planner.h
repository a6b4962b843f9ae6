// The planners (docs/design.md section 6): DAPPLE's dynamic program and the baselines, all
// scored by the same simulator. "No feasible plan" is an ordinary result, not an error.
#pragma once

#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"
#include "dapple/plan/plan_options.h"

namespace dapple {

// Plans `global_batch` samples of `profile` on `cluster` with `cost`. Throws InputError
// for an impossible request (no device, GBS < 1, a problem too big for the exhaustive
// planner, ...).
PlanResult RunPlanner(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                      int global_batch, const PlannerOptions& options);

}  // namespace dapple
