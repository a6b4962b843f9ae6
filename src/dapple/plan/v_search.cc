// The V shapes' search: see v_search.h.
//
// Note [V shapes searched]
// A V plan is made from a plan of one chunk per stage (Note [V shapes from a plan]): its
// device groups, each half of the model cut in its shares of compute or of width. Two things
// limit that: the groups are only the winners', and the shares of a one-chunk plan are not a
// V's (a group's two chunks run one after the other, and the best V is often uneven: an
// early group with a small chunk going down and a large one coming back, where transfers or
// memory say so). So the fastest V proposal is re-cut (ReCutVShape): every cut of the layers
// into its 2S chunks on its groups when there are few (kEveryCutMost), then a climb from
// there and one from its groups' balanced cut (Note [A balanced V cut]), whose moves shift
// one boundary between neighbouring chunks by a layer (reaching any cut), reverse the groups'
// order or swap two neighbouring groups; then the other V kinds on the final cut. The
// re-cutting spends at most kReCutWork of simulations (replicas x micro-batches of each plan
// simulated), so that its cost stays bounded on large pipelines.
// A V that beats the winner is often a re-cut of one that does not, so the fastest V is
// re-cut when it is up to kReCutSlack slower than the winner on a small model (SmallVSearch),
// kReCutSlackLarge on a larger one. A small V search also cuts more groups (MoreVBases: each
// base's groups in reverse order and without one group, and the even-width pipelines, each at
// its own micro-batch size), re-cuts the fastest V of each group count (FastestVShape), tries
// every cut on the groups in every order and at every micro-batch size (FastestCut), and,
// where no V of a count fits memory as cut in shares, every cut of the fastest one. On larger
// models those made SelectFastest simulate so many more V proposals that the planning
// report's commands took about twice their time. tests/plan/v_search_test.cc checks the
// planner against the exhaustive search with V shapes (Note [Exhaustive V shapes]).
#include "dapple/plan/v_search.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "dapple/plan/plan_costs.h"
#include "dapple/plan/v_cut.h"

namespace dapple::internal {
namespace {

// The device groups of a one-chunk plan, for telling bases apart.
std::vector<std::vector<int>> GroupsOf(const Plan& p) {
  std::vector<std::vector<int>> groups;
  for (int g = 0; g < p.num_device_groups(); ++g) groups.push_back(p.stages[g].devices);
  return groups;
}

// One-chunk plan `base` (S stages) with its stages' layer counts and devices in the given
// order of its stages (each group keeps its number of layers, the cuts follow).
Plan Reordered(const Plan& base, const std::vector<int>& order) {
  Plan p = base;
  p.stages.clear();
  p.estimate.reset();
  int first = 0;
  for (int g : order) {
    StagePlan st = base.stages[g];
    st.last_layer = first + (st.last_layer - st.first_layer);
    st.first_layer = first;
    first = st.last_layer + 1;
    p.stages.push_back(std::move(st));
  }
  // A dropped stage's layers go to the last one.
  p.stages.back().last_layer = base.stages.back().last_layer;
  return p;
}

// Note [V shapes searched]: `base`'s groups in reverse order (a V's first group holds the
// model's two ends), and, up to kDropMaxGroups groups, without each group in turn (in both
// orders): a device group that slows a one-chunk pipeline may leave a V faster without it.
std::vector<Plan> GroupVariants(const Plan& base) {
  const int S = base.num_stages();
  std::vector<int> order(S);
  for (int g = 0; g < S; ++g) order[g] = S - 1 - g;
  std::vector<Plan> out = {Reordered(base, order)};
  if (S > kDropMaxGroups) return out;
  for (int drop = 0; drop < S && S > 1; ++drop) {
    std::vector<int> kept;
    for (int g = 0; g < S; ++g)
      if (g != drop) kept.push_back(g);
    out.push_back(Reordered(base, kept));
    std::reverse(kept.begin(), kept.end());
    out.push_back(Reordered(base, kept));
  }
  return out;
}

// The V plan `p` with the boundary after chunk k moved by one layer: `later` gives chunk k
// the first layer of chunk k + 1, else chunk k + 1 takes the last of chunk k. nullopt when
// that would leave a chunk empty.
std::optional<Plan> MovedBoundary(const Plan& p, int k, bool later) {
  const StagePlan &a = p.stages[k], &b = p.stages[k + 1];
  if (later ? b.first_layer == b.last_layer : a.first_layer == a.last_layer) return std::nullopt;
  Plan q = p;
  q.estimate.reset();
  const int by = later ? 1 : -1;
  q.stages[k].last_layer += by;
  q.stages[k + 1].first_layer += by;
  return q;
}

// The V plan `p` (S groups) with the same chunks on its groups in the order `order` (chunk
// k of group g runs on group order[g]'s devices).
Plan Regrouped(const Plan& p, const std::vector<int>& order) {
  const int S = p.num_device_groups();
  Plan q = p;
  q.estimate.reset();
  for (int k = 0; k < p.num_stages(); ++k)
    q.stages[k].devices = p.stages[order[GroupOfVirtualStage(k, S, true)]].devices;
  return q;
}

// The neighbours of the V plan `p`: each boundary moved by a layer (MovedBoundary), its
// groups in reverse order and each two neighbouring groups swapped (Regrouped).
std::vector<Plan> Neighbours(const Plan& p) {
  std::vector<Plan> out;
  for (int k = 0; k + 1 < p.num_stages(); ++k)
    for (bool later : {false, true})
      if (std::optional<Plan> nb = MovedBoundary(p, k, later)) out.push_back(std::move(*nb));
  const int S = p.num_device_groups();
  std::vector<int> order(S);
  for (int g = 0; g < S; ++g) order[g] = S - 1 - g;
  if (S > 1) out.push_back(Regrouped(p, order));
  for (int g = 0; g + 2 < S; ++g) {  // with 2 groups, the reverse order
    for (int x = 0; x < S; ++x) order[x] = x;
    std::swap(order[g], order[g + 1]);
    out.push_back(Regrouped(p, order));
  }
  return out;
}

// One re-cutting of a V (ReCutVShape): its scoring of plans within a budget of work.
struct ReCutter {
  const Context& c;
  long long* simulated;
  long long work_left = kReCutWork;

