// The optimizer update at STEP (CostModel::UpdateMs): per stage and device, at the end of
// every device's list, part of the iteration time and of the busy time.
#include <gtest/gtest.h>

#include <algorithm>

#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::FindEvent;
using testing::MakePlan;

// One stage, data parallel on 2 devices (the second at half speed): whatever the schedule,
// micro-batches and overlap, the iteration grows by exactly the slowest replica's update,
// which both replicas run after the allreduce.
TEST(UpdateStep, OneStageGrowsByTheLargestUpdate) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kDappleA}) {
    for (int M : {1, 3}) {
      for (bool overlap : {false, true}) {
        FakeCostModel cost(3, 2);
        cost.speed = {1, 0.5};
        cost.allreduce_ms = 1.5;
        Plan plan = MakePlan({{0, 2, {0, 1}}}, 2, M, kind);
        plan.allreduce_overlap = overlap;
        SimResult before = SimulatePlan(plan, cost);
        cost.update_ms = {0.25, 0, 1};  // 1.25 ms at speed 1, 2.5 ms at speed 0.5
        SimResult after = SimulatePlan(plan, cost);
        SCOPED_TRACE(::testing::Message()
                     << ToString(kind) << " M " << M << " overlap " << overlap);
        EXPECT_DOUBLE_EQ(after.iteration_ms, before.iteration_ms + 2.5);
        EXPECT_DOUBLE_EQ(after.stages[0].update_ms, 2.5);
        EXPECT_DOUBLE_EQ(after.devices[0].busy_ms, before.devices[0].busy_ms + 1.25);
        EXPECT_DOUBLE_EQ(after.devices[1].busy_ms, before.devices[1].busy_ms + 2.5);
        for (int d = 0; d < 2; ++d) {
          const TimelineEvent* ar = FindEvent(after.timeline, d, "AR");
          const TimelineEvent* step = FindEvent(after.timeline, d, "STEP");
          ASSERT_NE(ar, nullptr);
          ASSERT_NE(step, nullptr);
          EXPECT_EQ(step->category, "step");
          EXPECT_DOUBLE_EQ(step->start_ms, ar->end_ms);
          EXPECT_DOUBLE_EQ(step->end_ms - step->start_ms, d == 0 ? 1.25 : 2.5);
        }
      }
    }
  }
}

// TwoToOne of simulator_test.cc without overlap (stage 0 on devices 0, 1; stage 1 on 2):
//   dev 0, 1: ... AR [16,19] STEP;  dev 2: ... B1 [9.5,13.5] STEP.
// Each device's STEP takes its own stage's update right after its last instruction.
TEST(UpdateStep, PerStageInAPipeline) {
  FakeCostModel cost(2, 3);
  cost.act_bytes = {1e6, 5e6};
  cost.transfer_ms = 0.5;
  cost.allreduce_ms = 3;
  Plan plan = MakePlan({{0, 0, {0, 1}}, {1, 1, {2}}}, 2, 2, ScheduleKind::kDappleA);
  plan.allreduce_overlap = false;
  ASSERT_DOUBLE_EQ(SimulatePlan(plan, cost).iteration_ms, 19);

  cost.update_ms = {2, 4};
  SimResult r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 21);  // stage 0: 19 + 2; stage 1 ends at 13.5 + 4
  EXPECT_DOUBLE_EQ(r.stages[0].update_ms, 2);
  EXPECT_DOUBLE_EQ(r.stages[1].update_ms, 4);
  EXPECT_DOUBLE_EQ(r.devices[0].busy_ms, 6 + 2);
  EXPECT_DOUBLE_EQ(r.devices[2].busy_ms, 12 + 4);
  EXPECT_DOUBLE_EQ(r.devices[2].bubble_ms, 21 - 16);
  for (int d : {0, 1}) {
    const TimelineEvent* step = FindEvent(r.timeline, d, "STEP");
    ASSERT_NE(step, nullptr);
    EXPECT_DOUBLE_EQ(step->start_ms, 19);
    EXPECT_DOUBLE_EQ(step->end_ms, 21);
  }
  const TimelineEvent* step2 = FindEvent(r.timeline, 2, "STEP");
  ASSERT_NE(step2, nullptr);
  EXPECT_DOUBLE_EQ(step2->start_ms, 13.5);
  EXPECT_DOUBLE_EQ(step2->end_ms, 17.5);

  // A slow update on the last stage now ends the iteration: 13.5 + 10.
  cost.update_ms = {2, 10};
  r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 23.5);
  EXPECT_DOUBLE_EQ(r.devices[0].bubble_ms, 23.5 - 8);
}

// STEP is the last instruction of every device's list, so no device does anything after
// its update, and every device's update has the length of its stage's.
TEST(UpdateStep, StepIsTheLastEventOfEveryDevice) {
  FakeCostModel cost(4, 4);
  cost.update_ms = {1, 2, 3, 4};
  cost.transfer_ms = 0.25;
  Plan plan = MakePlan({{0, 0, {0}}, {1, 2, {1, 2}}, {3, 3, {3}}}, 2, 4, ScheduleKind::kDappleA);
  SimResult r = SimulatePlan(plan, cost);
  const double expected[] = {1, 5, 5, 4};
  for (int d = 0; d < 4; ++d) {
    const TimelineEvent* step = FindEvent(r.timeline, d, "STEP");
    ASSERT_NE(step, nullptr) << d;
    EXPECT_DOUBLE_EQ(step->end_ms - step->start_ms, expected[d]) << d;
    for (const TimelineEvent& e : r.timeline.events) {
      if (e.device != d) continue;
      EXPECT_LE(e.end_ms, step->end_ms) << d << " " << e.name;
    }
  }
  double last = 0;
  for (const TimelineEvent& e : r.timeline.events) last = std::max(last, e.end_ms);
  EXPECT_DOUBLE_EQ(r.iteration_ms, last);
}

}  // namespace
}  // namespace dapple
