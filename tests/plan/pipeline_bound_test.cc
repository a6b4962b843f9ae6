// PipelineLowerBound never exceeds the simulated iteration time (the refinement skips
// simulating neighbours it proves slower; a bound too high would change plans): on the
// DP's candidates of random problems (fake costs, the analytic model, mixed devices), with
// every non-interleaved schedule, with and without re-computation and allreduce overlap.
#include <gtest/gtest.h>

#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/interleaving.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "random_mixed_problems.h"
#include "random_problems.h"
#include "sim/sim_test_util.h"

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
                               ScheduleKind::kZbH1, ScheduleKind::kZbH2}) {
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

// The same on V plans (Note [A V plan's pipeline bound]): each DP candidate's groups cut into
// a V of every kind, in base's shares and by width.
TEST(PipelineLowerBound, NeverAboveTheSimulatedTimeOfAV) {
  int checked = 0, tight = 0;
  for (unsigned seed = 0; seed < 45; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    for (int m : MicroBatchSizes(p->global_batch)) {
      DpOptions o;
      o.micro_batch_size = m;
      o.num_micro_batches = p->global_batch / m;
      o.enforce_memory = false;
      for (const DpCandidate& cand : DappleDp(*p->cost, p->cluster, o)) {
        for (const Proposal& q :
             VShapeProposals(cand.plan, *p->cost, {m}, p->global_batch,
                             {ScheduleKind::kZbV, ScheduleKind::kVHalf, ScheduleKind::kVMin})) {
          for (bool overlap : {false, true}) {
            Plan plan = q.plan;
            plan.allreduce_overlap = overlap;
            const double bound = PipelineLowerBound(plan, EvaluatePlan(plan, *p->cost));
            const double ms = SimulatePlan(plan, *p->cost).iteration_ms;
            ASSERT_LE(bound, ms * (1 + 1e-12))
                << p->description << ", m = " << m << ", " << ToString(plan.schedule);
            tight += bound >= 0.8 * ms;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(tight, checked / 10);
}

// The bound of `plan` over its simulated time, checked to be at most 1.
double Tightness(const Plan& plan, const CostModel& cost) {
  const double bound = PipelineLowerBound(plan, EvaluatePlan(plan, cost));
  const double ms = SimulatePlan(plan, cost).iteration_ms;
  EXPECT_LE(bound, ms * (1 + 1e-12));
  return bound / ms;
}

// Where a boundary's link is slower than the stages, its M transfers one after another
// bound the iteration when the transfers hold the link, and not when they do not (then
// they run side by side). F = 2 and B = 4 per stage, T = 10, M = 8: through the pipeline,
// stage 1 starts at F + T = 12 and is busy 8 x 6, then stage 0's last backward: 64. Through
// the link, the last activation arrives at 12 + 7 x 10, then F + B on stage 1 and B on
// stage 0: 92.
TEST(PipelineLowerBound, CountsABoundarysTransfersInTurnWhenTheyHoldALink) {
  FakeCostModel cost(4, 2);
  cost.transfer_ms = 10;
  const Plan plan = testing::MakePlan({{0, 1, {0}}, {2, 3, {1}}}, 1, 8, ScheduleKind::kDappleB);
  EXPECT_DOUBLE_EQ(PipelineLowerBound(plan, EvaluatePlan(plan, cost)), 64);
  Tightness(plan, cost);
  cost.transfer_resources = {0};
  EXPECT_DOUBLE_EQ(PipelineLowerBound(plan, EvaluatePlan(plan, cost)), 92);
  Tightness(plan, cost);
}

// zb-h1's buckets are ready during the stage's last W, its last compute: what no W hides
// of a long allreduce counts.
TEST(PipelineLowerBound, SplitBackwardCountsTheAllreduceAfterTheLastWeightGradient) {
  FakeCostModel cost(4, 4);
  cost.allreduce_ms = 40;
  Plan plan = testing::MakePlan({{0, 1, {0, 1}}, {2, 3, {2, 3}}}, 2, 4, ScheduleKind::kZbH1);
  plan.allreduce_overlap = true;
  EXPECT_GT(Tightness(plan, cost), 0.9);
  plan.allreduce_overlap = false;
  EXPECT_GT(Tightness(plan, cost), 0.9);
}

}  // namespace
}  // namespace dapple
