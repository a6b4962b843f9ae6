// The planners: RunPlanner dispatches by PlannerKind, searches the micro-batch size and
// the schedule, and lets the simulator pick among the proposals (rescoring.h).
#include "dapple/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "dapple/common/error.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/family_search.h"
#include "dapple/plan/proposals.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/schedule_offers.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/search/sim_cache.h"
#include "dapple/plan/size_searches.h"
#include "dapple/plan/v_search.h"

namespace dapple {

namespace {

using internal::ChooseForSteadyState;
using internal::Context;
using internal::Family;
using internal::ForwardTimed;
using internal::OfferedVShapes;
using internal::OfferInterleaving;
using internal::OfferVShapes;
using internal::Propose;
using internal::RunnableProposals;
using internal::SearchEachSize;
using internal::SearchSchedules;
using internal::SelectRefined;
using internal::Shared;

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
Selection SearchSizesTogether(const Context& c, std::vector<Proposal> proposals,
                              PlanResult& result) {
  const PlannerOptions& options = c.options;
  Selection sel;
  const bool refine = options.planner == PlannerKind::kDapple && options.refine_work > 0;
  if (refine && c.schedules.size() > 1) {
    std::vector<std::vector<Proposal>> families(c.schedules.size());
    for (Proposal& p : proposals) {
      auto f = std::find(c.schedules.begin(), c.schedules.end(), p.plan.schedule);
      if (f != c.schedules.end()) families[f - c.schedules.begin()].push_back(std::move(p));
    }
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
Selection Search(const Context& c, std::vector<Proposal> proposals, PlanResult& result) {
  Selection sel = SearchSizesTogether(c, std::move(proposals), result);
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
  const bool none_runnable = proposals.empty();
  Selection sel = Search(c, std::move(proposals), result);
  if (sel.best && options.steady_state) ChooseForSteadyState(c, sel, result);
  result.plans_simulated = sel.simulated;
  if (sel.best) {
    Plan plan = std::move(sel.best->plan);
    plan.planner = ToString(options.planner);
    plan.global_batch_size = global_batch;
    ResolvePlanLayers(plan, profile, "planner");
    result.plan = std::move(plan);
    result.origin = sel.best->origin.Name();
  } else {
    ExplainNoPlan(c, dropped_for_tags && none_runnable, result);
  }
  result.planning_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dapple
