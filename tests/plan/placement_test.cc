// Placement policies return the documented device sets (placement.h) on small clusters.
#include "dapple/plan/dp/placement.h"

#include <gtest/gtest.h>

#include <random>

namespace dapple {
namespace {

Cluster Servers(std::vector<int> sizes) {
  Cluster c;
  c.name = "test";
  for (int s : sizes) c.servers.push_back(ServerSpec{s, std::nullopt});
  return c;
}

std::vector<int> Seq(int from, int to) {  // from..to inclusive
  std::vector<int> v;
  for (int i = from; i <= to; ++i) v.push_back(i);
  return v;
}

TEST(Placement, FreshFirstKeepsAStageInsideOneFreshServer) {
  Cluster c = Servers({8, 8});
  EXPECT_EQ(PlaceDevices(c, {0, 0}, 4, PlacementPolicy::kFreshFirst), Seq(0, 3));
  EXPECT_EQ(PlaceDevices(c, {4, 0}, 4, PlacementPolicy::kFreshFirst), Seq(8, 11));
  // 10 devices do not fit in the fresh server: fill it, then the partly used one.
  auto take = PlaceCounts(c, {4, 0}, 10, PlacementPolicy::kFreshFirst);
  ASSERT_TRUE(take);
  EXPECT_EQ(*take, (std::vector<int>{2, 8}));
  std::vector<int> want = {4, 5};
  for (int d = 8; d <= 15; ++d) want.push_back(d);
  EXPECT_EQ(PlaceDevices(c, {4, 0}, 10, PlacementPolicy::kFreshFirst), want);
}

TEST(Placement, FreshFirstPicksTheFirstFreshServerWithRoom) {
  Cluster c = Servers({2, 4, 4});
  EXPECT_EQ(PlaceDevices(c, {0, 0, 0}, 3, PlacementPolicy::kFreshFirst), Seq(2, 4));
  EXPECT_EQ(PlaceDevices(c, {0, 0, 0}, 2, PlacementPolicy::kFreshFirst), Seq(0, 1));
}

TEST(Placement, WithoutAFreshServerAStageStaysInsideOnePartlyUsedServer) {
  Cluster c = Servers({4, 4});
  // Free 2 and 3: both policies take the fullest server that holds the stage.
  EXPECT_EQ(PlaceDevices(c, {2, 1}, 2, PlacementPolicy::kFreshFirst), Seq(2, 3));
  EXPECT_EQ(PlaceDevices(c, {2, 1}, 3, PlacementPolicy::kFreshFirst), Seq(5, 7));
  EXPECT_EQ(PlaceDevices(c, {1, 2}, 2, PlacementPolicy::kAppendFirst), Seq(6, 7));
  EXPECT_EQ(PlaceDevices(c, {0, 2}, 2, PlacementPolicy::kAppendFirst), Seq(6, 7));
  EXPECT_EQ(PlaceDevices(c, {0, 2}, 2, PlacementPolicy::kFreshFirst), Seq(0, 1));
}

TEST(Placement, AppendFirstFillsPartlyUsedServers) {
  Cluster c = Servers({8, 8});
  EXPECT_EQ(PlaceDevices(c, {4, 0}, 2, PlacementPolicy::kAppendFirst), Seq(4, 5));
  std::vector<int> want = Seq(4, 7);
  want.push_back(8);
  want.push_back(9);
  EXPECT_EQ(PlaceDevices(c, {4, 0}, 6, PlacementPolicy::kAppendFirst), want);
  EXPECT_EQ(PlaceDevices(c, {0, 0}, 3, PlacementPolicy::kAppendFirst), Seq(0, 2));
  EXPECT_EQ(PlaceDevices(c, {8, 3}, 2, PlacementPolicy::kAppendFirst), Seq(11, 12));
}

TEST(Placement, ScatterFirstSpreadsEvenly) {
  Cluster c = Servers({8, 8});
  EXPECT_EQ(PlaceDevices(c, {0, 0}, 4, PlacementPolicy::kScatterFirst),
            (std::vector<int>{0, 1, 8, 9}));
  // Free 4 and 8: server 1 gives until both have 4 free, then they alternate.
  auto take = PlaceCounts(c, {4, 0}, 6, PlacementPolicy::kScatterFirst);
  ASSERT_TRUE(take);
  EXPECT_EQ(*take, (std::vector<int>{1, 5}));
  Cluster four = Servers({1, 1, 1, 1});
  EXPECT_EQ(PlaceDevices(four, {0, 1, 0, 0}, 2, PlacementPolicy::kScatterFirst),
            (std::vector<int>{0, 2}));
}

TEST(Placement, NotEnoughFreeDevices) {
  Cluster c = Servers({8, 8});
  for (PlacementPolicy p : AllPlacementPolicies()) {
    EXPECT_FALSE(PlaceCounts(c, {8, 7}, 2, p)) << ToString(p);
    EXPECT_TRUE(PlaceDevices(c, {8, 7}, 2, p).empty());
    EXPECT_EQ(PlaceDevices(c, {8, 7}, 1, p), std::vector<int>{15});
  }
}

TEST(Placement, IdenticalServers) {
  EXPECT_TRUE(IdenticalServers(Servers({8, 8})));
  EXPECT_FALSE(IdenticalServers(Servers({8, 4})));
  Cluster c = Servers({2, 2});
  c.servers[1].device = DeviceSpec{16e9, 2.0};
  EXPECT_FALSE(IdenticalServers(c));
}

// Scatter First's rule taken literally, one device at a time, against PlaceCounts (which
// computes the counts by levels) on random clusters and usages.
TEST(Placement, ScatterFirstEqualsOneDeviceAtATime) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int servers = std::uniform_int_distribution<int>(1, 9)(rng);
    std::vector<int> sizes, usage;
    int free_total = 0;
    for (int s = 0; s < servers; ++s) {
      sizes.push_back(std::uniform_int_distribution<int>(1, 8)(rng));
      usage.push_back(std::uniform_int_distribution<int>(0, sizes.back())(rng));
      free_total += sizes.back() - usage.back();
    }
    if (free_total == 0) continue;
    const int n = std::uniform_int_distribution<int>(1, free_total)(rng);
    std::vector<int> take(servers, 0);
    for (int k = 0; k < n; ++k) {
      int best = -1;
      for (int s = 0; s < servers; ++s) {
        const int left = sizes[s] - usage[s] - take[s];
        if (left > 0 && (best < 0 || left > sizes[best] - usage[best] - take[best])) best = s;
      }
      ++take[best];
    }
    auto got = PlaceCounts(Servers(sizes), usage, n, PlacementPolicy::kScatterFirst);
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, take) << "trial " << trial;
  }
}

}  // namespace
}  // namespace dapple
