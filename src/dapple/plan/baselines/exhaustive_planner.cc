// Exhaustive search (ground truth for small and medium problems): see exhaustive.h.
//
// Note [Exhaustive branch and bound]
// Stages are placed back to front: a branch is a suffix of stages (layers [first, L) on
// their devices) and the layers [0, first) still to place on the free devices. A branch
// is cut when a lower bound of every plan completing it is no faster than the best plan
// found (`result`), and a complete plan is not simulated when PipelineLowerBound proves it
// no faster; a simulation stops once it proves the plan slower (SimulateSlowerThan). The
// bound of a branch is PipelineLowerBound's over the suffix, with the unplaced layers at
// their floors (ComputeFloors: the least forward and backward any stage can give them)
// in front, and the unplaced layers' least compute shared by the free devices. Each is at
// most what the whole plan's bound or simulation gives, so the optimum's time is that of
// the search without cuts (tests/plan/exhaustive_test.cc checks it against that brute
// force). The micro-batch sizes whose MicroBatchLowerBound is no faster than the best are
// skipped, and the others are searched in the order of that bound, so that a fast plan is
// found early.
#include <algorithm>
#include <limits>
#include <utility>

#include "dapple/common/error.h"
#include "dapple/format/cluster_kinds.h"
#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/baselines/exhaustive_v.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/search/compute_floors.h"
#include "dapple/plan/search/slower_than.h"
#include "dapple/schedule/schedule.h"
#include "dapple/sim/simulator.h"

namespace dapple {
namespace {

using internal::KeepIfFaster;

struct ExhaustiveSearch {
  ExhaustiveSearch(const CostModel& c, const Cluster& cl, ExhaustiveResult* r)
      : cost(c), cluster(cl), identical(IdenticalServers(cl)), result(r) {
    usage.assign(cl.num_servers(), 0);
    free_devices = cl.num_devices();
  }
  const CostModel& cost;
  const Cluster& cluster;
  bool identical;
  bool mixed = MixedDevices(cluster);  // several kinds of device (format/cluster_kinds.h)
  int m = 1, M = 1;
  ScheduleKind schedule = ScheduleKind::kDappleA;
  bool allreduce_overlap = true;
  std::vector<bool> forward_timed;  // may a stage re-compute (CanRecompute)
  bool prune = true;
  ComputeFloors floors;  // of micro-batch size m
  // Stages placed so far, back to front, with their costs and the transfer from each
  // stage to the one placed before it (transfer_ms[i]: stages[i] to stages[i - 1]).
  std::vector<StagePlan> stages;
  std::vector<StageCost> costs;
  std::vector<double> transfer_ms;
  std::vector<int> usage;
  int free_devices = 0;
  ExhaustiveResult* result;
  double min_memory = 1e300;

  void Leaf() {
    Plan p = ExhaustiveLeafPlan(m, M, schedule, allreduce_overlap);
    p.stages.assign(stages.rbegin(), stages.rend());
    const bool have = result->plan.has_value();
    SimResult r;
    // zb-h1 holds min(S, M) micro-batches on every stage, known only now that S is (the
    // other schedules' stages were checked as they were placed).
    if (prune) {
      const PlanCosts pc = FitLeaf(p);
      if (!pc.fits) return;
      if (have && PipelineLowerBound(p, pc) >= result->iteration_ms) {
        ++result->pruned;
        return;
      }
      r = SimulateSlowerThan(p, cost,
                             have ? result->iteration_ms : std::numeric_limits<double>::infinity());
    } else {
      if (SplitsBackward(schedule) && !FitLeaf(p).fits) return;
      r = SimulatePlan(p, cost, SimOptions{.record_timeline = false});
    }
    ++result->simulated;
    if (!r.stopped) KeepIfFaster(std::move(p), r, *result);
  }

  // Note [Exhaustive branch and bound]: a lower bound of every plan whose stages after
  // layer first - 1 are `stages`, the layers [0, first) on the free devices.
  double BranchBound(int first) const {
    if (first > 0 && free_devices == 0) return std::numeric_limits<double>::infinity();
    const bool split = SplitsBackward(schedule);
    auto tail = [](const StageCost& c) { return c.allreduce_exposed_ms + c.update_ms; };
    const double first_tail = first == 0 ? tail(costs.back()) : 0.0;  // stage 0's, when placed
    // PipelineLowerBound over the stages front to back, the unplaced layers' floors first
    // (their stages' allreduce, update and transfers taken as 0).
    double lb = 0, start = floors.forward[first], back = floors.backward[first];
    for (size_t i = stages.size(); i-- > 0;) {
      const StageCost& c = costs[i];
      const double after = std::max(tail(c), split ? 0.0 : back + first_tail);
      lb = std::max(lb, start + M * (c.forward_ms + c.backward_ms) + after);
      start += c.forward_ms + transfer_ms[i];
      if (!split) back += c.backward_ms;
    }
    // The unplaced layers' compute, shared by the free devices.
    if (first > 0) lb = std::max(lb, M * floors.work[first] / free_devices);
    return lb;
  }

