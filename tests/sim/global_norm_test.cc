// The global gradient norm's allreduce (SimOptions::global_norm_allreduce, Note [The norm's
// allreduce in the simulator]): every device's STEP waits for one scalar allreduce that
// starts when the last device reaches its STEP.
#include <gtest/gtest.h>

#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::FindEvent;
using testing::MakePlan;

// UpdateStep.PerStageInAPipeline's plan (stage 0 on devices 0, 1, its AR ending at 19;
// stage 1 on device 2, its last B ending at 13.5; updates of 2 and 4 ms): with the norm's
// allreduce of 0.5 ms every STEP starts at 19.5, so device 2 ends at 23.5 (not 17.5).
TEST(GlobalNorm, EveryStepWaitsForTheLastStageAndTheAllReduce) {
  FakeCostModel cost(2, 3);
  cost.act_bytes = {1e6, 5e6};
  cost.transfer_ms = 0.5;
  cost.allreduce_ms = 3;
  cost.update_ms = {2, 4};
  cost.scalar_allreduce_ms = 0.5;
  Plan plan = MakePlan({{0, 0, {0, 1}}, {1, 1, {2}}}, 2, 2, ScheduleKind::kDappleA);
  plan.allreduce_overlap = false;
  SimResult before = SimulatePlan(plan, cost);
  ASSERT_DOUBLE_EQ(before.iteration_ms, 21);
  SimOptions clipped;
  clipped.global_norm_allreduce = true;
  SimResult r = SimulatePlan(plan, cost, clipped);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 23.5);
  for (int d = 0; d < 3; ++d) {
    EXPECT_DOUBLE_EQ(r.devices[d].busy_ms, before.devices[d].busy_ms) << d;
    const TimelineEvent* norm = FindEvent(r.timeline, d, "NORM");
    const TimelineEvent* step = FindEvent(r.timeline, d, "STEP");
    ASSERT_NE(norm, nullptr) << d;
    ASSERT_NE(step, nullptr) << d;
    EXPECT_EQ(norm->category, "allreduce");
    EXPECT_DOUBLE_EQ(norm->start_ms, 19) << d;
    EXPECT_DOUBLE_EQ(norm->end_ms, 19.5) << d;
    EXPECT_DOUBLE_EQ(step->start_ms, 19.5) << d;
    EXPECT_DOUBLE_EQ(step->end_ms, 19.5 + (d < 2 ? 2 : 4)) << d;
  }
  // The same without a timeline.
  clipped.record_timeline = false;
  EXPECT_DOUBLE_EQ(SimulatePlan(plan, cost, clipped).iteration_ms, 23.5);
}

// One device: no allreduce, nothing changes.
TEST(GlobalNorm, OneDeviceCostsNothing) {
  FakeCostModel cost(2, 1);
  cost.update_ms = {1, 1};
  cost.scalar_allreduce_ms = 0.5;
  Plan plan = MakePlan({{0, 1, {0}}}, 2, 2, ScheduleKind::kDappleA);
  SimOptions clipped;
  clipped.global_norm_allreduce = true;
  EXPECT_DOUBLE_EQ(SimulatePlan(plan, cost, clipped).iteration_ms,
                   SimulatePlan(plan, cost).iteration_ms);
}

}  // namespace
}  // namespace dapple
