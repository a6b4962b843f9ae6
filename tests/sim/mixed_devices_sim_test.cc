// The simulator on a cluster of two device speeds equals a hand
// computation: each replica computes at its own device's speed, and replicas of one stage
// on devices of different speeds get equal slices, so the slowest sets the pace.
#include <gtest/gtest.h>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/sim/simulator.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

// Two layers at PBS 4; two servers of one device each, server 0's twice as fast.
struct MixedCase {
  MixedCase() {
    profile.model = "two-layers";
    profile.batch_size = 4;
    auto layer = [&](const char* id, double f, double b, double params, double update) {
      LayerProfile l;
      l.id = id;
      l.name = id;
      l.forward_ms = f;
      l.backward_ms = b;
      l.activation_bytes = 1e6;
      l.parameter_bytes = params;
      l.update_ms = update;
      profile.layers.push_back(l);
    };
    layer("l0", 4, 8, 1e6, 0.5);
    layer("l1", 3, 6, 2e6, 0.3);
    cluster.name = "fast-slow";
    cluster.servers = {ServerSpec{1, DeviceSpec{16e9, 2.0}}, ServerSpec{1, std::nullopt}};
    cluster.device = DeviceSpec{16e9, 1.0};
    cluster.intra_server = LinkSpec{25e9, 0};
    cluster.inter_server = LinkSpec{1e9, 1e-4};  // 1 GB/s, 0.1 ms
  }
  Profile profile;
  Cluster cluster;
};

// Stage 0 (layer 0) on the fast device, stage 1 (layer 1) on the slow one, 1F1B (dapple-a),
// M = 4 micro-batches of m = 4 samples. Per micro-batch: F0 = 4/2 = 2, B0 = 8/2 = 4 ms on
// the fast device; F1 = 3, B1 = 6 ms on the slow one; the activation (and the gradient
// back) is 1e6 bytes: t = 1e6 / 1e9 s + 0.1 ms = 1.1 ms. The slow stage is the bottleneck
// and never waits once started: its next micro-batch arrives 2t + B0 + F0 = 8.2 ms after
// it sent a gradient back, within its F1 + B1 = 9 ms. So it ends its last backward at
// F0 + t + M (F1 + B1), and the fast stage its last at that + t + B0. Then each updates
// its layer: U0 = 0.5 / 2, U1 = 0.3 / 1. One replica per stage: no allreduce.
TEST(MixedDevicesSim, PipelineOfAFastAndASlowDeviceEqualsTheHandFormula) {
  MixedCase mc;
  AnalyticCostModel cost(mc.profile, mc.cluster);
  const int M = 4;
  Plan p = testing::MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 4, M, ScheduleKind::kDappleA);
  p.allreduce_overlap = false;
  const double F0 = 2, B0 = 4, F1 = 3, B1 = 6, t = 1.1, U0 = 0.25, U1 = 0.3;
  ASSERT_GE(F1 + B1, 2 * t + B0 + F0);  // the premise of the formula
  const double last_stage_end = F0 + t + M * (F1 + B1) + U1;
  const double first_stage_end = F0 + t + M * (F1 + B1) + t + B0 + U0;
  SimResult r = SimulatePlan(p, cost);
  EXPECT_NEAR(r.iteration_ms, std::max(first_stage_end, last_stage_end), 1e-9);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_NEAR(r.stages[0].forward_ms, F0, 1e-12);
  EXPECT_NEAR(r.stages[0].backward_ms, B0, 1e-12);
  EXPECT_NEAR(r.stages[1].forward_ms, F1, 1e-12);
  EXPECT_NEAR(r.stages[1].backward_ms, B1, 1e-12);
  EXPECT_NEAR(r.stages[0].send_ms, t, 1e-12);
  // Busy time per device: its compute at its own speed.
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_NEAR(r.devices[0].busy_ms, M * (F0 + B0) + U0, 1e-9);
  EXPECT_NEAR(r.devices[1].busy_ms, M * (F1 + B1) + U1, 1e-9);
}

// Both layers on one stage with a replica on each device: m = 4 splits 2 + 2, so the slow
// replica takes (4 + 3) x 2/4 = 3.5 ms per forward and 7 ms per backward, the fast one half
// of that. With dapple-a and one stage the replicas run F B per micro-batch back to back;
// the allreduce starts when the slow one is done: 2(r-1)/r x 3e6 bytes / 1 GB/s + 2(r-1) x
// 0.1 ms = 3.2 ms; then the slow replica's update, (0.5 + 0.3) / 1.
TEST(MixedDevicesSim, ReplicasOfDifferentSpeedsGetEqualSlicesAndTheSlowestSetsThePace) {
  MixedCase mc;
  AnalyticCostModel cost(mc.profile, mc.cluster);
  const int M = 4;
  Plan p = testing::MakePlan({{0, 1, {0, 1}}}, 4, M, ScheduleKind::kDappleA);
  p.allreduce_overlap = false;
  const double F = 3.5, B = 7, AR = 3.2, U = 0.8;
  SimResult r = SimulatePlan(p, cost);
  EXPECT_NEAR(r.iteration_ms, M * (F + B) + AR + U, 1e-9);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_NEAR(r.devices[0].busy_ms, M * (F + B) / 2 + U / 2, 1e-9);  // the fast replica
  EXPECT_NEAR(r.devices[1].busy_ms, M * (F + B) + U, 1e-9);
  EXPECT_NEAR(r.stages[0].allreduce_ms, AR, 1e-9);
}

}  // namespace
}  // namespace dapple
