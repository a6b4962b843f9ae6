// Exhaustive search (ground truth for small problems): see exhaustive.h.
#include <algorithm>
#include <functional>

#include "dapple/common/error.h"
#include "dapple/format/cluster_kinds.h"
#include "dapple/plan/exhaustive.h"
#include "dapple/plan/placement.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/schedule/schedule.h"
#include "dapple/sim/simulator.h"

namespace dapple {
namespace {

struct ExhaustiveSearch {
  ExhaustiveSearch(const CostModel& c, const Cluster& cl, ExhaustiveResult* r)
      : cost(c), cluster(cl), identical(IdenticalServers(cl)), result(r) {
    usage.assign(cl.num_servers(), 0);
  }
  const CostModel& cost;
  const Cluster& cluster;
  bool identical;
  bool mixed = MixedDevices(cluster);  // several kinds of device (format/cluster_kinds.h)
  int m = 1, M = 1;
  ScheduleKind schedule = ScheduleKind::kDappleA;
  bool allreduce_overlap = true;
  std::vector<bool> forward_timed;  // may a stage re-compute (CanRecompute)
  // Stages placed so far, back to front.
  std::vector<StagePlan> stages;
  std::vector<int> usage;
  double partial_lb = 0;
  ExhaustiveResult* result;
  double min_memory = 1e300;

  void Leaf() {
    Plan p;
    p.planner = "exhaustive";
    p.micro_batch_size = m;
    p.num_micro_batches = M;
    p.global_batch_size = m * M;
    p.schedule = schedule;
    p.allreduce_overlap = allreduce_overlap;
    p.stages.assign(stages.rbegin(), stages.rend());
    // zb-h1 holds min(S, M) micro-batches on every stage, known only now that S is.
    if (SplitsBackward(schedule) && !EvaluatePlan(p, cost).fits) return;
    SimResult r = SimulatePlan(p, cost, SimOptions{.record_timeline = false});
    ++result->simulated;
    if (!result->plan || r.iteration_ms < result->iteration_ms) {
      result->iteration_ms = r.iteration_ms;
      p.estimate = PlanEstimate{};
      p.estimate->iteration_ms = r.iteration_ms;
      p.estimate->speedup = r.speedup;
      p.estimate->bubble_fraction = r.bubble_fraction;
      result->plan = std::move(p);
    }
  }

  // Places the stage ending at layer `last` (all layers after it are placed).
  void Recurse(int last) {
    const int after = static_cast<int>(stages.size());
    const int k = WarmupDepth(schedule, 0, after + 1, M);
    const int servers = cluster.num_servers();
    std::vector<int> take(servers, 0);
    // Every take vector with 1 <= sum <= m, take[s] <= free on s, canonical under
    // swapping identical servers (the servers touched so far are 0..t-1).
    std::function<void(int, int)> each = [&](int s, int sum) {
      if (s == servers) {
        if (sum < 1) return;
        if (identical) {
          bool seen_untouched = false;
          for (int x = 0; x < servers; ++x) {
            bool touched = usage[x] + take[x] > 0;
            if (touched && seen_untouched) return;
            if (!touched) seen_untouched = true;
          }
        }
        std::vector<int> devs = DevicesOf(cluster, usage, take);
        if (mixed) FastestFirst(cluster, devs);  // as the DP lists them (placement.h)
        for (int first = last; first >= 0; --first) {
          StageCost c = EvaluateStage(cost, first, last, devs, m, k, false, allreduce_overlap);
          // Sharded where it pays, as the DAPPLE planner shards (ShardWhereItPays), then
          // re-computing where it still does not fit.
          bool shard = false;
          if (devs.size() > 1) {
            StageCost sharded =
                EvaluateStage(cost, first, last, devs, m, k, false, allreduce_overlap, false, true);
            shard = ShardingPays(c, sharded);
            if (shard) c = sharded;
          }
          const bool recompute = !c.fits() && CanRecompute(forward_timed, first, last);
          if (recompute)
            c = EvaluateStage(cost, first, last, devs, m, k, true, allreduce_overlap, false, shard);
          if (!c.fits()) {
            min_memory = std::min(min_memory, c.memory_bytes);
            continue;
          }
          if (SplitsBackward(schedule)) {  // I + W, possibly less than B; no hiding assumed
            c.backward_ms = std::min(c.backward_ms, SplitBackwardMs(cost, first, last, devs, m));
            c.allreduce_exposed_ms = 0;
          }
          double lb = std::max(partial_lb, M * (c.forward_ms + c.backward_ms) +
                                               c.allreduce_exposed_ms + c.update_ms);
          if (result->plan && lb >= result->iteration_ms) continue;
          double saved_lb = partial_lb;
          partial_lb = lb;
          StagePlan sp;
          sp.first_layer = first;
          sp.last_layer = last;
          sp.devices = devs;
          sp.recompute = recompute;
          sp.shard_optimizer = shard;
          stages.push_back(std::move(sp));
          for (int x = 0; x < servers; ++x) usage[x] += take[x];
          if (first == 0) {
            Leaf();
          } else {
            Recurse(first - 1);
          }
          for (int x = 0; x < servers; ++x) usage[x] -= take[x];
          stages.pop_back();
          partial_lb = saved_lb;
        }
        return;
      }
      const int free = cluster.servers[s].devices - usage[s];
      for (int t = 0; t <= free && sum + t <= m; ++t) {
        take[s] = t;
        each(s + 1, sum + t);
      }
      take[s] = 0;
    };
    each(0, 0);
  }
};

}  // namespace

ExhaustiveResult ExhaustivePlan(const CostModel& cost, const Cluster& cluster, int global_batch,
                                const std::vector<int>& micro_batch_sizes,
                                const std::vector<ScheduleKind>& schedules, bool allreduce_overlap,
                                const std::vector<bool>& forward_timed) {
  ExhaustiveResult result;
  double min_memory = 1e300;
  for (int m : micro_batch_sizes) {
    if (m < 1 || global_batch % m != 0) continue;
    for (ScheduleKind kind : schedules) {
      ExhaustiveSearch search(cost, cluster, &result);
      search.m = m;
      search.M = global_batch / m;
      search.schedule = kind;
      search.allreduce_overlap = allreduce_overlap;
      search.forward_timed = forward_timed;
      search.Recurse(cost.num_layers() - 1);
      min_memory = std::min(min_memory, search.min_memory);
    }
  }
  if (!result.plan) result.min_memory_bytes = min_memory;
  return result;
}

}  // namespace dapple
