// Internal to plan/baselines: what the exhaustive search's two parts share, the one-chunk
// search (exhaustive_planner.cc) and the V shapes' (exhaustive_v.cc, Note [Exhaustive V
// shapes]).
#pragma once

#include <functional>
#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/sim/simulator.h"

namespace dapple::internal {

// Keeps `p`, simulated as `r`, in `result` when it is faster than the best found.
void KeepIfFaster(Plan p, const SimResult& r, ExhaustiveResult& result);

// Calls `f` with every take vector (devices taken on each server) of 1 to `most` devices
// in all, at most the free ones of each server after `usage`, and with identical servers
// (`identical`) only one of each mirror image: the servers touched, by `usage` or the take,
// are the first ones.
void ForEachTake(const Cluster& cluster, const std::vector<int>& usage, int most, bool identical,
                 const std::function<void(const std::vector<int>&)>& f);

// Searches every V plan of schedule `kind` (VShaped) at micro-batch size m (M = global
// batch / m) into `result`, whose best so far bounds the search when `prune`. Returns the
// least peak memory of the plans that did not fit (1e300 when none).
double ExhaustiveVShapes(const CostModel& cost, const Cluster& cluster, int m, int M,
                         ScheduleKind kind, bool allreduce_overlap, bool prune,
                         ExhaustiveResult& result);

}  // namespace dapple::internal
