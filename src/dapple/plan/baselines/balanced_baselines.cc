// Data parallelism and the balanced one-device-per-stage pipelines: see baselines.h.
#include <algorithm>
#include <tuple>
#include <utility>
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
  const int slice = SamplesPerReplica(m, static_cast<int>(group.size()));
  std::pair<int, std::vector<int>> key{slice, std::move(kinds)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = tables_.find(key); it != tables_.end()) return *it->second;
  }
  // Made unlocked: two threads may both make one table (equal), the first stored is kept.
  auto t = std::make_unique<Table>();
  const int n = cost.num_layers();
  t->layers = n;
  t->work.assign(static_cast<size_t>(n) * n, 0.0);
  for (int first = 0; first < n; ++first) {
    for (int last = first; last < n; ++last) {
      double w = 0;
      for (int d : devices)
        w = std::max(
            w, cost.ForwardMs(first, last, slice, d) + cost.BackwardMs(first, last, slice, d));
      t->work[static_cast<size_t>(first) * n + last] = w;
    }
  }
  t->shrinks_from_left = true;
  for (int last = 0; last < n; ++last)
    for (int first = 0; first < last; ++first)
      t->shrinks_from_left =
          t->shrinks_from_left && t->Work(first, last) >= t->Work(first + 1, last);
  std::lock_guard<std::mutex> lock(mu_);
  return *tables_.try_emplace(std::move(key), std::move(t)).first->second;
}

namespace {

// Note [Bisecting the cuts]
// The linear partition's step: stage k = layers i+1..j after the best of layers 0..i in k
// stages, v(i) = max(before[i], Work(i+1, j)) over i in [lo, j-1]; the smallest v, ties to
// the earliest i. When before[] does not decrease on [lo, j-1] and the table shrinks from the
// left (Work(i+1, j) does not increase with i), v falls (as Work) up to the first i where
// before[i] >= Work(i+1, j), call it c, and rises (as before[]) from there: the smallest v is
// Work(c, j) at c - 1 or before[c] at c, and the earliest i with it is found by bisection.
// The same value and cut as the scan over every i (the same doubles compared), in O(log n)
// instead of O(n): EvenWidthPlans partitions each stage count of each micro-batch size.
std::pair<double, int> BisectCut(const std::vector<double>& before, const GroupWorkCache::Table& t,
                                 int lo, int j) {
  auto w = [&](int i) { return t.Work(i + 1, j); };
  // The first i in [a, b) where pred holds, for a pred false then true; b when none.
  auto first_where = [](int a, int b, auto pred) {
    while (a < b) {
      const int mid = a + (b - a) / 2;
      if (pred(mid))
        b = mid;
      else
        a = mid + 1;
    }
    return a;
  };
  const int hi = j;  // candidates [lo, hi)
  const int c = first_where(lo, hi, [&](int i) { return before[i] >= w(i); });
  if (c == lo) return {before[c], c};
  const double falling = w(c - 1);  // v(c - 1); v(i) = w(i) on [lo, c)
  if (c < hi && before[c] < falling) return {before[c], c};
  return {falling, first_where(lo, c, [&](int i) { return w(i) <= falling; })};
}

// Whether v does not decrease on [from, to).
bool NonDecreasing(const std::vector<double>& v, int from, int to) {
  for (int i = from + 1; i < to; ++i)
    if (v[i] < v[i - 1]) return false;
  return true;
}

}  // namespace

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
    // Note [Bisecting the cuts]: the same cuts as the scan below, sooner.
    const bool bisect = tables[k]->shrinks_from_left && NonDecreasing(best[k - 1], k - 1, n - 1);
    for (int j = k; j < n; ++j) {
      if (bisect) {
        std::tie(best[k][j], cut[k][j]) = BisectCut(best[k - 1], *tables[k], k - 1, j);
        continue;
      }
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

std::vector<Plan> EvenWidthPlans(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                                 GroupWorkCache* cache, const std::vector<int>* device_order,
                                 const char* planner) {
  const int n = cost.num_layers(), N = cluster.num_devices();
  std::vector<int> ids(N);
  for (int d = 0; d < N; ++d) ids[d] = d;
  const std::vector<int>& devices = device_order ? *device_order : ids;
  DAPPLE_CHECK(static_cast<int>(devices.size()) == N);
  std::vector<Plan> plans;
  GroupWorkCache own;  // the stage counts share widths
  GroupWorkCache& known = cache ? *cache : own;
  for (int k = 2; k <= std::min(n, N - 1); ++k) {
    const int width = std::min(N / k, mb.micro_batch_size);
    const int wider = N / k < mb.micro_batch_size ? N % k : 0;  // stages one device wider
    // The wider stages first, and (when there are some) last.
    for (bool wider_first : {true, false}) {
      if (!wider_first && wider == 0) break;
      std::vector<std::vector<int>> groups(k);
      int next = 0;  // the devices in their order
      for (int s = 0; s < k; ++s) {
        const bool wide = wider_first ? s < wider : s >= k - wider;
        for (int i = 0; i < width + (wide ? 1 : 0); ++i) groups[s].push_back(devices[next++]);
        FastestFirst(cluster, groups[s]);
      }
      plans.push_back(
          BalancedPlanOnGroups(cost, groups, mb, ScheduleKind::kDappleA, planner, &known));
    }
  }
  return plans;
}

std::vector<std::vector<int>> EvenWidthOrders(const Cluster& cluster) {
  std::vector<std::vector<int>> orders;
  const std::vector<ServerOrder> server_orders = ServerOrders(cluster);
  if (server_orders.size() < 2) return orders;  // one kind of device
  for (const ServerOrder& o : server_orders) {
    std::vector<int> devices;
    for (int s : o.servers) {
      const int first = cluster.FirstDeviceOf(s);
      for (int i = 0; i < cluster.servers[s].devices; ++i) devices.push_back(first + i);
    }
    orders.push_back(std::move(devices));
  }
  return orders;
}

}  // namespace dapple
