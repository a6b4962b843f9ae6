// The planners' proposals: see proposals.h.
#include "dapple/plan/proposals.h"

#include <algorithm>
#include <iterator>

#include "dapple/format/cluster_kinds.h"
#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/parallel_for.h"
#include "dapple/plan/refine/refine.h"

namespace dapple::internal {

std::vector<bool> ForwardTimed(const Profile& profile) {
  std::vector<bool> timed;
  for (const LayerProfile& l : profile.layers) {
    bool t = l.forward_ms > 0;
    for (double ms : l.forward_ms_by_batch) t = t || ms > 0;
    timed.push_back(t);
  }
  return timed;
}

Context Family(const Context& c, ScheduleKind k) {
  Context f = c;
  f.schedules = {k};
  return f;
}

namespace {

// The DP's memory check depends on its schedule only through the warm-up depths K_s:
// zb-h1's are dapple-a's, interleaved's (one chunk) and zb-h2's dapple-b's.
ScheduleKind DepthSchedule(ScheduleKind k) {
  if (k == ScheduleKind::kZbH1) return ScheduleKind::kDappleA;
  if (k == ScheduleKind::kInterleaved || k == ScheduleKind::kZbH2) return ScheduleKind::kDappleB;
  return k;
}

MicroBatching Mb(const Context& c, int m) { return {m, c.global_batch / m}; }

// Adds `plan` once per schedule in `kinds`.
void AddWithSchedules(std::vector<Proposal>& out, Plan plan, const Origin& origin,
                      const std::vector<ScheduleKind>& kinds) {
  for (ScheduleKind k : kinds) {
    plan.schedule = k;
    out.push_back({plan, origin});
  }
}

// BalancedPipelinePlan with micro-batch size m, as the memo keeps it.
Plan Balanced(const Context& c, int m) {
  return BalancedPipelinePlan(c.cost, c.cluster, Mb(c, m), ScheduleKind::kDappleA, "straight");
}

// memo[key] under c.shared->dp_mu, made by make() (unlocked) when missing: once per key in a
// RunPlanner call and its memo (two searches may both make it; the first kept wins, and
// both are equal).
template <typename Map, typename Make>
typename Map::mapped_type Memoized(const Context& c, Map& memo, const typename Map::key_type& key,
                                   Make make) {
  std::unique_lock<std::mutex> lock(c.shared->dp_mu);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  lock.unlock();
  typename Map::mapped_type made = make();
  lock.lock();
  return memo.try_emplace(key, std::move(made)).first->second;
}

// The baselines' proposals; `into_dapple` tags them as candidates of the DAPPLE planner.
void ProposeBaseline(const Context& c, PlannerKind planner, bool enforce_memory,
                     const std::vector<ScheduleKind>& kinds, std::vector<Proposal>& out) {
  const int n = c.cost.num_layers();
  const std::string name = ToString(planner);
  if (planner == PlannerKind::kDataParallel) {
    for (int m : c.sizes) {
      auto p = DataParallelPlan(c.cluster, n, Mb(c, m));
      if (p) AddWithSchedules(out, std::move(*p), "dp", kinds);
    }
  } else if (planner == PlannerKind::kStraight || planner == PlannerKind::kGPipe) {
    for (int m : c.sizes) {
      Plan p = Memoized(c, c.shared->balanced, m, [&] { return Balanced(c, m); });
      p.planner = name;
      AddWithSchedules(out, std::move(p), name, kinds);
    }
  } else if (planner == PlannerKind::kPipeDream) {
    for (int m : c.sizes) {
      std::optional<Plan> p = Memoized(c, c.shared->pipedream, {m, enforce_memory}, [&] {
        return PipeDreamPlan(c.cost, c.cluster, Mb(c, m), enforce_memory);
      });
      if (p) AddWithSchedules(out, std::move(*p), "pipedream", kinds);
    }
  }
}

// Note [Widths across server boundaries]
// The DP places a stage that fits in one server inside one and fills servers in order, and
// its latency L ranks pipelines of narrow stages below short pipelines of whole servers;
// the refinement changes one stage's width by one device at a time, which rarely pays
// alone. So stages split across two servers, several narrow stages in one server and
// uneven widths were out of reach, where a medium problem's optimum often has them. So it also
// proposes, for every m, the pipelines of k stages of equal widths across the servers
// (EvenWidthPlans), layers balanced on them, and the simulator (the topology-aware cost)
// says when they pay: the fastest of them is a start of the refinement besides the other
// origins' (SelectStarts), whose moves then adjust widths and boundaries, so the search is
// never slower than without them. Not on clusters of more than kEvenWidthsMaxDevices
// devices: there the DP's replica counts and its refinement cover the widths that matter,
// and the proposals would cost simulations of many devices.
constexpr int kEvenWidthsMaxDevices = 64;

// Note [Even widths in every server order]
// On a cluster of several kinds of device, the devices in id order put whichever kind the
// cluster file lists first at the head of every even-width pipeline, and only the fastest
// of those is a start. A mixed problem's optimum may lead with another kind than the file's
// first, and of the pipelines that lead with it the deepest, not the fastest as proposed,
// may be the one that climbs to it. So on small
// clusters of several kinds (at most kKindFirstMaxDevices devices) the even-width pipelines
// are also proposed over the devices in each server order (EvenWidthOrders: each kind's
// servers first), with an origin per order ("even-widths-A-first", A the kind's letter in
// `dapple plan`'s "device kinds" line). Their starts are chosen by depth, per order
// (SelectStarts: DeepestStarts), whatever the order in which the cluster file lists the
// servers; climbs on those clusters take the wide moves at every local optimum
// (WideMovesUpTo in family_search.cc), as the deep starts begin far behind.
constexpr int kKindFirstMaxDevices = 12;

}  // namespace

bool KindFirstEvenWidths(const Cluster& cluster) {
  return cluster.num_devices() <= kKindFirstMaxDevices && MixedDevices(cluster);
}

namespace {

// The even-width pipelines of every size of `c` from `make(m)`, memoized in `memo` by
// key(m), each size's partitions on worker threads (the cost model is read-only; the table
// of stage compute is shared and thread-safe), added in the order of `sizes` with origin
// `origin`.
template <typename Map, typename Key, typename Make>
void AddEvenWidths(const Context& c, Map& memo, Key key, const Origin& origin, Make make,
                   std::vector<Proposal>& out) {
  std::vector<std::vector<Plan>> per_size(c.sizes.size());
  ParallelFor(c.sizes.size(), 0, [&](size_t k) {
    const int m = c.sizes[k];
    per_size[k] = Memoized(c, memo, key(m), [&] { return make(m); });
  });
  for (std::vector<Plan>& plans : per_size)
    for (Plan& p : plans) AddWithSchedules(out, std::move(p), origin, c.schedules);
}

void ProposeEvenWidths(const Context& c, std::vector<Proposal>& out) {
  if (c.cluster.num_devices() > kEvenWidthsMaxDevices) return;
  AddEvenWidths(
      c, c.shared->even_widths, [](int m) { return m; }, kEvenWidthsOrigin,
      [&](int m) { return EvenWidthPlans(c.cost, c.cluster, Mb(c, m), &c.shared->group_work); },
      out);
  if (!KindFirstEvenWidths(c.cluster)) return;
  const std::vector<std::vector<int>> orders = EvenWidthOrders(c.cluster);
  for (size_t k = 0; k < orders.size(); ++k) {
    const Origin origin = KindFirstOrigin(k);
    const std::string name = origin.Name();  // the plans' `planner`
    AddEvenWidths(
        c, c.shared->even_widths_by_order,
        [k](int m) {
          return std::pair{static_cast<int>(k), m};
        },
        origin,
        [&](int m) {
          return EvenWidthPlans(c.cost, c.cluster, Mb(c, m), &c.shared->group_work, &orders[k],
                                name.c_str());
        },
        out);
  }
}

// The DPs' candidates of every size (`all`; best_of_m: each size's best), fastest first:
// the rescore_top_k fastest and the best of each size.
void AddChosenDpCandidates(const Context& c, const std::vector<DpCandidate>& all,
                           const std::map<int, size_t>& best_of_m, std::vector<Proposal>& out) {
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return all[a].latency_ms < all[b].latency_ms; });
  std::vector<bool> chosen(all.size(), false);
  for (size_t i = 0; i < order.size() && static_cast<int>(i) < c.options.rescore_top_k; ++i)
    chosen[order[i]] = true;
  for (auto& [m, i] : best_of_m) chosen[i] = true;
  for (size_t i : order)
    if (chosen[i]) AddWithSchedules(out, all[i].plan, "dapple-dp", c.schedules);
}

