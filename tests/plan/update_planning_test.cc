// The planner with the optimizer update (CostModel::UpdateMs): plan costs, the analytic L,
// the lower bound, and a plan that changes shape when updates are expensive.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::MakePlan;

TEST(UpdatePlanning, StageCostsAndLatencyIncludeTheUpdate) {
  FakeCostModel cost(4, 4);
  cost.speed = {1, 0.5, 1, 1};
  cost.allreduce_ms = 2;
  Plan plan = MakePlan({{0, 1, {0, 1}}, {2, 3, {2}}}, 2, 4, ScheduleKind::kDappleA);
  plan.allreduce_overlap = false;
  PlanCosts before = EvaluatePlan(plan, cost);
  cost.update_ms = {1, 2, 0, 4};
  PlanCosts after = EvaluatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(after.stages[0].update_ms, 3 / 0.5);  // the slower replica
  EXPECT_DOUBLE_EQ(after.stages[1].update_ms, 4);
  // Same pivot; the ending is max_s (AR_s + U_s + E_s).
  EXPECT_EQ(after.latency.pivot, before.latency.pivot);
  EXPECT_GT(after.latency.ending_ms, before.latency.ending_ms);
  EXPECT_LE(after.latency.ending_ms, before.latency.ending_ms + 6);
  // The lower bound adds each stage's update and stays below the simulated time.
  SimResult r = SimulatePlan(plan, cost, SimOptions{.record_timeline = false});
  const double lb = IterationLowerBound(after, plan.num_micro_batches);
  EXPECT_DOUBLE_EQ(lb, IterationLowerBound(before, plan.num_micro_batches) + 6);
  EXPECT_LE(lb, r.iteration_ms * (1 + 1e-12));
}

TEST(UpdatePlanning, OneStageLatencyGrowsByTheUpdate) {
  FakeCostModel cost(3, 2);
  Plan plan = MakePlan({{0, 2, {0, 1}}}, 2, 3, ScheduleKind::kGPipe);
  const double before = EvaluatePlan(plan, cost).latency.latency_ms;
  cost.update_ms = {0.5, 0.25, 2};
  EXPECT_DOUBLE_EQ(EvaluatePlan(plan, cost).latency.latency_ms, before + 2.75);
}

// 4 equal layers (F 1, B 2 per sample) on 4 devices of one server, free transfers and
// allreduce, GBS 4. Data parallelism runs 1 sample per device, 12 ms, but every replica
// updates all 4 layers; the straight pipeline (M = 4, m = 1) takes (M + S - 1) x 3 = 21 ms
// and each device updates one layer. With a 10 ms update per layer: DP 12 + 40 = 52 ms,
// the pipeline 21 + 10 = 31 ms. Data parallelism with the optimizer state sharded (Note
// [Optimizer sharding in the planner]; its reduce-scatter and all-gather free here) updates
// one layer's worth per replica: 12 + 10 = 22 ms, the fastest.
TEST(UpdatePlanning, ExpensiveUpdatesFavourSplittingTheUpdate) {
  FakeCostModel cost(4, 4);
  Cluster cluster;
  cluster.name = "test";
  cluster.servers = {ServerSpec{4, {}}};
  Profile profile;
  profile.model = "test";
  profile.batch_size = 1;
  for (int i = 0; i < 4; ++i) {
    profile.layers.emplace_back();
    profile.layers.back().id = fmt::format("l{}", i);
  }
  PlannerOptions o;
  PlanResult cheap = RunPlanner(profile, cluster, cost, 4, o);
  ASSERT_TRUE(cheap.plan) << cheap.reason;
  EXPECT_EQ(cheap.plan->num_stages(), 1);
  EXPECT_DOUBLE_EQ(cheap.plan->estimate->iteration_ms, 12);

  cost.update_ms = {10, 10, 10, 10};
  PlanResult dear = RunPlanner(profile, cluster, cost, 4, o);
  ASSERT_TRUE(dear.plan) << dear.reason;
  ASSERT_EQ(dear.plan->num_stages(), 1);
  EXPECT_TRUE(dear.plan->stages[0].shard_optimizer);
  EXPECT_DOUBLE_EQ(dear.plan->estimate->iteration_ms, 22);
  // Without sharding, the straight pipeline.
  Plan pipeline =
      MakePlan({{0, 0, {0}}, {1, 1, {1}}, {2, 2, {2}}, {3, 3, {3}}}, 1, 4, ScheduleKind::kDappleA);
  EXPECT_DOUBLE_EQ(SimulatePlan(pipeline, cost).iteration_ms, 31);
  // Its estimate is the simulated time, update included.
  SimResult r = SimulatePlan(*dear.plan, cost, SimOptions{.record_timeline = false});
  EXPECT_DOUBLE_EQ(dear.plan->estimate->iteration_ms, r.iteration_ms);
  // Pure data parallelism pays the whole model's update on every replica.
  o.planner = PlannerKind::kDataParallel;
  PlanResult dp = RunPlanner(profile, cluster, cost, 4, o);
  ASSERT_TRUE(dp.plan);
  EXPECT_DOUBLE_EQ(dp.plan->estimate->iteration_ms, 52);
}

}  // namespace
}  // namespace dapple
