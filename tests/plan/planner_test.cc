// RunPlanner on hand-made problems: bad input, memory as a hard limit, the baselines'
// documented shapes, fixed options.
#include "dapple/plan/planner.h"

#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/plan_costs.h"
#include "fakes/fake_cost_model.h"

namespace dapple {
namespace {

struct Problem {
  Problem(int layers, std::vector<int> servers) : cost(layers, Devices(servers)) {
    cluster.name = "test";
    for (int s : servers) cluster.servers.push_back(ServerSpec{s, {}});
    profile.model = "test";
    profile.batch_size = 1;
    for (int i = 0; i < layers; ++i) {
      LayerProfile l;
      l.id = "l" + std::to_string(i);
      l.name = "layer" + std::to_string(i);
      profile.layers.push_back(l);
    }
  }
  static int Devices(const std::vector<int>& s) {
    int n = 0;
    for (int x : s) n += x;
    return n;
  }
  PlanResult Run(int gbs, PlannerOptions o = {}) {
    return RunPlanner(profile, cluster, cost, gbs, o);
  }
  Profile profile;
  Cluster cluster;
  FakeCostModel cost;
};

PlannerOptions Named(const std::string& n) {
  PlannerOptions o;
  o.planner = ParsePlannerKind(n);
  return o;
}

TEST(Planner, BadInput) {
  Problem p(4, {2});
  EXPECT_THROW(p.Run(8, Named("nope")), InputError);
  EXPECT_THROW(p.Run(0), InputError);
  PlannerOptions o;
  o.micro_batch_size = 3;
  EXPECT_THROW(p.Run(8, o), InputError);  // 3 does not divide 8
  // Data parallelism on 2 devices needs >= 2 samples per micro-batch.
  EXPECT_THROW(p.Run(1, Named("dp")), InputError);
  Problem none(4, {});
  EXPECT_THROW(none.Run(8), InputError);
  Problem big(13, {2});
  EXPECT_THROW(big.Run(8, Named("exhaustive")), InputError);
}

TEST(Planner, EveryPlannerGivesAValidPlanWithEstimate) {
  Problem p(6, {2, 2});
  p.cost.transfer_ms = 0.3;
  p.cost.allreduce_ms = 2;
  for (PlannerKind k : AllPlanners()) {
    const std::string name = ToString(k);
    PlanResult r = p.Run(8, Named(name));
    ASSERT_TRUE(r.plan) << name << ": " << r.reason;
    const Plan& plan = *r.plan;
    EXPECT_EQ(plan.planner, name);
    EXPECT_NO_THROW(ValidatePlan(plan, p.profile, p.cluster, name));
    ASSERT_TRUE(plan.estimate);
    EXPECT_GT(plan.estimate->iteration_ms, 0);
    EXPECT_GT(plan.estimate->speedup, 0);
    EXPECT_GT(plan.estimate->latency_ms, 0);
    EXPECT_EQ(plan.estimate->stage_peak_memory_bytes.size(), plan.stages.size());
    EXPECT_EQ(plan.stages.front().first_layer_id, "l0");
    EXPECT_EQ(plan.stages.back().last_layer_id, "l5");
  }
}

TEST(Planner, BaselineShapes) {
  Problem p(6, {2, 2});
  PlanResult dp = p.Run(16, Named("dp"));
  ASSERT_TRUE(dp.plan);
  EXPECT_EQ(dp.plan->num_stages(), 1);
  EXPECT_EQ(dp.plan->stages[0].replicas(), 4);
  EXPECT_EQ(dp.plan->micro_batch_size, 16);  // the largest that fits
  PlanResult straight = p.Run(16, Named("straight"));
  ASSERT_TRUE(straight.plan);
  EXPECT_EQ(straight.plan->num_stages(), 4);
  for (const StagePlan& s : straight.plan->stages) EXPECT_EQ(s.replicas(), 1);
  EXPECT_EQ(straight.plan->schedule, ScheduleKind::kDappleA);
  PlanResult gpipe = p.Run(16, Named("gpipe"));
  ASSERT_TRUE(gpipe.plan);
  EXPECT_EQ(gpipe.plan->schedule, ScheduleKind::kGPipe);
  EXPECT_EQ(gpipe.plan->num_stages(), 4);
  // Equal layers: balanced means 2+2+1+1 or similar, never 3 on one device.
  for (const StagePlan& s : gpipe.plan->stages) EXPECT_LE(s.last_layer - s.first_layer + 1, 2);
}

TEST(Planner, DataParallelTakesTheLargestMicroBatchThatFits) {
  Problem p(4, {2});
  // Static 4 layers x 1 MB x 4 = 16 MB; activations 4 MB per sample in flight.
  p.cost.memory_bytes = 16e6 + 4e6 * 3;  // a slice of at most 3 samples
  PlanResult r = p.Run(16, Named("dp"));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->micro_batch_size, 4);  // 2 samples per replica; 8 would need 4
}

TEST(Planner, MemoryIsAHardLimit) {
  Problem p(4, {4});
  p.cost.param_bytes = {4e9, 4e9, 4e9, 4e9};  // 16 GB of parameters x 4 state
  p.cost.memory_bytes = 16e9 + 1e8;           // one layer (and its activations) per device
  PlanResult r = p.Run(8);
  ASSERT_TRUE(r.plan) << r.reason;
  EXPECT_EQ(r.plan->num_stages(), 4);
  for (double b : r.plan->estimate->stage_peak_memory_bytes) EXPECT_LE(b, p.cost.memory_bytes);
  p.cost.memory_bytes = 15e9;  // nothing fits
  PlanResult none = p.Run(8);
  EXPECT_FALSE(none.plan);
  EXPECT_GE(none.required_memory_bytes, 16e9);
  EXPECT_FALSE(none.reason.empty());
}

TEST(Planner, FixedMicroBatchAndSchedule) {
  Problem p(6, {2, 2});
  PlannerOptions o;
  o.micro_batch_size = 2;
  o.schedule = ScheduleKind::kDappleB;
  PlanResult r = p.Run(16, o);
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->micro_batch_size, 2);
  EXPECT_EQ(r.plan->num_micro_batches, 8);
  EXPECT_EQ(r.plan->schedule, ScheduleKind::kDappleB);
  for (const StagePlan& s : r.plan->stages) EXPECT_LE(s.replicas(), 2);
}

