// The exhaustive search's V shapes: see exhaustive_v.h.
//
// Note [Exhaustive V shapes]
// A V plan of S device groups cuts the layers into 2S chunks, chunk k on group k down the V
// and on group 2S - 1 - k back up (Note [V placement]). The search enumerates, for every S
// with 2S <= layers and S <= devices, every cut into 2S non-empty chunks and every group of
// 1 to m devices on any servers (identical servers' mirror images once), with its own list
// of chunks and groups: it takes nothing from the planner's V shapes (Note [V shapes from a
// plan]). As the planner's V plans, its plans neither re-compute nor shard. A plan fits when
// EvaluatePlan says so and the simulator's peak fits every device (the planner's rule,
// SelectFastest), and its time is the simulator's.
// Chunks are placed back to front: chunks 2S - 1 .. S open groups 0 .. S - 1 on free
// devices, then chunks S - 1 .. 0 go back onto groups S - 1 .. 0. The bound of a branch
// holds for any order of a V schedule's instructions: every device of group g computes its
// chunks' M micro-batches (F + the lesser of B and I + W: Beff) one at a time, and none before
// micro-batch 0 has come forward through the layers before chunk g, which take at least their
// forward floors (ComputeFloors; chunk g starts at layer g at the earliest while unplaced).
// Transfers, allreduce and updates count as 0. A group's work is the sum of its chunks'
// slowest replicas', the same device for both where a layer's compute grows with its slice
// and shrinks with the device's speed alike for every layer (as the cost models have it). It
// only grows with a chunk's layers, so once it reaches the best time no longer chunk is
// tried.
// tests/plan/exhaustive_v_test.cc checks the optimum against the search without cuts.
#include "dapple/plan/baselines/exhaustive_v.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "dapple/format/cluster_kinds.h"
#include "dapple/format/message_tags.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/search/compute_floors.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/search/slower_than.h"

namespace dapple::internal {
namespace {

struct VSearch {
  VSearch(const CostModel& c, const Cluster& cl, ExhaustiveResult& r)
      : cost(c), cluster(cl), result(r) {}
  const CostModel& cost;
  const Cluster& cluster;
  ExhaustiveResult& result;
  int m = 1, M = 1, S = 1;
  ScheduleKind kind = ScheduleKind::kZbV;
  bool allreduce_overlap = true, prune = true;
  bool identical = IdenticalServers(cluster);
  bool mixed = MixedDevices(cluster);
  ComputeFloors floors;
  std::vector<StagePlan> chunks;        // by virtual stage k, those placed
  std::vector<std::vector<int>> takes;  // group g's devices taken on each server
  std::vector<double> group_work;       // M (F + Beff) of group g's placed chunks
  std::vector<int> usage;
  double min_memory = 1e300;

  double Best() const {
    return result.plan ? result.iteration_ms : std::numeric_limits<double>::infinity();
  }

  // Note [Exhaustive V shapes]: a lower bound of every plan completing the placed chunks
  // k..2S-1.
  double Bound(int k) const {
    double lb = 0;
    for (int g = 0; g < S; ++g) {
      if (takes[g].empty()) continue;  // not opened yet: no work placed on it
      const int first = g >= k ? chunks[g].first_layer : g;
      lb = std::max(lb, floors.forward[first] + group_work[g]);
    }
    return lb;
  }

  // M (F + Beff) of layers [first, last] on `devices`.
  double ChunkWork(int first, int last, const std::vector<int>& devices) const {
    const StageCost c = EvaluateStage(cost, first, last, devices, m, 1, false, allreduce_overlap);
    const double split = SplitBackwardMs(cost, first, last, devices, m);
    return M * (c.forward_ms + std::min(c.backward_ms, split));
  }

  void Leaf() {
    Plan p = ExhaustiveLeafPlan(m, M, kind, allreduce_overlap);
    p.virtual_stages = 2;
    p.stages = chunks;
    const PlanCosts pc = EvaluatePlan(p, cost);
    if (!pc.fits) {
      min_memory = std::min(min_memory, pc.peak_memory_bytes);
      return;
    }
    if (MessageTagError(p, cluster.num_devices())) return;
    const SimResult r = prune ? SimulateSlowerThan(p, cost, Best())
                              : SimulatePlan(p, cost, SimOptions{.record_timeline = false});
    ++result.simulated;
    if (r.stopped) return;
    if (!SimulatedFits(r, cost)) {
      min_memory = std::min(min_memory, pc.peak_memory_bytes);
      return;
    }
    KeepIfFaster(std::move(p), r, result);
  }

