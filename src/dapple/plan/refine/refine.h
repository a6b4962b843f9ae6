// Refinement after the planners' proposals (Note [Refinement] in refine.cc): a bounded local
// search from the best plans found, every move scored by the exact simulator.
#pragma once

#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/recompute_choice.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/shard_memo.h"

namespace dapple {

class GroupWorkCache;

struct RefineOptions {
  std::vector<int> sizes;               // micro-batch sizes a move may pick, ascending
  std::vector<ScheduleKind> schedules;  // schedules a move may pick
  // Per layer: whether the profile has a forward time for it. A stage may re-compute when
  // one of its layers has (re-computation costs the stage's forward again); empty: never.
  std::vector<bool> forward_timed;
  // The budget of the whole refinement in device steps: the neighbours listed x the devices
  // of the plan, plus the devices x micro-batches of those simulated (Note [A budget of
  // work] in refine.cc); 0: no move is tried. The default leaves the bound to max_rounds x
  // simulations_per_round.
  long long max_work = std::numeric_limits<long long>::max();
  int max_rounds = 400;            // accepted moves per start at most
  int simulations_per_round = 32;  // neighbours simulated per round at most (best first)
  // A climb tries the wide moves where no one-step move is faster and its plan is no slower
  // than this (Note [Wide moves at a local optimum] in refine.cc); elsewhere, and with 0, it
  // stops there.
  double wide_moves_up_to_ms = std::numeric_limits<double>::infinity();
  // Whether Regrouped climbs from the regrouped plans (Note [Regrouping at a local optimum]
  // in refine.cc); Refine itself never does.
  bool regroup = false;
  int threads = 0;            // simulating threads; 0: the machine's cores
  SimCache* cache = nullptr;  // simulations go through it when set (sim_cache.h)
  // The sharding decisions (ShardWhereItPays), shared when set; else each climb and
  // selection keeps its own.
  ShardMemo* shard_memo = nullptr;
  // The re-computation choices (RecomputeWhereNeeded), shared when set (recompute_choice.h).
  RecomputeMemo* recompute_memo = nullptr;
  // The group computes of the rebalanced neighbours (GroupWorkCache), shared when set; else
  // each climb keeps its own.
  GroupWorkCache* group_work = nullptr;
};

// One move of the search, as reported: "boundary", "move-device", "add-device",
// "remove-device", "merge", "split", "split-borrow", "rebalance", "regroup", "drop-group",
// "swap", "micro-batch", "schedule".
struct RefineStep {
  std::string move;
  double iteration_ms = 0;  // after the move
};

struct RefineResult {
  Scored best;                    // the fastest plan seen (a start when no move helped)
  std::vector<RefineStep> steps;  // the accepted moves that led from its start to it
  size_t start = 0;               // index of that start in `starts`
  long long simulated = 0;        // neighbours the simulator scored
  long long work = 0;             // what counted against the budget (Note [A budget of work])
  bool out_of_budget = false;     // the budget ran out before the search converged
};

// The fastest of `starts`' times: RefineOptions::wide_moves_up_to_ms for climbs from them
// (Note [Wide moves at a local optimum] in refine.cc). REQUIRES: starts non-empty.
double FastestStartMs(const std::vector<Scored>& starts);

// Runs the local search from each of `starts` (each already scored, fitting memory) and
// returns the fastest plan found; ties go to the earlier start. Every plan it proposes is
// valid for `cluster` (each replica has a sample, devices not shared) and fits memory.
// The outcome depends on the inputs only (the budget counts work, not time, and does not
// depend on `threads`). REQUIRES: starts non-empty.
RefineResult Refine(const std::vector<Scored>& starts, const CostModel& cost,
                    const Cluster& cluster, const RefineOptions& options);
// Refine's answer from its climbs run one start at a time (climbs[i]: Refine of starts[i]
// alone), as Refine picks it: the fastest end, ties to the earlier start; the simulations
// and work summed, out of budget if any climb was. Callers that run climbs on threads of their own
// gather them with it. REQUIRES: climbs non-empty.
RefineResult FastestClimb(std::vector<RefineResult> climbs);
// `r` (Refine's or FastestClimb's answer) gone on from the fastest end of the climbs from its
// plan's regrouped plans, as long as that is faster (Note [Regrouping at a local optimum] in
// refine.cc): their moves appended to r.steps ("regroup", then the climb's), their
// simulations and work added. Their budget is 8 times r.work, at most options.max_work; out of
// budget only when options.max_work ran out. `r` itself without options.regroup.
RefineResult Regrouped(RefineResult r, const CostModel& cost, const Cluster& cluster,
                       const RefineOptions& options);

// Note [Twin starts]
// Two origins may propose the same plan (the straight pipeline and PipeDream's partition
// often agree), and both are kept as starts: they count against max_starts as two, as they
// always did. A climb reads of its start only what SimKey holds (stages, devices,
// re-computation, m, M, schedule, chunks, overlap), so the climbs from the two are one climb
// (its budget and options are the same): the planner climbs from the first and gives the later
// twin a copy of its result, which FastestClimb never prefers (ties go to the earlier start).
// TwinStarts: for each start, the index of the first start with its SimKey (itself when none).
std::vector<size_t> TwinStarts(const std::vector<Scored>& starts);
// `climbs` with climbs[i] = climbs[twin[i]] where twin[i] < i (TwinStarts' twin).
std::vector<RefineResult> WithTwinClimbs(const std::vector<size_t>& twin,
                                         std::vector<RefineResult> climbs);

// Each of `starts` climbed alone (Refine({starts[i]})), the climbs side by side on the
// cores, a twin start's copied (Note [Twin starts]).
std::vector<RefineResult> ClimbsFrom(const std::vector<Scored>& starts, const CostModel& cost,
                                     const Cluster& cluster, const RefineOptions& options);
// Refine's answer from each of `starts` climbed alone: ClimbsFrom gathered by FastestClimb.
// REQUIRES: starts non-empty.
RefineResult ClimbEach(const std::vector<Scored>& starts, const CostModel& cost,
                       const Cluster& cluster, const RefineOptions& options);
// Note [Deep starts regrouped apart] (refine.cc): Regrouped(FastestClimb(climbs)), and where
// a climb from starts[apart_from..] (DeepestStarts') ends fastest, also the others' fastest
// climb regrouped alone, the faster of the two taken (ties to the others'); the simulations
// and work of every climb and both regroupings. RefineResult::start indexes all the climbs.
// REQUIRES: climbs non-empty.
RefineResult RegroupedApart(std::vector<RefineResult> climbs, size_t apart_from,
                            const CostModel& cost, const Cluster& cluster,
                            const RefineOptions& options);

// Re-computation where a plan needs it, and nowhere else: on each stage of `plan` that does
// not fit its devices' memory without it (per EvaluatePlan's memory rule) and may
// re-compute (CanRecompute), sets `recompute_layers` to the layers ChooseRecomputeLayers
// picks (plans of one chunk), or `recompute` when that is every layer, no choice fits, or
// the plan has chunks; clears both on the others and clears the plan's own flag. Returns whether
// some stage re-computes. Re-computation is a memory tool: the simulator may find a plan faster
// with it where it fits without (a later backward can shift a contended transfer), but the planners
// never propose it for that. `costs`, when given, receives EvaluatePlan of the plan without any
// re-computation (which is `plan`'s own costs when this returns false). With `base` and its
// EvaluatePlan `base_costs`, it evaluates with EvaluatePlanFrom (the same figures, sooner for a
// plan near base).
bool RecomputeWhereNeeded(Plan& plan, const CostModel& cost, const std::vector<bool>& forward_timed,
                          PlanCosts* costs = nullptr, const Plan* base = nullptr,
                          const PlanCosts* base_costs = nullptr, ShardMemo* shard_memo = nullptr,
                          RecomputeMemo* recompute_memo = nullptr);

// Note [Optimizer sharding in the planner]
// A stage of 2 or more replicas (in a plan without chunks) shards its optimizer state
// (StagePlan::shard_optimizer) where that makes it fit its devices' memory and it does not
// fit without, or where it fits and is faster: its reduce-scatter in place of the
// allreduce (exposed part, as EvaluateStage counts it), plus its 1/r update and all-gather,
// take less than the allreduce and the whole update. A tie does not shard: the runtime's
// reduce-scatter holds a receive buffer per bucket that the allreduce does not. Sets the flag on
// those stages and clears it on the others; returns whether some stage shards. RecomputeWhereNeeded
// shards first, so re-computation is left to the stages that sharding cannot make fit.
// With `memo`, a stage decides as the last stage alike in it (the same layers, devices,
// micro-batch size, micro-batches in flight, re-computation and overlap) did: the
// refinement's neighbours differ from their plan in a stage or two, and the planner's climbs
// and selections of one call share one memo (RefineOptions::shard_memo, shard_memo.h).
bool ShardWhereItPays(Plan& plan, const CostModel& cost, ShardMemo* memo = nullptr);

}  // namespace dapple

