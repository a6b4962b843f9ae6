// Properties of the schedules on balanced stages, checked through the simulator.
#include <gtest/gtest.h>

#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::StraightPlan;

// Balanced, unreplicated stages, free transfers: GPipe and DAPPLE policy A both take
// (M + S - 1)(F + B), so the bubble fraction is (S-1)/(M+S-1) on every device.
TEST(Bubble, GPipeAndDappleAMatchTheFormula) {
  SimOptions fast{.record_timeline = false};
  for (int S = 1; S <= 16; ++S) {
    FakeCostModel cost(S, S);  // 1 ms forward, 2 ms backward per layer
    for (int M = 1; M <= 64; ++M) {
      const double expected = static_cast<double>(S - 1) / (M + S - 1);
      SimResult g = SimulatePlan(StraightPlan(S, M, ScheduleKind::kGPipe), cost, fast);
      SimResult a = SimulatePlan(StraightPlan(S, M, ScheduleKind::kDappleA), cost, fast);
      ASSERT_DOUBLE_EQ(g.iteration_ms, 3.0 * (M + S - 1)) << "S=" << S << " M=" << M;
      ASSERT_DOUBLE_EQ(a.iteration_ms, g.iteration_ms) << "S=" << S << " M=" << M;
      ASSERT_NEAR(g.bubble_fraction, expected, 1e-12) << "S=" << S << " M=" << M;
      ASSERT_NEAR(a.bubble_fraction, expected, 1e-12) << "S=" << S << " M=" << M;
      for (const DeviceStats& d : a.devices) {
        ASSERT_DOUBLE_EQ(d.busy_ms, 3.0 * M);
        ASSERT_DOUBLE_EQ(d.bubble_ms, 3.0 * (S - 1));
      }
    }
  }
}

TEST(Bubble, PeakInFlightIsTheWarmupDepth) {
  SimOptions fast{.record_timeline = false};
  for (int S = 1; S <= 8; ++S) {
    FakeCostModel cost(S, S);
    cost.count_stage_inputs = false;  // peaks in micro-batches of 1 MB
    for (int M = 1; M <= 20; ++M) {
      for (ScheduleKind kind : AllScheduleKinds()) {
        if (VShaped(kind)) continue;                // two chunks per stage: v_shape_test.cc
        if (kind == ScheduleKind::kZbH2) continue;  // its own peak: steady_state_test.cc
        SimResult r = SimulatePlan(StraightPlan(S, M, kind), cost, fast);
        for (int s = 0; s < S; ++s) {
          // interleaved with one chunk (a plan without virtual_stages) is dapple-b.
          int expected = kind == ScheduleKind::kGPipe     ? M
                         : kind == ScheduleKind::kDappleA ? std::min(S - s, M)
                         : kind == ScheduleKind::kZbH1    ? std::min(S, M)
                                                          : std::min(2 * (S - s) - 1, M);
          ASSERT_EQ(r.devices[s].peak_in_flight, expected)
              << ToString(kind) << " S=" << S << " M=" << M << " stage " << s;
          // 1 MB of activation per layer and sample, one layer per stage, m = 1.
          ASSERT_DOUBLE_EQ(r.devices[s].peak_activation_bytes, expected * 1e6);
          ASSERT_DOUBLE_EQ(r.devices[s].peak_memory_bytes, 4e6 + expected * 1e6);
        }
      }
    }
  }
}

// On unbalanced stages early backward is never slower than fill-drain here, and strictly
// faster for this example (a slow last stage).
TEST(Bubble, DappleAIsNoSlowerOnUnbalancedStages) {
  FakeCostModel cost(4, 4);
  cost.fwd_ms = {1, 1, 1, 3};
  cost.bwd_ms = {2, 2, 2, 6};
  cost.transfer_ms = 0.25;
  SimOptions fast{.record_timeline = false};
  for (int M : {1, 4, 8, 16}) {
    double g = SimulatePlan(StraightPlan(4, M, ScheduleKind::kGPipe), cost, fast).iteration_ms;
    double a = SimulatePlan(StraightPlan(4, M, ScheduleKind::kDappleA), cost, fast).iteration_ms;
    EXPECT_LE(a, g + 1e-9) << "M=" << M;
  }
}

}  // namespace
}  // namespace dapple
