// Internal to plan/: the schedules the planner offers on its search's winners rather than
// inside the search: the V shapes (Note [V shapes from a plan] in interleaving.cc) and the
// choice by steady state (Note [Choosing for steady state] in schedule_offers.cc).
#pragma once

#include <vector>

#include "dapple/plan/plan_options.h"
#include "dapple/plan/proposals.h"
#include "dapple/plan/search/rescoring.h"

namespace dapple::internal {

// V-shape plans of `bases`' groups for each kind of `kinds`, at every micro-batch size. With
// the schedule fixed to a V the fastest that fits replaces the winner (none fitting: no
// plan), else it does only when it is faster.
void OfferVShapes(const Context& c, const std::vector<Plan>& bases,
                  const std::vector<ScheduleKind>& kinds, Selection& sel, PlanResult& result);

// REQUIRES: sel.best. Re-scores the winner, each family's and (unless the schedule is fixed)
// zb-h2 on the one-chunk ones' stages by their steady state; keeps the fastest, marked
// Plan::steady_state.
void ChooseForSteadyState(const Context& c, Selection& sel, PlanResult& result);

}  // namespace dapple::internal
