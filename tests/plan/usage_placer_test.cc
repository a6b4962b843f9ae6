// Note [Placement from one usage]: UsagePlacer's placements must be PlaceCountsInto's, on
// random clusters (servers of different sizes too) and usages, every n and policy.
#include "dapple/plan/dp/usage_placer.h"

#include <gtest/gtest.h>

#include <random>

#include "dapple/plan/dp/placement.h"

namespace dapple {
namespace {

TEST(UsagePlacer, PlacesAsPlaceCountsInto) {
  std::mt19937 rng(5);
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  long long compared = 0, placed = 0;
  for (int t = 0; t < 400; ++t) {
    Cluster c;
    c.name = "random";
    const int servers = pick(1, 40);
    const bool same = pick(0, 1) == 0;
    const int size = pick(1, 8);
    for (int s = 0; s < servers; ++s)
      c.servers.push_back(ServerSpec{same ? size : pick(1, 8), std::nullopt});
    UsagePlacer placer(c);
    for (int u = 0; u < 10; ++u) {
      std::vector<int> usage(servers);
      const int busy = pick(0, 3);  // mostly fresh, or mostly used, or mixed
      for (int s = 0; s < servers; ++s) {
        const int d = c.servers[s].devices;
        usage[s] = busy == 0   ? (pick(0, 4) == 0 ? pick(0, d) : 0)
                   : busy == 1 ? (pick(0, 4) == 0 ? pick(0, d) : d)
                               : pick(0, d);
      }
      placer.Reset(usage);
      std::vector<int> dense, devices, expected;
      UsagePlacer::Take take;
      for (int n = 1; n <= c.num_devices() + 1; ++n) {
        for (PlacementPolicy p : AllPlacementPolicies()) {
          const bool want = PlaceCountsInto(c, usage, n, p, dense);
          ASSERT_EQ(placer.Place(n, p, take), want) << "t " << t << " n " << n;
          ++compared;
          if (!want) continue;
          std::vector<int> got(servers, 0);
          for (const auto& [s, k] : take) {
            ASSERT_GT(k, 0);
            got[s] = k;
          }
          for (size_t i = 1; i < take.size(); ++i) ASSERT_LT(take[i - 1].first, take[i].first);
          ASSERT_EQ(got, dense) << "t " << t << " n " << n << " " << ToString(p);
          placer.DevicesOf(take, devices);
          DevicesOf(c, usage, dense, expected);
          ASSERT_EQ(devices, expected);
          ++placed;
        }
      }
    }
  }
  EXPECT_GT(placed, 100000);
  EXPECT_GT(compared, placed);
}

}  // namespace
}  // namespace dapple
