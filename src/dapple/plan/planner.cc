// The planner registry: RunPlanner dispatches by name, searches the micro-batch size and
// the schedule, and lets the simulator pick among the proposals (rescoring.h).
#include "dapple/plan/planner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "dapple/common/error.h"
#include "dapple/format/message_tags.h"
#include "dapple/plan/baselines.h"
#include "dapple/plan/dapple_dp.h"
#include "dapple/plan/exhaustive.h"
#include "dapple/plan/interleaving.h"
#include "dapple/plan/parallel_for.h"
#include "dapple/plan/refine.h"
#include "dapple/plan/rescoring.h"
#include "dapple/plan/sim_cache.h"

namespace dapple {

std::vector<std::string> PlannerNames() {
  return {"dapple", "dp", "straight", "gpipe", "pipedream", "exhaustive"};
}

std::vector<int> MicroBatchSizes(int global_batch) {
  std::vector<int> sizes;
  for (int m = 1; m <= global_batch; ++m)
    if (global_batch % m == 0) sizes.push_back(m);
  return sizes;
}

namespace {

// What one RunPlanner call computes once and its searches share.
struct Shared {
  SimCache sims;  // simulator results by plan
  // DP results by (m, warm-up depths' schedule, memory enforced), and for dapple-a's
  // depths how many accepted stages dapple-b's would reject (DpOptions::deeper_schedule).
  struct Dp {
    std::vector<DpCandidate> candidates;
    long long deeper_misfits = 0;
  };
  std::map<std::tuple<int, ScheduleKind, bool>, Dp> dps;
  std::map<std::pair<int, bool>, std::optional<Plan>> pipedream;  // by (m, memory enforced)
  std::mutex dp_mu;  // guards dps and pipedream (the schedule families search in parallel)
};

struct Context {
  const Profile& profile;
  const Cluster& cluster;
  const CostModel& cost;
  int global_batch;
  const PlannerOptions& options;
  std::vector<int> sizes;               // micro-batch sizes to try, ascending
  std::vector<ScheduleKind> schedules;  // for the planners that choose (dapple-a, -b, zb-h1)
  Shared* shared = nullptr;
};

// The DP's memory check depends on its schedule only through the warm-up depths K_s:
// zb-h1's are dapple-a's, interleaved's (one chunk) dapple-b's.
ScheduleKind DepthSchedule(ScheduleKind k) {
  if (k == ScheduleKind::kZbH1) return ScheduleKind::kDappleA;
  if (k == ScheduleKind::kInterleaved) return ScheduleKind::kDappleB;
  return k;
}

// Per layer: whether the profile times its forward (what re-computation costs).
std::vector<bool> ForwardTimed(const Profile& profile) {
  std::vector<bool> timed;
  for (const LayerProfile& l : profile.layers) {
    bool t = l.forward_ms > 0;
    for (double ms : l.forward_ms_by_batch) t = t || ms > 0;
    timed.push_back(t);
  }
  return timed;
}

// The context of the search with schedule `k` alone (what `--schedule k` runs).
Context Family(const Context& c, ScheduleKind k) {
  Context f = c;
  f.schedules = {k};
  return f;
}

MicroBatching Mb(const Context& c, int m) { return {m, c.global_batch / m}; }

// Adds `plan` once per schedule in `kinds`.
void AddWithSchedules(std::vector<Proposal>& out, Plan plan, const std::string& origin,
                      const std::vector<ScheduleKind>& kinds) {
  for (ScheduleKind k : kinds) {
    plan.schedule = k;
    out.push_back({plan, origin});
  }
}

// The baselines' proposals; `into_dapple` tags them as candidates of the DAPPLE planner.
void ProposeBaseline(const Context& c, const std::string& name, bool enforce_memory,
                     const std::vector<ScheduleKind>& kinds, std::vector<Proposal>& out) {
  const int n = c.cost.num_layers();
  if (name == "dp") {
    for (int m : c.sizes) {
      auto p = DataParallelPlan(c.cluster, n, Mb(c, m));
      if (p) AddWithSchedules(out, std::move(*p), "dp", kinds);
    }
  } else if (name == "straight" || name == "gpipe") {
    for (int m : c.sizes) {
      Plan p = BalancedPipelinePlan(c.cost, c.cluster, Mb(c, m), kinds.front(), name.c_str());
      AddWithSchedules(out, std::move(p), name, kinds);
    }
  } else if (name == "pipedream") {
    for (int m : c.sizes) {
      std::optional<Plan> p;
      {  // PipeDream's DP, once per (m, memory) in a RunPlanner call
        std::unique_lock<std::mutex> lock(c.shared->dp_mu);
        auto it = c.shared->pipedream.find({m, enforce_memory});
        if (it != c.shared->pipedream.end()) {
          p = it->second;
        } else {
          lock.unlock();
          p = PipeDreamPlan(c.cost, c.cluster, Mb(c, m), enforce_memory);
          lock.lock();
          c.shared->pipedream.try_emplace({m, enforce_memory}, p);
        }
      }
      if (p) AddWithSchedules(out, std::move(*p), "pipedream", kinds);
    }
  }
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
  lock.unlock();  // the DPs run unlocked; another search may run the same one (same result)
  ParallelFor(nm, 0, [&](size_t k) {
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
  std::vector<DpCandidate> all;
  std::map<int, size_t> best_of_m;  // index in `all` of each m's best
  for (int m : c.sizes) {
    for (const DpCandidate& d : c.shared->dps.at(key(m)).candidates) {
      if (!best_of_m.count(m)) best_of_m[m] = all.size();
      all.push_back(d);
    }
  }
  lock.unlock();
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
  // Pure data parallelism and the straight pipeline are candidates too, and so are the
  // other baselines' partitions under DAPPLE's schedules.
  for (const char* b : {"dp", "straight", "pipedream"})
    ProposeBaseline(c, b, enforce_memory, c.schedules, out);
}

std::vector<Proposal> Propose(const Context& c, bool enforce_memory) {
  std::vector<Proposal> out;
  const std::string& name = c.options.planner;
  if (name == "dapple" && c.schedules.size() > 1) {
    // Each schedule's proposals as `--schedule` makes them (Note [Never slower with more
    // schedules]), one after the other.
    for (ScheduleKind k : c.schedules) {
      std::vector<Proposal> family = Propose(Family(c, k), enforce_memory);
      std::move(family.begin(), family.end(), std::back_inserter(out));
    }
  } else if (name == "dapple") {
    ProposeDapple(c, enforce_memory, out);
  } else if (name == "gpipe") {
    ProposeBaseline(c, name, enforce_memory, {c.options.schedule.value_or(ScheduleKind::kGPipe)},
                    out);
  } else if (name == "dp" && enforce_memory) {
    // The largest micro-batch that fits.
    std::vector<Proposal> all;
    ProposeBaseline(c, name, enforce_memory, {c.schedules.front()}, all);
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (EvaluatePlan(it->plan, c.cost).fits) {
        out.push_back(*it);
        break;
      }
    }
    if (out.empty()) out = std::move(all);  // none fits: reported as such
  } else if (name == "exhaustive") {
    ExhaustiveResult r = ExhaustivePlan(c.cost, c.cluster, c.global_batch, c.sizes, c.schedules,
                                        c.options.allreduce_overlap, ForwardTimed(c.profile));
    if (r.plan) out.push_back({*r.plan, "exhaustive"});
  } else {
    ProposeBaseline(c, name, enforce_memory, {c.schedules.front()}, out);
  }
  for (Proposal& p : out) p.plan.allreduce_overlap = c.options.allreduce_overlap;
  return out;
}

// The DAPPLE planner's selection with refinement (refine.h) for the schedules of `c`.
// Re-computation is searched on the stages whose layers have forward times in the profile;
// when no proposal fits even with it where needed, the proposals made without the memory
// limit are tried with it.
RefinedSelection SelectRefined(const Context& c, const std::vector<Proposal>& proposals,
                               int threads = 0) {
  RefineOptions ro;
  ro.threads = threads;
  ro.sizes = c.sizes;
  ro.schedules = c.schedules;
  ro.seconds = c.options.refine_seconds;
  ro.forward_timed = ForwardTimed(c.profile);
  ro.cache = &c.shared->sims;
  RefinedSelection r = SelectAndRefine(proposals, {}, c.cost, c.cluster, ro);
  if (!r.best && CanRecompute(ro.forward_timed, 0, c.profile.num_layers() - 1))
    r = SelectAndRefine(proposals, Propose(c, /*enforce_memory=*/false), c.cost, c.cluster, ro);
  return r;
}

// Note [Never slower with more schedules]
// Hill climbing with more schedules among its moves can settle in another local optimum
// than the climb with fewer (AmoebaNet-6 on paper-b at GBS 128: 412.5 ms with dapple-a,
// dapple-b and zb-h1 against 403.4 ms with dapple-a alone; GNMT-16 on paper-b without
// overlap: zb-h1 at 362 ms against dapple-a's 355 ms). So the search over several
// schedules contains the searches of each one alone: it runs the search `--schedule k`
// runs, for each k (the same proposals, DP and refinement; the DP results and simulations
// are shared, so a family costs only its own climb), then one climb with every schedule
// among the moves from the families' winners, fastest first. Its result is the fastest plan
// it saw, so it is never slower than any schedule alone (tests/plan/never_slower_test.cc),
// and it is deterministic as each family's search is (unless a time budget runs out: each
// climb has `refine_seconds`).
Selection SearchSchedules(const Context& c, const std::vector<std::vector<Proposal>>& families,
                          PlanResult& result) {
  Selection sel;
  std::vector<Scored> winners;
  std::vector<std::vector<RefineStep>> steps;
  // The families' searches are independent: one thread each (each simulating on its own),
  // gathered in schedule order.
  std::vector<RefinedSelection> found(families.size());
  ParallelFor(families.size(), 0, [&](size_t f) {
    found[f] = SelectRefined(Family(c, c.schedules[f]), families[f], /*threads=*/1);
  });
  for (size_t f = 0; f < found.size(); ++f) {
    RefinedSelection& r = found[f];
    if (r.best) {  // what RunPlanner with this schedule fixed returns
      PlanResult& fr = result.families.emplace_back();
      fr.family = c.schedules[f];
      fr.plan = r.best->plan;
      fr.plan->planner = c.options.planner;
      fr.plan->global_batch_size = c.global_batch;
      ResolvePlanLayers(*fr.plan, c.profile, "planner");
      fr.origin = r.best->origin;
      for (const RefineStep& st : r.steps) fr.refine_moves.push_back(st.move);
      fr.refine_out_of_time = r.out_of_time;
      fr.plans_simulated = r.simulated;
    }
    sel.simulated += r.simulated;
    result.refine_out_of_time = result.refine_out_of_time || r.out_of_time;
    if (!r.best) continue;
    winners.push_back(std::move(*r.best));
    steps.push_back(std::move(r.steps));
  }
  if (winners.empty()) return sel;
  std::vector<size_t> order(winners.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return winners[a].sim.iteration_ms < winners[b].sim.iteration_ms;
  });
  std::vector<Scored> starts;
  for (size_t i : order) starts.push_back(winners[i]);
  RefineOptions ro;
  ro.sizes = c.sizes;
  ro.schedules = c.schedules;
  ro.seconds = c.options.refine_seconds;
  ro.forward_timed = ForwardTimed(c.profile);
  ro.cache = &c.shared->sims;
  RefineResult mixed = Refine(starts, c.cost, c.cluster, ro);
  sel.simulated += mixed.simulated;
  result.refine_out_of_time = result.refine_out_of_time || mixed.out_of_time;
  const size_t from = order[mixed.start];  // the family whose winner the climb began at
  for (const RefineStep& st : steps[from]) result.refine_moves.push_back(st.move);
  for (const RefineStep& st : mixed.steps) result.refine_moves.push_back(st.move);
  sel.best = std::move(mixed.best);
  return sel;
}

// Note [Interleaving a plan] (interleaving.cc): the winner's device groups with v chunks
// each, at every micro-batch size, against the winner itself (which wins ties).
void OfferInterleaving(const Context& c, Selection& sel, PlanResult& result) {
  std::vector<Proposal> proposals = {{sel.best->plan, sel.best->origin}};
  for (Proposal& p : InterleavedProposals(sel.best->plan, c.cost, c.sizes, c.global_batch)) {
    p.plan.allreduce_overlap = c.options.allreduce_overlap;
    if (!MessageTagError(p.plan, c.cluster.num_devices())) proposals.push_back(std::move(p));
  }
  if (proposals.size() == 1) return;
  Selection alt = SelectFastest(proposals, c.cost, false, &c.shared->sims);
  sel.simulated += alt.simulated;
  if (!alt.best || alt.best->sim.iteration_ms >= sel.best->sim.iteration_ms) return;
  result.refine_moves.push_back(fmt::format("interleave v={}", alt.best->plan.virtual_stages));
  alt.best->origin = sel.best->origin;
  sel.best = std::move(alt.best);
}

}  // namespace

PlanResult RunPlanner(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                      int global_batch, const PlannerOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const auto names = PlannerNames();
  if (std::find(names.begin(), names.end(), options.planner) == names.end())
    ThrowInput("unknown planner '{}' (known: {})", options.planner, fmt::join(names, ", "));
  if (global_batch < 1) ThrowInput("--global-batch must be at least 1, got {}", global_batch);
  if (cluster.num_devices() < 1) ThrowInput("cluster '{}' has no device", cluster.name);
  if (profile.num_layers() < 1) ThrowInput("profile '{}' has no layer", profile.model);
  DAPPLE_CHECK(cost.num_layers() == profile.num_layers());
  DAPPLE_CHECK(cost.num_devices() == cluster.num_devices());
  if (options.rescore_top_k < 1) ThrowInput("rescore_top_k must be at least 1");

  Shared shared;
  Context c{profile, cluster, cost, global_batch, options, {}, {}, &shared};
  if (options.micro_batch_size) {
    int m = *options.micro_batch_size;
    if (m < 1 || global_batch % m != 0)
      ThrowInput("--micro-batch {} does not divide --global-batch {}", m, global_batch);
    c.sizes = {m};
  } else {
    c.sizes = MicroBatchSizes(global_batch);
  }
  if (options.schedule) {
    c.schedules = {*options.schedule};
  } else {
    c.schedules = {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1};
  }
  if (options.planner == "exhaustive" &&
      (cost.num_layers() > kExhaustiveMaxLayers || cluster.num_devices() > kExhaustiveMaxDevices))
    ThrowInput(
        "the exhaustive planner is for small problems (at most {} layers and {} devices; "
        "this one has {} and {})",
        kExhaustiveMaxLayers, kExhaustiveMaxDevices, cost.num_layers(), cluster.num_devices());
  if (options.planner == "dp" && cluster.num_devices() > c.sizes.back())
    ThrowInput(
        "data parallelism needs at least one sample per device: micro-batch {} < {} "
        "devices (raise --global-batch or --micro-batch)",
        c.sizes.back(), cluster.num_devices());

  PlanResult result;
  std::vector<Proposal> proposals = Propose(c, /*enforce_memory=*/true);
  // Never propose a plan the runtime cannot run: its message tags must fit the transport's
  // range on a job of one process per device of the cluster.
  const size_t proposed = proposals.size();
  std::erase_if(proposals, [&](const Proposal& p) {
    return MessageTagError(p.plan, cluster.num_devices()).has_value();
  });
  const bool dropped_for_tags = proposals.size() < proposed;
  Selection sel;
  if (options.planner == "dapple" && options.refine_seconds > 0 && c.schedules.size() > 1) {
    std::vector<std::vector<Proposal>> families(c.schedules.size());
    for (Proposal& p : proposals)
      for (size_t f = 0; f < c.schedules.size(); ++f)
        if (p.plan.schedule == c.schedules[f]) families[f].push_back(p);
    sel = SearchSchedules(c, families, result);
  } else if (options.planner == "dapple" && options.refine_seconds > 0) {
    RefinedSelection r = SelectRefined(c, proposals);
    sel.best = std::move(r.best);
    sel.simulated = r.simulated;
    for (const RefineStep& st : r.steps) result.refine_moves.push_back(st.move);
    result.refine_out_of_time = r.out_of_time;
  } else {
    sel = SelectFastest(proposals, cost, false, &shared.sims);
  }
  if (sel.best && options.planner == "dapple" && options.interleave &&
      (!options.schedule || *options.schedule == ScheduleKind::kInterleaved))
    OfferInterleaving(c, sel, result);
  result.plans_simulated = sel.simulated;
  if (sel.best) {
    Plan plan = std::move(sel.best->plan);
    plan.planner = options.planner;
    plan.global_batch_size = global_batch;
    ResolvePlanLayers(plan, profile, "planner");
    result.plan = std::move(plan);
    result.origin = sel.best->origin;
  } else {
    // Nothing fits: what would the plans need?
    std::vector<Proposal> loose = Propose(c, /*enforce_memory=*/false);
    double leanest = 0;
    for (const Proposal& p : loose) {
      double need = EvaluatePlan(p.plan, cost).peak_memory_bytes;
      if (leanest == 0 || need < leanest) leanest = need;
    }
    if (dropped_for_tags && proposals.empty()) {
      result.reason = fmt::format(
          "no plan the runtime can run: every plan proposed needs more message tags than the "
          "transport's 2^31 (2 x (stages - 1) x micro-batches x {}^2 devices); raise "
          "--micro-batch or plan on fewer devices",
          cluster.num_devices());
    } else if (loose.empty()) {
      result.reason = "no plan: every partition needs more replicas than samples";
    } else {
      result.required_memory_bytes = leanest;
      result.reason = fmt::format(
          "no plan fits in device memory: the leanest plan found needs {:.2f} GB per device",
          leanest / 1e9);
    }
  }
  result.planning_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dapple
