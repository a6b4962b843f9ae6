// The planner's V shapes against the exhaustive optimum over every family, V shapes included
// (Note [Exhaustive V shapes]), on seeded random problems of up to 10 layers and 8 devices on
// 2 servers: the planner within 2% of it on every one.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/planner.h"
#include "plan/random_medium_problems.h"
#include "plan/random_mixed_problems.h"
#include "plan/stages_text.h"

namespace dapple {
namespace {

const std::vector<ScheduleKind> kEveryFamily = {
    ScheduleKind::kGPipe, ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1,
    ScheduleKind::kZbV,   ScheduleKind::kVHalf,   ScheduleKind::kVMin};

// DAPPLE_V_SEEDS problems (default 100) from DAPPLE_V_FIRST_SEED (default 1).
int EnvOr(const char* name, int fallback) {
  const char* env = std::getenv(name);
  return env ? std::atoi(env) : fallback;
}

// The seed's problem of any kind (fake costs, analytic, mixed devices) on 2 servers.
std::unique_ptr<testing::RandomProblem> TwoServerProblem(unsigned seed) {
  for (unsigned s = seed;; s += 1000) {
    auto p = testing::MakeRandomProblemOfAnyKind(s);
    if (p->cluster.num_servers() == 2) return p;
  }
}

TEST(VShapeSearch, WithinTwoPercentOfTheOptimumWithVShapes) {
  int compared = 0, v_optima = 0;
  double worst = 1;
  const int first = EnvOr("DAPPLE_V_FIRST_SEED", 1);
  for (int seed = first; seed < first + EnvOr("DAPPLE_V_SEEDS", 100); ++seed) {
    auto owner = TwoServerProblem(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    const PlanResult dapple = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, {});
    // Begun from the planner's plan, the cuts bite from the start (the optimum is the same:
    // tests/plan/exhaustive_v_test.cc).
    const ExhaustiveResult truth = ExhaustivePlan(
        *p.cost, p.cluster, p.global_batch, MicroBatchSizes(p.global_batch), kEveryFamily, true,
        testing::ForwardTimedLayers(p.profile), true, dapple.plan ? &*dapple.plan : nullptr);
    if (!truth.plan) {
      EXPECT_FALSE(dapple.plan);
      continue;
    }
    ASSERT_TRUE(dapple.plan) << "the planner found no plan, the exhaustive search did";
    ++compared;
    const double t = dapple.plan->estimate->iteration_ms, best = truth.iteration_ms;
    worst = std::max(worst, t / best);
    v_optima += VShaped(truth.plan->schedule);
    EXPECT_LE(t, best * 1.02) << "planner " << ToString(dapple.plan->schedule) << " "
                              << testing::StagesText(*dapple.plan) << ", optimum "
                              << ToString(truth.plan->schedule) << " m "
                              << truth.plan->micro_batch_size << " "
                              << testing::StagesText(*truth.plan);
    if (std::getenv("DAPPLE_DEBUG"))
      std::printf("%s: planner %.1f ms %s, optimum %.1f ms %s, ratio %.4f\n", p.description.c_str(),
                  t, ToString(dapple.plan->schedule).c_str(), best,
                  ToString(truth.plan->schedule).c_str(), t / best);
  }
  std::printf("%d problems, %d optima V-shaped, worst ratio %.4f\n", compared, v_optima, worst);
  EXPECT_GT(compared, 0);
}

}  // namespace
}  // namespace dapple