namespace dapple {

// The planner's last step, in two: SelectStarts picks the fastest of `proposals` (as
// SelectFastest) per origin as the starts: the fastest fitting proposal of each origin and,
// when `forward_timed` allows re-computation, the fastest of the proposals that fit only
// with it (re-computing the stages that need it; their origin's `recompute`); `loose`
// proposals (made without the memory limit) are used that way too, and as they are where
// sharding the optimizer state makes them fit (their origin's `shard`). Every proposal shards where
// it pays (ShardWhereItPays). The starts come fastest first, at most `max_starts` of them,
// then the fastest proposal of kEvenWidthsOrigin (with or without re-computation) when there
// is one, then for each KindFirstOrigin those that DeepestStarts picks (the fastest of each
// shape of the most stages that fit, at most three), with the simulations it took to pick
// them. Refine
// (above) climbs from them, on the caller's threads (the planner runs the climbs of several
// searches together), and Refined makes the selection from the starts and Refine's result
// on them (`r` is ignored when there is no start).
// The origin of the planner's even-width pipelines (EvenWidthPlans in baselines.h): their
// fastest is a start besides the max_starts others.
inline constexpr const char* kEvenWidthsOrigin = "even-widths";
// The origin of the even-width pipelines over the devices in the server order that leads with
// kind k of DeviceKinds (Note [Even widths in every server order] in proposals.cc), named
// "even-widths-A-first" for k = 0 (DeviceKindName). Up to three starts more of each such
// origin, after the others.
inline Origin KindFirstOrigin(size_t k) { return Origin(kEvenWidthsOrigin, static_cast<int>(k)); }
struct RefineStarts {
  std::vector<Scored> starts;
  long long simulated = 0;
  // starts[deep_from..] are DeepestStarts' (regrouped apart: RegroupedApart).
  size_t deep_from = 0;
};
RefineStarts SelectStarts(const std::vector<Proposal>& proposals,
                          const std::vector<Proposal>& loose, const CostModel& cost,
                          const RefineOptions& options, int max_starts = 3);
struct RefinedSelection {
  std::optional<Scored> best;  // its origin: the start's
  std::vector<RefineStep> steps;
  long long simulated = 0;
  bool out_of_budget = false;
};
RefinedSelection Refined(const RefineStarts& starts, const RefineResult& r);

}  // namespace dapple
