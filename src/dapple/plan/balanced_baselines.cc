// Data parallelism and the balanced one-device-per-stage pipelines: see baselines.h.
#include <algorithm>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/plan/baselines.h"

namespace dapple {

std::optional<Plan> DataParallelPlan(const Cluster& cluster, int num_layers, MicroBatching mb) {
  const int d = cluster.num_devices();
  if (d > mb.micro_batch_size || d < 1) return std::nullopt;
  Plan p;
  p.planner = "dp";
  p.micro_batch_size = mb.micro_batch_size;
  p.num_micro_batches = mb.num_micro_batches;
  p.global_batch_size = mb.micro_batch_size * mb.num_micro_batches;
  p.schedule = ScheduleKind::kDappleA;
  StagePlan s;
  s.first_layer = 0;
  s.last_layer = num_layers - 1;
  for (int i = 0; i < d; ++i) s.devices.push_back(i);
  p.stages.push_back(std::move(s));
  return p;
}

Plan BalancedPipelinePlan(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                          ScheduleKind schedule, const char* planner) {
  const int n = cost.num_layers();
  const int stages = std::min(n, cluster.num_devices());
  DAPPLE_CHECK(stages >= 1);
  const double m = mb.micro_batch_size;
  // Stage s runs on device s; its compute is that device's time.
  // Devices of one kind cost the same (CostModel::DeviceKind): when the stages' devices
  // are all of device 0's kind, each layer range is asked once.
  bool alike = true;
  for (int k = 1; k < stages; ++k) alike = alike && cost.DeviceKind(k) == cost.DeviceKind(0);
  std::vector<double> asked(alike ? static_cast<size_t>(n) * n : 0, -1.0);
  auto work = [&](int first, int last, int device) {
    double* known = alike ? &asked[static_cast<size_t>(first) * n + last] : nullptr;
    if (known && *known >= 0) return *known;
    const double w =
        cost.ForwardMs(first, last, m, device) + cost.BackwardMs(first, last, m, device);
    if (known) *known = w;
    return w;
  };
  // best[k][j]: smallest max stage work for layers 0..j in k+1 stages; cut[k][j]: the last
  // layer of stage k-1. Linear partition, O(S N^2).
  const double inf = 1e300;
  std::vector<std::vector<double>> best(stages, std::vector<double>(n, inf));
  std::vector<std::vector<int>> cut(stages, std::vector<int>(n, -1));
  for (int j = 0; j < n; ++j) best[0][j] = work(0, j, 0);
  for (int k = 1; k < stages; ++k) {
    for (int j = k; j < n; ++j) {
      for (int i = k - 1; i < j; ++i) {  // stage k = layers i+1..j
        double v = std::max(best[k - 1][i], work(i + 1, j, k));
        if (v < best[k][j]) {
          best[k][j] = v;
          cut[k][j] = i;
        }
      }
    }
  }
  Plan p;
  p.planner = planner;
  p.micro_batch_size = mb.micro_batch_size;
  p.num_micro_batches = mb.num_micro_batches;
  p.global_batch_size = mb.micro_batch_size * mb.num_micro_batches;
  p.schedule = schedule;
  p.stages.resize(stages);
  int j = n - 1;
  for (int k = stages - 1; k >= 0; --k) {
    int i = k > 0 ? cut[k][j] : -1;
    p.stages[k].first_layer = i + 1;
    p.stages[k].last_layer = j;
    p.stages[k].devices = {k};
    j = i;
  }
  return p;
}

}  // namespace dapple
