// Devices sharing one machine's cores (CostModel::Emulation, sim/emulation/shared_compute.cc):
// while k devices compute at once each runs at min(1, C / k) of its speed.
#include <gtest/gtest.h>

#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::MakePlan;

// Data parallelism on 4 devices: every instruction runs on all 4 at once, so with the
// compute of C devices each is stretched by exactly 4 / C (and not at all when C >= 4).
TEST(SharedCompute, DataParallelStretchesEveryInstructionByDevicesOverShared) {
  for (double C : {1.0, 2.0, 3.0, 4.0, 8.0}) {
    FakeCostModel cost(2, 4);
    cost.update_ms = {0.5, 0.5};
    cost.allreduce_ms = 3;
    Plan plan = MakePlan({{0, 1, {0, 1, 2, 3}}}, 4, 2, ScheduleKind::kDappleA);
    plan.allreduce_overlap = false;
    const SimResult alone = SimulatePlan(plan, cost);
    cost.shared_compute = C;
    const SimResult shared = SimulatePlan(plan, cost);
    const double stretch = std::max(1.0, 4 / C);
    SCOPED_TRACE(::testing::Message() << "C " << C);
    // Compute: 2 micro-batches x (F 2 + B 4) ms + update 1 ms; the allreduce is not compute.
    const double compute = 2 * (2 + 4) + 1;
    EXPECT_NEAR(alone.iteration_ms, compute + 3, 1e-9);
    EXPECT_NEAR(shared.iteration_ms, compute * stretch + 3, 1e-3 * compute);
    EXPECT_NEAR(shared.devices[0].busy_ms, compute * stretch, 1e-3 * compute);
  }
}

// A pipeline leaves devices idle in its bubbles: with the compute of one device shared by
// two stages, the iteration is longer than with each device its own, but shorter than two
// devices at half speed, which ignores that one stage runs alone at the start and the end.
TEST(SharedCompute, PipelineLiesBetweenOwnDevicesAndHalfSpeed) {
  FakeCostModel cost(2, 2);
  Plan plan = MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 1, 4, ScheduleKind::kDappleA);
  const double own = SimulatePlan(plan, cost).iteration_ms;
  cost.shared_compute = 1;
  const SimResult shared = SimulatePlan(plan, cost);
  cost.shared_compute = 0;
  cost.speed = {0.5, 0.5};
  const double half = SimulatePlan(plan, cost).iteration_ms;
  EXPECT_GT(shared.iteration_ms, own * 1.2);
  EXPECT_LT(shared.iteration_ms, half * 0.95);
  // The timeline holds the stretched instructions the result reports.
  double busy = 0;
  for (const TimelineEvent& e : shared.timeline.events)
    if (e.device == 0 && e.category != std::string("allreduce")) busy += e.end_ms - e.start_ms;
  EXPECT_NEAR(busy, shared.devices[0].busy_ms, 1e-9);
}

// Enough compute for every device: exactly the unshared simulation.
TEST(SharedCompute, AsMuchAsTheDevicesChangesNothing) {
  FakeCostModel cost(3, 3);
  cost.transfer_ms = 0.5;
  Plan plan = MakePlan({{0, 0, {0}}, {1, 2, {1, 2}}}, 2, 3, ScheduleKind::kDappleA);
  const SimResult own = SimulatePlan(plan, cost);
  cost.shared_compute = 3;
  const SimResult shared = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(shared.iteration_ms, own.iteration_ms);
  EXPECT_DOUBLE_EQ(shared.bubble_fraction, own.bubble_fraction);
}

// Note [Resuming on shared cores]: a forward or backward that starts after its device sat
// idle pays the resume cost; back-to-back ones do not. Two stages, one micro-batch: device
// 0's F (the step's first) and B (after waiting for the gradient) resume, device 1's F
// (after waiting for the activation) resumes and its B follows at once: 3 on the critical
// path, 2 on device 0's busy time, 1 on device 1's.
TEST(SharedCompute, ResumeCostsOnlyComputeThatFollowsIdleTime) {
  FakeCostModel cost(2, 2);
  cost.transfer_ms = 0.5;
  cost.shared_compute = 2;  // as many as the devices: no stretching, only the resume cost
  Plan plan = MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 1, 1, ScheduleKind::kDappleA);
  const SimResult without = SimulatePlan(plan, cost);
  cost.shared_compute_resume_ms = 0.25;
  const SimResult with = SimulatePlan(plan, cost);
  EXPECT_NEAR(with.iteration_ms - without.iteration_ms, 3 * 0.25, 1e-9);
  EXPECT_NEAR(with.devices[0].busy_ms - without.devices[0].busy_ms, 2 * 0.25, 1e-9);
  EXPECT_NEAR(with.devices[1].busy_ms - without.devices[1].busy_ms, 1 * 0.25, 1e-9);
  // Data parallelism computes back to back: only the step's first forward resumes.
  Plan dp = MakePlan({{0, 1, {0, 1}}}, 2, 2, ScheduleKind::kDappleA);
  dp.allreduce_overlap = false;
  cost.shared_compute_resume_ms = 0;
  const double dp_without = SimulatePlan(dp, cost).iteration_ms;
  cost.shared_compute_resume_ms = 0.25;
  EXPECT_NEAR(SimulatePlan(dp, cost).iteration_ms - dp_without, 0.25, 1e-9);
  // Devices of their own (no shared compute) pay nothing.
  cost.shared_compute = 0;
  const double own_with = SimulatePlan(plan, cost).iteration_ms;
  cost.shared_compute_resume_ms = 0;
  EXPECT_DOUBLE_EQ(own_with, SimulatePlan(plan, cost).iteration_ms);
}

