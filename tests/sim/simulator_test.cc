// Hand-computed simulations: replicated stages, link contention, memory, deadlock.
#include "dapple/sim/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;
using testing::MakePlan;

using testing::FindEvent;

// Stage 0 (layer 0) on devices 0 and 1, stage 1 (layer 1) on device 2; m = 2, M = 2,
// dapple-a; transfers 0.5 ms without shared resources; allreduce 3 ms.
// Stage 0 replicas take 1 sample: F = 1, B = 2. Stage 1 takes 2 samples: F = 2, B = 4.
//   dev 0, 1: F0 [0,1] F1 [1,2] . . . B0 [8,10] . . B1 [14,16] AR [16,19] STEP 19
//   links:    act0 [1,1.5] act1 [2,2.5]; grad0 [7.5,8] grad1 [13.5,14]
//   dev 2:    F0 [1.5,3.5] B0 [3.5,7.5] F1 [7.5,9.5] B1 [9.5,13.5] STEP 13.5
struct TwoToOne : ::testing::Test {
  TwoToOne() : cost(2, 3) {
    cost.act_bytes = {1e6, 5e6};
    cost.input_bytes = 0.25e6;  // the model input, per sample
    cost.transfer_ms = 0.5;
    cost.allreduce_ms = 3;
    plan = MakePlan({{0, 0, {0, 1}}, {1, 1, {2}}}, 2, 2, ScheduleKind::kDappleA);
  }
  FakeCostModel cost;
  Plan plan;
};

TEST_F(TwoToOne, Times) {
  // The paper's single allreduce: no bucket track or events (allreduce_overlap_test.cc).
  plan.allreduce_overlap = false;
  SimResult r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 19);
  ASSERT_EQ(r.devices.size(), 3u);
  EXPECT_EQ(r.devices[1].device, 1);
  EXPECT_EQ(r.devices[1].stage, 0);
  EXPECT_EQ(r.devices[1].replica, 1);
  EXPECT_EQ(r.devices[2].device, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].busy_ms, 6);
  EXPECT_DOUBLE_EQ(r.devices[1].busy_ms, 6);
  EXPECT_DOUBLE_EQ(r.devices[2].busy_ms, 12);
  EXPECT_DOUBLE_EQ(r.devices[0].bubble_ms, 13);
  EXPECT_DOUBLE_EQ(r.devices[2].bubble_ms, 7);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 33.0 / 57.0);
  EXPECT_DOUBLE_EQ(r.speedup, 24.0 / 19.0);  // (2 + 4) ms per sample x 4 samples
  EXPECT_EQ(r.instructions, 10 + 10 + 9);

  const Timeline& t = r.timeline;
  ASSERT_EQ(t.device_labels.size(), 5u);
  EXPECT_EQ(t.device_labels[1], "dev 1 (stage 0, replica 1)");
  EXPECT_EQ(t.device_labels[3], "link stage 0 -> 1 (activations)");
  EXPECT_EQ(t.device_labels[4], "link stage 1 -> 0 (gradients)");
  auto expect = [&](int track, const char* name, double start, double end) {
    const TimelineEvent* e = FindEvent(t, track, name);
    ASSERT_NE(e, nullptr) << track << " " << name;
    EXPECT_DOUBLE_EQ(e->start_ms, start) << track << " " << name;
    EXPECT_DOUBLE_EQ(e->end_ms, end) << track << " " << name;
  };
  expect(0, "F1", 1, 2);
  expect(1, "B0", 8, 10);
  expect(1, "B1", 14, 16);
  expect(0, "AR", 16, 19);
  expect(1, "AR", 16, 19);
  expect(2, "F0", 1.5, 3.5);
  expect(2, "B1", 9.5, 13.5);
  expect(3, "SA1", 2, 2.5);
  expect(4, "SG0", 7.5, 8);
  expect(4, "SG1", 13.5, 14);
  EXPECT_EQ(t.events.size(), 6u + 6u + 5u + 4u);
}

