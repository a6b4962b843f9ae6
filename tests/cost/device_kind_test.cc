// CostModel::DeviceKind of the analytic model (mixed clusters): devices alike in
// speed, memory and process memory are one kind, named by the first of them, and devices
// of one kind cost the same.
#include <gtest/gtest.h>

#include "cost/cost_test_util.h"
#include "dapple/cost/analytic_cost_model.h"

namespace dapple {
namespace {

TEST(DeviceKind, AlikeDevicesAreOneKindAndCostTheSame) {
  Profile p = testing::FourLayerChain();
  Cluster c = testing::TwoByFour();  // 4 of 16 GB at speed 1, then 4 of 8 GB at speed 2
  c.servers.push_back(ServerSpec{2, DeviceSpec{16e9, 1.0}});  // alike the default
  c.servers.push_back(ServerSpec{2, DeviceSpec{16e9, 1.0}});
  c.servers.back().device->process_memory_bytes = 1e9;  // differs in process memory only
  AnalyticCostModel cost(p, c);
  const std::vector<int> want = {0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 10, 10};
  ASSERT_EQ(cost.num_devices(), static_cast<int>(want.size()));
  for (int d = 0; d < cost.num_devices(); ++d) {
    EXPECT_EQ(cost.DeviceKind(d), want[d]) << d;
    const int k = cost.DeviceKind(d);
    EXPECT_EQ(cost.ForwardMs(0, 3, 3, d), cost.ForwardMs(0, 3, 3, k)) << d;
    EXPECT_EQ(cost.BackwardMs(1, 2, 5, d), cost.BackwardMs(1, 2, 5, k)) << d;
    EXPECT_EQ(cost.UpdateMs(0, 3, d), cost.UpdateMs(0, 3, k)) << d;
    EXPECT_EQ(cost.DeviceMemoryBytes(d), cost.DeviceMemoryBytes(k)) << d;
  }
  // Different kinds do differ here (the default of CostModel: every device its own kind).
  EXPECT_NE(cost.ForwardMs(0, 3, 4, 0), cost.ForwardMs(0, 3, 4, 4));
  EXPECT_NE(cost.DeviceMemoryBytes(0), cost.DeviceMemoryBytes(10));
}

}  // namespace
}  // namespace dapple
