// The planner's starts for the refinement and its selection: see SelectStarts in refine.h.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "dapple/plan/plan_costs.h"
#include "dapple/plan/refine/refine.h"

namespace dapple {
namespace {

bool IsKindFirst(const Origin& origin) { return origin.kind_first >= 0; }

bool IsEvenWidths(const Origin& origin) {
  return origin.proposer == kEvenWidthsOrigin && !IsKindFirst(origin);
}

// Note [Even widths in every server order] (proposals.cc): of one order's even-width
// proposals (re-computing or not) that fit, those of the most stages; of them the fastest of
// each stage-width shape (the device count of each stage, in order), at most kDeepStarts of
// them, fastest first. Only the proposals as deep as the deepest that fits are evaluated here.
constexpr int kDeepStarts = 3;

std::vector<Scored> DeepestStarts(const std::vector<Proposal>& proposals, const CostModel& cost,
                                  SimCache* cache, long long& simulated) {
  int most = 0;
  for (const Proposal& p : proposals) most = std::max(most, p.plan.num_stages());
  std::map<std::vector<int>, std::vector<Proposal>> shapes;  // by widths, of the deepest
  for (int depth = most; depth > 0 && shapes.empty(); --depth) {
    for (const Proposal& p : proposals) {
      if (p.plan.num_stages() != depth || !(p.costs ? *p.costs : EvaluatePlan(p.plan, cost)).fits)
        continue;
      std::vector<int> widths;
      for (const StagePlan& s : p.plan.stages) widths.push_back(static_cast<int>(s.devices.size()));
      shapes[widths].push_back(p);
    }
  }
  std::vector<Scored> out;
  for (auto& [widths, group] : shapes) {
    Selection sel = SelectFastest(group, cost, false, cache);
    simulated += sel.simulated;
    if (sel.best) out.push_back(std::move(*sel.best));
  }
  std::stable_sort(out.begin(), out.end(), [](const Scored& a, const Scored& b) {
    return a.sim.iteration_ms < b.sim.iteration_ms;
  });
  if (static_cast<int>(out.size()) > kDeepStarts) out.resize(kDeepStarts);
  return out;
}

}  // namespace

RefineStarts SelectStarts(const std::vector<Proposal>& proposals,
                          const std::vector<Proposal>& loose, const CostModel& cost,
                          const RefineOptions& options, int max_starts) {
  RefineStarts out;
  // Groups by origin, in order of first appearance; re-computing variants in groups of
  // their own.
  std::vector<Origin> order;
  std::map<Origin, std::vector<Proposal>> groups;
  auto add = [&](Proposal p) {
    auto [it, fresh] = groups.try_emplace(p.origin);
    if (fresh) order.push_back(p.origin);
    it->second.push_back(std::move(p));
  };
  const bool may_recompute = !options.forward_timed.empty() &&
                             std::find(options.forward_timed.begin(), options.forward_timed.end(),
                                       true) != options.forward_timed.end();
  ShardMemo own_shard_memo;  // the families' and sizes' proposals share many stages
  ShardMemo& shard_memo = options.shard_memo ? *options.shard_memo : own_shard_memo;
  auto add_recomputing = [&](const Proposal& p) {
    Proposal q = p;
    q.costs.reset();
    if (RecomputeWhereNeeded(q.plan, cost, options.forward_timed, nullptr, nullptr, nullptr,
                             &shard_memo, options.recompute_memo)) {
      q.origin.recompute = true;
      add(std::move(q));
    }
  };
  // Each proposal with its stages sharded where it pays (Note [Optimizer sharding in the
  // planner]), and its costs for SelectFastest; a proposal made without the memory limit
  // when sharding makes it fit.
  auto sharded = [&](const Proposal& p) {
    Proposal q = p;
    ShardWhereItPays(q.plan, cost, &shard_memo);
    q.costs = EvaluatePlan(q.plan, cost, &shard_memo);
    return q;
  };
  // Whether RecomputeWhereNeeded(p) would find nothing to re-compute, from q = sharded(p):
  // when p re-computes nothing (the layer ids cost nothing), it evaluates that same plan, and
  // re-computes only in the stages that do not fit.
  auto fits_as_is = [](const Proposal& p, const Proposal& q) {
    for (int s = 0; s < p.plan.num_stages(); ++s)
      if (p.plan.RecomputesAny(s) || !q.costs->stages[s].fits()) return false;
    return true;
  };
  for (const Proposal& p : proposals) {
    Proposal q = sharded(p);
    const bool recompute = may_recompute && !fits_as_is(p, q);
    add(std::move(q));
    if (recompute) add_recomputing(p);
  }
  for (const Proposal& p : loose) {
    Proposal q = sharded(p);
    const bool recompute = may_recompute && !fits_as_is(p, q);
    if (q.costs->fits) {
      q.origin.shard = true;
      add(std::move(q));
    }
    if (recompute) add_recomputing(p);
  }

  std::vector<Scored>& starts = out.starts;
  // The time an origin's fastest must beat to be kept: the max_starts-th fastest start so far
  // (a tie goes to the earlier origin); SelectFastest need not simulate what cannot.
  std::vector<double> kept_ms;  // the starts' times, ascending
  auto bar = [&] {
    return static_cast<int>(kept_ms.size()) < max_starts ? std::numeric_limits<double>::infinity()
                                                         : kept_ms[max_starts - 1];
  };
  for (const Origin& origin : order) {
    if (IsEvenWidths(origin) || IsKindFirst(origin)) continue;  // below
    Selection sel = SelectFastest(groups[origin], cost, false, options.cache, bar());
    out.simulated += sel.simulated;
    if (!sel.best) continue;
    kept_ms.insert(std::upper_bound(kept_ms.begin(), kept_ms.end(), sel.best->sim.iteration_ms),
                   sel.best->sim.iteration_ms);
    starts.push_back(std::move(*sel.best));
  }
  std::optional<Scored> even;  // the fastest even-widths start, with or without re-computation
  for (const Origin& origin : order) {
    if (!IsEvenWidths(origin)) continue;
    Selection sel = SelectFastest(groups[origin], cost, false, options.cache,
                                  std::min(bar(), even ? even->sim.iteration_ms : bar()));
    out.simulated += sel.simulated;
    if (sel.best) even = std::move(sel.best);
  }
  std::stable_sort(starts.begin(), starts.end(), [](const Scored& a, const Scored& b) {
    return a.sim.iteration_ms < b.sim.iteration_ms;
  });
  if (static_cast<int>(starts.size()) > max_starts) starts.resize(max_starts);
  // Note [Widths across server boundaries] (proposals.cc): one start more, after the others
  // (ties go to them), so the climbs from the other starts are what they were; only when it
  // would have been among them as an origin of its own (faster than the slowest kept).
  if (even && (static_cast<int>(starts.size()) < max_starts ||
               even->sim.iteration_ms < starts.back().sim.iteration_ms))
    starts.push_back(std::move(*even));
  // Note [Even widths in every server order] (proposals.cc): after all of those, order by
  // order (re-computing or not).
  out.deep_from = starts.size();
  std::vector<int> orders;  // kind_first, in order of first appearance
  std::map<int, std::vector<Proposal>> by_order;
  for (const Origin& origin : order) {
    if (!IsKindFirst(origin)) continue;
    auto [it, fresh] = by_order.try_emplace(origin.kind_first);
    if (fresh) orders.push_back(it->first);
    it->second.insert(it->second.end(), groups[origin].begin(), groups[origin].end());
  }
  for (int o : orders)
    for (Scored& s : DeepestStarts(by_order[o], cost, options.cache, out.simulated))
      starts.push_back(std::move(s));
  return out;
}

RefinedSelection Refined(const RefineStarts& starts, const RefineResult& r) {
  RefinedSelection out;
  out.simulated = starts.simulated + r.simulated;
  if (starts.starts.empty()) return out;
  out.best = r.best;
  out.steps = r.steps;
  out.out_of_budget = r.out_of_budget;
  return out;
}

}  // namespace dapple
