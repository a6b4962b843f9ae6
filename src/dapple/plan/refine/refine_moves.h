// The moves of the refinement (refine.h): every plan one step away from a given plan.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/refine/refine.h"

namespace dapple::internal {

struct Neighbour {
  Plan plan;
  const char* move;  // a RefineStep::move name
  PlanCosts costs;   // EvaluatePlan(plan, cost)
};

// Which neighbours Neighbours lists: the one-step moves, the wide moves that change several
// things at once, which a climb lists only where no one-step move is faster (Note [Wide
// moves at a local optimum] in refine.cc), or the regrouped plans that a climb climbs from
// where no wide move is faster either (Note [Regrouping at a local optimum] there).
enum class Moves { kStep, kWide, kRegroup };

// The layers of the rebalanced neighbours (Note [Rebalancing the layers] in regroup_moves.cc)
// by (m, device groups), and the groups' computes: a climb's plans mostly keep their groups,
// and a partition costs stages x layers^2 cost-model queries.
struct RebalanceMemo {
  std::map<std::pair<int, std::vector<std::vector<int>>>, std::vector<int>> last_layers;
  GroupWorkCache work;
};

// The neighbours of `plan`, each valid for `cluster` (stages cover the layers in order,
// devices unique, every replica with a sample, m among options.sizes, the schedule among
// options.schedules). The one-step moves (kStep): one stage boundary moved by 1, 2, 4, ...
// layers; one device moved from a replicated stage to another; an unused device added to a
// stage or a replica's device left unused; two adjacent stages merged; a stage split at its
// compute midpoint (its devices shared, or one unused device for the new stage); two devices
// of different servers swapped between stages; the next smaller or larger micro-batch size;
// another schedule. The wide moves (kWide): a stage split at its compute midpoint with one
// half on a device taken from another replicated stage; the layers cut anew over the plan's
// device groups. The regrouped plans (kRegroup): the device groups of two stages exchanged, or
// one stage's group left out ("drop-group"), the layers cut anew over them. Each re-computes
// exactly on the stages that need it (RecomputeWhereNeeded). In a fixed order (deterministic).
// `plan_costs`, when given, is EvaluatePlan(plan, cost): the neighbours' costs are then evaluated
// from it (EvaluatePlanFrom), with the same figures. `shard_memo` and `rebalance_memo`, when given,
// hold the sharding decisions of stages seen before and the rebalanced partitions (a climb's rounds
// list mostly the same stages); the neighbours are the same.
std::vector<Neighbour> Neighbours(const Plan& plan, const CostModel& cost, const Cluster& cluster,
                                  const RefineOptions& options,
                                  const PlanCosts* plan_costs = nullptr,
                                  ShardMemo* shard_memo = nullptr, Moves moves = Moves::kStep,
                                  RebalanceMemo* rebalance_memo = nullptr);

}  // namespace dapple::internal
