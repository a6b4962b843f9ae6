// The pivot stage rule and L (docs/design.md section 6) against hand-computed examples.
#include "dapple/plan/pipeline_latency.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace dapple {
namespace {

TEST(PipelineLatency, TwoStagesWithATransferBetween) {
  // c0 = (F 1, B 2, AR 0.5), transfer 0.5, c1 = (2, 4, 1), M = 4.
  auto st = WithTransfers({{1, 2, 0.5}, {2, 4, 1}}, {0.5});
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[1].forward_ms, 0.5);
  EXPECT_EQ(st[1].backward_ms, 0.5);
  EXPECT_EQ(st[1].allreduce_ms, 0.0);
  // Q: start 2; s=1: l1 = 3*1 = 3 <= l2 = 3*6 = 18; s=0: l1 = 9 <= 18 + 1 = 19. Q = 2.
  PipelineLatency l = ComputeLatency(st, 4);
  EXPECT_EQ(l.pivot, 2);
  EXPECT_EQ(ComputeStageOf(l.pivot), 1);
  EXPECT_DOUBLE_EQ(l.warmup_ms, 3.5);   // 1 + 0.5 + 2
  EXPECT_DOUBLE_EQ(l.steady_ms, 18.0);  // 3 * (2 + 4)
  // E_2 = 4 (+AR 1) = 5; E_1 = 4.5; E_0 = 6.5 (+AR 0.5) = 7.
  EXPECT_DOUBLE_EQ(l.ending_ms, 7.0);
  EXPECT_DOUBLE_EQ(l.latency_ms, 28.5);
}

TEST(PipelineLatency, PivotMovesToASlowFirstStage) {
  // s0 = (4, 8, AR 1), s1 = (1, 2, AR 3), s2 = (1, 1, AR 13); M = 3.
  std::vector<LatencyStage> st = {{4, 8, 1}, {1, 2, 3}, {1, 1, 13}};
  // s=1: l1 = 2*3 = 6 > l2 = 2*2 = 4 -> Q = 1; s=0: l1 = 24 > 2*3 + 0 = 6 -> Q = 0.
  EXPECT_EQ(PivotStage(st, 3), 0);
  PipelineLatency l = ComputeLatency(st, 3);
  EXPECT_DOUBLE_EQ(l.warmup_ms, 4.0);
  EXPECT_DOUBLE_EQ(l.steady_ms, 24.0);
  // E_0 = 8 -> 9; E_1 = -(empty) = 0 -> 3; E_2 = -B_1 = -2 -> 11. The paper's printed
  // form (-sum_{a=Q..s} B_a = -11) would give 2 for s = 2 and T_e = 9.
  EXPECT_DOUBLE_EQ(l.ending_ms, 11.0);
  EXPECT_DOUBLE_EQ(l.latency_ms, 39.0);
}

TEST(PipelineLatency, TiesKeepTheLaterPivot) {
  // s=0: l1 = (M-1)*3 = l2 = (M-1)*3: not strictly larger, Q stays 1.
  std::vector<LatencyStage> st = {{1, 2, 0}, {1, 2, 0}};
  EXPECT_EQ(PivotStage(st, 5), 1);
  // One micro-batch: l1 = l2 = 0 everywhere; L = sum F + sum B.
  std::vector<LatencyStage> three = {{1, 2, 0}, {3, 4, 0}, {5, 6, 0}};
  PipelineLatency l = ComputeLatency(three, 1);
  EXPECT_EQ(l.pivot, 2);
  EXPECT_DOUBLE_EQ(l.latency_ms, 1 + 3 + 5 + 6 + 4 + 2);
}

