// The planners' options and results (RunPlanner's, planner.h): the types every part of plan/
// may take, below all of them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"

namespace dapple {

namespace internal {
struct Shared;
}

// Work that RunPlanner calls on one problem share (Note [One memo for several planner
// calls] in planner.cc): the DP's results per micro-batch size and warm-up depths,
// PipeDream's partitions, and the simulator's results by plan. `dapple plan` plans with
// DAPPLE, then with each baseline and each schedule family: with one memo for all of them
// each DP runs once. A memo serves calls with the same profile, cluster and cost model
// (the same objects) and the same global batch and rescore_top_k; a call on another
// problem empties it first. Calls may not run at the same time on one memo.
class PlanningMemo {
 public:
  PlanningMemo();
  ~PlanningMemo();
  PlanningMemo(const PlanningMemo&) = delete;
  PlanningMemo& operator=(const PlanningMemo&) = delete;

  // The shared work for this problem (emptied when it is not the last call's problem).
  internal::Shared& For(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                        int global_batch, int rescore_top_k);

 private:
  std::unique_ptr<internal::Shared> shared_;
  const void* problem_[3] = {nullptr, nullptr, nullptr};
  int global_batch_ = 0, top_k_ = 0;
};

// The refinement's default budget per climb (PlannerOptions::refine_work).
inline constexpr long long kDefaultRefineWork = 5000000;

// The planners: DAPPLE's (DP, then refinement) and the baselines it is compared with.
enum class PlannerKind {
  kDapple,        // "dapple": the DP's and the baselines' proposals, refined by the simulator
  kDataParallel,  // "dp": every device a replica of one stage
  kStraight,      // "straight": one device per stage, layers balanced
  kGPipe,         // "gpipe": the straight pipeline under GPipe's schedule
  kPipeDream,     // "pipedream": PipeDream's partitioning DP
  kExhaustive,    // "exhaustive": every plan of a small problem (the ground truth of tests)
};

// Every planner, in the order `dapple plan` prints them.
std::vector<PlannerKind> AllPlanners();
// The planner's name as the command line and plan files spell it ("dapple", "dp", ...).
std::string ToString(PlannerKind k);
// Their names joined by ", " ("dapple, dp, ..."), for help texts and error messages.
std::string PlannerNames();
// The planner named `name`; throws InputError naming the known ones otherwise.
PlannerKind ParsePlannerKind(const std::string& name);

struct PlannerOptions {
  PlannerKind planner = PlannerKind::kDapple;
  std::optional<ScheduleKind> schedule;  // fixed schedule; default: searched/planner's own
  std::optional<int> micro_batch_size;   // fixed m; default: searched
  int rescore_top_k = 8;                 // DP candidates re-scored by the exact simulator
  // Plan::allreduce_overlap of every plan proposed and scored (false: the paper's single
  // allreduce after the last backward; `dapple plan --no-overlap`).
  bool allreduce_overlap = true;
  // The DAPPLE planner's refinement (refine.h): the budget of each climb in device steps
  // (Note [A budget of work] in refine.cc), so that the plan depends on the inputs only;
  // 0: no refinement.
  long long refine_work = kDefaultRefineWork;
  // The DAPPLE planner offers interleaved 1F1B on its winner's device groups (Note
  // [Interleaving a plan]) unless the schedule is fixed to another family; false: never.
  bool interleave = true;
  // Choose by the time per iteration in steady state (SimulateSteadyState) rather than one
  // iteration's from a cold start: the searched winners and each family's, and zb-h2 on
  // the one-chunk ones' stages, re-scored so; the plan records it (Plan::steady_state).
  bool steady_state = false;
  // Shares the DPs, partitions and simulations with other calls on the same problem
  // (PlanningMemo); null: this call's own. The plan is the same either way.
  PlanningMemo* memo = nullptr;
  // Called once the proposals are made and kept in `memo` (the DPs and the baselines'
  // partitions), before the searches among them: `dapple plan` starts the baselines' rows
  // then, beside the searches. Not called when the call throws before.
  std::function<void()> proposed;
};

struct PlanResult {
  std::optional<Plan> plan;  // with estimate filled (simulated iteration_ms, speedup, L)
  // With PlannerOptions::steady_state: the plan's time per iteration in steady state.
  double steady_state_iteration_ms = 0;
  std::string reason;                // why there is no plan
  double required_memory_bytes = 0;  // when nothing fits: what the best plan would need
  double planning_seconds = 0;
  long long plans_simulated = 0;  // proposals the simulator scored
  // Which proposal won: "dapple-dp" (the DP), or a baseline's name ("dp", "straight",
  // "pipedream", ...) when a baseline's partition won inside the DAPPLE planner.
  std::string origin;
  // The refinement's accepted moves from that proposal to the plan (empty: it won as
  // proposed), and whether its budget ran out.
  std::vector<std::string> refine_moves;
  bool refine_out_of_budget = false;
  // The DAPPLE planner searching several schedules runs each one's own search first (Note
  // [Never slower with more schedules] in family_search.cc): here are those that found a plan,
  // each what RunPlanner with `schedule` = `family` returns (planning_seconds and
  // plans_simulated aside), so that callers need not run them again.
  std::optional<ScheduleKind> family;
  std::vector<PlanResult> families;
};

// The micro-batch sizes the planners search: every divisor of `global_batch`, ascending
// (the powers of two that divide it are among them).
std::vector<int> MicroBatchSizes(int global_batch);

}  // namespace dapple
