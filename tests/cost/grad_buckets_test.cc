// GradientBuckets (DDP-style grouping from the last layer down), BucketAllReduceMs and
// ExposedAllReduceMs, by hand on the fake and on the analytic model.
#include "dapple/cost/grad_buckets.h"

#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/cost/analytic_cost_model.h"
#include "fakes/fake_cost_model.h"

namespace dapple {
namespace {

// "[first,last]" per bucket, in allreduce order.
std::string Ranges(const std::vector<GradBucket>& buckets) {
  std::string out;
  for (const GradBucket& b : buckets)
    out += "[" + std::to_string(b.first_layer) + "," + std::to_string(b.last_layer) + "]";
  return out;
}

TEST(GradientBuckets, FillFromTheLastLayerDownWithoutOverflowing) {
  FakeCostModel cost(6, 1);
  cost.bucket_bytes = 10;
  cost.param_bytes = {1, 2, 3, 4, 5, 6};
  // From layer 5: 6, + 5 = 11 > 10: [5]; 5 + 4 = 9, + 3 = 12 > 10: [3,4]; 3 + 2 + 1: [0,2].
  std::vector<GradBucket> b = GradientBuckets(cost, 0, 5);
  EXPECT_EQ(Ranges(b), "[5,5][3,4][0,2]");
  EXPECT_EQ(b[0].bytes, 6);
  EXPECT_EQ(b[1].bytes, 9);
  EXPECT_EQ(b[2].bytes, 6);
  // A sub-range of the layers: only its own layers.
  EXPECT_EQ(Ranges(GradientBuckets(cost, 1, 3)), "[1,3]");  // 9 bytes
  EXPECT_EQ(Ranges(GradientBuckets(cost, 2, 5)), "[5,5][3,4][2,2]");
}

TEST(GradientBuckets, ExactlyFullClosesAndABigLayerIsAlone) {
  FakeCostModel cost(5, 1);
  cost.bucket_bytes = 10;
  cost.param_bytes = {3, 25, 4, 6, 10};
  // [4] is exactly full; 6 + 4 = 10 full; 25 alone (bigger than a bucket); [0].
  EXPECT_EQ(Ranges(GradientBuckets(cost, 0, 4)), "[4,4][2,3][1,1][0,0]");
}

TEST(GradientBuckets, ParameterFreeLayersJoinTheirNeighbours) {
  FakeCostModel cost(6, 1);
  cost.bucket_bytes = 10;
  cost.param_bytes = {0, 0, 8, 0, 7, 0};
  // 5 (free) joins 4's bucket; 3 (free) too (7 + 0); 2 would overflow: [2]; 1 and 0 (free)
  // join the bucket above them.
  EXPECT_EQ(Ranges(GradientBuckets(cost, 0, 5)), "[3,5][0,2]");
  cost.param_bytes = {0, 0, 0, 0, 0, 0};
  std::vector<GradBucket> none = GradientBuckets(cost, 1, 4);
  EXPECT_EQ(Ranges(none), "[1,4]");  // never empty
  EXPECT_EQ(none[0].bytes, 0);
  cost.param_bytes = {0, 0, 10, 0, 0, 0};
  EXPECT_EQ(Ranges(GradientBuckets(cost, 0, 5)), "[0,5]");  // full at 2; 1, 0 join it
}

TEST(GradientBuckets, PartitionTheStageOnTheAnalyticModelWith25MiB) {
  Profile p;
  p.model = "m";
  p.batch_size = 1;
  const double mib = 1 << 20;
  for (double mb : {0.0, 30.0, 10.0, 10.0, 5.0, 0.0, 20.0, 1.0}) {
    LayerProfile l;
    l.id = "l" + std::to_string(p.layers.size());
    l.name = l.id;
    l.forward_ms = 1;
    l.backward_ms = 2;
    l.parameter_bytes = mb * mib;
    p.layers.push_back(l);
  }
  Cluster c = ClusterPreset("paper-a");
  AnalyticCostModel cost(p, c);
  EXPECT_EQ(cost.AllReduceBucketBytes(), 25 * mib);
  EXPECT_EQ(cost.ParameterBytes(1, 3), 50 * mib);
  // 1 + 20 = 21, + 0, + 5 = 26 > 25: [5,7]; 5 + 10 + 10 = 25 full: [2,4]; 30 alone: [1];
  // the parameter-free layer 0 joins it.
  std::vector<GradBucket> b = GradientBuckets(cost, 0, 7);
  EXPECT_EQ(Ranges(b), "[5,7][2,4][0,1]");
  double sum = 0;
  for (const GradBucket& x : b) sum += x.bytes;
  EXPECT_EQ(sum, cost.ParameterBytes(0, 7));
  // Ring allreduce per bucket among 2 devices of one server: bytes / 25 GB/s.
  std::vector<double> ms = BucketAllReduceMs(cost, b, {0, 1});
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_NEAR(ms[0], 21 * mib / 25e9 * 1e3, 1e-12);
  EXPECT_NEAR(ms[0] + ms[1] + ms[2], cost.AllReduceMs(0, 7, {0, 1}), 1e-12);

  CostOptions bad;
  bad.allreduce_bucket_bytes = 0;
  EXPECT_THROW(AnalyticCostModel(p, c, bad), InputError);
}

TEST(ExposedAllReduceMs, TheBackwardHidesAllButTheTail) {
  FakeCostModel cost(3, 2);
  cost.bucket_bytes = 1;  // one layer per bucket
  cost.param_bytes = {1, 1, 1};
  cost.bwd_ms = {1, 1, 1};
  cost.allreduce_ms = 2;  // every bucket 2 ms
  std::vector<GradBucket> b = GradientBuckets(cost, 0, 2);
  std::vector<double> ms = BucketAllReduceMs(cost, b, {0, 1});
  EXPECT_EQ(ms, (std::vector<double>{2, 2, 2}));
  // Ready at 1, 2, 3 after the backward starts; chain [1,3] [3,5] [5,7]: 4 ms after it ends.
  EXPECT_DOUBLE_EQ(ExposedAllReduceMs(cost, b, ms, 1, 0), 4);
  // Twice the samples: ready at 2, 4, 6; chain [2,4] [4,6] [6,8]: the last bucket only.
  EXPECT_DOUBLE_EQ(ExposedAllReduceMs(cost, b, ms, 2, 0), 2);
  // One bucket: the whole allreduce.
  cost.bucket_bytes = 100;
  b = GradientBuckets(cost, 0, 2);
  EXPECT_DOUBLE_EQ(ExposedAllReduceMs(cost, b, BucketAllReduceMs(cost, b, {0, 1}), 1, 0), 2);
}

// The runtime groups its real parameters with GroupGradientBuckets: the same rule as
// GradientBuckets, on explicit per-layer bytes and an offset layer range.
TEST(GroupGradientBuckets, SameRuleOnExplicitBytes) {
  const double mib = 1 << 20;
  // Layers 3..7: 10, 10, 0, 30, 10 MiB, cap 25 MiB -> {7}, {6} (too big), {3..5}.
  std::vector<GradBucket> b =
      GroupGradientBuckets({10 * mib, 10 * mib, 0, 30 * mib, 10 * mib}, 3, 25 * mib);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].first_layer, 7);
  EXPECT_EQ(b[0].last_layer, 7);
  EXPECT_EQ(b[1].first_layer, 6);
  EXPECT_EQ(b[1].last_layer, 6);
  EXPECT_EQ(b[2].first_layer, 3);
  EXPECT_EQ(b[2].last_layer, 5);
  EXPECT_DOUBLE_EQ(b[2].bytes, 20 * mib);

  FakeCostModel cost(5, 2);
  cost.bucket_bytes = 25 * mib;
  cost.param_bytes = {10 * mib, 10 * mib, 0, 30 * mib, 10 * mib};
  std::vector<GradBucket> via_cost = GradientBuckets(cost, 0, 4);
  ASSERT_EQ(via_cost.size(), b.size());
  for (size_t k = 0; k < b.size(); ++k) {
    EXPECT_EQ(via_cost[k].first_layer + 3, b[k].first_layer) << k;
    EXPECT_EQ(via_cost[k].last_layer + 3, b[k].last_layer) << k;
    EXPECT_DOUBLE_EQ(via_cost[k].bytes, b[k].bytes) << k;
  }
}

}  // namespace
}  // namespace dapple