  // Places `sp` (cost `c`, `to_next` to the stage after it, `take` devices of each server),
  // searches the layers before it unless the bound proves them slower, and takes it back.
  void PlaceAndRecurse(StagePlan sp, const StageCost& c, double to_next,
                       const std::vector<int>& take) {
    const int first = sp.first_layer, placed = static_cast<int>(sp.devices.size());
    stages.push_back(std::move(sp));
    costs.push_back(c);
    transfer_ms.push_back(to_next);
    for (size_t x = 0; x < take.size(); ++x) usage[x] += take[x];
    free_devices -= placed;
    if (!prune || !result->plan || BranchBound(first) < result->iteration_ms) {
      if (first == 0) {
        Leaf();
      } else {
        Recurse(first - 1);
      }
    } else {
      ++result->pruned;
    }
    free_devices += placed;
    for (size_t x = 0; x < take.size(); ++x) usage[x] -= take[x];
    stages.pop_back();
    costs.pop_back();
    transfer_ms.pop_back();
  }

  // Note [Exhaustive re-computation]: a stage that does not fit re-computes the layers
  // ChooseStageRecompute picks (the least extra forward that fits, from every subset of up to
  // kExhaustiveLayers layers), as it would hold its peaks as stage 0 of the pipeline of the
  // stages placed so far and itself. Without a split backward that is its count; with one
  // the fewest it could hold, so that its cost stays a lower bound for the cuts, and the leaf
  // chooses again for the stages that do not fit with the pipeline's true depth (FitLeaf).
  void Recompute(StagePlan& sp, int k, StageCost& c) const {
    const int after = static_cast<int>(stages.size());
    const bool split = SplitsBackward(schedule);
    const std::vector<HeldMicroBatches> held = HeldAtPeaks(schedule, 0, after + 1, M);
    ChooseStageRecompute(sp, cost, m, held, split, c.device_memory_bytes - c.static_bytes,
                         forward_timed);
    if (sp.recompute)
      c = EvaluateStage(cost, sp.first_layer, sp.last_layer, sp.devices, m, k, true,
                        allreduce_overlap, false, sp.shard_optimizer);
    ChargeStageRecompute(cost, sp, sp.recompute, m, held, split, c);
  }

  // The leaf's costs; with a split backward its stages that do not fit at the pipeline's
  // depth first choose their re-computation again (Note [Exhaustive re-computation]).
  PlanCosts FitLeaf(Plan& p) const {
    PlanCosts pc = EvaluatePlan(p, cost);
    if (pc.fits || !SplitsBackward(schedule)) return pc;
    const int S = p.num_stages();
    for (int s = 0; s < S; ++s) {
      StagePlan& st = p.stages[s];
      if (pc.stages[s].fits() || !CanRecompute(forward_timed, st.first_layer, st.last_layer))
        continue;
      st.recompute = false;
      st.recompute_layers.clear();
      const StageCost c = EvaluateStage(cost, st.first_layer, st.last_layer, st.devices, m,
                                        PeakInFlight(schedule, s, S, M), false, allreduce_overlap,
                                        false, st.shard_optimizer);
      ChooseStageRecompute(st, cost, m, HeldAtPeaks(schedule, s, S, M), true,
                           c.device_memory_bytes - c.static_bytes, forward_timed);
    }
    return EvaluatePlan(p, cost);
  }

  // Places the stage ending at layer `last` (all layers after it are placed).
  void Recurse(int last) {
    const int k = WarmupDepth(schedule, 0, static_cast<int>(stages.size()) + 1, M);
    // Every take vector of 1 to m devices (mirror images of identical servers once).
    internal::ForEachTake(cluster, usage, m, identical,
                          [&](const std::vector<int>& take) { PlaceEach(last, k, take); });
  }

