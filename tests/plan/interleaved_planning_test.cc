// Interleaved 1F1B in the DAPPLE planner (Note [Interleaving a plan]): never slower than
// the best plan of the DAPPLE schedules, and chosen where the formula says it wins.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dapple/plan/interleaving.h"
#include "dapple/plan/planner.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "plan/random_problems.h"
#include "plan/uniform_problem.h"

namespace dapple {
namespace {

// On seeded random problems (replication, transfers, allreduce, memory limits), the plan
// with interleaving offered is never slower than without (the winner competes with its
// interleaved forms and keeps ties), fits memory by the simulator's peak, and is valid.
TEST(InterleavedPlanning, NeverSlowerThanTheDappleSchedules) {
  int compared = 0, interleaved = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::unique_ptr<testing::RandomProblem> p = testing::MakeRandomProblem(seed);
    SCOPED_TRACE(p->description);
    PlannerOptions without;
    without.interleave = false;
    without.refine_work = 2000;
    PlannerOptions with = without;
    with.interleave = true;
    PlanResult a = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, without);
    PlanResult b = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, with);
    ASSERT_EQ(a.plan.has_value(), b.plan.has_value());
    if (!a.plan) continue;
    ++compared;
    EXPECT_LE(b.plan->estimate->iteration_ms, a.plan->estimate->iteration_ms * (1 + 1e-12));
    if (b.plan->virtual_stages == 1) continue;
    ++interleaved;
    ValidatePlan(*b.plan, p->profile, p->cluster, "planned");
    SimResult r = SimulatePlan(*b.plan, *p->cost);
    EXPECT_DOUBLE_EQ(r.iteration_ms, b.plan->estimate->iteration_ms);
    for (const DeviceStats& d : r.devices) EXPECT_LE(d.peak_memory_bytes, p->memory_bytes);
  }
  std::printf("%d problems with a plan, interleaved won %d\n", compared, interleaved);
  EXPECT_GT(compared, 20);
}

// 16 uniform layers (f = 1, b = 2 ms per sample), 4 devices, an allreduce so dear that no
// stage is replicated, free transfers, GBS 8: the best one-chunk plans are 4-stage
// pipelines at m = 1, M = 8 (dapple-a/b: (M + S - 1)(F + B) = 11 x 12 = 132 ms; zb-h1 with
// I = W = F: (3M + S - 1)F = 27 x 4 = 108 ms). Interleaved with v chunks of 4/v layers:
// vM(f + b) + (S - 1)(f + b) with f + b = 12/v: v = 2 gives 96 + 18 = 114 ms, v = 4 gives
// 96 + 9 = 105 ms, the fastest of them; the planner finds it.
TEST(InterleavedPlanning, ChoosesFourChunksWhereTheFormulaSaysSo) {
  testing::UniformProblem u;
  PlanResult zb = u.Plan(ScheduleKind::kZbH1);
  ASSERT_TRUE(zb.plan);
  EXPECT_DOUBLE_EQ(zb.plan->estimate->iteration_ms, 108);
  // Fixing the schedule to interleaved gives v = 4; fixing another family, no chunks. (The
  // search over every family picks zb-v at 102 ms: VShapePlanning.ChoosesZbVWhereItHasNoBubble.)
  PlanResult fixed = u.Plan(ScheduleKind::kInterleaved);
  ASSERT_TRUE(fixed.plan) << fixed.reason;
  EXPECT_EQ(fixed.plan->schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(fixed.plan->virtual_stages, 4);
  EXPECT_EQ(fixed.plan->num_stages(), 16);
  EXPECT_EQ(fixed.plan->num_micro_batches, 8);
  EXPECT_DOUBLE_EQ(fixed.plan->estimate->iteration_ms, 105);
  EXPECT_EQ(zb.plan->virtual_stages, 1);
}

// InterleavePlan keeps the groups' devices and shares of compute: a 2-stage plan whose
// stage 0 has 3 of 4 equal layers x 2 chunks -> rounds of 4 layers cut 3 + 1.
TEST(InterleavedPlanning, InterleavePlanKeepsTheGroupsShares) {
  FakeCostModel cost(8, 3);
  Plan base;
  base.micro_batch_size = 2;
  base.num_micro_batches = 4;
  base.global_batch_size = 8;
  base.stages = {StagePlan{0, 5, "", "", {0, 1}}, StagePlan{6, 7, "", "", {2}}};
  std::optional<Plan> p = InterleavePlan(base, 2, cost);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->num_stages(), 4);
  EXPECT_EQ(p->stages[0].last_layer, 2);
  EXPECT_EQ(p->stages[1].last_layer, 3);
  EXPECT_EQ(p->stages[2].last_layer, 6);
  EXPECT_EQ(p->stages[3].last_layer, 7);
  EXPECT_EQ(p->stages[2].devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(p->stages[3].devices, (std::vector<int>{2}));
  base.num_micro_batches = 3;  // not a multiple of 2 stages
  EXPECT_FALSE(InterleavePlan(base, 2, cost));
  base.num_micro_batches = 4;
  EXPECT_FALSE(InterleavePlan(base, 8, cost));  // 16 chunks, 8 layers
}

}  // namespace
}  // namespace dapple
