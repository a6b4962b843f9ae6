// The planner's shared state and proposals (internal to plan/): what one RunPlanner call
// computes once and its searches share, and the proposals each planner makes.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/plan_options.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/search/sim_cache.h"

namespace dapple::internal {

// What one RunPlanner call computes once and its searches share.
struct Shared {
  SimCache sims;                 // simulator results by plan
  ShardMemo shard_memo;          // sharding decisions by stage (ShardWhereItPays)
  RecomputeMemo recompute_memo;  // re-computation choices by stage (RecomputeWhereNeeded)
  // Group computes for the layer partitions (the even-width pipelines of every m, the
  // climbs' rebalanced neighbours).
  GroupWorkCache group_work;
  // DP results by (m, warm-up depths' schedule, memory enforced), and for dapple-a's
  // depths how many accepted stages dapple-b's would reject (DpOptions::deeper_schedule).
  struct Dp {
    std::vector<DpCandidate> candidates;
    long long deeper_misfits = 0;
  };
  std::map<std::tuple<int, ScheduleKind, bool>, Dp> dps;
  std::map<std::pair<int, bool>, std::optional<Plan>> pipedream;  // by (m, memory enforced)
  // BalancedPipelinePlan by m (the straight and gpipe partitions; each use sets its own
  // schedule and planner name).
  std::map<int, Plan> balanced;
  std::map<int, std::vector<Plan>> even_widths;  // EvenWidthPlans by m
  // EvenWidthPlans in the orders of EvenWidthOrders by (order, m) (Note [Even widths in
  // every server order] in proposals.cc).
  std::map<std::pair<int, int>, std::vector<Plan>> even_widths_by_order;
  // A schedule's refined selection (SelectRefined: its starts and climbs) by (schedule,
  // micro-batch sizes, refine_work, allreduce overlap): `dapple plan`'s V-shape rows search
  // as zb-h1, whose search the planner's call ran already.
  std::map<std::tuple<ScheduleKind, std::vector<int>, long long, bool>, RefinedSelection> refined;
  std::mutex dp_mu;  // guards the maps above (the families search in parallel)
};

struct Context {
  const Profile& profile;
  const Cluster& cluster;
  const CostModel& cost;
  int global_batch;
  const PlannerOptions& options;
  std::vector<int> sizes;               // micro-batch sizes to try, ascending
  std::vector<ScheduleKind> schedules;  // for the planners that choose (dapple-a, -b, zb-h1)
  Shared* shared = nullptr;
};

// Per layer: whether the profile times its forward (what re-computation costs).
std::vector<bool> ForwardTimed(const Profile& profile);

// Whether the planner proposes the even-width pipelines in every server order on `cluster`
// (Note [Even widths in every server order] in proposals.cc): at most 12 devices, of
// several kinds.
bool KindFirstEvenWidths(const Cluster& cluster);

// The context of the search with schedule `k` alone (what `--schedule k` runs).
Context Family(const Context& c, ScheduleKind k);

// The proposals of the planner `c.options.planner` for the schedules of `c`: the DAPPLE
// planner's DP candidates and the baselines' partitions, with several schedules each
// schedule's proposals one after another (as `--schedule` makes them).
std::vector<Proposal> Propose(const Context& c, bool enforce_memory);

}  // namespace dapple::internal
