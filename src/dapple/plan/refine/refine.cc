// The refinement's search loop: see refine.h.
//
// Note [Refinement]
// The DP sees a plan through the analytic latency L, over coarsened layer blocks, with a
// pivot heuristic and a beam; the baselines see it through their own objectives. Each can
// miss a plan one or two small changes away from its answer that the simulator finds
// faster (a baseline's deeper partition may beat the DP's, say). So
// the planner ends with a local search from its best proposals. Each round lists every
// neighbour of the current plan (refine_moves.h), drops those that cannot fit memory or
// cannot win (IterationLowerBound >= the current time), orders the rest by an analytic
// estimate (max of L and the lower bound) and simulates them in that order, a batch of
// `threads` at a time, until one is faster: the first faster one in that order is taken,
// whichever thread finished first, so the result does not depend on timing. A round that
// simulates `simulations_per_round` neighbours without finding a faster one ends the
// search from that start, as does the budget. Each accepted move makes the plan strictly
// faster, so the search cannot cycle.
//
// Note [Wide moves at a local optimum]
// The wide moves (refine_moves.h: a split onto a device taken from another stage, the layers
// cut anew over the device groups) change several things at once, where the one-step moves
// would each be slower alone; they reach the narrower stages across server boundaries that
// the medium problems' optima have (tests/plan/medium_exhaustive_test.cc). A round lists
// them only where none of the one-step moves is faster, and the climb goes back to the
// one-step moves after taking one. So a climb is the one-step climb up to the first plan
// where that one would stop (its moves, simulations and work the same), and only ever
// faster from there: no plan is slower for them, and listing them costs one round per
// local optimum (listed in every round, they moved some climbs to slower local optima). The planner
// lets a climb try them only where its plan is no slower than the fastest start of the climbs run
// together (RefineOptions::wide_moves_up_to_ms): a climb stuck far behind would go on with
// them for many times the work, to end behind still.
//
// Note [Regrouping at a local optimum]
// Where no wide move is faster either, a climb may still be a few moves from a plan whose
// stages visit the device groups in another order (Note [Regrouping the stages] in
// regroup_moves.cc): a medium problem's exhaustive optimum can be a regrouped plan of the
// planner's and a climb away. The regrouped plans themselves are mostly much slower (the
// layers cut for compute alone, transfers crossing between the servers), so a climb would not take
// them as moves. So a search goes on from its fastest climb (Regrouped): it climbs from each
// regrouped plan of that climb's end, and takes the fastest end of those climbs when it is faster,
// as long as that helps: random restarts, chosen among the orders of the plan's device groups. Each
// search regroups once, after its climbs (each schedule family, the climb across schedules,
// each size's search), so that the searches nest as before (Note [Never slower with more
// schedules] in family_search.cc). Its budget is kRegroupWorkShare times the work of the climbs it
// follows, within max_work: the climbs from slow plans are long, and without the cap the
// regrouping would cost several times the climbs it follows. A search whose climbs were
// short (the climb across schedules from the families' winners, a few moves) leaves it
// little, so the share is the least with which the medium problems of 10-12 layers reach
// their exhaustive optimum (tests/plan/medium_exhaustive_test.cc, scripts/medium_exhaustive.sh).
// The planner regroups on clusters of at most kEachSizeMaxDevices devices (RefineOptions::regroup),
// where the search is meant to reach the exhaustive optimum and a search is cheap.
//
// Note [A budget of work]
// The budget counts work, not seconds, so that a plan depends on its inputs alone: on any
// machine, under any load, and on every rank of an elastic job that plans again. Work is
// counted in device steps, in the two places a climb spends its time:
// * listing a round's neighbours costs each one's evaluation (EvaluatePlan), about a step
//   per device of the plan: neighbours x devices. On a large cluster a round lists many
//   neighbours (every unused device may join a stage), and listing is most of the time;
// * simulating a neighbour costs its schedule, devices x micro-batches (WorkOf). The
//   simulations counted are those a search simulating one neighbour at a time would run:
//   in a round, the neighbours up to and including the one taken (all listed ones when
//   none is), whatever `threads` simulated beyond it; a batch starts no neighbour once the
//   budget is spent.
// So the same options give the same climb with any number of threads. A count of plans
// alone would let a climb of wide plans on a large cluster run many times longer than one
// on a small cluster, for the same budget.
#include "dapple/plan/refine/refine.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "dapple/common/error.h"
#include "dapple/plan/parallel_for.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/refine/refine_moves.h"
#include "dapple/plan/search/sim_cache.h"