  // `p` scored when it fits and is faster than `bar` (else nullopt). Note [V shapes
  // searched]: each simulation spends p's replicas x micro-batches of the budget; none
  // once it is spent.
  std::optional<Scored> Faster(const Plan& p, double bar, const Origin& origin) {
    if (work_left <= 0) return std::nullopt;
    PlanCosts pc = EvaluatePlan(p, c.cost);
    if (!pc.fits || IterationLowerBound(pc, p.num_micro_batches) >= bar) return std::nullopt;
    std::optional<Scored> s = ScoreFitting(p, std::move(pc), c.cost, &c.shared->sims, bar);
    ++*simulated;
    work_left -= static_cast<long long>(p.num_devices()) * p.num_micro_batches;
    if (!s || s->sim.iteration_ms >= bar) return std::nullopt;
    s->origin = origin;
    return s;
  }

  // `cur` after the climb of its fastest faster neighbour (Neighbours) while there is one.
  Scored Climb(Scored cur) {
    while (true) {
      std::optional<Scored> best;
      for (const Plan& nb : Neighbours(cur.plan))
        if (std::optional<Scored> s =
                Faster(nb, best ? best->sim.iteration_ms : cur.sim.iteration_ms, cur.origin))
          best = std::move(s);
      if (!best) return cur;
      cur = std::move(*best);
    }
  }

