// The planner's search over every micro-batch size and schedule is never slower than the
// planner with one size or one schedule fixed (Note [Never slower than one micro-batch
// size] in plan/size_searches.cc), on seeded random problems: small ones of every kind and
// medium ones (10 layers, 2 servers of 5 or 6 devices, GBS 24-72). Before the search over
// several sizes contained each size's own search, it lost to a fixed size on medium
// problems (10 layers, 2 x 6 devices, GBS 48: 1128.1 ms against 1051.9 ms with m = 6);
// checked to fail here with those searches turned off.
#include <gtest/gtest.h>

#include "dapple/plan/planner.h"
#include "plan/random_medium_problems.h"
#include "plan/random_mixed_problems.h"

namespace dapple {
namespace {

// Returns how many fixed runs found a plan; fails where one is faster than the free search.
int CheckNeverSlowerThanFixed(testing::RandomProblem& p) {
  SCOPED_TRACE(p.description);
  PlannerOptions o;
  const PlanResult all = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
  std::vector<PlannerOptions> fixed;
  for (int m : MicroBatchSizes(p.global_batch)) {
    PlannerOptions f = o;
    f.micro_batch_size = m;
    fixed.push_back(f);
  }
  for (ScheduleKind k : {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1}) {
    PlannerOptions f = o;
    f.schedule = k;
    fixed.push_back(f);
  }
  int compared = 0;
  for (const PlannerOptions& f : fixed) {
    const PlanResult one = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, f);
    if (!one.plan) continue;
    ++compared;
    const std::string which = f.schedule ? "--schedule " + ToString(*f.schedule)
                                         : "--micro-batch " + std::to_string(*f.micro_batch_size);
    if (!all.plan) {
      ADD_FAILURE() << which << " found a plan, the free search none";
      continue;
    }
    EXPECT_LE(all.plan->estimate->iteration_ms, one.plan->estimate->iteration_ms * (1 + 1e-12))
        << which << " found a faster plan";
  }
  return compared;
}

TEST(NeverSlowerSizes, SmallProblems) {
  int compared = 0;
  for (unsigned seed = 1; seed <= 45; ++seed)
    compared += CheckNeverSlowerThanFixed(*testing::MakeRandomProblemOfAnyKind(seed));
  EXPECT_GT(compared, 150);
}

TEST(NeverSlowerSizes, MediumProblems) {
  int compared = 0;
  // Without the sizes' own searches, analytic seed 7 lost to --micro-batch 3 (and before
  // the even-width starts, fake-cost problems lost too).
  for (unsigned seed = 1; seed <= 3; ++seed)
    compared += CheckNeverSlowerThanFixed(*testing::MakeMediumProblem(seed));
  for (unsigned seed = 6; seed <= 8; ++seed)
    compared += CheckNeverSlowerThanFixed(*testing::MakeMediumAnalyticProblem(seed));
  EXPECT_GT(compared, 40);
}

// The families the search records are still what the planner returns with that schedule
// fixed, now that each is the fastest over the sizes too.
TEST(NeverSlowerSizes, FamiliesAreTheFixedScheduleSearches) {
  int compared = 0;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    auto owner = testing::MakeRandomProblemOfAnyKind(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    const PlanResult all = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, {});
    for (const PlanResult& f : all.families) {
      PlannerOptions fixed;
      fixed.schedule = f.family;
      const PlanResult one = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, fixed);
      ASSERT_TRUE(one.plan) << ToString(*f.family);
      EXPECT_EQ(PlanToJsonText(*f.plan), PlanToJsonText(*one.plan)) << ToString(*f.family);
      EXPECT_EQ(f.refine_moves, one.refine_moves) << ToString(*f.family);
      ++compared;
    }
  }
  EXPECT_GT(compared, 12);
}

}  // namespace
}  // namespace dapple