void ProposeDapple(const Context& c, bool enforce_memory, std::vector<Proposal>& out) {
  // One DP per micro-batch size, on worker threads (the cost model is read-only); the
  // results are gathered in the order of `sizes`, so the outcome does not depend on timing.
  // dapple-a first among the schedules: the smallest warm-up depths.
  const ScheduleKind depths = DepthSchedule(c.schedules.front());
  auto key = [&](int m) { return std::tuple{m, depths, enforce_memory}; };
  std::vector<int> missing;  // sizes whose DP this call has not run yet
  std::unique_lock<std::mutex> lock(c.shared->dp_mu);
  for (int m : c.sizes) {
    if (c.shared->dps.count(key(m))) continue;
    // dapple-b's DP decides as dapple-a's where no stage that fits a's depths misses b's.
    auto a = c.shared->dps.find({m, ScheduleKind::kDappleA, enforce_memory});
    if (depths == ScheduleKind::kDappleB && a != c.shared->dps.end() &&
        a->second.deeper_misfits == 0) {
      c.shared->dps[key(m)] = a->second;
      continue;
    }
    missing.push_back(m);
  }
  const size_t nm = missing.size();
  std::vector<Shared::Dp> per_m(nm);
  // PipeDream's DPs (ProposeBaseline below) on the same threads, not after them on one
  // core.
  std::vector<int> pd_missing;
  for (int m : c.sizes)
    if (!c.shared->pipedream.count({m, enforce_memory})) pd_missing.push_back(m);
  std::vector<std::optional<Plan>> pd(pd_missing.size());
  // And the straight pipelines' partitions (ProposeBaseline below), on the cores beside
  // them rather than one after another.
  std::vector<int> bal_missing;
  for (int m : c.sizes)
    if (!c.shared->balanced.count(m)) bal_missing.push_back(m);
  std::vector<Plan> bal(bal_missing.size());
  lock.unlock();  // the DPs run unlocked; another search may run the same one (same result)
  ParallelFor(nm + pd.size() + bal.size(), 0, [&](size_t k) {
    if (k >= nm + pd.size()) {
      bal[k - nm - pd.size()] = Balanced(c, bal_missing[k - nm - pd.size()]);
      return;
    }
    if (k >= nm) {
      const int m = pd_missing[k - nm];
      pd[k - nm] = PipeDreamPlan(c.cost, c.cluster, Mb(c, m), enforce_memory);
      return;
    }
    DpOptions o;
    o.micro_batch_size = missing[k];
    o.num_micro_batches = c.global_batch / missing[k];
    o.memory_schedule = depths;
    o.enforce_memory = enforce_memory;
    o.top_k = c.options.rescore_top_k;
    if (depths == ScheduleKind::kDappleA) o.deeper_schedule = ScheduleKind::kDappleB;
    DpStats stats;
    per_m[k].candidates = DappleDp(c.cost, c.cluster, o, &stats);
    per_m[k].deeper_misfits = stats.deeper_misfits;
  });
  lock.lock();
  for (size_t k = 0; k < nm; ++k) c.shared->dps[key(missing[k])] = std::move(per_m[k]);
  for (size_t k = 0; k < pd.size(); ++k)
    c.shared->pipedream.try_emplace({pd_missing[k], enforce_memory}, std::move(pd[k]));
  for (size_t k = 0; k < bal.size(); ++k)
    c.shared->balanced.try_emplace(bal_missing[k], std::move(bal[k]));
  std::vector<DpCandidate> all;
  std::map<int, size_t> best_of_m;  // index in `all` of each m's best
  for (int m : c.sizes) {
    for (const DpCandidate& d : c.shared->dps.at(key(m)).candidates) {
      if (!best_of_m.count(m)) best_of_m[m] = all.size();
      all.push_back(d);
    }
  }
  lock.unlock();
  AddChosenDpCandidates(c, all, best_of_m, out);
  // Pure data parallelism and the straight pipeline are candidates too, and so are the
  // other baselines' partitions under DAPPLE's schedules.
  for (PlannerKind b :
       {PlannerKind::kDataParallel, PlannerKind::kStraight, PlannerKind::kPipeDream})
    ProposeBaseline(c, b, enforce_memory, c.schedules, out);
  ProposeEvenWidths(c, out);
}

}  // namespace