  // `cur` or the fastest V of its kind cut any other way (EveryCut, when there are at most
  // kEveryCutMost cuts) on its groups at its micro-batch size; in a small V search
  // (SmallVSearch) of at most kEveryOrderMost groups, also on its groups in every order and
  // at every micro-batch size that leaves each replica a sample.
  Scored FastestCut(Scored cur) {
    const Plan start = cur.plan;
    const int S = start.num_device_groups();
    const std::vector<std::vector<int>> cuts = EveryCut(c.cost.num_layers(), 2 * S, kEveryCutMost);
    const bool every = SmallVSearch(c) && S <= kEveryOrderMost;
    std::vector<int> sizes = {start.micro_batch_size}, order(S);
    int widest = 0;
    for (int g = 0; g < S; ++g) widest = std::max(widest, start.stages[g].replicas());
    if (every)
      std::copy_if(c.sizes.begin(), c.sizes.end(), std::back_inserter(sizes), [&](int m) {
        return m >= widest && m != start.micro_batch_size && c.global_batch % m == 0;
      });
    for (int g = 0; g < S; ++g) order[g] = g;
    do {
      Plan q = Regrouped(start, order);
      for (int m : sizes) {
        q.micro_batch_size = m;
        q.num_micro_batches = c.global_batch / m;
        for (const std::vector<int>& starts : cuts)
          if (std::optional<Scored> s = Faster(CutAt(q, starts), cur.sim.iteration_ms, cur.origin))
            cur = std::move(*s);
      }
    } while (every && !cuts.empty() && std::next_permutation(order.begin(), order.end()));
    return cur;
  }
};

}  // namespace

std::vector<ScheduleKind> OfferedVShapes(const PlannerOptions& o) {
  if (o.schedule)
    return VShaped(*o.schedule) ? std::vector{*o.schedule} : std::vector<ScheduleKind>{};
  if (o.planner != PlannerKind::kDapple || !o.interleave) return {};
  return {ScheduleKind::kZbV, ScheduleKind::kVHalf, ScheduleKind::kVMin};
}

bool SmallVSearch(const Context& c) { return c.cost.num_layers() <= kSmallVLayers; }

std::vector<Plan> MoreVBases(const Context& c, const std::vector<Plan>& bases) {
  std::vector<Plan> out;
  // By groups and micro-batch size: bases' variants and the even-width pipelines.
  std::set<std::pair<std::vector<std::vector<int>>, int>> seen;
  for (const Plan& p : bases) seen.insert({GroupsOf(p), p.micro_batch_size});
  auto add = [&](const Plan& p) {
    if (p.virtual_stages == 1 && seen.insert({GroupsOf(p), p.micro_batch_size}).second)
      out.push_back(p);
  };
  for (const Plan& base : bases)
    if (base.virtual_stages == 1)
      for (const Plan& p : GroupVariants(base)) add(p);
  std::lock_guard<std::mutex> lock(c.shared->dp_mu);
  for (const auto& [m, plans] : c.shared->even_widths)
    for (const Plan& p : plans) add(p);
  for (const auto& [key, plans] : c.shared->even_widths_by_order)
    for (const Plan& p : plans) add(p);
  return out;
}

Scored ReCutVShape(const Context& c, Scored start, long long* simulated) {
  ReCutter r{c, simulated};
  // Note [V shapes searched]: from `start` and from its groups' balanced cut (Note [A
  // balanced V cut]), whose climbs mostly end apart.
  std::optional<Scored> balanced;
  if (std::optional<Plan> q = BalancedVCut(start.plan, c.cost);
      q && SimKey(*q) != SimKey(start.plan))
    balanced = r.Faster(*q, start.sim.iteration_ms * (1 + kReCutSlack), start.origin);
  Scored cur = r.Climb(r.FastestCut(std::move(start)));
  if (balanced) {
    Scored other = r.Climb(std::move(*balanced));
    if (other.sim.iteration_ms < cur.sim.iteration_ms) cur = std::move(other);
  }
  // The same cut with the other V kinds.
  for (ScheduleKind kind : OfferedVShapes(c.options)) {
    if (kind == cur.plan.schedule) continue;
    Plan q = cur.plan;
    q.schedule = kind;
    q.estimate.reset();
    if (std::optional<Scored> s = r.Faster(q, cur.sim.iteration_ms, cur.origin))
      cur = std::move(*s);
  }
  return cur;
}

}  // namespace dapple::internal

namespace dapple::internal {

std::optional<Scored> FastestVShape(const Context& c, const std::vector<Proposal>& proposals,
                                    double bar, long long* simulated) {
  if (!SmallVSearch(c)) {
    Selection s = SelectFastest(proposals, c.cost, false, &c.shared->sims, bar);
    *simulated += s.simulated;
    if (!s.best) return std::nullopt;
    return ReCutVShape(c, std::move(*s.best), simulated);
  }
  // Note [V shapes searched]: the fastest of each group count.
  std::map<int, std::vector<Proposal>> by_count;
  for (const Proposal& p : proposals) by_count[p.plan.num_device_groups()].push_back(p);
  std::optional<Scored> best;
  for (const auto& [count, some] : by_count) {
    Selection s = SelectFastest(some, c.cost, false, &c.shared->sims, bar);
    *simulated += s.simulated;
    std::optional<Scored> r;
    if (s.best) {
      r = ReCutVShape(c, std::move(*s.best), simulated);
    } else {
      // None fits or is fast enough: every cut of the fastest ignoring memory, against bar.
      Selection loose = SelectFastest(some, c.cost, true, &c.shared->sims);
      *simulated += loose.simulated;
      if (!loose.best) continue;
      loose.best->sim.iteration_ms = bar;  // what a cut must beat
      ReCutter cutter{c, simulated};
      Scored cut = cutter.FastestCut(std::move(*loose.best));
      if (cut.sim.iteration_ms < bar) r = ReCutVShape(c, std::move(cut), simulated);
    }
    if (r && (!best || r->sim.iteration_ms < best->sim.iteration_ms)) best = std::move(r);
  }
  return best;
}

}  // namespace dapple::internal
