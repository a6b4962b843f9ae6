// The baseline planners (docs/design.md section 6) for one micro-batch size: each proposes one
// plan (no estimate); the registry (planner.cc) searches the micro-batch size and scores
// every proposal with the simulator.
#pragma once

#include <optional>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"

namespace dapple {

struct MicroBatching {
  int micro_batch_size = 1;   // m
  int num_micro_batches = 1;  // M; GBS = m x M
};

// Data parallelism with gradient accumulation: every layer in one stage replicated on all
// devices. nullopt when there are more devices than samples per micro-batch.
std::optional<Plan> DataParallelPlan(const Cluster& cluster, int num_layers, MicroBatching mb);

// min(devices, layers) stages, one device each (devices 0, 1, ... in order), layers split
// so that the largest stage compute (forward + backward of a micro-batch) is smallest.
// The straight pipeline (schedule dapple-a) and GPipe's partition (schedule gpipe).
Plan BalancedPipelinePlan(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                          ScheduleKind schedule, const char* planner);

// PipeDream's planner objective: minimise the slowest of the stage times and transfers,
// where a stage on r devices takes (F + B) of its slice + its allreduce per micro-batch,
// a transfer counts twice (activation and gradient), and there is no bubble term. Devices
// are handed out in id order (contiguous ranges). With `enforce_memory`, a stage must fit
// with the warm-up depth of dapple-a at the most stages it could have after it. nullopt
// when no partition fits. The plan runs synchronously with dapple-a.
std::optional<Plan> PipeDreamPlan(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                                  bool enforce_memory, int max_blocks = 0);

}  // namespace dapple
