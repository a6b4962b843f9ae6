// The FakeCostModel other layers' tests use keeps its documented contracts.
#include "fakes/fake_cost_model.h"

#include <gtest/gtest.h>

namespace dapple {
namespace {

TEST(FakeCostModel, DocumentedContracts) {
  FakeCostModel cost(4, 3);
  cost.fwd_ms = {1, 2, 3, 4};
  cost.pbs = 2;
  cost.speed[2] = 2;
  cost.transfer_ms = 0.5;
  cost.transfer_ms_per_sample = 0.25;
  cost.allreduce_ms = 3;
  EXPECT_EQ(cost.num_layers(), 4);
  EXPECT_EQ(cost.num_devices(), 3);
  EXPECT_DOUBLE_EQ(cost.ForwardMs(1, 2, 4, 0), 10);
  EXPECT_DOUBLE_EQ(cost.ForwardMs(1, 2, 4, 2), 5);
  EXPECT_DOUBLE_EQ(cost.BackwardMs(0, 3, 2, 0), 8);
  EXPECT_DOUBLE_EQ(cost.Transfer(1, 4, {0}, {1}).ms, 1.5);
  EXPECT_DOUBLE_EQ(cost.AllReduceMs(0, 3, {0}), 0);
  EXPECT_DOUBLE_EQ(cost.AllReduceMs(0, 3, {0, 1}), 3);
  EXPECT_DOUBLE_EQ(cost.StaticMemoryBytes(0, 1), 8e6);
  EXPECT_DOUBLE_EQ(cost.ActivationBytes(0, 1, 1), 1e6);
  EXPECT_DOUBLE_EQ(cost.StageInputBytes(2, 2), 1e6);
  EXPECT_DOUBLE_EQ(cost.CutBytes(0, 4), 2e6);
  EXPECT_DOUBLE_EQ(cost.SingleDeviceMs(4), (10 + 8) * 2.0);
  EXPECT_DOUBLE_EQ(cost.UpdateMs(0, 3, 0), 0);  // free by default
  cost.update_ms = {0.5, 1, 0, 2};
  EXPECT_DOUBLE_EQ(cost.UpdateMs(0, 1, 0), 1.5);
  EXPECT_DOUBLE_EQ(cost.UpdateMs(1, 3, 2), 1.5);  // 3 ms at speed 2
}

}  // namespace
}  // namespace dapple
