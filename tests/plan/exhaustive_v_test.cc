// The exhaustive search's V shapes (Note [Exhaustive V shapes] in
// plan/baselines/exhaustive_v.cc): its cuts against the same search without them, every V
// plan simulated whole, on seeded random small problems of every kind; and its plans against
// the simulator and the planner's rules.
#include <gtest/gtest.h>

#include <cstdio>

#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/planner.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/sim/simulator.h"
#include "plan/random_mixed_problems.h"

namespace dapple {
namespace {

const std::vector<ScheduleKind> kVShapes = {ScheduleKind::kZbV, ScheduleKind::kVHalf,
                                            ScheduleKind::kVMin};

// Problems the brute force finishes in about a second: at most 8 layers and 6 devices.
std::unique_ptr<testing::RandomProblem> SmallVProblem(unsigned seed) {
  return testing::SmallRandomProblem(seed, 8, 6);
}

TEST(ExhaustiveVShapes, CutsKeepTheOptimumOfTheBruteForce) {
  int found = 0;
  long long pruned = 0, simulated = 0, brute_simulated = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    auto owner = SmallVProblem(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    const std::vector<int> sizes = MicroBatchSizes(p.global_batch);
    const ExhaustiveResult cut =
        ExhaustivePlan(*p.cost, p.cluster, p.global_batch, sizes, kVShapes, true, {}, true);
    const ExhaustiveResult brute =
        ExhaustivePlan(*p.cost, p.cluster, p.global_batch, sizes, kVShapes, true, {}, false);
    ASSERT_EQ(cut.plan.has_value(), brute.plan.has_value());
    EXPECT_EQ(brute.pruned, 0);
    pruned += cut.pruned;
    simulated += cut.simulated;
    brute_simulated += brute.simulated;
    if (!brute.plan) continue;
    ++found;
    EXPECT_NEAR(cut.iteration_ms, brute.iteration_ms, 1e-9 * brute.iteration_ms);
    // The plan is a V of the planner's format, its time the simulator's, within memory.
    const Plan& plan = *cut.plan;
    ValidatePlan(plan, p.profile, p.cluster, "exhaustive");
    EXPECT_TRUE(VShaped(plan.schedule));
    EXPECT_EQ(plan.virtual_stages, 2);
    const SimResult r = SimulatePlan(plan, *p.cost);
    EXPECT_EQ(r.iteration_ms, cut.iteration_ms);
    EXPECT_TRUE(SimulatedFits(r, *p.cost));
    EXPECT_TRUE(EvaluatePlan(plan, *p.cost).fits);
  }
  std::printf("%d problems with a V plan, %lld simulated (brute force %lld), %lld cut\n", found,
              simulated, brute_simulated, pruned);
  EXPECT_GT(found, 25);
  EXPECT_GT(pruned, 0);  // the cuts are used
  EXPECT_LT(simulated, brute_simulated);
}

// With the one-chunk schedules too, the optimum is the better of the two searches alone.
TEST(ExhaustiveVShapes, AllFamiliesGiveTheBestOfEach) {
  const std::vector<ScheduleKind> one_chunk = {ScheduleKind::kDappleA, ScheduleKind::kDappleB,
                                               ScheduleKind::kZbH1};
  std::vector<ScheduleKind> all = one_chunk;
  all.insert(all.end(), kVShapes.begin(), kVShapes.end());
  int v_wins = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    auto owner = SmallVProblem(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    const std::vector<int> sizes = MicroBatchSizes(p.global_batch);
    const ExhaustiveResult v = ExhaustivePlan(*p.cost, p.cluster, p.global_batch, sizes, kVShapes);
    const ExhaustiveResult one =
        ExhaustivePlan(*p.cost, p.cluster, p.global_batch, sizes, one_chunk);
    const ExhaustiveResult both = ExhaustivePlan(*p.cost, p.cluster, p.global_batch, sizes, all);
    if (!v.plan && !one.plan) {
      EXPECT_FALSE(both.plan);
      continue;
    }
    ASSERT_TRUE(both.plan);
    double best = 1e300;
    if (v.plan) best = std::min(best, v.iteration_ms);
    if (one.plan) best = std::min(best, one.iteration_ms);
    EXPECT_NEAR(both.iteration_ms, best, 1e-9 * best);
    v_wins += v.plan && (!one.plan || v.iteration_ms < one.iteration_ms);
  }
  EXPECT_GT(v_wins, 0);
}

}  // namespace
}  // namespace dapple