TEST_F(TwoToOne, StageStatsAndMemory) {
  SimResult r = SimulatePlan(plan, cost);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(r.stages[0].forward_ms, 1);
  EXPECT_DOUBLE_EQ(r.stages[0].backward_ms, 2);
  EXPECT_DOUBLE_EQ(r.stages[0].send_ms, 0.5);
  EXPECT_DOUBLE_EQ(r.stages[0].allreduce_ms, 3);
  EXPECT_DOUBLE_EQ(r.stages[1].forward_ms, 2);
  EXPECT_DOUBLE_EQ(r.stages[1].send_ms, 0);
  EXPECT_DOUBLE_EQ(r.stages[1].allreduce_ms, 0);
  // Stage 0 keeps K=2 micro-batches of 1 sample x (0.25 MB input + 1 MB); stage 1 one of 2
  // samples x (1 MB input + 5 MB).
  EXPECT_EQ(r.devices[0].peak_in_flight, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].peak_activation_bytes, 2 * 1.25e6);
  EXPECT_DOUBLE_EQ(r.devices[2].peak_activation_bytes, 2e6 + 10e6);
  EXPECT_DOUBLE_EQ(r.devices[0].static_memory_bytes, 4e6);
  EXPECT_DOUBLE_EQ(r.devices[2].peak_memory_bytes, 4e6 + 12e6);

  // Re-computation: K stage inputs plus one micro-batch of activations.
  plan.recompute = true;
  r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.devices[0].peak_activation_bytes, 2 * 0.25e6 + 1e6);
  EXPECT_DOUBLE_EQ(r.devices[2].peak_activation_bytes, 1 * 2e6 + 10e6);
  // Every B first runs its stage's forward again: stage 0 B = 1 + 2, stage 1 B = 2 + 4.
  //   dev 2: F0 [1.5,3.5] B0 [3.5,9.5] F1 [9.5,11.5] B1 [11.5,17.5]; grads at 10 and 18
  //   dev 0, 1: B0 [10,13] B1 [18,21] AR [21,24]
  EXPECT_DOUBLE_EQ(r.iteration_ms, 24);
  EXPECT_DOUBLE_EQ(r.stages[0].backward_ms, 3);
  EXPECT_DOUBLE_EQ(r.stages[1].backward_ms, 6);
}

// Re-computation per stage, by hand (single allreduce):
//   stage 1 only: dev 2 F0 [1.5,3.5] B0 [3.5,9.5] F1 [9.5,11.5] B1 [11.5,17.5];
//     grads [9.5,10] and [17.5,18]; dev 0, 1 B0 [10,12] B1 [18,20] AR [20,23] -> 23.
//   stage 0 only: dev 2 as without (grads [7.5,8], [13.5,14]); dev 0, 1 B0 [8,11]
//     B1 [14,17] AR [17,20] -> 20.
//   both: dev 0, 1 B0 [10,13] B1 [18,21] AR [21,24] -> 24.
TEST_F(TwoToOne, RecomputePerStage) {
  plan.allreduce_overlap = false;
  plan.stages[1].recompute = true;
  SimResult r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 23);
  EXPECT_DOUBLE_EQ(r.stages[0].backward_ms, 2);
  EXPECT_DOUBLE_EQ(r.stages[1].backward_ms, 6);
  // Stage 1 keeps its input (layer 0's 1 MB x 2 samples) plus one micro-batch; stage 0 two
  // micro-batches whole.
  EXPECT_DOUBLE_EQ(r.devices[0].peak_activation_bytes, 2 * 1.25e6);
  EXPECT_DOUBLE_EQ(r.devices[2].peak_activation_bytes, 1 * 2e6 + 10e6);
  plan.stages[1].recompute = false;
  plan.stages[0].recompute = true;
  r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 20);
  EXPECT_DOUBLE_EQ(r.devices[0].peak_activation_bytes, 2 * 0.25e6 + 1e6);
  EXPECT_DOUBLE_EQ(r.devices[2].peak_activation_bytes, 2e6 + 10e6);
  plan.stages[1].recompute = true;
  EXPECT_DOUBLE_EQ(SimulatePlan(plan, cost).iteration_ms, 24);
}

