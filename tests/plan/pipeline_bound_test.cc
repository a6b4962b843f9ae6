// PipelineLowerBound never exceeds the simulated iteration time (the refinement skips
// simulating neighbours it proves slower; a bound too high would change plans): on the
// DP's candidates of random problems (fake costs, the analytic model, mixed devices), with
// every non-interleaved schedule, with and without re-computation and allreduce overlap.
#include <gtest/gtest.h>

#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "dapple/sim/simulator.h"
#include "random_mixed_problems.h"
#include "random_problems.h"

namespace dapple {
namespace {

TEST(PipelineLowerBound, NeverAboveTheSimulatedTime) {
  int checked = 0, tight = 0;
  for (unsigned seed = 0; seed < 45; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    for (int m : MicroBatchSizes(p->global_batch)) {
      DpOptions o;
      o.micro_batch_size = m;
      o.num_micro_batches = p->global_batch / m;
      o.enforce_memory = false;
      for (const DpCandidate& cand : DappleDp(*p->cost, p->cluster, o)) {
        for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::kDappleA, ScheduleKind::kDappleB,
                               ScheduleKind::kZbH1}) {
          for (int variant = 0; variant < 4; ++variant) {
            Plan plan = cand.plan;
            plan.schedule = k;
            plan.allreduce_overlap = variant & 1;
            plan.stages.back().recompute = variant & 2;  // the fake times every forward
            const double bound = PipelineLowerBound(plan, EvaluatePlan(plan, *p->cost));
            const double ms = SimulatePlan(plan, *p->cost).iteration_ms;
            ASSERT_LE(bound, ms * (1 + 1e-12)) << p->description << ", m = " << m << ", "
                                               << ToString(k) << ", variant " << variant;
            tight += bound >= 0.9 * ms;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 2000);
  EXPECT_GT(tight, checked / 10);  // it bounds something: not 0 everywhere
}

}  // namespace
}  // namespace dapple