  // Places the stage ending at layer `last` on `take` devices of each server (warm-up depth
  // k), each first layer in turn.
  void PlaceEach(int last, int k, const std::vector<int>& take) {
    std::vector<int> devs = DevicesOf(cluster, usage, take);
    if (mixed) FastestFirst(cluster, devs);  // as the DP lists them (placement.h)
    // The transfer to the stage after depends on neither the first layer nor the costs.
    const double to_next =
        stages.empty() ? 0 : cost.TransferMs(last, m, devs, stages.back().devices);
    const bool split = SplitsBackward(schedule);
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
      // I + W, possibly less than B; no hiding assumed
      const double split_ms = split ? SplitBackwardMs(cost, first, last, devs, m) : 0.0;
      // A stage's M (F + B) only grows with its layers: once it is no faster than the
      // best plan, neither is any stage with more of them (re-computation adds to it).
      if (prune && result->plan &&
          M * (c.forward_ms + (split ? std::min(c.backward_ms, split_ms) : c.backward_ms)) >=
              result->iteration_ms) {
        ++result->pruned;
        break;
      }
      StagePlan sp;
      sp.first_layer = first;
      sp.last_layer = last;
      sp.devices = devs;
      sp.shard_optimizer = shard;
      if (!c.fits() && CanRecompute(forward_timed, first, last)) Recompute(sp, k, c);
      if (!c.fits()) {
        min_memory = std::min(min_memory, c.memory_bytes);
        continue;
      }
      if (split) {
        c.backward_ms = std::min(c.backward_ms, split_ms + c.recompute_ms);
        c.allreduce_exposed_ms = 0;
      }
      PlaceAndRecurse(std::move(sp), c, to_next, take);
    }
  }
};

// Simulates `p` and keeps it in `result` when it fits and is faster.
void Consider(Plan p, const CostModel& cost, ExhaustiveResult& result) {
  if (!EvaluatePlan(p, cost).fits) return;
  const SimResult r = SimulatePlan(p, cost, SimOptions{.record_timeline = false});
  ++result.simulated;
  KeepIfFaster(std::move(p), r, result);
}

// A first best plan for the cuts (Note [Exhaustive branch and bound]): data parallelism,
// the straight pipeline and the even-width pipelines of every size and schedule. Only the
// time of the optimum matters to the cuts, so any plan serves; these cost little.
void Seed(const CostModel& cost, const Cluster& cluster, int global_batch,
          const std::vector<std::pair<double, int>>& sizes,
          const std::vector<ScheduleKind>& schedules, bool allreduce_overlap,
          ExhaustiveResult& result) {
  for (const auto& [size_bound, m] : sizes) {
    const MicroBatching mb{m, global_batch / m};
    std::vector<Plan> plans = EvenWidthPlans(cost, cluster, mb);
    plans.push_back(BalancedPipelinePlan(cost, cluster, mb, ScheduleKind::kDappleA, "straight"));
    if (auto dp = DataParallelPlan(cluster, cost.num_layers(), mb)) plans.push_back(*dp);
    for (Plan& p : plans) {
      p.allreduce_overlap = allreduce_overlap;
      for (ScheduleKind kind : schedules) {
        if (VShaped(kind)) continue;  // plans of one chunk
        p.schedule = kind;
        Consider(p, cost, result);
      }
    }
  }
}

}  // namespace

namespace internal {

void KeepIfFaster(Plan p, const SimResult& r, ExhaustiveResult& result) {
  if (result.plan && r.iteration_ms >= result.iteration_ms) return;
  result.iteration_ms = r.iteration_ms;
  p.planner = "exhaustive";
  p.estimate = PlanEstimate{};
  p.estimate->iteration_ms = r.iteration_ms;
  p.estimate->speedup = r.speedup;
  p.estimate->bubble_fraction = r.bubble_fraction;
  result.plan = std::move(p);
}

}  // namespace internal

ExhaustiveResult ExhaustivePlan(const CostModel& cost, const Cluster& cluster, int global_batch,
                                const std::vector<int>& micro_batch_sizes,
                                const std::vector<ScheduleKind>& schedules, bool allreduce_overlap,
                                const std::vector<bool>& forward_timed, bool prune,
                                const Plan* start) {
  ExhaustiveResult result;
  if (prune && start) Consider(*start, cost, result);
  double min_memory = 1e300;
  // The sizes by MicroBatchLowerBound, smallest first (ties by size): a fast plan early cuts
  // more (Note [Exhaustive branch and bound]). Without cuts, in the order given.
  std::vector<std::pair<double, int>> sizes;
  for (int m : micro_batch_sizes)
    if (m >= 1 && global_batch % m == 0)
      sizes.push_back({prune ? MicroBatchLowerBound(cost, global_batch, m) : 0.0, m});
  std::stable_sort(sizes.begin(), sizes.end());
  if (prune) Seed(cost, cluster, global_batch, sizes, schedules, allreduce_overlap, result);
  for (const auto& [size_bound, m] : sizes) {
    if (prune && result.plan && size_bound >= result.iteration_ms) {
      ++result.pruned;
      continue;
    }
    const ComputeFloors floors = ComputeFloorsFor(cost, m);
    for (ScheduleKind kind : schedules) {
      if (VShaped(kind)) {  // Note [Exhaustive V shapes] in exhaustive_v.cc
        min_memory = std::min(min_memory,
                              internal::ExhaustiveVShapes(cost, cluster, m, global_batch / m, kind,
                                                          allreduce_overlap, prune, result));
        continue;
      }
      ExhaustiveSearch search(cost, cluster, &result);
      search.m = m;
      search.M = global_batch / m;
      search.schedule = kind;
      search.allreduce_overlap = allreduce_overlap;
      search.forward_timed = forward_timed;
      search.prune = prune;
      search.floors = floors;
      search.Recurse(cost.num_layers() - 1);
      min_memory = std::min(min_memory, search.min_memory);
    }
  }
  if (!result.plan) result.min_memory_bytes = min_memory;
  return result;
}

}  // namespace dapple
