// The optimizer update (UpdateMs) and the allreduce-specific link fields of the cluster
// (allreduce_bandwidth_bytes_per_s, allreduce_latency_s) in AnalyticCostModel, by hand.
#include <gtest/gtest.h>

#include "cost/cost_test_util.h"
#include "dapple/cost/analytic_cost_model.h"
#include "dapple/cost/grad_buckets.h"

namespace dapple {
namespace {

using testing::FourLayerChain;
using testing::TwoByFour;

TEST(UpdateMs, SumsTheLayersAndScalesWithSpeed) {
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();  // server 1 (devices 4..7) runs at speed 2
  {
    AnalyticCostModel none(p, c);  // no update_ms in the profile: the update is free
    EXPECT_DOUBLE_EQ(none.UpdateMs(0, 3, 0), 0);
  }
  p.layers[0].update_ms = 0.5;
  p.layers[1].update_ms = 1.25;
  p.layers[3].update_ms = 4;  // layer 2 has none (0)
  AnalyticCostModel cost(p, c);
  EXPECT_DOUBLE_EQ(cost.UpdateMs(0, 3, 0), 5.75);
  EXPECT_DOUBLE_EQ(cost.UpdateMs(1, 2, 3), 1.25);
  EXPECT_DOUBLE_EQ(cost.UpdateMs(2, 2, 1), 0);
  EXPECT_DOUBLE_EQ(cost.UpdateMs(0, 3, 5), 5.75 / 2);
  EXPECT_DOUBLE_EQ(cost.UpdateMs(3, 3, 7), 2);
  // Independent of the batch: nothing else changes with it.
  EXPECT_DOUBLE_EQ(cost.SingleDeviceMs(8), (10 + 20) * 8.0 / 4);
}

TEST(AllReduceLinkFields, UnsetFieldsGiveThePointToPointNumbersExactly) {
  Profile p = FourLayerChain();
  Cluster plain = TwoByFour();
  Cluster same = plain;  // the allreduce fields set to the link's own values
  for (LinkSpec* l : {&same.intra_server, &same.inter_server}) {
    l->allreduce_bandwidth_bytes_per_s = l->bandwidth_bytes_per_s;
    l->allreduce_latency_s = l->latency_s;
  }
  AnalyticCostModel a(p, plain), b(p, same);
  for (const std::vector<int>& devs :
       std::vector<std::vector<int>>{{0, 1}, {0, 1, 2, 3}, {0, 4}, {1, 2, 5, 6, 7}, {4, 5}})
    for (int first = 0; first < 4; ++first)
      EXPECT_EQ(a.AllReduceMs(first, 3, devs), b.AllReduceMs(first, 3, devs));
  // The numbers of RingAllReduce (analytic_cost_model_test.cc): 4 devices of one server,
  // 2 x 3/4 x 100 B / 1e6 B/s + 6 x 1 ms.
  EXPECT_EQ(a.AllReduceMs(0, 3, {0, 1, 2, 3}), (2.0 * 3 / 4 * 100 / 1e6 + 6 * 1e-3) * 1e3);
}

TEST(AllReduceLinkFields, SetFieldsReplaceBandwidthAndLatencyInTheRingFormula) {
  Profile p = FourLayerChain();  // 100 B of parameters in all
  Cluster c = TwoByFour();       // links: intra 1e6 B/s 1 ms, inter 1e5 B/s 2 ms
  c.intra_server.allreduce_bandwidth_bytes_per_s = 2e5;
  c.intra_server.allreduce_latency_s = 3e-3;
  c.inter_server.allreduce_bandwidth_bytes_per_s = 5e4;
  c.inter_server.allreduce_latency_s = 1e-3;
  AnalyticCostModel cost(p, c);
  // One server: its allreduce fields. 2 x 3/4 x 100 / 2e5 s + 6 x 3 ms = 0.75 + 18 ms.
  EXPECT_NEAR(cost.AllReduceMs(0, 3, {0, 1, 2, 3}), 18.75, 1e-12);
  // Across servers: the slower bandwidth (inter 5e4) and the longer step latency (intra
  // 3 ms): 2 x 1/2 x 100 / 5e4 s + 2 x 3 ms = 2 + 6 ms.
  EXPECT_NEAR(cost.AllReduceMs(0, 3, {0, 4}), 8.0, 1e-12);
  // Layers 1..2 (50 B), r = 3 inside server 1: 2 x 2/3 x 50 / 2e5 s + 4 x 3 ms.
  EXPECT_NEAR(cost.AllReduceMs(1, 2, {5, 6, 7}), 2.0 * 2 / 3 * 50 / 2e5 * 1e3 + 12, 1e-12);
  EXPECT_DOUBLE_EQ(cost.AllReduceMs(0, 3, {6}), 0);
  // Only the allreduce changes: split-concat transfers keep the point-to-point link.
  const Cluster plain_cluster = TwoByFour();  // the model keeps a reference: not a temporary
  AnalyticCostModel plain(p, plain_cluster);
  EXPECT_EQ(cost.Transfer(1, 4, {0}, {1}).ms, plain.Transfer(1, 4, {0}, {1}).ms);
  EXPECT_EQ(cost.Transfer(1, 4, {0, 1}, {4}).ms, plain.Transfer(1, 4, {0, 1}, {4}).ms);
  // Buckets go through AllReduceMs: with one bucket, the whole allreduce.
  std::vector<GradBucket> buckets = GradientBuckets(cost, 0, 3);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(BucketAllReduceMs(cost, buckets, {0, 4})[0], cost.AllReduceMs(0, 3, {0, 4}));
}

TEST(AllReduceLinkFields, OnlyOneFieldSetKeepsTheOtherFromTheLink) {
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();
  c.intra_server.allreduce_bandwidth_bytes_per_s = 5e5;  // latency stays the link's 1 ms
  AnalyticCostModel cost(p, c);
  EXPECT_NEAR(cost.AllReduceMs(0, 3, {0, 1}), 100.0 / 5e5 * 1e3 + 2, 1e-12);
  Cluster d = TwoByFour();
  d.inter_server.allreduce_latency_s = 0;  // bandwidth stays the link's 1e5 B/s
  AnalyticCostModel cost_d(p, d);
  // max(intra 1 ms, inter 0) latency; min(1e6, 1e5) bandwidth: 1 ms + 2 x 1 ms.
  EXPECT_NEAR(cost_d.AllReduceMs(0, 3, {0, 4}), 1 + 2, 1e-12);
}

}  // namespace
}  // namespace dapple
