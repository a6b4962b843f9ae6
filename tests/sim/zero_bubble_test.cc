// zb-h1 (Note [ZB-H1] in schedule/make_schedule.cc) through the simulator, against the
// paper's formulas on balanced stages.
#include <gtest/gtest.h>

#include <algorithm>

#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::StraightPlan;

// S balanced, unreplicated stages, free transfers, F = I = W = 1 ms (the fake's B = 2 ms
// splits in halves): dapple-a takes (M + S - 1)(F + B) = 3(M + S - 1) and idles 3(S - 1)
// per device; zb-h1 takes 3M + (S - 1) and idles S - 1 per device: one third.
TEST(ZeroBubble, IdleIsOneThirdOfDappleA) {
  SimOptions fast{.record_timeline = false};
  for (int S = 1; S <= 12; ++S) {
    FakeCostModel cost(S, S);
    ASSERT_DOUBLE_EQ(cost.BackwardInputMs(0, 0, 1, 0), 1.0);
    ASSERT_DOUBLE_EQ(cost.BackwardWeightMs(0, 0, 1, 0), 1.0);
    for (int M = S; M <= 40; ++M) {
      SimResult a = SimulatePlan(StraightPlan(S, M, ScheduleKind::kDappleA), cost, fast);
      SimResult zb = SimulatePlan(StraightPlan(S, M, ScheduleKind::kZbH1), cost, fast);
      ASSERT_DOUBLE_EQ(zb.iteration_ms, 3.0 * M + (S - 1)) << "S=" << S << " M=" << M;
      for (int d = 0; d < S; ++d) {
        ASSERT_DOUBLE_EQ(zb.devices[d].busy_ms, 3.0 * M);
        ASSERT_DOUBLE_EQ(zb.devices[d].bubble_ms, S - 1.0) << "S=" << S << " M=" << M;
        ASSERT_DOUBLE_EQ(a.devices[d].bubble_ms, 3.0 * (S - 1));
        ASSERT_DOUBLE_EQ(3 * zb.devices[d].bubble_ms, a.devices[d].bubble_ms);
      }
    }
  }
}

// A micro-batch's activations live from its F to its W: every stage of zb-h1 holds
// min(S, M) micro-batches at its peak, which is the peak of dapple-a's stage 0 and so the
// largest peak of any dapple-a device; a later stage s holds more than dapple-a's S - s.
TEST(ZeroBubble, PeakActivationsEqualDappleAsLargest) {
  SimOptions fast{.record_timeline = false};
  for (int S = 1; S <= 8; ++S) {
    FakeCostModel cost(S, S);
    cost.count_stage_inputs = false;  // peaks in micro-batches of 1 MB
    for (int M = 1; M <= 20; ++M) {
      SimResult a = SimulatePlan(StraightPlan(S, M, ScheduleKind::kDappleA), cost, fast);
      SimResult zb = SimulatePlan(StraightPlan(S, M, ScheduleKind::kZbH1), cost, fast);
      double peak_a = 0, peak_zb = 0;
      for (int d = 0; d < S; ++d) {
        peak_a = std::max(peak_a, a.devices[d].peak_activation_bytes);
        peak_zb = std::max(peak_zb, zb.devices[d].peak_activation_bytes);
        ASSERT_EQ(zb.devices[d].peak_in_flight, std::min(S, M));
        ASSERT_DOUBLE_EQ(zb.devices[d].peak_activation_bytes, std::min(S, M) * 1e6);
      }
      ASSERT_DOUBLE_EQ(peak_zb, peak_a) << "S=" << S << " M=" << M;
      ASSERT_DOUBLE_EQ(a.devices[0].peak_activation_bytes, zb.devices[0].peak_activation_bytes);
    }
  }
}

// With fewer micro-batches than stages zb-h1 still runs (no deadlock) and is no slower
// than dapple-a.
TEST(ZeroBubble, FewMicroBatchesNoSlower) {
  SimOptions fast{.record_timeline = false};
  for (int S = 2; S <= 8; ++S) {
    FakeCostModel cost(S, S);
    for (int M = 1; M < S; ++M) {
      SimResult a = SimulatePlan(StraightPlan(S, M, ScheduleKind::kDappleA), cost, fast);
      SimResult zb = SimulatePlan(StraightPlan(S, M, ScheduleKind::kZbH1), cost, fast);
      ASSERT_LE(zb.iteration_ms, a.iteration_ms) << "S=" << S << " M=" << M;
    }
  }
}

// The timeline shows I as "backward" and W as "weight", apart, each with its own time.
TEST(ZeroBubble, TimelineShowsInputAndWeightGradientsApart) {
  FakeCostModel cost(2, 2);
  cost.bwd_ms = {4, 4};  // I = W = 2 ms
  SimResult r = SimulatePlan(StraightPlan(2, 3, ScheduleKind::kZbH1), cost);
  int inputs = 0, weights = 0;
  for (const TimelineEvent& e : r.timeline.events) {
    if (e.name[0] == 'I') {
      ++inputs;
      EXPECT_EQ(e.category, "backward");
      EXPECT_DOUBLE_EQ(e.end_ms - e.start_ms, 2.0);
    } else if (e.name[0] == 'W') {
      ++weights;
      EXPECT_EQ(e.category, "weight");
      EXPECT_DOUBLE_EQ(e.end_ms - e.start_ms, 2.0);
    }
  }
  EXPECT_EQ(inputs, 6);
  EXPECT_EQ(weights, 6);
  EXPECT_DOUBLE_EQ(r.stages[0].input_grad_ms, 2.0);
  EXPECT_DOUBLE_EQ(r.stages[0].weight_grad_ms, 2.0);
}

// Overlapped allreduce on a replicated zb-h1 stage: the buckets start during the last W,
// as they start during the last B of dapple-a. One stage on 2 replicas, one bucket: the
// allreduce starts when the last W ends.
TEST(ZeroBubble, AllReduceAfterTheLastWeightGradient) {
  FakeCostModel cost(1, 2);
  cost.allreduce_ms = 5;
  Plan plan = testing::MakePlan({{0, 0, {0, 1}}}, 2, 3, ScheduleKind::kZbH1);
  SimResult r = SimulatePlan(plan, cost);
  // Per replica 1 sample: F 1, I 1, W 1 ms; 3 micro-batches: 9 ms of compute, then 5 ms.
  EXPECT_DOUBLE_EQ(r.iteration_ms, 9.0 + 5.0);
  EXPECT_EQ(r.stages[0].allreduce_buckets, 1);
}

}  // namespace
}  // namespace dapple
