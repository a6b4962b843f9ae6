// The planner shards a replicated stage's optimizer state (Note [Optimizer sharding in the
// planner], refine.h) where only that makes it fit memory, or where it is faster, and
// nowhere else; the simulator charges what the runtime does (a reduce-scatter in the
// allreduce's place, a 1/r update, an all-gather) and shows the all-gather.
#include <gtest/gtest.h>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/sim/simulator.h"

namespace dapple {
namespace {

// Layer 0 holds 100 MB of parameters (Adam: 400 MB a device whole; over r replicas
// 200 + 200 / r MB), layer 1 none, so no pipeline splits the state.
struct ShardProblem {
  explicit ShardProblem(double memory_bytes, double update_ms) {
    profile.model = "shard";
    profile.batch_size = 8;
    for (int i = 0; i < 2; ++i) {
      LayerProfile l;
      l.id = l.name = "l" + std::to_string(i);
      l.forward_ms = 10;
      l.backward_ms = 20;
      l.activation_bytes = 1e6;
      l.parameter_bytes = i == 0 ? 100e6 : 0;
      l.update_ms = i == 0 ? update_ms : 0;
      profile.layers.push_back(l);
    }
    cluster = ClusterPreset("paper-a");
    cluster.name = "four";
    cluster.servers = {ServerSpec{4, std::nullopt}};
    cluster.device.memory_bytes = memory_bytes;
  }
  PlanResult Plan() {
    AnalyticCostModel cost(profile, cluster);
    return RunPlanner(profile, cluster, cost, 32, PlannerOptions{});
  }
  Profile profile;
  Cluster cluster;
};

bool AnyShards(const Plan& p) {
  for (const StagePlan& st : p.stages)
    if (st.shard_optimizer) return true;
  return false;
}

TEST(ShardPlanning, ShardsWhenOnlySharingTheStateFits) {
  ShardProblem problem(380e6, 0);
  PlanResult r = problem.Plan();
  ASSERT_TRUE(r.plan) << r.reason;
  AnalyticCostModel cost(problem.profile, problem.cluster);
  const Plan& p = *r.plan;
  ASSERT_TRUE(AnyShards(p));
  for (int s = 0; s < p.num_stages(); ++s) {
    if (!p.stages[s].shard_optimizer) continue;
    EXPECT_GE(p.stages[s].replicas(), 2);
    Plan whole = p;
    whole.stages[s].shard_optimizer = false;
    EXPECT_FALSE(EvaluatePlan(whole, cost).fits) << "stage " << s << " shards without need";
  }
  EXPECT_TRUE(EvaluatePlan(p, cost).fits);
  SimOptions with_timeline;
  with_timeline.record_timeline = true;
  SimResult sim = SimulatePlan(p, cost, with_timeline);
  for (const DeviceStats& d : sim.devices) EXPECT_LE(d.peak_memory_bytes, 380e6);
  EXPECT_DOUBLE_EQ(sim.iteration_ms, p.estimate->iteration_ms);
  // The timeline: an all-gather after each sharded replica's update.
  int all_gathers = 0, sharded_devices = 0;
  for (const TimelineEvent& e : sim.timeline.events) all_gathers += e.name == "AG";
  for (const StagePlan& st : p.stages)
    if (st.shard_optimizer) sharded_devices += st.replicas();
  EXPECT_EQ(all_gathers, sharded_devices);
}

TEST(ShardPlanning, NoShardingWhereItNeitherFitsNorPays) {
  // Ample memory, no update to divide: sharding only adds the all-gather.
  ShardProblem roomy(4e9, 0);
  PlanResult r = roomy.Plan();
  ASSERT_TRUE(r.plan) << r.reason;
  EXPECT_GE(r.plan->stages[0].replicas(), 2);  // the allreduce is there to be replaced
  EXPECT_FALSE(AnyShards(*r.plan));
}

TEST(ShardPlanning, ShardsWhereTheUpdateItDividesOutweighsTheAllGather) {
  ShardProblem slow_update(4e9, 400);
  PlanResult r = slow_update.Plan();
  ASSERT_TRUE(r.plan) << r.reason;
  ASSERT_TRUE(AnyShards(*r.plan));
  AnalyticCostModel cost(slow_update.profile, slow_update.cluster);
  Plan whole = *r.plan;
  for (StagePlan& st : whole.stages) st.shard_optimizer = false;
  EXPECT_LT(SimulatePlan(*r.plan, cost).iteration_ms, SimulatePlan(whole, cost).iteration_ms);
}

// What the simulator charges a sharded stage: AllGatherMs and ReduceScatterMs, half of an
// allreduce each, and 1/r of the update.
TEST(ShardPlanning, SimulatedCollectivesAreWhatTheRuntimeSends) {
  ShardProblem problem(4e9, 40);
  AnalyticCostModel cost(problem.profile, problem.cluster);
  Plan p;
  p.global_batch_size = 32;
  p.micro_batch_size = 8;
  p.num_micro_batches = 4;
  p.allreduce_overlap = false;
  p.stages = {StagePlan{0, 1, "", "", {0, 1, 2, 3}}};
  const SimResult whole = SimulatePlan(p, cost);
  p.stages[0].shard_optimizer = true;
  const SimResult sharded = SimulatePlan(p, cost);
  const double ar = cost.AllReduceMs(0, 1, {0, 1, 2, 3});
  EXPECT_GT(ar, 0);
  EXPECT_DOUBLE_EQ(whole.stages[0].allreduce_ms, ar);
  EXPECT_DOUBLE_EQ(sharded.stages[0].allreduce_ms, ar / 2);
  EXPECT_DOUBLE_EQ(sharded.stages[0].allgather_ms, ar / 2);
  EXPECT_DOUBLE_EQ(sharded.stages[0].update_ms, whole.stages[0].update_ms / 4);
  EXPECT_NEAR(sharded.iteration_ms - whole.iteration_ms, -whole.stages[0].update_ms * 3 / 4,
              1e-9 * whole.iteration_ms);
  // Memory: weights, gradients and the reduce-scatter's receive buffers whole, the two
  // moments a quarter.
  EXPECT_DOUBLE_EQ(whole.devices[0].static_memory_bytes, 400e6);
  EXPECT_DOUBLE_EQ(sharded.devices[0].static_memory_bytes, 350e6);
}

}  // namespace
}  // namespace dapple
