// The V-shape schedules in the simulator (docs/schedules.md, "ZB-V", "V-Half and V-Min"): the
// paper's iteration times and activation memory on balanced chunks, and every list running
// with transfers and replicas.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::MakePlan;
using testing::StageSpec;

// S groups, 2S one-layer chunks in a V: chunk k (layer k) on group k for k < S and on
// group 2S - 1 - k for k >= S; group g has replicas[g] devices (one when empty).
Plan VPlan(int S, int M, int m = 1, const std::vector<int>& replicas = {},
           ScheduleKind kind = ScheduleKind::kZbV) {
  std::vector<std::vector<int>> groups(S);
  int next = 0;
  for (int g = 0; g < S; ++g)
    for (int j = 0; j < (replicas.empty() ? 1 : replicas[g]); ++j) groups[g].push_back(next++);
  std::vector<StageSpec> stages;
  for (int k = 0; k < 2 * S; ++k) stages.push_back({k, k, groups[k < S ? k : 2 * S - 1 - k]});
  Plan p = MakePlan(stages, m, M, kind);
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
    cost.count_stage_inputs = false;  // peaks in chunk-micro-batches of 1 MB
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

// Note [V-Half and V-Min], on the same balanced chunks: every group holds exactly the cap
// of chunk-micro-batches at its peak, 2((S + 2) / 2) for v-half and 2((S + 4) / 3) for
// v-min ((S + 2) // 2 and (S + 4) // 3 micro-batches of its chunk pair, the paper's figures),
// and the iteration takes 6Mt + bubble, the bubble that construction reaches and under the
// paper's S/2 and 2S/3 micro-batches of 6t.
int ControlledVBubble(ScheduleKind kind, int S) {
  if (kind == ScheduleKind::kVHalf) return std::max(S - 1, 6 * ((S - 1) / 2) - 1);
  return 4 * S - 7 + (S % 3 == 1 ? 2 : 0);
}

TEST(ControlledVSim, PaperPeaksAndBubbles) {
  SimOptions fast{.record_timeline = false};
  const double t = 1;
  int checked = 0;
  for (ScheduleKind kind : {ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    for (int S = 2; S <= 8; ++S) {
      const int pairs = kind == ScheduleKind::kVHalf ? (S + 2) / 2 : (S + 4) / 3;
      const int bubble = ControlledVBubble(kind, S);
      ASSERT_LT(bubble, kind == ScheduleKind::kVHalf ? 3 * S : 4 * S);  // the paper's figure
      FakeCostModel cost(2 * S, S);
      cost.count_stage_inputs = false;  // peaks in chunk-micro-batches of 1 MB
      for (int M = 2 * S; M <= 4 * S; ++M) {
        SimResult r = SimulatePlan(VPlan(S, M, 1, {}, kind), cost, fast);
        const std::string at =
            ToString(kind) + " S=" + std::to_string(S) + " M=" + std::to_string(M);
        ASSERT_DOUBLE_EQ(r.iteration_ms, (6 * M + bubble) * t) << at;
        for (int g = 0; g < S; ++g) {
          const DeviceStats& d = r.devices[g];
          ASSERT_DOUBLE_EQ(d.busy_ms, 6 * M * t) << at << " group " << g;
          ASSERT_EQ(d.peak_in_flight, 2 * pairs) << at << " group " << g;
          ASSERT_EQ(PeakInFlight(kind, g, S, M), 2 * pairs) << at << " group " << g;
          ASSERT_DOUBLE_EQ(d.peak_activation_bytes, 2 * pairs * 1e6) << at;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * (5 + 7 + 9 + 11 + 13 + 15 + 17));
}

// Every list of the V-shape kinds terminates in the simulator with costly transfers on
// shared links and replicated groups (the last group's hand-off between its own chunks
// included), and holds no more than PeakInFlight.
TEST(VShapeSim, EveryListRunsWithTransfersAndReplicas) {
  for (ScheduleKind kind : {ScheduleKind::kZbV, ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    for (int S = 1; S <= 6; ++S) {
      std::vector<int> replicas(S);
      for (int g = 0; g < S; ++g) replicas[g] = 1 + g % 3;
      for (int M = 1; M <= 13; M += 2) {
        FakeCostModel cost(2 * S, 2 * S);
        cost.transfer_ms = 0.7;
        cost.transfer_resources = {1, 2};
        cost.allreduce_ms = 1.5;
        SimResult r = SimulatePlan(VPlan(S, M, 6, replicas, kind), cost);
        EXPECT_GT(r.iteration_ms, 0);
        for (const DeviceStats& d : r.devices) {
          EXPECT_LE(d.peak_in_flight, PeakInFlight(kind, d.stage, S, M)) << ToString(kind);
          EXPECT_GE(d.bubble_ms, 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dapple
