// What the refinement's moves share (refine_moves.cc lists the one-step and wide moves,
// regroup_moves.cc the rebalanced and regrouped plans): the plan whose neighbours they list,
// the devices it leaves unused, the memos, and how a neighbour is added.
#pragma once

#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/refine/refine_moves.h"

namespace dapple::internal {

struct MoveContext {
  const CostModel& cost;
  const Cluster& cluster;
  const RefineOptions& o;
  const Plan& base;             // the plan whose neighbours these are
  const PlanCosts* base_costs;  // its EvaluatePlan, when known
  std::vector<int> unused;      // devices no stage has, ascending
  std::vector<int> server_of;   // device -> server (Cluster::ServerOf scans the servers)
  ShardMemo* shard_memo;        // the neighbours' stages are mostly the plan's
  RebalanceMemo* rebalance_memo;
};

// Adds `p` to `out` as the neighbour made by `move`: m raised where a replica would have no
// sample (nothing added when no allowed size gives each one), each stage's fastest devices
// first, re-computing exactly where it needs to, with its costs.
void AddNeighbour(MoveContext& c, std::vector<Neighbour>& out, Plan p, const char* move);

// The wide move that cuts the layers anew over the plan's device groups (Note [Rebalancing
// the layers] in regroup_moves.cc).
void Rebalance(MoveContext& c, const Plan& p, std::vector<Neighbour>& out);

// The regrouped plans (Note [Regrouping the stages] in regroup_moves.cc).
void Regroups(MoveContext& c, const Plan& p, std::vector<Neighbour>& out);

}  // namespace dapple::internal
