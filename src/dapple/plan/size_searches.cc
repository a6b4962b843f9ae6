// The search over several micro-batch sizes and the search of each size alone.
//
// Note [Never slower than one micro-batch size]
// The search over every micro-batch size refines the fastest proposals of all sizes
// together: its starts are the fastest of each origin whatever their size, and its climbs
// move between sizes. A climb that starts elsewhere can settle in a worse local optimum
// than the search with one size fixed. So the search
// over several sizes contains the search of each size alone: after its own search, it runs
// for every size m exactly what RunPlanner with `micro_batch_size` = m runs (that size's
// proposals, starts, climbs and schedule families, each climb with the full budget
// `refine_work`, so no size is starved by another's), and keeps the fastest plan seen, for
// the whole search and for each family. Its result is therefore never slower than the
// planner with any one size fixed, nor with any one schedule or both fixed (the families
// are nested the same way, Note [Never slower with more schedules] in family_search.cc):
// tests/plan/never_slower_sizes_test.cc. The DPs, partitions and simulations are shared,
// so a size costs its own climbs.
//
// Only on clusters of at most kEachSizeMaxDevices devices: a size's search costs about what
// the whole search did before (its climbs simulate plans of its own size, which the others
// do not visit), so the search takes about as many times longer as there are sizes: worth it where
// the search is cheap and meant to reach the exhaustive optimum, not on large clusters.
//
// A size is skipped when MicroBatchLowerBound says no plan of that size can be faster than
// the slowest result recorded (the plan and every family's): it could not replace any, so
// the outcome is the same as running it. The bound is loose (it sees neither the bubble
// nor the transfers), so it skips mostly sizes whose slices compute inefficiently or whose
// busiest layer alone, M times, takes longer.
#include "dapple/plan/size_searches.h"

#include <algorithm>
#include <limits>

#include "dapple/format/message_tags.h"
#include "dapple/plan/search/compute_floors.h"

namespace dapple::internal {

std::vector<Proposal> RunnableProposals(const Context& c, bool* dropped_for_tags) {
  std::vector<Proposal> proposals = Propose(c, /*enforce_memory=*/true);
  const size_t proposed = proposals.size();
  std::erase_if(proposals, [&](const Proposal& p) {
    return MessageTagError(p.plan, c.cluster.num_devices()).has_value();
  });
  if (dropped_for_tags) *dropped_for_tags = proposals.size() < proposed;
  return proposals;
}

namespace {

double TimeOf(const Selection& s) { return s.best->sim.iteration_ms; }

// The slowest result recorded: the plan's and each family's; infinite while a family of
// `c` has none (a size could give it its first).
double SlowestRecorded(const Context& c, const Selection& sel, const PlanResult& result) {
  if (!sel.best) return std::numeric_limits<double>::infinity();
  double slowest = TimeOf(sel);
  if (c.schedules.size() > 1) {
    for (ScheduleKind k : c.schedules) {
      auto f = std::find_if(result.families.begin(), result.families.end(),
                            [&](const PlanResult& r) { return r.family == k; });
      if (f == result.families.end()) return std::numeric_limits<double>::infinity();
    }
  }
  for (const PlanResult& f : result.families)
    slowest = std::max(slowest, f.plan->estimate->iteration_ms);
  return slowest;
}

// Keeps each family of `one` (a size's search) in `result` where it is faster.
void MergeFamilies(std::vector<PlanResult>& families, std::vector<PlanResult>&& one) {
  for (PlanResult& f : one) {
    auto it = std::find_if(families.begin(), families.end(),
                           [&](const PlanResult& r) { return r.family == f.family; });
    if (it == families.end()) {
      families.push_back(std::move(f));
    } else if (f.plan->estimate->iteration_ms < it->plan->estimate->iteration_ms) {
      *it = std::move(f);
    }
  }
}

}  // namespace

void SearchEachSize(const Context& c, const SearchOf& search, Selection& sel, PlanResult& result) {
  if (c.sizes.size() < 2 || c.cluster.num_devices() > kEachSizeMaxDevices) return;
  for (int m : c.sizes) {
    if (MicroBatchLowerBound(c.cost, c.global_batch, m) >= SlowestRecorded(c, sel, result))
      continue;
    Context one = c;
    one.sizes = {m};
    PlanResult r;
    Selection s = search(one, RunnableProposals(one), r);
    sel.simulated += s.simulated;
    result.refine_out_of_budget = result.refine_out_of_budget || r.refine_out_of_budget;
    MergeFamilies(result.families, std::move(r.families));
    if (!s.best || (sel.best && TimeOf(s) >= TimeOf(sel))) continue;
    sel.best = std::move(s.best);
    result.refine_moves = std::move(r.refine_moves);
  }
}

}  // namespace dapple::internal
