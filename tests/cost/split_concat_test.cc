// Split-concat transfers by hand, on the TwoByFour cluster: intra 1e6 B/s + 1 ms, inter
// 1e5 B/s + 2 ms. Cut after layer 1 of FourLayerChain: 200 B at PBS 4 = 50 B per sample.
// Resource ids: 2s egress of server s, 2s+1 its ingress, 4 + d device d's intra link.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cost/cost_test_util.h"
#include "dapple/cost/analytic_cost_model.h"

namespace dapple {
namespace {

using ::testing::ElementsAre;
using testing::FourLayerChain;
using testing::TwoByFour;

class SplitConcat : public ::testing::Test {
 protected:
  Profile profile_ = FourLayerChain();
  Cluster cluster_ = TwoByFour();
  AnalyticCostModel cost_{profile_, cluster_};
  TransferCost T(const std::vector<int>& from, const std::vector<int>& to, double mb = 12) {
    return cost_.Transfer(1, mb, from, to);
  }
};

TEST_F(SplitConcat, OneToOne) {
  TransferCost t = T({0}, {1});
  EXPECT_NEAR(t.ms, 600 / 1e6 * 1e3 + 1, 1e-12);  // 12 samples x 50 B intra + latency
  EXPECT_THAT(t.resources, ElementsAre(4 + 1));
  TransferCost x = T({0}, {4});
  EXPECT_NEAR(x.ms, 600 / 1e5 * 1e3 + 2, 1e-12);
  EXPECT_THAT(x.resources, ElementsAre(0, 3));  // egress of server 0, ingress of server 1
}

TEST_F(SplitConcat, TwoToOneWithinServer) {
  TransferCost t = T({0, 1}, {2});  // receiver gets all 12 samples: 600 B
  EXPECT_NEAR(t.ms, 0.6 + 1, 1e-12);
  EXPECT_THAT(t.resources, ElementsAre(4 + 2));
  TransferCost self = T({0, 1}, {1});  // device 1 keeps its own half
  EXPECT_NEAR(self.ms, 0.3 + 1, 1e-12);
  EXPECT_THAT(self.resources, ElementsAre(4 + 1));
}

TEST_F(SplitConcat, TwoToOneAcrossServers) {
  TransferCost t = T({4, 5}, {0});  // 600 B leave server 1 and enter server 0
  EXPECT_NEAR(t.ms, 6 + 2, 1e-12);
  EXPECT_THAT(t.resources, ElementsAre(1, 2));
}

TEST_F(SplitConcat, OneToThree) {
  TransferCost in = T({0}, {1, 2, 3});  // 200 B to each receiver over its own link
  EXPECT_NEAR(in.ms, 0.2 + 1, 1e-12);
  EXPECT_THAT(in.resources, ElementsAre(5, 6, 7));
  TransferCost across = T({0}, {4, 5, 6});  // 600 B share server 0's egress port
  EXPECT_NEAR(across.ms, 6 + 2, 1e-12);
  EXPECT_THAT(across.resources, ElementsAre(0, 3));
}

TEST_F(SplitConcat, ThreeToTwo) {
  // Senders own [0,4) [4,8) [8,12); receivers want [0,6) [6,12).
  // Within: to device 3: 4 from dev 0 + 2 from dev 1 = 300 B; to device 2: 2 from dev 1
  // (its own 4 stay) = 100 B. The slower receiver decides: 0.3 ms + 1 ms.
  TransferCost in = T({0, 1, 2}, {3, 2});
  EXPECT_NEAR(in.ms, 0.3 + 1, 1e-12);
  EXPECT_THAT(in.resources, ElementsAre(4 + 2, 4 + 3));
  // Across: all 12 samples leave server 0: 600 B / 1e5 B/s + 2 ms.
  TransferCost across = T({0, 1, 2}, {4, 5});
  EXPECT_NEAR(across.ms, 6 + 2, 1e-12);
  EXPECT_THAT(across.resources, ElementsAre(0, 3));
}

TEST_F(SplitConcat, MixedIntraAndInter) {
  // Senders dev 0 (server 0) [0,6), dev 4 (server 1) [6,12); receivers dev 1 [0,4),
  // dev 2 [4,8), dev 5 [8,12). 0->1: 200 B, 0->2: 100 B, 4->2: 100 B across, 4->5: 200 B.
  // Intra links: 0.2 ms at most; ports: 100 B / 1e5 = 1 ms; plus the inter latency.
  TransferCost t = T({0, 4}, {1, 2, 5});
  EXPECT_NEAR(t.ms, 1 + 2, 1e-12);
  EXPECT_THAT(t.resources, ElementsAre(1, 2, 4 + 1, 4 + 2, 4 + 5));
  // Each server keeps its half: only intra traffic, only intra latency.
  TransferCost pairs = T({0, 4}, {1, 5});
  EXPECT_NEAR(pairs.ms, 0.3 + 1, 1e-12);
  EXPECT_THAT(pairs.resources, ElementsAre(4 + 1, 4 + 5));
}

TEST_F(SplitConcat, SameDevicesCostNothing) {
  TransferCost t = T({0, 1}, {0, 1});
  EXPECT_EQ(t.ms, 0);
  EXPECT_TRUE(t.resources.empty());
}

TEST_F(SplitConcat, UnevenSlicesFollowSliceOf) {
  // 5 samples over 2 senders: [0,3) [3,5); 3 receivers: [0,2) [2,4) [4,5). Receiver dev 3
  // gets 1 sample from dev 0 and 1 from dev 1 (100 B); dev 2 gets 2 from dev 0 (100 B);
  // dev 4 gets 1 sample from dev 1 across servers (50 B = 0.5 ms).
  TransferCost t = T({0, 1}, {2, 3, 4}, 5);
  EXPECT_NEAR(t.ms, 0.5 + 2, 1e-12);
  EXPECT_THAT(t.resources, ElementsAre(0, 3, 4 + 2, 4 + 3));
}

TEST_F(SplitConcat, ScalesWithMicroBatch) { EXPECT_NEAR(T({0}, {1}, 24).ms, 1.2 + 1, 1e-12); }

}  // namespace
}  // namespace dapple
