// IterationLowerBound (plan_costs.h) never exceeds the simulated iteration time: the
// refinement drops the neighbours and re-scoring stops at the proposals it proves no
// faster than a plan at hand, so a bound too high would change plans. On the plans of
// random problems (fake costs, the analytic model, mixed devices): every DP candidate
// under every schedule, with and without re-computation and allreduce overlap, and its
// two-chunk interleaving.
#include <gtest/gtest.h>

#include "dapple/plan/plan_costs.h"
#include "dapple/schedule/schedule.h"
#include "dapple/sim/simulator.h"
#include "random_mixed_problems.h"
#include "random_plans.h"

namespace dapple {
namespace {

TEST(IterationLowerBound, NeverAboveTheSimulatedTime) {
  int checked = 0, tight = 0;
  for (unsigned seed = 0; seed < 30; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    for (const Plan& plan : testing::PlansOf(*p)) {
      const double bound =
          IterationLowerBound(EvaluatePlan(plan, *p->cost), plan.num_micro_batches);
      const double ms =
          SimulatePlan(plan, *p->cost, SimOptions{.record_timeline = false}).iteration_ms;
      ASSERT_LE(bound, ms * (1 + 1e-12)) << p->description << ", " << ToString(plan.schedule)
                                         << ", " << plan.virtual_stages << " chunks";
      tight += bound >= 0.9 * ms;
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000);
  EXPECT_GT(tight, checked / 10);  // it bounds something
}

}  // namespace
}  // namespace dapple
