// Internal to plan/: the DAPPLE planner's search with refinement, per schedule family and
// across the families (Note [Never slower with more schedules] in family_search.cc), and the
// interleaving offered on a winner. planner.cc runs them for each set of micro-batch sizes.
#pragma once

#include <vector>

#include "dapple/plan/plan_options.h"
#include "dapple/plan/proposals.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/search/rescoring.h"

namespace dapple::internal {

// The refined selection of `c`'s one schedule among `proposals`: its starts, their climbs
// side by side, the fastest end (memoized per schedule in c.shared).
RefinedSelection SelectRefined(const Context& c, const std::vector<Proposal>& proposals);

// The search over several schedules: each family's search as `--schedule k` runs it, then
// one climb with every schedule among the moves from the families' winners; the families'
// results go to result.families.
Selection SearchSchedules(const Context& c, const std::vector<std::vector<Proposal>>& families,
                          PlanResult& result);

// The winner's device groups with v chunks each, at every micro-batch size, against the
// winner itself (which wins ties); the move is recorded in result.refine_moves.
void OfferInterleaving(const Context& c, Selection& sel, PlanResult& result);

}  // namespace dapple::internal