TEST(Planner, ReplicasNeverExceedTheMicroBatch) {
  Problem p(3, {8});
  PlanResult r = p.Run(4);  // 8 devices, 4 samples
  ASSERT_TRUE(r.plan);
  for (const StagePlan& s : r.plan->stages) EXPECT_LE(s.replicas(), r.plan->micro_batch_size);
}

TEST(Planner, NeverProposesMoreMessageTagsThanTheRuntimeCarries) {
  // 16 stages of one device, 2^19 micro-batches of 1 sample: 2 x 15 x 2^19 x 16^2 tags, far
  // over 2^31 (MessageTagCount): the runtime could not run it, so no plan, and the reason
  // says why. (Micro-batches of 2 would fit, but simulating 2^18 of them takes too long
  // for a unit test; tests/format/message_tags_test.cc checks the boundary.)
  Problem p(16, {16});
  PlannerOptions o = Named("straight");
  o.micro_batch_size = 1;
  PlanResult r = p.Run(1 << 19, o);
  EXPECT_FALSE(r.plan);
  EXPECT_NE(r.reason.find("message tags"), std::string::npos) << r.reason;
}

TEST(DappleDp, FindsThePipelineWhenAllreduceIsExpensive) {
  // Two equal layers on 2 devices, a costly allreduce and free transfers: two stages.
  Problem p(2, {2});
  p.cost.allreduce_ms = 100;
  DpOptions o;
  o.micro_batch_size = 1;
  o.num_micro_batches = 8;
  auto c = DappleDp(p.cost, p.cluster, o);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].plan.num_stages(), 2);
  // L of 2 stages (F 1, B 2 each, free transfers), M = 8: T_w = 1 + 0 + 1, T_s = 7 * 3,
  // T_e = 2 + 0 + 2 = 4 (E_0 = B_1 + B_t + B_0). L = 2 + 21 + 4 = 27.
  EXPECT_DOUBLE_EQ(c[0].latency_ms, 27.0);
  // Without allreduce cost and m = 2: data parallelism on both devices.
  p.cost.allreduce_ms = 0;
  o.micro_batch_size = 2;
  o.num_micro_batches = 4;
  auto d = DappleDp(p.cost, p.cluster, o);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].plan.num_stages(), 1);
  EXPECT_EQ(d[0].plan.stages[0].replicas(), 2);
  // One sample per replica: F = 2, B = 4 (two layers); L = 2 + 3 x 6 + 4 = 24.
  EXPECT_DOUBLE_EQ(d[0].latency_ms, 24.0);
}

}  // namespace
}  // namespace dapple
