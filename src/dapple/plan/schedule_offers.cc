// The schedules offered on the search's winners: see schedule_offers.h.
#include "dapple/plan/schedule_offers.h"

#include <limits>
#include <optional>
#include <set>
#include <string>

#include "dapple/common/error.h"
#include "dapple/format/message_tags.h"
#include "dapple/plan/interleaving.h"
#include "dapple/plan/v_search.h"
#include "dapple/sim/simulator.h"

namespace dapple::internal {

void OfferVShapes(const Context& c, const std::vector<Plan>& bases,
                  const std::vector<ScheduleKind>& kinds, Selection& sel, PlanResult& result) {
  std::vector<Proposal> proposals;
  auto add = [&](const Plan& base, const std::vector<int>& sizes) {
    for (Proposal& p : VShapeProposals(base, c.cost, sizes, c.global_batch, kinds)) {
      p.plan.allreduce_overlap = c.options.allreduce_overlap;
      if (!MessageTagError(p.plan, c.cluster.num_devices())) proposals.push_back(std::move(p));
    }
  };
  std::set<std::string> seen;  // the winner is mostly a family's winner too
  for (const Plan& base : bases)
    if (seen.insert(SimKey(base)).second) add(base, c.sizes);
  if (SmallVSearch(c))
    for (const Plan& base : MoreVBases(c, bases)) add(base, {base.micro_batch_size});
  const bool fixed = c.options.schedule.has_value();
  // Offered beside a winner, a V shape must beat it once re-cut (Note [V shapes searched]):
  // SelectFastest need not simulate those more than the slack slower to the end.
  const double beat =
      !fixed && sel.best ? sel.best->sim.iteration_ms : std::numeric_limits<double>::infinity();
  Selection alt;
  alt.best =
      FastestVShape(c, proposals, beat * (1 + (SmallVSearch(c) ? kReCutSlack : kReCutSlackLarge)),
                    &sel.simulated);
  if (!alt.best) {
    if (fixed) sel.best.reset();
    return;
  }
  if (!fixed && sel.best && alt.best->sim.iteration_ms >= sel.best->sim.iteration_ms) return;
  result.refine_moves.push_back(fmt::format("v-shape {}", ToString(alt.best->plan.schedule)));
  if (sel.best) alt.best->origin = sel.best->origin;
  sel.best = std::move(alt.best);
}

// Note [Choosing for steady state]: the search scores one iteration from a cold start (its
// simulations, bounds and cache are made for that). With PlannerOptions::steady_state the
// winner, each family's winner and zb-h2 on the stages of each one-chunk one (zb-h2 is not a
// family of the search; its parallelogram pays most in steady state: Note [ZB-H2]) are scored
// again, those that fit memory, by their time per iteration in steady state, and the fastest
// is kept (the winner on ties).
void ChooseForSteadyState(const Context& c, Selection& sel, PlanResult& result) {
  std::vector<Plan> candidates = {sel.best->plan};
  for (const PlanResult& fr : result.families)
    if (fr.plan) candidates.push_back(*fr.plan);
  // A fixed schedule stays fixed: zb-h2 is offered only when the search chose the schedule.
  for (size_t i = 0, n = c.options.schedule ? 0 : candidates.size(); i < n; ++i) {
    if (candidates[i].virtual_stages != 1) continue;
    Plan h2 = candidates[i];
    h2.schedule = ScheduleKind::kZbH2;
    h2.estimate.reset();
    candidates.push_back(std::move(h2));
  }
  double best_ms = 0;
  std::optional<Scored> chosen;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Selection one =
        SelectFastest({{candidates[i], sel.best->origin}}, c.cost, false, &c.shared->sims);
    sel.simulated += one.simulated;
    if (!one.best) continue;
    const double ms = SimulateSteadyState(one.best->plan, c.cost).iteration_ms;
    if (chosen && ms >= best_ms) continue;
    best_ms = ms;
    chosen = std::move(one.best);
    if (i > 0)
      result.refine_moves.push_back(
          fmt::format("steady state {}", ToString(chosen->plan.schedule)));
  }
  DAPPLE_CHECK(chosen.has_value(), "the winner fits memory");
  sel.best = std::move(chosen);
  sel.best->plan.steady_state = true;
  result.steady_state_iteration_ms = best_ms;
}

}  // namespace dapple::internal
