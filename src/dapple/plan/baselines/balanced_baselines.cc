// Data parallelism and the balanced one-device-per-stage pipelines: see baselines.h.
#include <algorithm>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/plan_costs.h"

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

const GroupWorkCache::Table& GroupWorkCache::TableFor(const CostModel& cost, int m,
                                                      const std::vector<int>& group) {
  std::vector<int> devices;  // one device per kind, the first of each
  std::vector<int> kinds;    // their kinds, ascending
  for (int d : group) {
    const int kind = cost.DeviceKind(d);
    if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end()) continue;
    kinds.push_back(kind);
    devices.push_back(d);
  }
  std::sort(kinds.begin(), kinds.end());
  const int width = static_cast<int>(group.size());
  auto [it, fresh] = tables_.try_emplace({m, width, std::move(kinds)});
  Table& t = it->second;
  if (!fresh) return t;
  const int n = cost.num_layers();
  const double slice = SamplesPerReplica(m, width);
  t.layers = n;
  t.work.assign(static_cast<size_t>(n) * n, 0.0);
  for (int first = 0; first < n; ++first) {
    for (int last = first; last < n; ++last) {
      double w = 0;
      for (int d : devices)
        w = std::max(
            w, cost.ForwardMs(first, last, slice, d) + cost.BackwardMs(first, last, slice, d));
      t.work[static_cast<size_t>(first) * n + last] = w;
    }
  }
  return t;
}

Plan BalancedPlanOnGroups(const CostModel& cost, const std::vector<std::vector<int>>& groups,
                          MicroBatching mb, ScheduleKind schedule, const char* planner,
                          GroupWorkCache* cache) {
  const int n = cost.num_layers();
  const int stages = static_cast<int>(groups.size());
  DAPPLE_CHECK(stages >= 1 && stages <= n);
  // Stage k's compute is that of its slowest replica: one device of each kind of its group
  // with the largest slice. Groups of one width and kinds cost alike: each layer range is
  // asked once per such class (GroupWorkCache).
  GroupWorkCache own;
  GroupWorkCache& known = cache ? *cache : own;
  std::vector<const GroupWorkCache::Table*> tables(stages);
  for (int k = 0; k < stages; ++k)
    tables[k] = &known.TableFor(cost, mb.micro_batch_size, groups[k]);
  auto work = [&](int first, int last, int k) { return tables[k]->Work(first, last); };
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
    p.stages[k].devices = groups[k];
    j = i;
  }
  return p;
}

Plan BalancedPipelinePlan(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                          ScheduleKind schedule, const char* planner) {
  const int stages = std::min(cost.num_layers(), cluster.num_devices());
  DAPPLE_CHECK(stages >= 1);
  std::vector<std::vector<int>> groups(stages);
  for (int k = 0; k < stages; ++k) groups[k] = {k};  // stage s on device s
  return BalancedPlanOnGroups(cost, groups, mb, schedule, planner);
}

std::vector<Plan> EvenWidthPlans(const CostModel& cost, const Cluster& cluster, MicroBatching mb) {
  const int n = cost.num_layers(), N = cluster.num_devices();
  std::vector<Plan> plans;
  GroupWorkCache cache;  // the stage counts share widths
  for (int k = 2; k <= std::min(n, N - 1); ++k) {
    const int width = std::min(N / k, mb.micro_batch_size);
    const int wider = N / k < mb.micro_batch_size ? N % k : 0;  // stages one device wider
    // The wider stages first, and (when there are some) last.
    for (bool wider_first : {true, false}) {
      if (!wider_first && wider == 0) break;
      std::vector<std::vector<int>> groups(k);
      int next = 0;  // devices in id order, server after server
      for (int s = 0; s < k; ++s) {
        const bool wide = wider_first ? s < wider : s >= k - wider;
        for (int i = 0; i < width + (wide ? 1 : 0); ++i) groups[s].push_back(next++);
        FastestFirst(cluster, groups[s]);
      }
      plans.push_back(
          BalancedPlanOnGroups(cost, groups, mb, ScheduleKind::kDappleA, "even-widths", &cache));
    }
  }
  return plans;
}

}  // namespace dapple
