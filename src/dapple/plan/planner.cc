// The planners: RunPlanner dispatches by PlannerKind, searches the micro-batch size and
// the schedule, and lets the simulator pick among the proposals (rescoring.h).
#include "dapple/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "dapple/common/error.h"
#include "dapple/format/message_tags.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/interleaving.h"
#include "dapple/plan/parallel_for.h"
#include "dapple/plan/proposals.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/schedule_offers.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/search/sim_cache.h"
#include "dapple/plan/size_searches.h"

namespace dapple {

namespace {

using internal::ChooseForSteadyState;
using internal::Context;
using internal::Family;
using internal::ForwardTimed;
using internal::OfferedVShapes;
using internal::OfferVShapes;
using internal::Propose;
using internal::RunnableProposals;
using internal::SearchEachSize;
using internal::Shared;

// The DAPPLE planner's selection with refinement (refine.h) for the schedules of `c`.
// Re-computation is searched on the stages whose layers have forward times in the profile;
// when no proposal fits even with it where needed, the proposals made without the memory
// limit are tried with it.
RefineOptions RefineOptionsFor(const Context& c, int threads) {
  RefineOptions ro;
  ro.threads = threads;
  ro.sizes = c.sizes;
  ro.schedules = c.schedules;
  ro.max_work = c.options.refine_work;
  ro.forward_timed = ForwardTimed(c.profile);
  ro.cache = &c.shared->sims;
  ro.shard_memo = &c.shared->shard_memo;
  ro.group_work = &c.shared->group_work;
  ro.regroup = c.cluster.num_devices() <= internal::kEachSizeMaxDevices;
  return ro;
}

// SelectRefined's starts: when none fits, those of the proposals made without the memory
// limit, sharding the optimizer state and re-computing where they need it.
RefineStarts SelectedStarts(const Context& c, const std::vector<Proposal>& proposals,
                            const RefineOptions& ro) {
  RefineStarts starts = SelectStarts(proposals, {}, c.cost, ro);
  if (starts.starts.empty())
    starts = SelectStarts(proposals, Propose(c, /*enforce_memory=*/false), c.cost, ro);
  return starts;
}

// The key of a schedule's refined selection in Shared::refined.
auto RefinedKey(const Context& c, ScheduleKind k) {
  return std::tuple{k, c.sizes, c.options.refine_work, c.options.allreduce_overlap};
}

// Keeps `r` as the refined selection of schedule `k` of `c` (SelectRefined's outcome), and
// returns it.
const RefinedSelection& KeepRefined(const Context& c, ScheduleKind k, RefinedSelection r) {
  std::lock_guard<std::mutex> lock(c.shared->dp_mu);
  return c.shared->refined.try_emplace(RefinedKey(c, k), std::move(r)).first->second;
}

// A selection of `c`'s one schedule, from the memo when a search ran it already (the same
// proposals, starts and climbs: the outcome is that search's). Its climbs, one per start,
// each with a budget of its own, run side by side on the cores, one thread each, as the
// families' climbs do (SelectRefinedFamilies): a climb on two threads simulates the second
// neighbour of a pair in vain when the first is taken, as it mostly is.
RefinedSelection SelectRefined(const Context& c, const std::vector<Proposal>& proposals) {
  DAPPLE_CHECK(c.schedules.size() == 1);
  {
    std::lock_guard<std::mutex> lock(c.shared->dp_mu);
    auto it = c.shared->refined.find(RefinedKey(c, c.schedules[0]));
    if (it != c.shared->refined.end()) return it->second;
  }
  const RefineOptions ro = RefineOptionsFor(c, /*threads=*/1);
  const RefineStarts starts = SelectedStarts(c, proposals, ro);
  if (starts.starts.empty()) return KeepRefined(c, c.schedules[0], Refined(starts, {}));
  RefineOptions wide = ro;
  wide.wide_moves_up_to_ms = FastestStartMs(starts.starts);
  return KeepRefined(c, c.schedules[0],
                     Refined(starts, Regrouped(ClimbEach(starts.starts, c.cost, c.cluster, wide),
                                               c.cost, c.cluster, wide)));
}

// Each family's SelectRefined, the families' searches on the machine's cores together:
// three families on two cores, one search per thread, left a core idle while the last
// family climbed alone. Picking a family's starts is a task; once it is done, each climb
// from its starts (up to three, independent given the starts) is a task of its own, the
// largest simulations first (M x S of the start), while other families may still pick
// theirs. What the tasks compute is gathered by family and start, so the result does not
// depend on timing.
std::vector<RefinedSelection> SelectRefinedFamilies(
    const Context& c, const std::vector<std::vector<Proposal>>& families) {
  const size_t F = families.size();
  std::vector<RefineOptions> options(F);
  std::vector<RefineStarts> starts(F);
  std::vector<std::vector<RefineResult>> climbs(F);  // [family][start]
  std::vector<std::vector<size_t>> twins(F);         // Note [Twin starts]
  TaskPool pool;
  auto climb = [&](size_t f, size_t i) {
    return [&, f, i](TaskPool&) {
      climbs[f][i] = Refine({starts[f].starts[i]}, c.cost, c.cluster, options[f]);
    };
  };
  constexpr long long kStarts = std::numeric_limits<long long>::max() - 8;  // before climbs
  for (size_t k = 0; k < F; ++k) {
    const size_t f = F - 1 - k;  // the last family (zb-h1's) is the longest: not last
    pool.Add(kStarts - static_cast<long long>(k), [&, f](TaskPool& p) {
      const Context fc = Family(c, c.schedules[f]);
      options[f] = RefineOptionsFor(fc, /*threads=*/1);
      starts[f] = SelectedStarts(fc, families[f], options[f]);
      climbs[f].resize(starts[f].starts.size());
      if (!starts[f].starts.empty())
        options[f].wide_moves_up_to_ms = FastestStartMs(starts[f].starts);
      twins[f] = TwinStarts(starts[f].starts);
      for (size_t i = 0; i < starts[f].starts.size(); ++i) {
        const Plan& plan = starts[f].starts[i].plan;
        if (twins[f][i] == i)
          p.Add(static_cast<long long>(plan.num_micro_batches) * plan.num_stages(), climb(f, i));
      }
    });
  }
  pool.Run(0);
  std::vector<RefineResult> ends(F);  // the families' regroupings side by side; Refined
  ParallelFor(F, 0, [&](size_t f) {   // ignores those of a family without starts
    if (!climbs[f].empty())
      ends[f] = Regrouped(FastestClimb(WithTwinClimbs(twins[f], std::move(climbs[f]))), c.cost,
                          c.cluster, options[f]);
  });
  std::vector<RefinedSelection> found(F);
  for (size_t f = 0; f < F; ++f)
    found[f] = KeepRefined(c, c.schedules[f], Refined(starts[f], ends[f]));
  return found;
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

// Fills a family's result from its search `r` and its final selection `sel` (r's winner,
// or the interleaving offered on it, whose move OfferInterleaving recorded already).
void FillFamily(PlanResult& fr, const RefinedSelection& r, const Selection& sel, const Context& c) {
  std::vector<std::string> offered = std::move(fr.refine_moves);
  fr.refine_moves.clear();
  for (const RefineStep& st : r.steps) fr.refine_moves.push_back(st.move);
  fr.refine_moves.insert(fr.refine_moves.end(), offered.begin(), offered.end());
  fr.plan = sel.best->plan;
  fr.plan->planner = ToString(c.options.planner);
  fr.plan->global_batch_size = c.global_batch;
  ResolvePlanLayers(*fr.plan, c.profile, "planner");
  fr.origin = sel.best->origin;
  fr.refine_out_of_budget = r.out_of_budget;
  fr.plans_simulated = sel.simulated;
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
// and it is deterministic as each family's search is (each climb has a budget of
// `refine_work`: Note [A budget of work] in refine.cc).
Selection SearchSchedules(const Context& c, const std::vector<std::vector<Proposal>>& families,
                          PlanResult& result) {
  Selection sel;
  std::vector<Scored> winners;
  std::vector<std::vector<RefineStep>> steps;
  std::vector<RefinedSelection> found = SelectRefinedFamilies(c, families);
  PlanResult interleaved;
  for (size_t f = 0; f < found.size(); ++f) {
    RefinedSelection& r = found[f];
    if (r.best) {  // what RunPlanner with this schedule fixed returns
      PlanResult& fr = result.families.emplace_back();
      fr.family = c.schedules[f];
      FillFamily(fr, r, Selection{r.best, r.simulated, 0}, c);
    }
    // Interleaved with one chunk is dapple-b (its lists are dapple-b's, and so are its
    // warm-up depths, proposals and moves), so `--schedule interleaved` searches as
    // dapple-b does and then offers chunks on that winner: its family is recorded from
    // dapple-b's, and `dapple plan`'s interleaved row needs no search of its own.
    if (r.best && c.schedules[f] == ScheduleKind::kDappleB && c.options.interleave) {
      Selection one{r.best, r.simulated, 0};
      one.best->plan.schedule = ScheduleKind::kInterleaved;
      interleaved.family = ScheduleKind::kInterleaved;
      OfferInterleaving(Family(c, ScheduleKind::kInterleaved), one, interleaved);
      FillFamily(interleaved, r, one, c);
    }
    sel.simulated += r.simulated;
    result.refine_out_of_budget = result.refine_out_of_budget || r.out_of_budget;
    if (!r.best) continue;
    winners.push_back(std::move(*r.best));
    steps.push_back(std::move(r.steps));
  }
  if (interleaved.plan) result.families.push_back(std::move(interleaved));
  if (winners.empty()) return sel;
  std::vector<size_t> order(winners.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return winners[a].sim.iteration_ms < winners[b].sim.iteration_ms;
  });
  // One climb per winner, side by side on the cores (each simulating one neighbour at a
  // time: a climb with two threads simulated the second neighbour of a pair in vain when
  // the first was faster, as it mostly is), gathered as Refine gathers its starts'.
  std::vector<Scored> ordered;
  for (size_t k : order) ordered.push_back(winners[k]);
  RefineOptions one = RefineOptionsFor(c, /*threads=*/1);
  one.wide_moves_up_to_ms = ordered[0].sim.iteration_ms;
  RefineResult mixed =
      Regrouped(ClimbEach(ordered, c.cost, c.cluster, one), c.cost, c.cluster, one);
  sel.simulated += mixed.simulated;
  result.refine_out_of_budget = result.refine_out_of_budget || mixed.out_of_budget;
  const size_t from = order[mixed.start];  // the family whose winner the climb began at
  for (const RefineStep& st : steps[from]) result.refine_moves.push_back(st.move);
  for (const RefineStep& st : mixed.steps) result.refine_moves.push_back(st.move);
  sel.best = std::move(mixed.best);
  return sel;
}

// Throws InputError for a request no planner can answer.
void CheckRequest(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                  int global_batch, const PlannerOptions& options) {
  if (global_batch < 1) ThrowInput("--global-batch must be at least 1, got {}", global_batch);
  if (cluster.num_devices() < 1) ThrowInput("cluster '{}' has no device", cluster.name);
  if (profile.num_layers() < 1) ThrowInput("profile '{}' has no layer", profile.model);
  DAPPLE_CHECK(cost.num_layers() == profile.num_layers());
  DAPPLE_CHECK(cost.num_devices() == cluster.num_devices());
  if (options.rescore_top_k < 1) ThrowInput("rescore_top_k must be at least 1");
}

// The call's context: the micro-batch sizes and schedules it searches. Throws InputError
// for a request the planner cannot answer on them.
Context ContextFor(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                   int global_batch, const PlannerOptions& options, Shared& shared) {
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
    // A V-shape plan is made from a plan of one chunk per stage: the search runs zb-h1's,
    // whose split backward and peak (S micro-batches) are zb-v's (Note [V shapes from a plan]).
    c.schedules = {VShaped(*options.schedule) ? ScheduleKind::kZbH1 : *options.schedule};
  } else {
    c.schedules = {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1};
  }
  if (options.planner == PlannerKind::kExhaustive &&
      (cost.num_layers() > kExhaustiveMaxLayers || cluster.num_devices() > kExhaustiveMaxDevices))
    ThrowInput(
        "the exhaustive planner is for small problems (at most {} layers and {} devices; "
        "this one has {} and {})",
        kExhaustiveMaxLayers, kExhaustiveMaxDevices, cost.num_layers(), cluster.num_devices());
  if (options.planner == PlannerKind::kDataParallel && cluster.num_devices() > c.sizes.back())
    ThrowInput(
        "data parallelism needs at least one sample per device: micro-batch {} < {} "
        "devices (raise --global-batch or --micro-batch)",
        c.sizes.back(), cluster.num_devices());
  return c;
}

// The search among the proposals: the DAPPLE planner's refinement (per schedule family,
// then across them) and interleaving, or the simulator's pick for the other planners.
Selection SearchSizesTogether(const Context& c, const std::vector<Proposal>& proposals,
                              PlanResult& result) {
  const PlannerOptions& options = c.options;
  Selection sel;
  const bool refine = options.planner == PlannerKind::kDapple && options.refine_work > 0;
  if (refine && c.schedules.size() > 1) {
    std::vector<std::vector<Proposal>> families(c.schedules.size());
    for (const Proposal& p : proposals)
      for (size_t f = 0; f < c.schedules.size(); ++f)
        if (p.plan.schedule == c.schedules[f]) families[f].push_back(p);
    sel = SearchSchedules(c, families, result);
  } else if (refine) {
    RefinedSelection r = SelectRefined(c, proposals);
    sel.best = std::move(r.best);
    sel.simulated = r.simulated;
    for (const RefineStep& st : r.steps) result.refine_moves.push_back(st.move);
    result.refine_out_of_budget = r.out_of_budget;
  } else {
    sel = SelectFastest(proposals, c.cost, false, &c.shared->sims);
  }
  // The bases of the V shapes: the one-chunk winner and each family's, or, when nothing fits
  // with one chunk per stage, every proposal made without the memory limit.
  std::vector<Plan> v_bases;
  if (const std::vector<ScheduleKind> kinds = OfferedVShapes(options); !kinds.empty()) {
    if (sel.best) v_bases.push_back(sel.best->plan);
    for (const PlanResult& fr : result.families)
      if (fr.plan && fr.plan->virtual_stages == 1) v_bases.push_back(*fr.plan);
    if (v_bases.empty())
      for (Proposal& p : Propose(c, /*enforce_memory=*/false)) v_bases.push_back(std::move(p.plan));
  }
  if (sel.best && options.planner == PlannerKind::kDapple && options.interleave &&
      (!options.schedule || *options.schedule == ScheduleKind::kInterleaved))
    OfferInterleaving(c, sel, result);
  if (!v_bases.empty()) OfferVShapes(c, v_bases, OfferedVShapes(options), sel, result);
  return sel;
}

// SearchSizesTogether, then (the DAPPLE planner with refinement) the same on each
// micro-batch size alone: Note [Never slower than one micro-batch size].
Selection Search(const Context& c, const std::vector<Proposal>& proposals, PlanResult& result) {
  Selection sel = SearchSizesTogether(c, proposals, result);
  if (c.options.planner == PlannerKind::kDapple && c.options.refine_work > 0)
    SearchEachSize(c, &SearchSizesTogether, sel, result);
  return sel;
}

// Why nothing was found: the runtime could run none (`for_tags`), no partition has a
// sample per replica, or nothing fits memory (with what the leanest plan would need).
void ExplainNoPlan(const Context& c, bool for_tags, PlanResult& result) {
  std::vector<Proposal> loose = Propose(c, /*enforce_memory=*/false);
  double leanest = 0;
  for (const Proposal& p : loose) {
    double need = EvaluatePlan(p.plan, c.cost).peak_memory_bytes;
    if (leanest == 0 || need < leanest) leanest = need;
  }
  if (for_tags) {
    result.reason = fmt::format(
        "no plan the runtime can run: every plan proposed needs more message tags than the "
        "transport's 2^31 (2 x (stages - 1) x micro-batches x {}^2 devices); raise "
        "--micro-batch or plan on fewer devices",
        c.cluster.num_devices());
  } else if (loose.empty()) {
    result.reason = "no plan: every partition needs more replicas than samples";
  } else {
    result.required_memory_bytes = leanest;
    result.reason = fmt::format(
        "no plan fits in device memory: the leanest plan found needs {:.2f} GB per device",
        leanest / 1e9);
  }
}

}  // namespace

// Note [One memo for several planner calls]
// What a planner call keeps in internal::Shared depends only on the problem (profile,
// cluster, cost model, global batch, rescore_top_k) and on its own key: a DP's result on
// (m, warm-up depths, memory enforced), PipeDream's partition on (m, memory enforced), a
// simulation on the plan (SimKey). So calls on one problem may share it, whichever planner
// or schedule each runs, and each gets what it would have computed itself. The one
// exception is dapple-b's DP, which a call reuses from dapple-a's when no stage would
// decide differently (proposals.cc): it returns the same plans either way.
PlanningMemo::PlanningMemo() : shared_(std::make_unique<Shared>()) {}
PlanningMemo::~PlanningMemo() = default;

Shared& PlanningMemo::For(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                          int global_batch, int rescore_top_k) {
  const void* problem[3] = {&profile, &cluster, &cost};
  if (!std::equal(problem, problem + 3, problem_) || global_batch != global_batch_ ||
      rescore_top_k != top_k_) {
    shared_ = std::make_unique<Shared>();
    std::copy(problem, problem + 3, problem_);
    global_batch_ = global_batch;
    top_k_ = rescore_top_k;
  }
  return *shared_;
}

PlanResult RunPlanner(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                      int global_batch, const PlannerOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CheckRequest(profile, cluster, cost, global_batch, options);
  Shared own;
  Shared& shared =
      options.memo ? options.memo->For(profile, cluster, cost, global_batch, options.rescore_top_k)
                   : own;
  const Context c = ContextFor(profile, cluster, cost, global_batch, options, shared);
  PlanResult result;
  // Never propose a plan the runtime cannot run: its message tags must fit the transport's
  // range on a job of one process per device of the cluster.
  bool dropped_for_tags = false;
  std::vector<Proposal> proposals = RunnableProposals(c, &dropped_for_tags);
  if (options.proposed) options.proposed();
  Selection sel = Search(c, proposals, result);
  if (sel.best && options.steady_state) ChooseForSteadyState(c, sel, result);
  result.plans_simulated = sel.simulated;
  if (sel.best) {
    Plan plan = std::move(sel.best->plan);
    plan.planner = ToString(options.planner);
    plan.global_batch_size = global_batch;
    ResolvePlanLayers(plan, profile, "planner");
    result.plan = std::move(plan);
    result.origin = sel.best->origin;
  } else {
    ExplainNoPlan(c, dropped_for_tags && proposals.empty(), result);
  }
  result.planning_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dapple