TEST(PipelineLatency, SingleStageIsGradientAccumulation) {
  PipelineLatency l = ComputeLatency({{2, 3, 7}}, 8);
  EXPECT_EQ(l.pivot, 0);
  EXPECT_DOUBLE_EQ(l.latency_ms, 2 + 7 * 5 + 3 + 7);  // M (F + B) + AR
  // The optimizer update follows the allreduce.
  PipelineLatency u = ComputeLatency({{2, 3, 7, 1.5}}, 8);
  EXPECT_DOUBLE_EQ(u.ending_ms, 3 + 7 + 1.5);
  EXPECT_DOUBLE_EQ(u.latency_ms, l.latency_ms + 1.5);
}

TEST(PipelineLatency, UpdatesEndEachStageAfterItsAllReduce) {
  // The example of TwoStagesWithATransferBetween, ending 7 = E_0 6.5 + AR 0.5 (E_2 = 5).
  // U_0 = 1: E_0 + AR + U = 8. U_2 = 3.5 on the last stage: E_2 4 + AR 1 + 3.5 = 8.5 wins.
  auto st = WithTransfers({{1, 2, 0.5, 1}, {2, 4, 1, 3.5}}, {0.5});
  EXPECT_EQ(st[1].update_ms, 0.0);  // transfers update nothing
  PipelineLatency l = ComputeLatency(st, 4);
  EXPECT_EQ(l.pivot, 2);  // the update does not move the pivot
  EXPECT_DOUBLE_EQ(l.ending_ms, 8.5);
  EXPECT_DOUBLE_EQ(l.latency_ms, 3.5 + 18 + 8.5);
  st[2].update_ms = 0;
  EXPECT_DOUBLE_EQ(ComputeLatency(st, 4).ending_ms, 8.0);
  // A stage after the pivot: s2 of PivotMovesToASlowFirstStage ends at E_2 = -2 + AR 13;
  // with U_2 = 4 it gives 15 > E_0 + AR_0 = 9.
  std::vector<LatencyStage> slow_first = {{4, 8, 1}, {1, 2, 3}, {1, 1, 13, 4}};
  EXPECT_DOUBLE_EQ(ComputeLatency(slow_first, 3).ending_ms, 15.0);
}

// Note [Latency over a shared tail]: LatencyWithTail against ComputeLatency of the whole
// list, to the bit, on random lists; small whole numbers make ties (pivot and ending) common.
TEST(PipelineLatency, TailStateGivesTheSameFigure) {
  std::mt19937_64 rng(13);
  auto stage = [&](bool transfer) {
    auto value = [&] {
      switch (rng() % 4) {
        case 0:
          return 0.0;
        case 1:
          return static_cast<double>(rng() % 6);
        default:
          return std::uniform_real_distribution<double>(0, 10)(rng);
      }
    };
    LatencyStage s{value(), value(), value(), value()};
    if (transfer) s = {s.forward_ms, s.forward_ms, 0.0, 0.0};
    return s;
  };
  int pivots_in_head = 0, pivots_in_tail = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int M = 1 + static_cast<int>(rng() % 9);
    std::vector<LatencyStage> tail;
    for (int n = static_cast<int>(rng() % 9), s = 0; s < n; ++s) tail.push_back(stage(s % 2 == 1));
    const LatencyTail t = TailOf(tail, M);
    for (int h = 0; h < 4; ++h) {
      std::vector<LatencyStage> all;
      for (int n = 1 + static_cast<int>(rng() % 5), s = 0; s < n; ++s)
        all.push_back(stage(s % 2 == 1));
      const size_t head = all.size();
      all.insert(all.end(), tail.begin(), tail.end());
      const PipelineLatency want = ComputeLatency(all, M);
      const double got = LatencyWithTail(std::span<const LatencyStage>(all.data(), head), t);
      ASSERT_EQ(std::memcmp(&got, &want.latency_ms, sizeof got), 0)
          << "trial " << trial << ": " << got << " vs " << want.latency_ms;
      ++(want.pivot < static_cast<int>(head) ? pivots_in_head : pivots_in_tail);
    }
  }
  EXPECT_GT(pivots_in_head, 1000);  // both ways of finishing are exercised
  EXPECT_GT(pivots_in_tail, 1000);
}

}  // namespace
}  // namespace dapple
