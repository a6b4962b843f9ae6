// The emulation block's charges (cost/emulation_costs.h), and the one door they pass.
#include "dapple/cost/emulation_costs.h"

#include <gtest/gtest.h>

#include "cost/cost_test_util.h"
#include "dapple/cost/analytic_cost_model.h"

namespace dapple {
namespace {

using testing::FourLayerChain;
using testing::TwoByFour;

TEST(EmulationCosts, DevicesOfTheirOwnHaveNone) {
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();
  EXPECT_EQ(AnalyticCostModel(p, c).Emulation(), nullptr);
  c.emulation = Emulation{.shared_compute = 1.5, .resume_s = 0.002, .wake_s = 0.001};
  AnalyticCostModel model(p, c);
  ASSERT_NE(model.Emulation(), nullptr);
  EXPECT_EQ(model.Emulation()->SharedCompute(), 1.5);
  EXPECT_DOUBLE_EQ(model.Emulation()->ResumeMs(), 2.0);
  EXPECT_DOUBLE_EQ(model.Emulation()->WakeMs(), 1.0);
}

// Note [Stream load] in calibration_steps.cc: a link's stream load is what one stream at its
// point-to-point bandwidth takes. A transfer runs one stream per split-concat piece at that
// bandwidth; an allreduce one per rank at its bus bandwidth, so a slower allreduce takes
// proportionally less.
TEST(EmulationCosts, ComputeLoadOfTransfersAndAllReduces) {
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();  // intra 1e6 B/s, inter 1e5 B/s
  c.emulation = Emulation{
      .shared_compute = 2, .intra_server_stream_load = 0.8, .inter_server_stream_load = 0.2};
  c.intra_server.allreduce_bandwidth_bytes_per_s = 0.25e6;  // a quarter of a stream's rate
  AnalyticCostModel model(p, c);
  ASSERT_NE(model.Emulation(), nullptr);
  const EmulationCosts& cost = *model.Emulation();
  EXPECT_DOUBLE_EQ(cost.AllReduceLoad({2}), 0);
  EXPECT_NEAR(cost.AllReduceLoad({0, 1}), 0.8 * 2 * 0.25, 1e-12);
  EXPECT_NEAR(cost.AllReduceLoad({0, 1, 2, 3}), 0.8 * 4 * 0.25, 1e-12);
  // Across servers: the inter-server link, whose allreduce runs at its stream rate.
  EXPECT_NEAR(cost.AllReduceLoad({0, 4}), 0.2 * 2, 1e-12);
  // Transfers: the larger side's number of pieces, at the link's own rate.
  EXPECT_NEAR(cost.TransferLoad({0}, {1}), 0.8, 1e-12);
  EXPECT_NEAR(cost.TransferLoad({0, 1}, {4}), 0.2 * 2, 1e-12);
  // An allreduce faster than a stream (say, measured on a quiet loopback) counts as a stream.
  c.intra_server.allreduce_bandwidth_bytes_per_s = 4e6;
  EXPECT_NEAR(ClusterEmulationCosts(c).AllReduceLoad({0, 1}), 0.8 * 2, 1e-12);
}

}  // namespace
}  // namespace dapple
