// Steady state (Note [Steady state] in simulator.h) and ZB-H2 (Note [ZB-H2]): from a cold
// start zb-h2 takes zb-h1's time, in steady state it has no bubble, zb-h1 keeps its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "dapple/schedule/schedule.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::StraightPlan;

// S one-layer stages with F = I = W = 1 ms (the fake's 1 ms forward, 2 ms backward split in
// halves), free transfers, an update of u ms per stage. zb-h1 and zb-h2 both take 3M + S - 1 + u
// from a cold start. In steady state a stage starts its next forward once its own update
// ended: zb-h2's stage s ends at 3M + s + u (a parallelogram), so iterations follow every
// 3M + u; zb-h1's stages all end at 3M + S - 1 + u and the next iteration's forward still
// has to go down the pipeline, so it keeps 3M + S - 1 + u. dapple-a keeps its cold time too.
// With M < 2S - 1 zb-h2's warm-up is cut short: 2S - 1 - M units of bubble remain.
TEST(SteadyState, ZbH2HasNoBubbleAndZbH1KeepsItsOwn) {
  int checked = 0;
  for (double u : {0.0, 0.5}) {
    for (int S = 2; S <= 8; ++S) {
      FakeCostModel cost(S, S);
      cost.update_ms.assign(S, u);
      for (int M = S; M <= 3 * S; ++M) {
        const std::string at =
            "S=" + std::to_string(S) + " M=" + std::to_string(M) + " u=" + std::to_string(u);
        SteadyState h1 = SimulateSteadyState(StraightPlan(S, M, ScheduleKind::kZbH1), cost);
        SteadyState h2 = SimulateSteadyState(StraightPlan(S, M, ScheduleKind::kZbH2), cost);
        SteadyState a = SimulateSteadyState(StraightPlan(S, M, ScheduleKind::kDappleA), cost);
        ASSERT_DOUBLE_EQ(h1.cold_ms, 3 * M + S - 1 + u) << at;
        if (M >= 2 * S - 1) {
          ASSERT_DOUBLE_EQ(h2.cold_ms, 3 * M + S - 1 + u) << at;
        }
        ASSERT_DOUBLE_EQ(h1.iteration_ms, 3 * M + S - 1 + u) << at;
        ASSERT_DOUBLE_EQ(h2.iteration_ms, 3 * M + std::max(0, 2 * S - 1 - M) + u) << at;
        ASSERT_DOUBLE_EQ(a.iteration_ms, a.cold_ms) << at;
        ASSERT_DOUBLE_EQ(a.cold_ms, 3 * (M + S - 1) + u) << at;
        // More iterations change nothing: the state is steady after one.
        ASSERT_DOUBLE_EQ(
            SimulateSteadyState(StraightPlan(S, M, ScheduleKind::kZbH2), cost, 5).iteration_ms,
            h2.iteration_ms)
            << at;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * (5 + 7 + 9 + 11 + 13 + 15 + 17));  // M = S..3S for S = 2..8
}

// The price: zb-h2 holds min(2S - 1, M) micro-batches on every stage (twice 1F1B's S, less
// one), against zb-h1's min(S, M).
TEST(SteadyState, ZbH2HoldsTwiceTheActivations) {
  for (int S = 1; S <= 8; ++S) {
    FakeCostModel cost(S, S);
    for (int M = 1; M <= 3 * S; ++M) {
      SimResult r = SimulatePlan(StraightPlan(S, M, ScheduleKind::kZbH2), cost,
                                 SimOptions{.record_timeline = false});
      for (const DeviceStats& d : r.devices) {
        ASSERT_EQ(d.peak_in_flight, std::min(2 * S - 1, M)) << S << " " << M << " " << d.stage;
        ASSERT_EQ(PeakInFlight(ScheduleKind::kZbH2, d.stage, S, M), d.peak_in_flight);
      }
    }
  }
}

}  // namespace
}  // namespace dapple
