// Exhaustive search for small and medium problems, the ground truth of the planner tests:
// every contiguous partition, replica count, placement, micro-batch size and schedule, each
// scored by the simulator, with branch and bound on lower bounds of the simulated time
// (Note [Exhaustive branch and bound] in exhaustive_planner.cc).
#pragma once

#include <optional>
#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"

namespace dapple {

// The largest problems ExhaustivePlan accepts (RunPlanner throws InputError beyond).
inline constexpr int kExhaustiveMaxLayers = 12;
inline constexpr int kExhaustiveMaxDevices = 12;

struct ExhaustiveResult {
  std::optional<Plan> plan;  // the fastest plan that fits; estimate.iteration_ms set
  double iteration_ms = 0;
  long long simulated = 0;      // plans simulated
  double min_memory_bytes = 0;  // when none fits: the smallest peak memory of any plan
  long long pruned = 0;         // branches and plans the bounds cut
};

// Placements: a stage takes, on each server, any number of its free devices (a server's
// devices are interchangeable, and so are identical servers: only one of each mirror
// image is tried). Memory: static + K_s x activations of the largest slice must fit.
// Every plan has `allreduce_overlap` (Plan::allreduce_overlap). A stage that does not fit
// re-computes when CanRecompute(forward_timed, ...) allows (re-computation never makes a
// plan faster, so a stage that fits without it is never tried with it).
// `prune` false: no bound cuts anything and every plan that fits is simulated whole (the
// brute force that the bounds are checked against, on small problems); the optimum's time is
// the same either way. `start` (with `prune`): a plan of the problem (its micro-batching,
// schedule and overlap set) to begin with as the best found, so that the cuts bite from
// the start; the result is it when no plan is faster.
ExhaustiveResult ExhaustivePlan(const CostModel& cost, const Cluster& cluster, int global_batch,
                                const std::vector<int>& micro_batch_sizes,
                                const std::vector<ScheduleKind>& schedules,
                                bool allreduce_overlap = true,
                                const std::vector<bool>& forward_timed = {}, bool prune = true,
                                const Plan* start = nullptr);

// The plan a leaf of either exhaustive search scores, before its stages are set: planner
// "exhaustive", M micro-batches of m samples, `schedule`, the overlap setting.
inline Plan ExhaustiveLeafPlan(int m, int M, ScheduleKind schedule, bool allreduce_overlap) {
  Plan p;
  p.planner = "exhaustive";
  p.micro_batch_size = m;
  p.num_micro_batches = M;
  p.global_batch_size = m * M;
  p.schedule = schedule;
  p.allreduce_overlap = allreduce_overlap;
  return p;
}

}  // namespace dapple
