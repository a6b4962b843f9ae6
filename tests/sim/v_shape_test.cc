// ZB-V in the simulator (docs/schedules.md, "ZB-V"): the paper's iteration time and
// activation memory on balanced chunks, and every list running with transfers and replicas.
#include <gtest/gtest.h>

#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::MakePlan;
using testing::StageSpec;

// S groups, 2S one-layer chunks in a V: chunk k (layer k) on group k for k < S and on
// group 2S - 1 - k for k >= S; group g has replicas[g] devices (one when empty).
Plan VPlan(int S, int M, int m = 1, const std::vector<int>& replicas = {}) {
  std::vector<std::vector<int>> groups(S);
  int next = 0;
  for (int g = 0; g < S; ++g)
    for (int j = 0; j < (replicas.empty() ? 1 : replicas[g]); ++j) groups[g].push_back(next++);
  std::vector<StageSpec> stages;
  for (int k = 0; k < 2 * S; ++k) stages.push_back({k, k, groups[k < S ? k : 2 * S - 1 - k]});
  Plan p = MakePlan(stages, m, M, ScheduleKind::kZbV);
  p.virtual_stages = 2;
  return p;
}

// Note [ZB-V]: balanced chunks with F = I = W = t (the fake's 1 ms forward and 2 ms backward
// per layer, split in halves), free transfers, M >= 2S - 1. Every group does 2M chunks of
// F + I + W = 6Mt of work; group S - 1 can start only after micro-batch 0's forward went
// down the S - 1 chunks above it, and ZB-V leaves no other idle time: the iteration is
// 6Mt + (S - 1)t, the work of two chunks per micro-batch plus the fill of one chunk, and
// every group idles exactly (S - 1)t. Peak activations: 2S chunk-micro-batches on every
// group (S micro-batches of its chunk pair: 1F1B's S micro-batches of a stage when a
// chunk is half a stage), each one chunk's 1 MB; static memory: both chunks' parameters.
TEST(ZbVSim, PaperIterationTimeAndPeakActivations) {
  SimOptions fast{.record_timeline = false};
  const double t = 1;
  int checked = 0;
  for (int S = 2; S <= 6; ++S) {
    FakeCostModel cost(2 * S, S);
    for (int M = 2 * S; M <= 4 * S; ++M) {
      SimResult r = SimulatePlan(VPlan(S, M), cost, fast);
      ASSERT_DOUBLE_EQ(r.iteration_ms, 6 * M * t + (S - 1) * t) << "S=" << S << " M=" << M;
      for (int g = 0; g < S; ++g) {
        const DeviceStats& d = r.devices[g];
        ASSERT_DOUBLE_EQ(d.busy_ms, 6 * M * t) << "S=" << S << " M=" << M << " group " << g;
        ASSERT_DOUBLE_EQ(d.bubble_ms, (S - 1) * t) << "S=" << S << " M=" << M << " group " << g;
        ASSERT_EQ(d.peak_in_flight, 2 * S) << "S=" << S << " M=" << M << " group " << g;
        ASSERT_EQ(PeakInFlight(ScheduleKind::kZbV, g, S, M), 2 * S);
        ASSERT_DOUBLE_EQ(d.peak_activation_bytes, 2 * S * 1e6);
        ASSERT_DOUBLE_EQ(d.static_memory_bytes, 2 * 4e6);  // 1 MB x state factor 4, per chunk
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 + 7 + 9 + 11 + 13);
}

// Every zb-v list terminates in the simulator with costly transfers on shared links and
// replicated groups (the last group's hand-off between its own chunks included), and holds
// no more than PeakInFlight.
TEST(ZbVSim, EveryListRunsWithTransfersAndReplicas) {
  for (int S = 1; S <= 6; ++S) {
    std::vector<int> replicas(S);
    for (int g = 0; g < S; ++g) replicas[g] = 1 + g % 3;
    for (int M = 1; M <= 13; M += 2) {
      FakeCostModel cost(2 * S, 2 * S);
      cost.transfer_ms = 0.7;
      cost.transfer_resources = {1, 2};
      cost.allreduce_ms = 1.5;
      SimResult r = SimulatePlan(VPlan(S, M, 6, replicas), cost);
      EXPECT_GT(r.iteration_ms, 0);
      for (const DeviceStats& d : r.devices) {
        EXPECT_LE(d.peak_in_flight, PeakInFlight(ScheduleKind::kZbV, d.stage, S, M));
        EXPECT_GE(d.bubble_ms, 0);
      }
    }
  }
}

}  // namespace
}  // namespace dapple
