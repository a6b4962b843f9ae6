// Interleaved 1F1B in the simulator (docs/schedules.md, "Interleaved 1F1B"): the bubble
// formula, activation memory in chunks, v times the point-to-point messages, split-concat
// between groups of different widths, and timelines that name the chunk.
#include <gtest/gtest.h>

#include <random>

#include "dapple/common/error.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::MakePlan;
using testing::StageSpec;

// S groups of v one-layer chunks: chunk k (layer k) on device k mod S.
Plan ChunkedPlan(int S, int v, int M, int m = 1, const std::vector<int>& replicas = {}) {
  std::vector<StageSpec> stages;
  std::vector<std::vector<int>> groups(S);
  int next = 0;
  for (int g = 0; g < S; ++g)
    for (int j = 0; j < (replicas.empty() ? 1 : replicas[g]); ++j) groups[g].push_back(next++);
  for (int k = 0; k < S * v; ++k) stages.push_back({k, k, groups[k % S]});
  Plan p = MakePlan(stages, m, M, ScheduleKind::kInterleaved);
  p.virtual_stages = v;
  return p;
}

// The same layers as S stages of v layers each (dapple-a's partition of the same model).
Plan StagedPlan(int S, int v, int M, ScheduleKind kind = ScheduleKind::kDappleA) {
  std::vector<StageSpec> stages;
  for (int s = 0; s < S; ++s) stages.push_back({s * v, s * v + v - 1, {s}});
  return MakePlan(stages, 1, M, kind);
}