std::vector<Proposal> Propose(const Context& c, bool enforce_memory) {
  std::vector<Proposal> out;
  const PlannerKind planner = c.options.planner;
  if (planner == PlannerKind::kDapple && c.schedules.size() > 1) {
    // Each schedule's proposals as `--schedule` makes them (Note [Never slower with more
    // schedules]), one after the other.
    for (ScheduleKind k : c.schedules) {
      std::vector<Proposal> family = Propose(Family(c, k), enforce_memory);
      std::move(family.begin(), family.end(), std::back_inserter(out));
    }
  } else if (planner == PlannerKind::kDapple) {
    ProposeDapple(c, enforce_memory, out);
  } else if (planner == PlannerKind::kGPipe) {
    ProposeBaseline(c, planner, enforce_memory, {c.options.schedule.value_or(ScheduleKind::kGPipe)},
                    out);
  } else if (planner == PlannerKind::kDataParallel && enforce_memory) {
    // The largest micro-batch that fits.
    std::vector<Proposal> all;
    ProposeBaseline(c, planner, enforce_memory, {c.schedules.front()}, all);
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (EvaluatePlan(it->plan, c.cost).fits) {
        out.push_back(*it);
        break;
      }
    }
    if (out.empty()) out = std::move(all);  // none fits: reported as such
  } else if (planner == PlannerKind::kExhaustive) {
    ExhaustiveResult r = ExhaustivePlan(c.cost, c.cluster, c.global_batch, c.sizes, c.schedules,
                                        c.options.allreduce_overlap, ForwardTimed(c.profile));
    if (r.plan) out.push_back({*r.plan, "exhaustive"});
  } else {
    ProposeBaseline(c, planner, enforce_memory, {c.schedules.front()}, out);
  }
  for (Proposal& p : out) p.plan.allreduce_overlap = c.options.allreduce_overlap;
  return out;
}

}  // namespace dapple::internal
