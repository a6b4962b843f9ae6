// Note [Twin replicas] (sim/event_engine.cc): the planner's BoundedRun (plan/search/
// bounded_run.h) runs only the first replica of a stage whose replicas cost the same and
// copies its results to the others; the plain Simulate runs every replica. On the plans of random
// problems (fake costs, the analytic model, mixed devices; every schedule, overlap and
// re-computation on or off, interleaving) both give every figure of the result equal to the last
// bit.
#include <gtest/gtest.h>

#include <limits>

#include "dapple/plan/search/bounded_run.h"
#include "dapple/sim/simulator.h"
#include "random_mixed_problems.h"
#include "random_plans.h"

namespace dapple {
namespace {

// Whether some stage of `plan` has replicas the engine runs as twins: more than one, all
// of one device kind, with slices of one size.
bool HasTwins(const Plan& plan, const CostModel& cost) {
  for (const StagePlan& st : plan.stages) {
    const int n = st.replicas();
    if (n < 2 || plan.micro_batch_size % n != 0) continue;
    bool same = true;
    for (int d : st.devices) same = same && cost.DeviceKind(d) == cost.DeviceKind(st.devices[0]);
    if (same) return true;
  }
  return false;
}

TEST(TwinReplicas, RunningTheFirstGivesWhatRunningEachGives) {
  int checked = 0, twinned = 0;
  for (unsigned seed = 0; seed < 30; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    for (const Plan& plan : testing::PlansOf(*p)) {
      const Schedule lowered = LoweredSchedule(plan);
      const SimResult once =
          BoundedRun(plan, ViewOf(lowered), *p->cost).Run(std::numeric_limits<double>::infinity());
      const SimResult each = SimulatePlan(plan, *p->cost);
      const std::string what = p->description + ", " + ToString(plan.schedule) + ", m " +
                               std::to_string(plan.micro_batch_size) + ", " +
                               std::to_string(plan.num_stages()) + " stages";
      ASSERT_EQ(once.iteration_ms, each.iteration_ms) << what;
      ASSERT_EQ(once.speedup, each.speedup) << what;
      ASSERT_EQ(once.bubble_fraction, each.bubble_fraction) << what;
      ASSERT_EQ(once.instructions, each.instructions) << what;
      ASSERT_EQ(once.devices.size(), each.devices.size()) << what;
      for (size_t d = 0; d < each.devices.size(); ++d) {
        const DeviceStats &a = once.devices[d], &b = each.devices[d];
        ASSERT_EQ(a.device, b.device) << what;
        ASSERT_EQ(a.stage, b.stage) << what;
        ASSERT_EQ(a.replica, b.replica) << what;
        ASSERT_EQ(a.busy_ms, b.busy_ms) << what << ", device " << d;
        ASSERT_EQ(a.bubble_ms, b.bubble_ms) << what << ", device " << d;
        ASSERT_EQ(a.static_memory_bytes, b.static_memory_bytes) << what << ", device " << d;
        ASSERT_EQ(a.peak_activation_bytes, b.peak_activation_bytes) << what << ", device " << d;
        ASSERT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << what << ", device " << d;
        ASSERT_EQ(a.peak_in_flight, b.peak_in_flight) << what << ", device " << d;
      }
      ASSERT_EQ(once.stages.size(), each.stages.size()) << what;
      for (size_t s = 0; s < each.stages.size(); ++s)
        ASSERT_EQ(once.stages[s].allreduce_exposed_ms, each.stages[s].allreduce_exposed_ms)
            << what << ", stage " << s;
      twinned += HasTwins(plan, *p->cost);
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000);
  EXPECT_GT(twinned, checked / 4);  // the twins' path is taken often
}

}  // namespace
}  // namespace dapple
