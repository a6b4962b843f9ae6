// The exhaustive search's branch and bound (Note [Exhaustive branch and bound] in
// plan/baselines/exhaustive_planner.cc) against the same search without cuts, every plan simulated
// whole, on seeded random small problems of every kind; and the lower bound of a
// micro-batch size (plan/search/compute_floors.h) against each size's optimum.
#include "dapple/plan/baselines/exhaustive.h"

#include <gtest/gtest.h>

#include "dapple/plan/planner.h"
#include "dapple/plan/search/compute_floors.h"
#include "dapple/sim/simulator.h"
#include "plan/random_mixed_problems.h"

namespace dapple {
namespace {

const std::vector<ScheduleKind> kExhaustiveSchedules = {
    ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1};

// Problems the brute force finishes in about a second: at most 7 layers and 6 devices.
std::unique_ptr<testing::RandomProblem> SmallExhaustiveProblem(unsigned seed) {
  return testing::SmallRandomProblem(seed, 7, 6);
}

TEST(ExhaustiveBounds, CutsKeepTheOptimumOfTheBruteForce) {
  int found = 0;
  long long pruned = 0, simulated = 0, brute_simulated = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    auto owner = SmallExhaustiveProblem(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    const std::vector<int> sizes = MicroBatchSizes(p.global_batch);
    const ExhaustiveResult cut = ExhaustivePlan(*p.cost, p.cluster, p.global_batch, sizes,
                                                kExhaustiveSchedules, true, {}, true);
    const ExhaustiveResult brute = ExhaustivePlan(*p.cost, p.cluster, p.global_batch, sizes,
                                                  kExhaustiveSchedules, true, {}, false);
    ASSERT_EQ(cut.plan.has_value(), brute.plan.has_value());
    EXPECT_EQ(brute.pruned, 0);
    pruned += cut.pruned;
    simulated += cut.simulated;
    brute_simulated += brute.simulated;
    if (!brute.plan) continue;
    ++found;
    EXPECT_NEAR(cut.iteration_ms, brute.iteration_ms, 1e-9 * brute.iteration_ms);
    EXPECT_EQ(SimulatePlan(*cut.plan, *p.cost).iteration_ms, cut.iteration_ms);
  }
  EXPECT_GT(found, 30);
  EXPECT_GT(pruned, 0);  // the cuts are used
  EXPECT_LT(simulated, brute_simulated);
}

// No plan of a micro-batch size is faster than MicroBatchLowerBound: each size's own
// optimum (the brute force on that size alone) against the bound.
TEST(ExhaustiveBounds, MicroBatchLowerBoundIsBelowEachSizesOptimum) {
  int compared = 0;
  for (unsigned seed = 1; seed <= 30; ++seed) {
    auto owner = SmallExhaustiveProblem(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    for (int m : MicroBatchSizes(p.global_batch)) {
      const ExhaustiveResult r = ExhaustivePlan(*p.cost, p.cluster, p.global_batch, {m},
                                                kExhaustiveSchedules, true, {}, false);
      if (!r.plan) continue;
      ++compared;
      EXPECT_LE(MicroBatchLowerBound(*p.cost, p.global_batch, m), r.iteration_ms * (1 + 1e-12))
          << "m = " << m;
    }
  }
  EXPECT_GT(compared, 60);
}

}  // namespace
}  // namespace dapple
