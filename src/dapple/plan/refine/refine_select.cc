// The planner's starts for the refinement and its selection: see SelectStarts in refine.h.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

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

// The proposals by origin, in order of first appearance; re-computing variants in groups of
// their own.
struct OriginGroups {
  std::vector<Origin> order;
  std::map<Origin, std::vector<Proposal>> groups;
  void Add(Proposal p) {
    auto [it, fresh] = groups.try_emplace(p.origin);
    if (fresh) order.push_back(p.origin);
    it->second.push_back(std::move(p));
  }
};

// Whether a stage may re-compute at all: the profile times some layer's forward.
bool MayRecompute(const RefineOptions& options) {
  return std::find(options.forward_timed.begin(), options.forward_timed.end(), true) !=
         options.forward_timed.end();
}

// `p` with its stages sharded where it pays (Note [Optimizer sharding in the planner]), and
// its costs for SelectFastest.
Proposal Sharded(const Proposal& p, const CostModel& cost, ShardMemo& shard_memo) {
  Proposal q = p;
  ShardWhereItPays(q.plan, cost, &shard_memo);
  q.costs = EvaluatePlan(q.plan, cost, &shard_memo);
  return q;
}

// Whether RecomputeWhereNeeded(p) would find nothing to re-compute, from q = Sharded(p):
// when p re-computes nothing (the layer ids cost nothing), it evaluates that same plan, and
// re-computes only in the stages that do not fit.
bool FitsAsIs(const Proposal& p, const Proposal& q) {
  for (int s = 0; s < p.plan.num_stages(); ++s)
    if (p.plan.RecomputesAny(s) || !q.costs->stages[s].fits()) return false;
  return true;
}

// `p` re-computing where it needs to, added when it does (an origin of its own).
void AddRecomputing(const Proposal& p, const CostModel& cost, const RefineOptions& options,
                    ShardMemo& shard_memo, OriginGroups& g) {
  Proposal q = p;
  q.costs.reset();
  if (RecomputeWhereNeeded(q.plan, cost, options.forward_timed, nullptr, nullptr, nullptr,
                           &shard_memo, options.recompute_memo)) {
    q.origin.recompute = true;
    g.Add(std::move(q));
  }
}

// Each proposal sharded where it pays, and its re-computing variant where it needs one; a
// proposal made without the memory limit (`loose`) only when sharding makes it fit.
OriginGroups GroupByOrigin(const std::vector<Proposal>& proposals,
                           const std::vector<Proposal>& loose, const CostModel& cost,
                           const RefineOptions& options) {
  OriginGroups g;
  const bool may_recompute = MayRecompute(options);
  ShardMemo own_shard_memo;  // the families' and sizes' proposals share many stages
  ShardMemo& shard_memo = options.shard_memo ? *options.shard_memo : own_shard_memo;
  for (const Proposal& p : proposals) {
    Proposal q = Sharded(p, cost, shard_memo);
    const bool recompute = may_recompute && !FitsAsIs(p, q);
    g.Add(std::move(q));
    if (recompute) AddRecomputing(p, cost, options, shard_memo, g);
  }
  for (const Proposal& p : loose) {
    Proposal q = Sharded(p, cost, shard_memo);
    const bool recompute = may_recompute && !FitsAsIs(p, q);
    if (q.costs->fits) {
      q.origin.shard = true;
      g.Add(std::move(q));
    }
    if (recompute) AddRecomputing(p, cost, options, shard_memo, g);
  }
  return g;
}

// The fastest of each origin but the even widths and the server orders, at most max_starts
// of them, fastest first; then the fastest even-widths start (Note [Widths across server
// boundaries] in proposals.cc).
void AddOriginStarts(OriginGroups& g, const CostModel& cost, const RefineOptions& options,
                     int max_starts, RefineStarts& out) {
  std::vector<Scored>& starts = out.starts;
  // The time an origin's fastest must beat to be kept: the max_starts-th fastest start so far
  // (a tie goes to the earlier origin); SelectFastest need not simulate what cannot.
  std::vector<double> kept_ms;  // the starts' times, ascending
  auto bar = [&] {
    return static_cast<int>(kept_ms.size()) < max_starts ? std::numeric_limits<double>::infinity()
                                                         : kept_ms[max_starts - 1];
  };
  for (const Origin& origin : g.order) {
    if (IsEvenWidths(origin) || IsKindFirst(origin)) continue;  // below
    Selection sel = SelectFastest(g.groups[origin], cost, false, options.cache, bar());
    out.simulated += sel.simulated;
    if (!sel.best) continue;
    kept_ms.insert(std::upper_bound(kept_ms.begin(), kept_ms.end(), sel.best->sim.iteration_ms),
                   sel.best->sim.iteration_ms);
    starts.push_back(std::move(*sel.best));
  }
  std::optional<Scored> even;  // the fastest even-widths start, with or without re-computation
  for (const Origin& origin : g.order) {
    if (!IsEvenWidths(origin)) continue;
    Selection sel = SelectFastest(g.groups[origin], cost, false, options.cache,
                                  std::min(bar(), even ? even->sim.iteration_ms : bar()));
    out.simulated += sel.simulated;
    if (sel.best) even = std::move(sel.best);
  }
  std::stable_sort(starts.begin(), starts.end(), [](const Scored& a, const Scored& b) {
    return a.sim.iteration_ms < b.sim.iteration_ms;
  });
  if (static_cast<int>(starts.size()) > max_starts) starts.resize(max_starts);
  // One start more, after the others (ties go to them), so the climbs from the other starts
  // are what they were; only when it would have been among them as an origin of its own
  // (faster than the slowest kept).
  if (even && (static_cast<int>(starts.size()) < max_starts ||
               even->sim.iteration_ms < starts.back().sim.iteration_ms))
    starts.push_back(std::move(*even));
}

// Note [Even widths in every server order] (proposals.cc): after all of those, order by
// order (re-computing or not), DeepestStarts of each.
void AddDeepStarts(OriginGroups& g, const CostModel& cost, const RefineOptions& options,
                   RefineStarts& out) {
  std::vector<int> orders;  // kind_first, in order of first appearance
  std::map<int, std::vector<Proposal>> by_order;
  for (const Origin& origin : g.order) {
    if (!IsKindFirst(origin)) continue;
    auto [it, fresh] = by_order.try_emplace(origin.kind_first);
    if (fresh) orders.push_back(it->first);
    it->second.insert(it->second.end(), g.groups[origin].begin(), g.groups[origin].end());
  }
  for (int o : orders)
    for (Scored& s : DeepestStarts(by_order[o], cost, options.cache, out.simulated))
      out.starts.push_back(std::move(s));
}

}  // namespace

RefineStarts SelectStarts(const std::vector<Proposal>& proposals,
                          const std::vector<Proposal>& loose, const CostModel& cost,
                          const RefineOptions& options, int max_starts) {
  RefineStarts out;
  OriginGroups g = GroupByOrigin(proposals, loose, cost, options);
  AddOriginStarts(g, cost, options, max_starts, out);
  out.deep_from = out.starts.size();
  AddDeepStarts(g, cost, options, out);
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
