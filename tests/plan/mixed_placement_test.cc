// Placement on mixed clusters (Note [Placement on mixed clusters] in placement.h): the
// kinds of device, the server orders the planners try, the policies under an order, and a
// stage's devices listed fastest first.
#include <gtest/gtest.h>

#include "dapple/format/cluster_kinds.h"
#include "dapple/plan/dp/placement.h"

namespace dapple {
namespace {

// MixedServers of `sizes` devices; speeds[s] > 0 overrides server s's device speed.
Cluster Mixed(std::vector<int> sizes, std::vector<double> speeds) {
  Cluster c;
  c.name = "mixed";
  for (size_t s = 0; s < sizes.size(); ++s) {
    c.servers.push_back(ServerSpec{sizes[s], std::nullopt});
    if (speeds[s] != 1) c.servers[s].device = DeviceSpec{16e9, speeds[s]};
  }
  return c;
}

std::vector<std::vector<int>> MixedServers(const std::vector<ServerOrder>& orders) {
  std::vector<std::vector<int>> out;
  for (const ServerOrder& o : orders) out.push_back(o.servers);
  return out;
}

TEST(MixedPlacement, KindsAreRankedFastestFirstWhateverTheListing) {
  Cluster c = Mixed({2, 2, 2, 2}, {1, 3, 1, 2});
  std::vector<DeviceKind> kinds = DeviceKinds(c);
  ASSERT_EQ(kinds.size(), 3u);
  EXPECT_EQ(kinds[0].spec.speed, 3);
  EXPECT_EQ(kinds[0].servers, std::vector<int>{1});
  EXPECT_EQ(kinds[1].servers, std::vector<int>{3});
  EXPECT_EQ(kinds[2].servers, (std::vector<int>{0, 2}));
  EXPECT_TRUE(MixedDevices(c));
  EXPECT_EQ(MixedServers(ServerOrders(c)),
            (std::vector<std::vector<int>>{{1, 3, 0, 2}, {3, 1, 0, 2}, {0, 2, 1, 3}}));
  // Memory breaks ties of speed: more memory first.
  Cluster m = Mixed({1, 1}, {1, 1});
  m.servers[1].device = DeviceSpec{32e9, 1};
  EXPECT_EQ(DeviceKinds(m)[0].servers, std::vector<int>{1});
  // One kind: one order, the servers as listed; the planners' search is as before.
  Cluster u = Mixed({2, 2}, {1, 1});
  u.servers[1].device = DeviceSpec{16e9, 1};  // an override equal to the default
  EXPECT_FALSE(MixedDevices(u));
  EXPECT_EQ(MixedServers(ServerOrders(u)), (std::vector<std::vector<int>>{{0, 1}}));
}

TEST(MixedPlacement, PoliciesFollowTheOrder) {
  Cluster c = Mixed({2, 2, 2}, {1, 1, 2});
  const std::vector<ServerOrder> orders = ServerOrders(c);
  ASSERT_EQ(orders.size(), 2u);
  ASSERT_EQ(orders[0].servers, (std::vector<int>{2, 0, 1}));  // the fast server first
  auto place = [&](std::vector<int> usage, int n, PlacementPolicy p) {
    auto take = PlaceCountsInOrder(orders[0], usage, n, p);
    EXPECT_TRUE(take);
    std::vector<int> devices = DevicesOf(c, usage, *take);
    FastestFirst(c, devices);
    return devices;
  };
  EXPECT_EQ(place({0, 0, 0}, 2, PlacementPolicy::kFreshFirst), (std::vector<int>{4, 5}));
  EXPECT_EQ(place({0, 0, 0}, 1, PlacementPolicy::kAppendFirst), (std::vector<int>{4}));
  // 3 devices fit no fresh server: fresh servers filled in order, the fast one first.
  EXPECT_EQ(place({0, 0, 0}, 3, PlacementPolicy::kFreshFirst), (std::vector<int>{4, 5, 0}));
  // Scatter: ties between servers with as many free devices go to the first in order.
  EXPECT_EQ(place({0, 0, 0}, 1, PlacementPolicy::kScatterFirst), (std::vector<int>{4}));
  EXPECT_EQ(place({0, 0, 0}, 3, PlacementPolicy::kScatterFirst), (std::vector<int>{4, 0, 2}));
  // Counts by server id; usage is by id too.
  EXPECT_EQ(*PlaceCountsInOrder(orders[0], {0, 1, 1}, 2, PlacementPolicy::kAppendFirst),
            (std::vector<int>{0, 1, 1}));  // partly used servers in order: 2, then 1
  EXPECT_EQ(*PlaceCountsInOrder(orders[1], {0, 0, 0}, 2, PlacementPolicy::kFreshFirst),
            (std::vector<int>{2, 0, 0}));  // the slow servers first
  // Without an order, as listed.
  EXPECT_EQ(PlaceDevices(c, {0, 0, 0}, 2, PlacementPolicy::kFreshFirst), (std::vector<int>{0, 1}));
}

TEST(MixedPlacement, AStageListsItsFastestDevicesFirst) {
  Cluster c = Mixed({2, 2}, {1, 2});
  // Devices 0-1 of speed 1, 2-3 of speed 2: the fast ones first, then by id.
  std::vector<int> devices = {0, 3, 1, 2};
  FastestFirst(c, devices);
  EXPECT_EQ(devices, (std::vector<int>{2, 3, 0, 1}));
}

}  // namespace
}  // namespace dapple