  // Places chunk k as layers [first, last] on group g = GroupOfVirtualStage(k), whose work
  // becomes `work`, then the chunks before it unless the bound proves them no faster.
  void PlaceAndRecurse(int k, int first, int last, double work) {
    const int g = GroupOfVirtualStage(k, S, true);
    const double before = group_work[g];
    chunks[k].first_layer = first;
    chunks[k].last_layer = last;
    group_work[g] = work;
    if (prune && result.plan && Bound(k) >= result.iteration_ms) {
      ++result.pruned;
    } else if (k == 0) {
      Leaf();
    } else {
      Chunk(k - 1, first - 1);
    }
    group_work[g] = before;
  }

  // Places chunk k on its group's devices, ending at layer `last`, leaving a layer to each
  // chunk before it.
  void PlaceOnGroup(int k, int last) {
    const int g = GroupOfVirtualStage(k, S, true);
    const std::vector<int>& devices = chunks[k].devices;
    for (int first = k == 0 ? 0 : last; first >= k; --first) {
      const double work = group_work[g] + ChunkWork(first, last, devices);
      if (prune && result.plan && work >= result.iteration_ms) {
        ++result.pruned;  // Note [Exhaustive V shapes]: longer chunks are no faster
        break;
      }
      PlaceAndRecurse(k, first, last, work);
    }
  }

  // Places chunk k ending at layer `last`; chunks k + 1 .. 2S - 1 are placed.
  void Chunk(int k, int last) {
    const int g = GroupOfVirtualStage(k, S, true);
    if (k < S) {  // back up the V: the group is open
      chunks[k].devices = chunks[2 * S - 1 - k].devices;
      PlaceOnGroup(k, last);
      return;
    }
    ForEachTake(cluster, usage, m, identical, [&](const std::vector<int>& take) {
      std::vector<int> devices = DevicesOf(cluster, usage, take);
      if (mixed) FastestFirst(cluster, devices);  // as the DP lists them (placement.h)
      for (size_t x = 0; x < take.size(); ++x) usage[x] += take[x];
      takes[g] = take;
      chunks[k].devices = std::move(devices);
      PlaceOnGroup(k, last);
      takes[g].clear();
      for (size_t x = 0; x < take.size(); ++x) usage[x] -= take[x];
    });
  }
};

}  // namespace

double ExhaustiveVShapes(const CostModel& cost, const Cluster& cluster, int m, int M,
                         ScheduleKind kind, bool allreduce_overlap, bool prune,
                         ExhaustiveResult& result) {
  VSearch search(cost, cluster, result);
  search.m = m;
  search.M = M;
  search.kind = kind;
  search.allreduce_overlap = allreduce_overlap;
  search.prune = prune;
  search.floors = ComputeFloorsFor(cost, m);
  const int n = cost.num_layers();
  for (int S = 1; 2 * S <= n && S <= cluster.num_devices(); ++S) {
    search.S = S;
    search.chunks.assign(2 * S, StagePlan{});
    search.takes.assign(S, {});
    search.group_work.assign(S, 0.0);
    search.usage.assign(cluster.num_servers(), 0);
    search.Chunk(2 * S - 1, n - 1);
  }
  return search.min_memory;
}

void ForEachTake(const Cluster& cluster, const std::vector<int>& usage, int most, bool identical,
                 const std::function<void(const std::vector<int>&)>& f) {
  const int servers = cluster.num_servers();
  std::vector<int> take(servers, 0);
  std::function<void(int, int)> each = [&](int s, int sum) {
    if (s == servers) {
      if (sum < 1) return;
      if (identical) {
        bool seen_untouched = false;
        for (int x = 0; x < servers; ++x) {
          const bool touched = usage[x] + take[x] > 0;
          if (touched && seen_untouched) return;
          if (!touched) seen_untouched = true;
        }
      }
      f(take);
      return;
    }
    const int free = cluster.servers[s].devices - usage[s];
    for (int t = 0; t <= free && sum + t <= most; ++t) {
      take[s] = t;
      each(s + 1, sum + t);
    }
    take[s] = 0;
  };
  each(0, 0);
}

}  // namespace dapple::internal