// Note [Waking up on shared cores]: a device that waits at a receive goes on wake_ms after
// the transfer finished; one whose message is in before it gets there pays nothing. Two
// stages, one micro-batch: device 1 waits for the activation and device 0 for the gradient,
// both on the critical path: 2 wake-ups. Busy time is unchanged (a wake-up is not compute).
TEST(SharedCompute, WakeUpCostsOnlyReceivesThatWait) {
  FakeCostModel cost(2, 2);
  cost.transfer_ms = 0.5;
  cost.shared_compute = 2;  // as many as the devices: no stretching
  Plan plan = MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 1, 1, ScheduleKind::kDappleA);
  const SimResult without = SimulatePlan(plan, cost);
  cost.shared_compute_wake_ms = 0.3;
  const SimResult with = SimulatePlan(plan, cost);
  EXPECT_NEAR(with.iteration_ms - without.iteration_ms, 2 * 0.3, 1e-9);
  EXPECT_NEAR(with.devices[0].busy_ms, without.devices[0].busy_ms, 1e-9);
  EXPECT_NEAR(with.devices[1].busy_ms, without.devices[1].busy_ms, 1e-9);
  // GPipe, two micro-batches: device 1's second activation is in while it computes the
  // first forward, so of its two receives only the first waits (and 4 receives in all).
  Plan gpipe = MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 2, 2, ScheduleKind::kGPipe);
  cost.shared_compute_wake_ms = 0;
  const SimResult g_without = SimulatePlan(gpipe, cost);
  cost.shared_compute_wake_ms = 0.3;
  const SimResult g_with = SimulatePlan(gpipe, cost);
  const double added = g_with.iteration_ms - g_without.iteration_ms;
  EXPECT_GT(added, 0);
  EXPECT_LT(added, 4 * 0.3 - 1e-9) << "a receive that did not wait paid the wake-up";
  // Data parallelism receives nothing: no wake-up at all.
  Plan dp = MakePlan({{0, 1, {0, 1}}}, 2, 2, ScheduleKind::kDappleA);
  dp.allreduce_overlap = false;
  cost.shared_compute_wake_ms = 0;
  const double dp_without = SimulatePlan(dp, cost).iteration_ms;
  cost.shared_compute_wake_ms = 0.3;
  EXPECT_DOUBLE_EQ(SimulatePlan(dp, cost).iteration_ms, dp_without);
  // Devices of their own (no shared compute) pay nothing: the cost model gives no wake-up.
  cost.shared_compute = 0;
  const double own_with = SimulatePlan(plan, cost).iteration_ms;
  cost.shared_compute_wake_ms = 0;
  EXPECT_DOUBLE_EQ(own_with, SimulatePlan(plan, cost).iteration_ms);
}

// Communication on a shared machine takes compute (LinkSpec::compute_load): it slows the
// compute that runs meanwhile, and only that.
TEST(SharedCompute, CommunicationLoadSlowsOnlyTheComputeItOverlaps) {
  FakeCostModel cost(2, 2);
  cost.transfer_ms = 1;
  cost.shared_compute = 2;  // no stretching from compute alone
  // One micro-batch: every transfer runs while both devices wait.
  Plan one = MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 1, 1, ScheduleKind::kDappleA);
  const double one_without = SimulatePlan(one, cost).iteration_ms;
  cost.transfer_compute_load = 1.5;
  EXPECT_DOUBLE_EQ(SimulatePlan(one, cost).iteration_ms, one_without);
  // Four micro-batches: device 0 computes while its activations travel, so with load 1.5
  // on 2 devices of compute it runs slower; the transfers themselves keep their time.
  Plan four = MakePlan({{0, 0, {0}}, {1, 1, {1}}}, 1, 4, ScheduleKind::kDappleA);
  cost.transfer_compute_load = 0;
  const SimResult four_without = SimulatePlan(four, cost);
  cost.transfer_compute_load = 1.5;
  const SimResult four_with = SimulatePlan(four, cost);
  EXPECT_GT(four_with.iteration_ms, four_without.iteration_ms + 0.1);
  EXPECT_GT(four_with.devices[0].busy_ms, four_without.devices[0].busy_ms + 0.1);
  // Overlapped buckets slow the backward they overlap; without overlap nothing computes
  // during the allreduce.
  Plan dp = MakePlan({{0, 1, {0, 1}}}, 2, 2, ScheduleKind::kDappleA);
  cost.allreduce_ms = 4;
  cost.bucket_bytes = 1;  // a bucket per layer
  cost.transfer_compute_load = 0;
  dp.allreduce_overlap = false;
  const double dp_plain = SimulatePlan(dp, cost).iteration_ms;
  cost.allreduce_compute_load = 2;
  EXPECT_DOUBLE_EQ(SimulatePlan(dp, cost).iteration_ms, dp_plain);
  dp.allreduce_overlap = true;
  const double overlapped_loaded = SimulatePlan(dp, cost).iteration_ms;
  cost.allreduce_compute_load = 0;
  EXPECT_GT(overlapped_loaded, SimulatePlan(dp, cost).iteration_ms + 0.05);
  // Devices of their own ignore it.
  cost.shared_compute = 0;
  cost.allreduce_compute_load = 2;
  const double own_loaded = SimulatePlan(dp, cost).iteration_ms;
  cost.allreduce_compute_load = 0;
  EXPECT_DOUBLE_EQ(own_loaded, SimulatePlan(dp, cost).iteration_ms);
}

}  // namespace
}  // namespace dapple