TEST_F(TwoToOne, SlowDeviceDelaysTheTransferAndTheAllReduce) {
  cost.speed = {1, 0.5, 1};  // replica 1 of stage 0 runs at half speed: F = 2, B = 4
  SimResult r = SimulatePlan(plan, cost);
  //   dev 1: F0 [0,2] F1 [2,4]; act0 ready 2 -> [2,2.5]; act1 [4,4.5]
  //   dev 2: F0 [2.5,4.5] B0 [4.5,8.5] F1 [8.5,10.5] B1 [10.5,14.5]; grad1 [14.5,15]
  //   dev 1: B0 [9,13] B1 [15,19]; AR [19,22]
  EXPECT_DOUBLE_EQ(r.iteration_ms, 22);
  EXPECT_DOUBLE_EQ(r.stages[0].forward_ms, 2);  // the slowest replica
  EXPECT_DOUBLE_EQ(r.devices[0].busy_ms, 6);
  EXPECT_DOUBLE_EQ(r.devices[1].busy_ms, 12);
}

// Stage 0 (layer 0) on device 0, stage 1 (layer 1) on devices 1, 2, 3; m = 3, M = 3, gpipe,
// pbs 3. Every transfer takes 2 ms and holds the same link, so they queue:
//   dev 0:  F0 [0,1] F1 [1,2] F2 [2,3]            B0 [12,14] B1 [14,16] B2 [16,18] STEP 18
//   link:   act0 [1,3] act1 [3,5] act2 [5,7] grad0 [10,12] grad1 [12,14] grad2 [14,16]
//   dev 1-3: F0 [3,4] F1 [5,6] F2 [7,8] B0 [8,10] B1 [10,12] B2 [12,14] AR [14,19] STEP 19
TEST(Simulator, OneToThreeWithLinkContention) {
  FakeCostModel cost(2, 4);
  cost.pbs = 3;
  cost.fwd_ms = {1, 3};
  cost.bwd_ms = {2, 6};
  cost.transfer_ms = 2;
  cost.transfer_resources = {7};
  cost.allreduce_ms = 5;
  Plan plan = MakePlan({{0, 0, {0}}, {1, 1, {1, 2, 3}}}, 3, 3, ScheduleKind::kGPipe);
  SimResult r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 19);
  for (const DeviceStats& d : r.devices) EXPECT_DOUBLE_EQ(d.busy_ms, 9);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 10.0 / 19.0);
  EXPECT_DOUBLE_EQ(r.speedup, 36.0 / 19.0);
  const Timeline& t = r.timeline;
  EXPECT_DOUBLE_EQ(FindEvent(t, 4, "SA1")->start_ms, 3);
  EXPECT_DOUBLE_EQ(FindEvent(t, 4, "SA2")->start_ms, 5);
  EXPECT_DOUBLE_EQ(FindEvent(t, 5, "SG2")->start_ms, 14);
  EXPECT_DOUBLE_EQ(FindEvent(t, 0, "B0")->start_ms, 12);
  EXPECT_DOUBLE_EQ(FindEvent(t, 3, "F2")->start_ms, 7);
  EXPECT_DOUBLE_EQ(FindEvent(t, 0, "STEP")->end_ms, 18);

  // Without the shared link the transfers overlap and everything moves earlier.
  cost.transfer_resources.clear();
  SimResult free = SimulatePlan(plan, cost);
  //   act0 [1,3] act1 [2,4] act2 [3,5]; dev 1-3 F0 [3,4] F1 [4,5] F2 [5,6] B0-B2 [6,12]
  //   AR [12,17]; grads [8,10] [10,12] [12,14]; dev 0 B2 [14,16]
  EXPECT_DOUBLE_EQ(free.iteration_ms, 17);
}