// Note [Interleaved 1F1B]: S uniform stages, each of v chunks with forward f and backward
// b (here f = 1, b = 2 per layer, one layer per chunk), M a multiple of S, free transfers.
// dapple-a on the same stages (F = vf, B = vb) takes M(F + B) + (S - 1)(F + B), every device
// idling (S - 1)(F + B); interleaved with v chunks takes vM(f + b) + (S - 1)(f + b) = M(F + B)
// + (S - 1)(F + B) / v: the idle time divided by v, bubble (S - 1)/v slots.
TEST(InterleavedSim, DividesDappleAsIdleTimeByV) {
  SimOptions fast{.record_timeline = false};
  int checked = 0;
  for (int S = 2; S <= 8; ++S) {
    for (int v : {1, 2, 3, 4}) {
      FakeCostModel cost(S * v, S);
      for (int M = S; M <= 4 * S; M += S) {
        const double f = 1, b = 2, F = v * f, B = v * b;
        SimResult a = SimulatePlan(StagedPlan(S, v, M), cost, fast);
        SimResult in = SimulatePlan(ChunkedPlan(S, v, M), cost, fast);
        ASSERT_DOUBLE_EQ(a.iteration_ms, M * (F + B) + (S - 1) * (F + B));
        ASSERT_DOUBLE_EQ(in.iteration_ms, v * M * (f + b) + (S - 1) * (f + b))
            << "S=" << S << " v=" << v << " M=" << M;
        for (int s = 0; s < S; ++s) {
          ASSERT_DOUBLE_EQ(a.devices[s].bubble_ms, (S - 1) * (F + B));
          ASSERT_DOUBLE_EQ(in.devices[s].bubble_ms * v, a.devices[s].bubble_ms);
          ASSERT_DOUBLE_EQ(in.devices[s].busy_ms, a.devices[s].busy_ms);
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 7 * 4 * 4);
}

// Memory: stage s holds at most K_s = min((v-1)S + 2(S-s) - 1, vM) chunk-micro-batches
// (PeakInFlight),
// each one chunk's activations; the static memory is that of all its chunks.
TEST(InterleavedSim, PeakActivationsAreTheWarmupInChunks) {
  for (int S : {2, 3, 5}) {
    for (int v : {2, 3}) {
      FakeCostModel cost(S * v, S);
      cost.count_stage_inputs = false;  // peaks in chunk-micro-batches of 1 MB
      for (int M = S; M <= 3 * S; M += S) {
        SimResult r = SimulatePlan(ChunkedPlan(S, v, M), cost);
        for (int s = 0; s < S; ++s) {
          const int k = PeakInFlight(ScheduleKind::kInterleaved, s, S, M, v);
          EXPECT_EQ(k, std::min((v - 1) * S + 2 * (S - s) - 1, v * M));
          EXPECT_EQ(r.devices[s].peak_in_flight, k);
          EXPECT_DOUBLE_EQ(r.devices[s].peak_activation_bytes, k * 1e6);  // 1 MB per chunk
          EXPECT_DOUBLE_EQ(r.devices[s].static_memory_bytes, v * 4e6);
        }
        // With M >= 2S, stage 0 holds vS + S - 1 chunk-micro-batches: S + (S - 1)/v
        // micro-batches of the whole stage, against dapple-a's S and dapple-b's 2S - 1.
        if (M < 2 * S) continue;
        SimResult a = SimulatePlan(StagedPlan(S, v, M), cost);
        SimResult b = SimulatePlan(StagedPlan(S, v, M, ScheduleKind::kDappleB), cost);
        EXPECT_DOUBLE_EQ(r.devices[0].peak_activation_bytes,
                         a.devices[0].peak_activation_bytes * (1 + (S - 1.0) / (v * S)));
        EXPECT_LT(r.devices[0].peak_activation_bytes, b.devices[0].peak_activation_bytes);
      }
    }
  }
}

// v times the point-to-point messages: 2(vS - 1)M transfers against dapple-a's 2(S - 1)M,
// each on its virtual boundary's link track; compute events name their chunk.
TEST(InterleavedSim, TransfersAndTimelineNameTheChunk) {
  const int S = 3, v = 2, M = 6;
  FakeCostModel cost(S * v, S);
  cost.transfer_ms = 0.25;
  SimResult r = SimulatePlan(ChunkedPlan(S, v, M), cost);
  SimResult a = SimulatePlan(StagedPlan(S, v, M), cost);
  auto transfers = [](const SimResult& x) {
    int n = 0;
    for (const TimelineEvent& e : x.timeline.events) n += e.category == "transfer";
    return n;
  };
  EXPECT_EQ(transfers(r), 2 * (v * S - 1) * M);
  EXPECT_EQ(transfers(a), 2 * (S - 1) * M);
  ASSERT_EQ(r.timeline.device_labels.size(), static_cast<size_t>(S + 2 * (v * S - 1)));
  EXPECT_EQ(r.timeline.device_labels[S + 2], "link stage 2 -> 3 (activations)");
  // Device 0 runs chunk 1 (virtual stage 3) of micro-batch 0 after receiving it from
  // device 2's chunk 0 (virtual stage 2) across the wrap-around.
  const TimelineEvent* f = testing::FindEvent(r.timeline, 0, "F0c1");
  const TimelineEvent* sent = testing::FindEvent(r.timeline, S + 2, "SA0");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(sent, nullptr);
  EXPECT_EQ(f->stage, 3);
  EXPECT_GE(f->start_ms, sent->end_ms);
  EXPECT_NE(testing::FindEvent(r.timeline, 2, "B5c1"), nullptr);
  EXPECT_NE(r.timeline.title.find("2 chunks per stage"), std::string::npos);
  EXPECT_EQ(r.stages.size(), static_cast<size_t>(S * v));
  EXPECT_DOUBLE_EQ(r.stages[4].send_ms, 0.25);
  EXPECT_DOUBLE_EQ(r.stages[5].send_ms, 0.0);
}

// With one chunk, interleaved is dapple-b, on random plans with replication, transfers
// that contend and an allreduce (every figure equal).
TEST(InterleavedSim, OneChunkEqualsDappleBOnRandomPlans) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    const int S = 1 + rng() % 5, M = 1 + rng() % 9;
    std::vector<StageSpec> stages;
    int dev = 0;
    for (int s = 0; s < S; ++s) {
      std::vector<int> d;
      for (int r = 1 + rng() % 3; r > 0; --r) d.push_back(dev++);
      stages.push_back({s, s, d});
    }
    FakeCostModel cost(S, dev);
    for (int l = 0; l < S; ++l) cost.fwd_ms[l] = 0.5 + rng() % 5, cost.bwd_ms[l] = 1 + rng() % 7;
    cost.transfer_ms = (rng() % 3) * 0.5;
    cost.transfer_resources = {rng() % 2 ? 1 : 0};
    cost.allreduce_ms = 1.5;
    Plan a = MakePlan(stages, 6, M, ScheduleKind::kDappleB);
    Plan in = MakePlan(stages, 6, M, ScheduleKind::kInterleaved);
    SimResult ra = SimulatePlan(a, cost), ri = SimulatePlan(in, cost);
    ASSERT_DOUBLE_EQ(ra.iteration_ms, ri.iteration_ms) << trial;
    for (size_t d = 0; d < ra.devices.size(); ++d) {
      EXPECT_DOUBLE_EQ(ra.devices[d].busy_ms, ri.devices[d].busy_ms);
      EXPECT_DOUBLE_EQ(ra.devices[d].peak_memory_bytes, ri.devices[d].peak_memory_bytes);
    }
  }
}

// Groups of different widths (2 and 1 replicas, m = 4): every chunk of group 0 runs on half
// of each micro-batch on each replica, a transfer from group 0 is ready when both replicas
// sent their slice (split-concat, both directions, round the ring). With free transfers the
// run equals the same schedule on two one-replica groups whose group 0 is twice as fast.
TEST(InterleavedSim, GroupsOfDifferentWidths) {
  const int S = 2, v = 2, M = 4;
  FakeCostModel cost(S * v, 3);
  cost.pbs = 4;
  SimResult wide = SimulatePlan(ChunkedPlan(S, v, M, /*m=*/4, {2, 1}), cost);
  ASSERT_EQ(wide.devices.size(), 3u);
  EXPECT_EQ(wide.devices[1].stage, 0);
  EXPECT_EQ(wide.devices[1].replica, 1);
  FakeCostModel fast(S * v, 2);
  fast.pbs = 4;
  fast.speed[0] = 2;
  SimResult narrow = SimulatePlan(ChunkedPlan(S, v, M, /*m=*/4), fast);
  EXPECT_DOUBLE_EQ(wide.iteration_ms, narrow.iteration_ms);
  EXPECT_DOUBLE_EQ(wide.devices[0].busy_ms, narrow.devices[0].busy_ms);
  EXPECT_DOUBLE_EQ(wide.devices[2].busy_ms, narrow.devices[1].busy_ms);
  EXPECT_DOUBLE_EQ(wide.devices[1].peak_activation_bytes,
                   0.5 * narrow.devices[0].peak_activation_bytes);
}

}  // namespace
}  // namespace dapple
