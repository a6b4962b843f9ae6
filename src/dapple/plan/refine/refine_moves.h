// The moves of the refinement (refine.h): every plan one step away from a given plan.
#pragma once

#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/refine/refine.h"

namespace dapple::internal {

struct Neighbour {
  Plan plan;
  const char* move;  // a RefineStep::move name
  PlanCosts costs;   // EvaluatePlan(plan, cost)
};

// The neighbours of `plan`, each valid for `cluster` (stages cover the layers in order,
// devices unique, every replica with a sample, m among options.sizes, the schedule among
// options.schedules): one stage boundary moved by 1, 2, 4, ... layers; one device moved
// from a replicated stage to another; an unused device added to a stage or a replica's
// device left unused; two adjacent stages merged; a stage split at its compute midpoint
// (its devices shared, or one unused device for the new stage); two devices of different
// servers swapped between stages; the next smaller or larger micro-batch size; another
// schedule. Each re-computes exactly on the stages that need it (RecomputeWhereNeeded). In
// a fixed order (deterministic). `plan_costs`, when given, is EvaluatePlan(plan, cost): the
// neighbours' costs are then evaluated from it (EvaluatePlanFrom), with the same figures.
// `shard_memo`, when given, holds the sharding decisions of stages seen before (a climb's
// rounds list mostly the same stages); the decisions are the same.
std::vector<Neighbour> Neighbours(const Plan& plan, const CostModel& cost, const Cluster& cluster,
                                  const RefineOptions& options,
                                  const PlanCosts* plan_costs = nullptr,
                                  ShardMemo* shard_memo = nullptr);

}  // namespace dapple::internal
