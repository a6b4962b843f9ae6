// Simulator re-scoring of proposed plans: see rescoring.h.
#include "dapple/plan/search/rescoring.h"

#include <algorithm>
#include <numeric>

#include "dapple/common/error.h"
#include "dapple/plan/search/slower_than.h"

namespace dapple {
namespace {

// The plan's simulation without a timeline, from `cache` when there is one; it may stop
// once it proves the plan slower than stop_above_ms.
SimResult SimulateWithCache(const Plan& plan, const CostModel& cost, SimCache* cache,
                            double stop_above_ms, bool uncontended_first = true) {
  return cache ? cache->Simulate(plan, cost, stop_above_ms, uncontended_first)
               : SimulateSlowerThan(plan, cost, stop_above_ms, uncontended_first);
}
// A simulated plan with its estimate filled: time, speedup, L, pivot, peak memory.
Scored MakeScored(const Plan& plan, const Origin& origin, SimResult r, PlanCosts costs,
                  const CostModel& cost);

}  // namespace

bool SimulatedFits(const SimResult& r, const CostModel& cost) {
  bool fits = true;
  for (const DeviceStats& d : r.devices)
    fits = fits && d.peak_memory_bytes <= cost.DeviceMemoryBytes(d.device) * (1 + 1e-12);
  return fits;
}

Selection SelectFastest(const std::vector<Proposal>& proposals, const CostModel& cost,
                        bool ignore_memory, SimCache* cache, double faster_than) {
  Selection sel;
  struct Item {
    double lb;
    size_t index;
    PlanCosts costs;
  };
  std::vector<Item> items;
  double leanest = 0;
  for (size_t i = 0; i < proposals.size(); ++i) {
    PlanCosts pc = proposals[i].costs ? *proposals[i].costs : EvaluatePlan(proposals[i].plan, cost);
    if (!pc.fits && !ignore_memory) {
      if (leanest == 0 || pc.peak_memory_bytes < leanest) leanest = pc.peak_memory_bytes;
      continue;
    }
    // The larger of the two lower bounds (plan_costs.h): the pipeline's is mostly the
    // tighter, so the likely winners come first and the runs after them stop sooner.
    const double lb = std::max(IterationLowerBound(pc, proposals[i].plan.num_micro_batches),
                               PipelineLowerBound(proposals[i].plan, pc));
    items.push_back({lb, i, std::move(pc)});
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.lb < b.lb; });
  size_t best_index = 0;
  // What a proposal must not exceed to win: the best's time, else faster_than.
  const double bar = faster_than;
  for (Item& it : items) {
    if (it.lb > (sel.best ? sel.best->sim.iteration_ms : bar)) break;
    const Plan& plan = proposals[it.index].plan;
    // A plan slower than the best cannot win: its run may stop once that is proved.
    SimResult r = SimulateWithCache(plan, cost, cache, sel.best ? sel.best->sim.iteration_ms : bar);
    ++sel.simulated;
    if (r.stopped || r.iteration_ms >= faster_than) continue;
    if (!ignore_memory && !SimulatedFits(r, cost)) {
      if (leanest == 0 || it.costs.peak_memory_bytes < leanest)
        leanest = it.costs.peak_memory_bytes;
      continue;
    }
    bool better = !sel.best || r.iteration_ms < sel.best->sim.iteration_ms ||
                  (r.iteration_ms == sel.best->sim.iteration_ms && it.index < best_index);
    if (!better) continue;
    best_index = it.index;
    sel.best =
        MakeScored(plan, proposals[it.index].origin, std::move(r), std::move(it.costs), cost);
  }
  sel.leanest_unfit_memory_bytes = leanest;
  return sel;
}

std::optional<Scored> ScoreFitting(const Plan& plan, PlanCosts costs, const CostModel& cost,
                                   SimCache* cache, double stop_above_ms, bool uncontended_first) {
  DAPPLE_CHECK(costs.fits);
  SimResult r = SimulateWithCache(plan, cost, cache, stop_above_ms, uncontended_first);
  if (r.stopped || !SimulatedFits(r, cost)) return std::nullopt;
  return MakeScored(plan, "", std::move(r), std::move(costs), cost);
}

namespace {

Scored MakeScored(const Plan& plan, const Origin& origin, SimResult r, PlanCosts costs,
                  const CostModel& cost) {
  Scored s{plan, origin, std::move(r), std::move(costs)};
  PlanEstimate e;
  e.iteration_ms = s.sim.iteration_ms;
  e.speedup = s.sim.speedup;
  e.bubble_fraction = s.sim.bubble_fraction;
  e.latency_ms = s.costs.latency.latency_ms;
  e.pivot_stage = s.costs.pivot_stage;
  e.stage_peak_memory_bytes.assign(plan.num_stages(), 0.0);
  for (int st = 0; st < plan.num_stages(); ++st)
    e.stage_peak_memory_bytes[st] = s.costs.stages[st].memory_bytes;
  for (const DeviceStats& d : s.sim.devices) {
    if (d.stage >= 0 && d.stage < plan.num_stages())
      e.stage_peak_memory_bytes[d.stage] =
          std::max(e.stage_peak_memory_bytes[d.stage], d.peak_memory_bytes);
    e.process_memory_bytes = std::max(e.process_memory_bytes, cost.ProcessMemoryBytes(d.device));
  }
  s.plan.estimate = std::move(e);
  return s;
}

}  // namespace

}  // namespace dapple
