// A search with more schedules never returns a slower plan than the same search restricted
// to fewer (Note [Never slower with more schedules] in family_search.cc): the planner's
// default search (dapple-a, dapple-b and zb-h1) against the planner with each schedule
// fixed, on seeded random problems. Before the searches were nested, hill climbing with
// every schedule among its moves could settle in a worse local optimum than the climb of
// one schedule alone (AmoebaNet-6 on paper-b: 412.5 ms against dapple-a's 403.4 ms).
#include <gtest/gtest.h>

#include <cstdio>

#include "dapple/plan/planner.h"
#include "plan/random_problems.h"

namespace dapple {
namespace {

using Maker = std::unique_ptr<testing::RandomProblem> (*)(unsigned);

// Every problem: the default search is no slower than each schedule alone.
void CheckNeverSlower(Maker make, int first_seed, int last_seed) {
  int compared = 0;
  for (int seed = first_seed; seed <= last_seed; ++seed) {
    std::unique_ptr<testing::RandomProblem> owner = make(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    PlannerOptions o;
    o.interleave = false;  // interleaving is offered after the search, on its winner
    PlanResult all = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
    for (ScheduleKind k : {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1}) {
      PlannerOptions fixed = o;
      fixed.schedule = k;
      PlanResult one = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, fixed);
      if (!one.plan) continue;
      ASSERT_TRUE(all.plan) << ToString(k) << " alone found a plan";
      ++compared;
      EXPECT_LE(all.plan->estimate->iteration_ms, one.plan->estimate->iteration_ms * (1 + 1e-12))
          << ToString(k) << " alone found a faster plan";
    }
  }
  EXPECT_GT(compared, 0);
}

// The default search's own runs of each schedule (PlanResult::families) are exactly what
// the planner returns with that schedule fixed: the containment the guarantee rests on.
TEST(NeverSlower, FamiliesAreTheFixedScheduleSearches) {
  int compared = 0;
  for (int seed = 1; seed <= 20; ++seed) {
    auto owner =
        seed % 2 ? testing::MakeRandomProblem(seed) : testing::MakeRandomAnalyticProblem(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    PlannerOptions o;
    PlanResult all = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
    for (const PlanResult& f : all.families) {
      ASSERT_TRUE(f.family && f.plan);
      PlannerOptions fixed = o;
      fixed.schedule = f.family;
      PlanResult one = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, fixed);
      ASSERT_TRUE(one.plan) << ToString(*f.family);
      EXPECT_EQ(PlanToJsonText(*f.plan), PlanToJsonText(*one.plan)) << ToString(*f.family);
      EXPECT_EQ(f.origin, one.origin);
      EXPECT_EQ(f.refine_moves, one.refine_moves);
      ++compared;
    }
  }
  EXPECT_GT(compared, 20);
}

// Fewer problems under the sanitizers (16 s of the sanitizer run's ctest with 60): they look
// for memory errors, the regular build for the guarantee.
#ifdef DAPPLE_SANITIZED
constexpr int kLastSeed = 15;
#else
constexpr int kLastSeed = 60;
#endif

TEST(NeverSlower, FakeCosts) { CheckNeverSlower(&testing::MakeRandomProblem, 1, kLastSeed); }

TEST(NeverSlower, AnalyticCosts) {
  CheckNeverSlower(&testing::MakeRandomAnalyticProblem, 1, kLastSeed);
}

}  // namespace
}  // namespace dapple
