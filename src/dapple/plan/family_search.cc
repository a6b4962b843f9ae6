// The DAPPLE planner's search per schedule family and across them: see family_search.h.
#include "dapple/plan/family_search.h"

#include <algorithm>
#include <limits>

#include "dapple/common/error.h"
#include "dapple/format/message_tags.h"
#include "dapple/plan/interleaving.h"
#include "dapple/plan/parallel_for.h"
#include "dapple/plan/search/sim_cache.h"
#include "dapple/plan/size_searches.h"

namespace dapple::internal {
namespace {

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
  ro.recompute_memo = &c.shared->recompute_memo;
  ro.group_work = &c.shared->group_work;
  ro.regroup = c.cluster.num_devices() <= internal::kEachSizeMaxDevices;
  return ro;
}

// RefineOptions::wide_moves_up_to_ms for the climbs from `starts`: the fastest start's time
// (Note [Wide moves at a local optimum] in refine.cc), or every local optimum where the
// even-width starts in every server order are (Note [Even widths in every server order] in
// proposals.cc): those begin far behind the fastest start and reach the optimum only by
// the wide moves, and the clusters are small.
double WideMovesUpTo(const Context& c, const std::vector<Scored>& starts) {
  if (KindFirstEvenWidths(c.cluster)) return std::numeric_limits<double>::infinity();
  return FastestStartMs(starts);
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

}  // namespace

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
  wide.wide_moves_up_to_ms = WideMovesUpTo(c, starts.starts);
  return KeepRefined(
      c, c.schedules[0],
      Refined(starts, RegroupedApart(ClimbsFrom(starts.starts, c.cost, c.cluster, wide),
                                     starts.deep_from, c.cost, c.cluster, wide)));
}

namespace {

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
        options[f].wide_moves_up_to_ms = WideMovesUpTo(fc, starts[f].starts);
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
      ends[f] = RegroupedApart(WithTwinClimbs(twins[f], std::move(climbs[f])), starts[f].deep_from,
                               c.cost, c.cluster, options[f]);
  });
  std::vector<RefinedSelection> found(F);
  for (size_t f = 0; f < F; ++f)
    found[f] = KeepRefined(c, c.schedules[f], Refined(starts[f], ends[f]));
  return found;
}

}  // namespace

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

namespace {

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
  fr.origin = sel.best->origin.Name();
  fr.refine_out_of_budget = r.out_of_budget;
  fr.plans_simulated = sel.simulated;
}

}  // namespace

// Note [Never slower with more schedules]
// Hill climbing with more schedules among its moves can settle in another, slower local optimum
// than the climb with fewer. So the search over several
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
  one.wide_moves_up_to_ms = WideMovesUpTo(c, ordered);
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

}  // namespace dapple::internal