// Two transfers ready at the same time on a shared link go in boundary order: with stage 0
// slower (F = 2), act1 across boundary 0 (ready at 4, F1 on stage 0 ends) and act0 across
// boundary 1 (ready at 4, F0 on stage 1 ends) tie; boundary 0 goes first.
TEST(Simulator, TiesGoToTheLowerBoundary) {
  FakeCostModel cost(3, 3);
  cost.fwd_ms = {2, 1, 1};
  cost.transfer_ms = 1;
  cost.transfer_resources = {0};
  Plan plan = MakePlan({{0, 0, {0}}, {1, 1, {1}}, {2, 2, {2}}}, 1, 2, ScheduleKind::kGPipe);
  SimResult r = SimulatePlan(plan, cost);
  const Timeline& t = r.timeline;
  const int act0 = 3, act1 = 4;  // link tracks after the 3 devices
  EXPECT_DOUBLE_EQ(FindEvent(t, act0, "SA0")->start_ms, 2);
  EXPECT_DOUBLE_EQ(FindEvent(t, act0, "SA1")->start_ms, 4);
  EXPECT_DOUBLE_EQ(FindEvent(t, act1, "SA0")->start_ms, 5);
  EXPECT_DOUBLE_EQ(FindEvent(t, 2, "F0")->start_ms, 6);
}

TEST(Simulator, DeadlockThrowsNamingTheBlockedInstructions) {
  FakeCostModel cost(2, 2);
  Plan plan = MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 1, 2, ScheduleKind::kGPipe);
  Schedule bad = ParseScheduleText(
      "stage 0: F0 SA0 RG0 B0 F1 SA1 RG1 B1 STEP\n"
      "stage 1: RA0 F0 RA1 F1 B0 SG0 B1 SG1 STEP\n");
  try {
    Simulate(plan, bad, cost);
    FAIL() << "expected a deadlock";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "simulated schedule deadlocks: stage 0 replica 0 pc 2 RG0 (micro-batch 0); "
                 "stage 1 replica 0 pc 2 RA1 (micro-batch 1)");
  }
}

TEST(Simulator, RejectsMalformedInput) {
  FakeCostModel cost(2, 2);
  Plan plan = MakePlan({{0, 0, {0}}, {1, 1, {5}}}, 1, 2, ScheduleKind::kGPipe);
  EXPECT_THROW(SimulatePlan(plan, cost), InputError);  // device 5 of 2
  plan.stages[1].devices = {1};
  Schedule bad = ParseScheduleText("stage 0: F0 SA7 B0 STEP\nstage 1: RA0 F0 B0 STEP\n");
  bad.num_micro_batches = 2;
  try {
    Simulate(plan, bad, cost);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("stage 0 has SA7"));
  }
}

// Every generated schedule terminates in the simulator, with costly transfers on shared
// links and replicated stages, and never holds more than its warm-up depth.
TEST(Simulator, EveryGeneratedScheduleRuns) {
  for (int S = 1; S <= 6; ++S) {
    for (int M = 1; M <= 9; M += 2) {
      for (ScheduleKind kind : AllScheduleKinds()) {
        if (VShaped(kind)) continue;  // two chunks per stage: v_shape_test.cc
        std::vector<testing::StageSpec> stages;
        int next = 0;
        for (int s = 0; s < S; ++s) {
          std::vector<int> devices(1 + s % 3);
          for (int& d : devices) d = next++;
          stages.push_back({s, s, devices});
        }
        FakeCostModel cost(S, next);
        cost.transfer_ms = 0.7;
        cost.transfer_resources = {1, 2};
        cost.allreduce_ms = 1.5;
        SimResult r = SimulatePlan(MakePlan(stages, 6, M, kind), cost);
        EXPECT_GT(r.iteration_ms, 0);
        for (const DeviceStats& d : r.devices) {
          EXPECT_LE(d.peak_in_flight, PeakInFlight(kind, d.stage, S, M));
          EXPECT_GE(d.bubble_ms, 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dapple
