// The V-shape schedules in the DAPPLE planner (Note [V shapes from a plan]): chosen where
// memory binds so that 1F1B's peak does not fit and v-half's does, not where they are slower,
// and never slower than the plan without them.
#include <gtest/gtest.h>

#include "dapple/plan/interleaving.h"
#include "dapple/plan/planner.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "plan/uniform_problem.h"

namespace dapple {
namespace {

using Uniform = testing::UniformProblem;

// Memory binds at 30 MB a device. A 4-stage pipeline of 4 layers holds 16 MB of weights, and
// per micro-batch (m = 1) 4 MB of activations: dapple-a's first stage and every stage of
// zb-h1 hold 4 micro-batches, 32 MB; zb-v 8 chunk-micro-batches of 2 MB, 32 MB; v-half 6 of
// them, 28 MB; v-min 4, 24 MB. The one-chunk plans that fit are skewed (fewer layers on the
// early stages) and slower. v-half on balanced chunks (t = 2 ms for F, I or W of a chunk of
// 2 layers) takes 6Mt + 5t = 96 + 10 = 106 ms at M = 8 (Note [V-Half and V-Min]), v-min
// 6Mt + 11t = 118 ms: the planner picks v-half. (The stage inputs are left out of these
// counts: the chunks' inputs would weigh as much as a layer here.)
TEST(VShapePlanning, ChoosesVHalfWhereOneFOneBDoesNotFit) {
  Uniform u;
  u.cost.memory_bytes = 30e6;
  u.cost.count_stage_inputs = false;
  PlanResult a = u.Plan(ScheduleKind::kDappleA);
  ASSERT_TRUE(a.plan) << a.reason;
  EXPECT_GT(a.plan->estimate->iteration_ms, 106);
  PlanResult best = u.Plan();
  ASSERT_TRUE(best.plan) << best.reason;
  EXPECT_EQ(best.plan->schedule, ScheduleKind::kVHalf);
  EXPECT_EQ(best.plan->num_stages(), 8);
  EXPECT_EQ(best.plan->num_micro_batches, 8);
  EXPECT_DOUBLE_EQ(best.plan->estimate->iteration_ms, 106);
  ValidatePlan(*best.plan, u.profile, u.cluster, "planned");
  SimResult r = SimulatePlan(*best.plan, u.cost);
  for (const DeviceStats& d : r.devices) EXPECT_DOUBLE_EQ(d.peak_memory_bytes, 28e6);
  // Fixed to each V, the planner returns that V; zb-v does not fit.
  PlanResult half = u.Plan(ScheduleKind::kVHalf);
  ASSERT_TRUE(half.plan) << half.reason;
  EXPECT_DOUBLE_EQ(half.plan->estimate->iteration_ms, 106);
  PlanResult min = u.Plan(ScheduleKind::kVMin);
  ASSERT_TRUE(min.plan) << min.reason;
  EXPECT_EQ(min.plan->schedule, ScheduleKind::kVMin);
  EXPECT_DOUBLE_EQ(min.plan->estimate->iteration_ms, 118);
  PlanResult v = u.Plan(ScheduleKind::kZbV);
  EXPECT_FALSE(v.plan);
}

// With 16 GB a device nothing binds: zb-v on the 4 groups (chunks of 2 layers, t = 2 ms) takes
// 6Mt + (S - 1)t = 96 + 6 = 102 ms, faster than interleaved 1F1B's best, 4 chunks of one layer
// (105 ms, InterleavedPlanning.ChoosesFourChunksWhereTheFormulaSaysSo), and zb-h1's 108 ms.
TEST(VShapePlanning, ChoosesZbVWhereItHasNoBubble) {
  Uniform u;
  PlanResult best = u.Plan();
  ASSERT_TRUE(best.plan) << best.reason;
  EXPECT_EQ(best.plan->schedule, ScheduleKind::kZbV);
  EXPECT_DOUBLE_EQ(best.plan->estimate->iteration_ms, 102);
}

// Where transfers are dear (3 ms each, more than a chunk's forward) the V's twice as many
// transfers between groups, and v-half's and v-min's tight pattern, cost more than they
// save: the planner keeps a plan without a V, faster than the best plan of each V fixed.
TEST(VShapePlanning, KeepsOtherFamiliesWhereTheVIsSlower) {
  Uniform u;
  u.cost.transfer_ms = 3;
  PlanResult best = u.Plan();
  ASSERT_TRUE(best.plan) << best.reason;
  EXPECT_FALSE(VShaped(best.plan->schedule)) << ToString(best.plan->schedule);
  for (ScheduleKind kind : {ScheduleKind::kZbV, ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    PlanResult v = u.Plan(kind);
    ASSERT_TRUE(v.plan) << ToString(kind) << ": " << v.reason;
    EXPECT_EQ(v.plan->schedule, kind);
    EXPECT_LT(best.plan->estimate->iteration_ms, v.plan->estimate->iteration_ms) << ToString(kind);
  }
}

// Note [Choosing for steady state]: 8 uniform layers on 4 devices, GBS 8, 1 ms transfers. The
// search from a cold start does not offer zb-h2. In steady state zb-h2's parallelogram has no
// bubble (Note [ZB-H2]), and zb-v's twice as many transfers cost more: the planner asked for
// steady state picks zb-h2, faster in steady state than the cold winner, and records it.
TEST(SteadyStatePlanning, PicksZbH2ByItsSteadyState) {
  Uniform u(8);
  u.cost.transfer_ms = 1;
  PlanResult cold = u.Plan();
  ASSERT_TRUE(cold.plan) << cold.reason;
  EXPECT_NE(cold.plan->schedule, ScheduleKind::kZbH2);
  EXPECT_FALSE(cold.plan->steady_state);
  PlanResult steady = u.Plan(std::nullopt, /*steady_state=*/true);
  ASSERT_TRUE(steady.plan) << steady.reason;
  EXPECT_EQ(steady.plan->schedule, ScheduleKind::kZbH2) << ToString(steady.plan->schedule);
  EXPECT_TRUE(steady.plan->steady_state);
  EXPECT_DOUBLE_EQ(steady.steady_state_iteration_ms,
                   SimulateSteadyState(*steady.plan, u.cost).iteration_ms);
  EXPECT_LT(steady.steady_state_iteration_ms, SimulateSteadyState(*cold.plan, u.cost).iteration_ms);
  // A fixed schedule stays fixed.
  PlanResult fixed = u.Plan(ScheduleKind::kZbH1, /*steady_state=*/true);
  ASSERT_TRUE(fixed.plan) << fixed.reason;
  EXPECT_EQ(fixed.plan->schedule, ScheduleKind::kZbH1);
  EXPECT_TRUE(fixed.plan->steady_state);
  Plan read = ParsePlanJson(PlanToJsonText(*steady.plan), "plan.json");
  EXPECT_TRUE(read.steady_state);
}

}  // namespace
}  // namespace dapple
