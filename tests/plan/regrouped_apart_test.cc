// RegroupedApart (Note [Deep starts regrouped apart] in plan/refine/refine.cc): never slower
// than the fastest climb regrouped (what the search did before), and where a climb from the
// added starts ends fastest, never slower than the others' fastest climb regrouped alone (the
// search without the added starts). On the climbs from the even-width pipelines of mixed
// medium problems, split at every place: on these two, the fastest climb regrouped is slower
// than the others' alone at 11 of the splits.
#include <gtest/gtest.h>

#include <vector>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/search/sim_cache.h"
#include "plan/random_medium_problems.h"

namespace dapple {
namespace {

TEST(RegroupedApart, NeverSlowerThanTheOthersAlone) {
  int compared = 0, plain_slower = 0;
  for (unsigned seed : {2u, 13u}) {
    const auto p = testing::MakeMediumAnalyticProblem(seed, /*mixed=*/true, 10);
    SCOPED_TRACE(p->description);
    SimCache cache;
    RefineOptions o;
    o.sizes = {2};
    o.schedules = {ScheduleKind::kDappleB};
    o.regroup = true;
    o.threads = 1;
    o.cache = &cache;
    const MicroBatching mb{2, p->global_batch / 2};
    std::vector<Scored> starts;
    for (Plan& plan : EvenWidthPlans(*p->cost, p->cluster, mb)) {
      plan.schedule = ScheduleKind::kDappleB;
      const PlanCosts costs = EvaluatePlan(plan, *p->cost);
      if (!costs.fits) continue;
      if (auto s = ScoreFitting(plan, costs, *p->cost, &cache)) starts.push_back(std::move(*s));
    }
    ASSERT_GE(starts.size(), 3u);
    const std::vector<RefineResult> climbs = ClimbsFrom(starts, *p->cost, p->cluster, o);
    const RefineResult plain = Regrouped(FastestClimb(climbs), *p->cost, p->cluster, o);
    for (size_t k = 1; k < climbs.size(); ++k) {
      const RefineResult r = RegroupedApart(climbs, k, *p->cost, p->cluster, o);
      EXPECT_LE(r.best.sim.iteration_ms, plain.best.sim.iteration_ms) << "split at " << k;
      if (FastestClimb(climbs).start < k) {  // one of the others' ends fastest: as before
        EXPECT_EQ(r.best.sim.iteration_ms, plain.best.sim.iteration_ms) << "split at " << k;
        continue;
      }
      const std::vector<RefineResult> others(climbs.begin(), climbs.begin() + k);
      const double alone =
          Regrouped(FastestClimb(others), *p->cost, p->cluster, o).best.sim.iteration_ms;
      EXPECT_LE(r.best.sim.iteration_ms, alone) << "split at " << k;
      plain_slower += plain.best.sim.iteration_ms > alone * (1 + 1e-9);
      ++compared;
    }
  }
  EXPECT_GT(compared, 3);
  EXPECT_GT(plain_slower, 0);  // the problems show what RegroupedApart is for
}

}  // namespace
}  // namespace dapple