namespace dapple {

namespace {

// Simulates plans[i] for i in [begin, end) on up to `threads` threads (each fits by its
// costs); scored[i] is empty when the simulator's peak does not fit memory.
// A round's first neighbour is the one most often taken, and
// then a question put first to a run without contention (Note [Uncontended first] in
// plan/search/slower_than.cc) would only add that run: plans[0] goes to the contended run at once.
// Cost only: the answers are the same.
void ScoreBatch(const std::vector<const internal::Neighbour*>& plans, size_t begin, size_t end,
                const CostModel& cost, int threads, SimCache* cache, double stop_above_ms,
                std::vector<std::optional<Scored>>& scored) {
  auto one = [&](size_t i) {
    scored[i] = ScoreFitting(plans[i]->plan, plans[i]->costs, cost, cache, stop_above_ms,
                             /*uncontended_first=*/i != 0);
  };
  ParallelFor(end - begin, static_cast<size_t>(std::max(threads, 1)),
              [&](size_t k) { one(begin + k); });
}

long long DevicesOf(const Plan& plan) {
  long long devices = 0;
  for (const StagePlan& st : plan.stages) devices += st.replicas();
  return devices;
}

// A simulation's share of the budget (Note [A budget of work]): the size of its schedule,
// devices x micro-batches.
long long WorkOf(const Plan& plan) { return DevicesOf(plan) * plan.num_micro_batches; }

struct ClimbSearch {
  const CostModel& cost;
  const Cluster& cluster;
  const RefineOptions& o;
  int threads;
  long long simulated = 0;
  long long work = 0;
  bool out_of_budget = false;
  ShardMemo own_shard_memo = {};  // without RefineOptions::shard_memo
  // The climb's rounds list mostly the same stages, and mostly the same device groups.
  ShardMemo& shard_memo = o.shard_memo ? *o.shard_memo : own_shard_memo;
  internal::RebalanceMemo rebalance_memo = {};

  // Local search from `start`; returns the last plan and the moves taken.
  std::pair<Scored, std::vector<RefineStep>> Run(Scored cur) {
    std::vector<RefineStep> steps;
    // Note [Wide moves at a local optimum]: the wide moves once no one-step move is faster.
    internal::Moves moves = internal::Moves::kStep;
    while (static_cast<int>(steps.size()) < o.max_rounds) {
      if (work >= o.max_work) {
        // A wide round with no neighbour to list would end the climb as it is: not cut.
        out_of_budget = out_of_budget || moves == internal::Moves::kStep ||
                        !internal::Neighbours(cur.plan, cost, cluster, o, &cur.costs, &shard_memo,
                                              moves, &rebalance_memo)
                             .empty();
        break;
      }
      std::vector<internal::Neighbour> ns = internal::Neighbours(
          cur.plan, cost, cluster, o, &cur.costs, &shard_memo, moves, &rebalance_memo);
      work += static_cast<long long>(ns.size()) * DevicesOf(cur.plan);  // their costs
      struct Item {
        double estimate;
        size_t index;
      };
      std::vector<Item> items;
      const double now_ms = cur.sim.iteration_ms;
      const double faster_than = now_ms * (1 - 1e-9);  // what a neighbour must beat
      for (size_t i = 0; i < ns.size(); ++i) {
        const PlanCosts& pc = ns[i].costs;
        if (!pc.fits) continue;
        const double lb = IterationLowerBound(pc, ns[i].plan.num_micro_batches);
        if (lb >= now_ms) continue;
        items.push_back({std::max(lb, pc.latency.latency_ms), i});
      }
      std::stable_sort(items.begin(), items.end(),
                       [](const Item& a, const Item& b) { return a.estimate < b.estimate; });
      if (static_cast<int>(items.size()) > o.simulations_per_round)
        items.resize(o.simulations_per_round);
      // Those whose PipelineLowerBound says they cannot be faster are not simulated: they
      // would not be taken, and which are listed (the first simulations_per_round by
      // estimate) stays as it was.
      std::erase_if(items, [&](const Item& it) {
        const internal::Neighbour& n = ns[it.index];
        return PipelineLowerBound(n.plan, n.costs) >= faster_than;
      });
      std::vector<const internal::Neighbour*> plans;
      for (const Item& it : items) plans.push_back(&ns[it.index]);
      std::vector<std::optional<Scored>> scored(plans.size());
      std::optional<size_t> taken;
      for (size_t begin = 0; begin < plans.size() && !taken;) {
        size_t end = begin;  // the batch: up to `threads` neighbours, within the budget
        for (long long w = work;
             end < plans.size() && end - begin < static_cast<size_t>(threads) && w < o.max_work;
             ++end)
          w += WorkOf(plans[end]->plan);
        if (end == begin) {
          out_of_budget = true;
          break;
        }
        // The runs may stop once they prove a neighbour is not faster (Note [Stopping
        // above a time] in plan/search/stop_bound.cc).
        ScoreBatch(plans, begin, end, cost, threads, o.cache, faster_than, scored);
        simulated += static_cast<long long>(end - begin);
        for (size_t i = begin; i < end && !taken; ++i)
          if (scored[i] && scored[i]->sim.iteration_ms < faster_than) taken = i;
        for (size_t i = begin; i < (taken ? *taken + 1 : end); ++i) work += WorkOf(plans[i]->plan);
        begin = end;
      }
      if (!taken && moves == internal::Moves::kStep && !out_of_budget &&
          now_ms <= o.wide_moves_up_to_ms) {
        moves = internal::Moves::kWide;
        continue;
      }
      if (!taken) break;
      moves = internal::Moves::kStep;
      Scored next = std::move(*scored[*taken]);
      next.origin = cur.origin;
      steps.push_back({ns[items[*taken].index].move, next.sim.iteration_ms});
      cur = std::move(next);
    }
    return {std::move(cur), std::move(steps)};
  }

