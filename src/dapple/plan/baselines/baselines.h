// The baseline planners (docs/design.md section 6) for one micro-batch size: each proposes one
// plan (no estimate); the registry (planner.cc) searches the micro-batch size and scores
// every proposal with the simulator.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

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

// The compute of layer ranges on a device group, forward + backward of its largest slice on
// its slowest kind, by the size of that slice and the kinds of device (groups alike in these
// cost alike, whatever their m and width): BalancedPlanOnGroups asks the cost model once per
// range and such class, and partitions that share a cache share them (the planner's
// even-width pipelines of every m and its climbs' rebalanced neighbours). Thread-safe; one
// cost model per cache; a table stays where it is while the cache lives.
class GroupWorkCache {
 public:
  struct Table {
    int layers = 0;
    std::vector<double> work;  // [first x layers + last], first <= last
    // Whether a range costs no less than the same range without its first layer
    // (Work(first, last) >= Work(first + 1, last) for all first < last), as sums of
    // non-negative layer times do: BalancedPlanOnGroups then searches its cuts by bisection.
    bool shrinks_from_left = false;
    double Work(int first, int last) const {
      return work[static_cast<size_t>(first) * layers + last];
    }
  };
  const Table& TableFor(const CostModel& cost, int m, const std::vector<int>& group);

 private:
  std::mutex mu_;
  // By (slice, kinds).
  std::map<std::pair<int, std::vector<int>>, std::unique_ptr<const Table>> tables_;
};

// Layers split among stages on fixed device groups (stage k on groups[k], replicas in that
// order; at most as many groups as layers) so that the largest stage compute (forward +
// backward of the largest slice on the group's slowest device) is smallest; ties go to the
// earliest cuts. With `cache`, its known ranges are not asked again (the same plan).
Plan BalancedPlanOnGroups(const CostModel& cost, const std::vector<std::vector<int>>& groups,
                          MicroBatching mb, ScheduleKind schedule, const char* planner,
                          GroupWorkCache* cache = nullptr);

// Pipelines of k stages of (nearly) equal widths for k = 2 .. min(layers, devices - 1),
// whatever the server boundaries: the devices in id order (or in `device_order`, a
// permutation of them) cut into k runs (devices mod k runs one wider, first or last; at most
// m wide, the rest unused), layers balanced on them (BalancedPlanOnGroups), each plan's
// planner `planner`. Stages split across two servers or several in one are what they add to
// the DP's placements (Note [Widths across server boundaries] in proposals.cc). With
// `cache`, the group computes it knows are not asked again (the same plans).
std::vector<Plan> EvenWidthPlans(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                                 GroupWorkCache* cache = nullptr,
                                 const std::vector<int>* device_order = nullptr,
                                 const char* planner = "even-widths");

// The device orders of ServerOrders (placement.h) for EvenWidthPlans on a cluster of several
// kinds of device: order k leads with kind k's servers (DeviceKinds' k-th, the fastest first),
// each order's devices server after server. None on a cluster of one kind.
std::vector<std::vector<int>> EvenWidthOrders(const Cluster& cluster);

// PipeDream's planner objective: minimise the slowest of the stage times and transfers,
// where a stage on r devices takes (F + B) of its slice + its allreduce per micro-batch,
// a transfer counts twice (activation and gradient), and there is no bubble term. Devices
// are handed out in id order (contiguous ranges). With `enforce_memory`, a stage must fit
// with the warm-up depth of dapple-a at the most stages it could have after it. nullopt
// when no partition fits. The plan runs synchronously with dapple-a.
std::optional<Plan> PipeDreamPlan(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                                  bool enforce_memory, int max_blocks = 0);

}  // namespace dapple
