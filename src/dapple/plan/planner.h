// The planners (docs/design.md section 6): DAPPLE's dynamic program and the baselines, all
// scored by the same simulator. "No feasible plan" is an ordinary result, not an error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"

namespace dapple {

struct PlannerOptions {
  std::string planner = "dapple";        // dapple, dp, straight, gpipe, pipedream, exhaustive
  std::optional<ScheduleKind> schedule;  // fixed schedule; default: searched/planner's own
  std::optional<int> micro_batch_size;   // fixed m; default: searched
  int rescore_top_k = 8;                 // DP candidates re-scored by the exact simulator
  // Plan::allreduce_overlap of every plan proposed and scored (false: the paper's single
  // allreduce after the last backward; `dapple plan --no-overlap`).
  bool allreduce_overlap = true;
  // The DAPPLE planner's refinement (refine.h): wall-clock budget in seconds; 0: none.
  double refine_seconds = 2.0;
  // The DAPPLE planner offers interleaved 1F1B on its winner's device groups (Note
  // [Interleaving a plan]) unless the schedule is fixed to another family; false: never.
  bool interleave = true;
};

struct PlanResult {
  std::optional<Plan> plan;          // with estimate filled (simulated iteration_ms, speedup, L)
  std::string reason;                // why there is no plan
  double required_memory_bytes = 0;  // when nothing fits: what the best plan would need
  double planning_seconds = 0;
  long long plans_simulated = 0;  // proposals the simulator scored
  // Which proposal won: "dapple-dp" (the DP), or a baseline's name ("dp", "straight",
  // "pipedream", ...) when a baseline's partition won inside the DAPPLE planner.
  std::string origin;
  // The refinement's accepted moves from that proposal to the plan (empty: it won as
  // proposed), and whether its time budget ran out.
  std::vector<std::string> refine_moves;
  bool refine_out_of_time = false;
  // The DAPPLE planner searching several schedules runs each one's own search first (Note
  // [Never slower with more schedules] in planner.cc): here are those that found a plan,
  // each what RunPlanner with `schedule` = `family` returns (planning_seconds and
  // plans_simulated aside), so that callers need not run them again.
  std::optional<ScheduleKind> family;
  std::vector<PlanResult> families;
};

std::vector<std::string> PlannerNames();

// The micro-batch sizes the planners search: every divisor of `global_batch`, ascending
// (the powers of two that divide it are among them).
std::vector<int> MicroBatchSizes(int global_batch);

// Plans `global_batch` samples of `profile` on `cluster` with `cost`. Throws InputError
// for an unknown planner or an impossible request (no device, GBS < 1).
PlanResult RunPlanner(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                      int global_batch, const PlannerOptions& options);

}  // namespace dapple