  // Note [Regrouping at a local optimum]: the fastest end of the climbs from `cur`'s
  // regrouped plans, with the moves from `cur` to it, when faster than `cur`.
  std::optional<std::pair<Scored, std::vector<RefineStep>>> Regroup(const Scored& cur) {
    const std::vector<internal::Neighbour> ns =
        internal::Neighbours(cur.plan, cost, cluster, o, &cur.costs, &shard_memo,
                             internal::Moves::kRegroup, &rebalance_memo);
    work += static_cast<long long>(ns.size()) * DevicesOf(cur.plan);
    std::optional<std::pair<Scored, std::vector<RefineStep>>> best;
    for (const internal::Neighbour& n : ns) {
      if (!n.costs.fits) continue;
      if (work >= o.max_work) {
        out_of_budget = true;
        break;
      }
      std::optional<Scored> from = ScoreFitting(n.plan, n.costs, cost, o.cache);
      ++simulated;
      work += WorkOf(n.plan);
      if (!from) continue;
      from->origin = cur.origin;
      const double from_ms = from->sim.iteration_ms;
      auto [end, steps] = Run(std::move(*from));
      const double beat = best ? best->first.sim.iteration_ms : cur.sim.iteration_ms * (1 - 1e-9);
      if (end.sim.iteration_ms >= beat) continue;
      steps.insert(steps.begin(), RefineStep{n.move, from_ms});
      best.emplace(std::move(end), std::move(steps));
    }
    return best;
  }
};

}  // namespace

RefineResult Refine(const std::vector<Scored>& starts, const CostModel& cost,
                    const Cluster& cluster, const RefineOptions& options) {
  DAPPLE_CHECK(!starts.empty());
  ClimbSearch search{cost, cluster, options,
                     options.threads > 0
                         ? options.threads
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  std::vector<RefineResult> climbs;
  for (const Scored& start : starts) {
    const long long simulated = search.simulated, work = search.work;
    auto [end, steps] = search.Run(start);
    climbs.push_back({std::move(end), std::move(steps), 0, search.simulated - simulated,
                      search.work - work, search.out_of_budget});
  }
  return FastestClimb(std::move(climbs));
}

// Note [Regrouping at a local optimum]: the regrouping's budget in times the work of the
// climbs it follows.
constexpr long long kRegroupWorkShare = 8;

RefineResult Regrouped(RefineResult r, const CostModel& cost, const Cluster& cluster,
                       const RefineOptions& options) {
  if (!options.regroup) return r;
  RefineOptions o = options;
  o.max_work = std::min(o.max_work, kRegroupWorkShare * r.work);
  ClimbSearch search{cost, cluster, o, std::max(o.threads, 1)};
  while (auto found = search.Regroup(r.best)) {
    r.best = std::move(found->first);
    r.steps.insert(r.steps.end(), found->second.begin(), found->second.end());
  }
  r.simulated += search.simulated;
  r.work += search.work;
  // Out of the caller's budget only: the cap of twice the climbs' work is the regrouping's own.
  r.out_of_budget = r.out_of_budget || (search.out_of_budget && o.max_work == options.max_work);
  return r;
}

double FastestStartMs(const std::vector<Scored>& starts) {
  DAPPLE_CHECK(!starts.empty());
  double fastest = starts[0].sim.iteration_ms;
  for (const Scored& s : starts) fastest = std::min(fastest, s.sim.iteration_ms);
  return fastest;
}

std::vector<size_t> TwinStarts(const std::vector<Scored>& starts) {
  std::vector<std::string> keys;
  std::vector<size_t> twin(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    keys.push_back(SimKey(starts[i].plan));
    twin[i] = static_cast<size_t>(std::find(keys.begin(), keys.end(), keys[i]) - keys.begin());
  }
  return twin;
}

std::vector<RefineResult> WithTwinClimbs(const std::vector<size_t>& twin,
                                         std::vector<RefineResult> climbs) {
  DAPPLE_CHECK(twin.size() == climbs.size());
  for (size_t i = 0; i < twin.size(); ++i)
    if (twin[i] < i) climbs[i] = climbs[twin[i]];
  return climbs;
}

std::vector<RefineResult> ClimbsFrom(const std::vector<Scored>& starts, const CostModel& cost,
                                     const Cluster& cluster, const RefineOptions& options) {
  const std::vector<size_t> twin = TwinStarts(starts);
  std::vector<RefineResult> climbs(starts.size());
  ParallelFor(climbs.size(), 0, [&](size_t i) {
    if (twin[i] == i) climbs[i] = Refine({starts[i]}, cost, cluster, options);
  });
  return WithTwinClimbs(twin, std::move(climbs));
}

RefineResult ClimbEach(const std::vector<Scored>& starts, const CostModel& cost,
                       const Cluster& cluster, const RefineOptions& options) {
  return FastestClimb(ClimbsFrom(starts, cost, cluster, options));
}

// Note [Deep starts regrouped apart]
// The regrouping goes on from the fastest climb's end only (Note [Regrouping at a local
// optimum]). So starts added after the others (DeepestStarts', Note [Even widths in every
// server order] in proposals.cc) could make a search slower: one of their climbs ends
// fastest, the regrouping goes on from it and finds nothing, where from the others' fastest
// it would have found a faster plan. So where
// one of their climbs ends fastest, the others' fastest climb is regrouped too, as it would be
// without them (the budget from the others' work alone), and the faster end is taken; where
// one of the others' ends fastest, nothing changes. Not regrouping the deep climbs at all
// instead can lose a medium problem's optimum.
RefineResult RegroupedApart(std::vector<RefineResult> climbs, size_t apart_from,
                            const CostModel& cost, const Cluster& cluster,
                            const RefineOptions& options) {
  DAPPLE_CHECK(!climbs.empty());
  RefineResult all = FastestClimb(climbs);
  if (!options.regroup || apart_from == 0 || all.start < apart_from)
    return Regrouped(std::move(all), cost, cluster, options);
  climbs.resize(apart_from);
  RefineResult others = FastestClimb(std::move(climbs));
  const long long others_simulated = others.simulated, others_work = others.work;
  RefineResult base = Regrouped(std::move(others), cost, cluster, options);
  RefineResult deep = Regrouped(std::move(all), cost, cluster, options);
  // Every climb counted once (in `deep`), both regroupings.
  const long long simulated = deep.simulated + base.simulated - others_simulated;
  const long long work = deep.work + base.work - others_work;
  const bool out_of_budget = deep.out_of_budget || base.out_of_budget;
  RefineResult kept =
      std::move(deep.best.sim.iteration_ms < base.best.sim.iteration_ms ? deep : base);
  kept.simulated = simulated;
  kept.work = work;
  kept.out_of_budget = out_of_budget;
  return kept;
}

RefineResult FastestClimb(std::vector<RefineResult> climbs) {
  DAPPLE_CHECK(!climbs.empty());
  size_t best = 0;
  long long simulated = 0, work = 0;
  bool out_of_budget = false;
  for (size_t i = 0; i < climbs.size(); ++i) {
    if (climbs[i].best.sim.iteration_ms < climbs[best].best.sim.iteration_ms) best = i;
    simulated += climbs[i].simulated;
    work += climbs[i].work;
    out_of_budget = out_of_budget || climbs[i].out_of_budget;
  }
  RefineResult result = std::move(climbs[best]);
  result.start = best;
  result.simulated = simulated;
  result.work = work;
  result.out_of_budget = out_of_budget;
  return result;
}

}  // namespace dapple
