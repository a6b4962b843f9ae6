// The DAPPLE planner against the exhaustive optimum on seeded random small problems:
// never faster than the optimum, within 5% of it in >= 98% of them, always
// within memory. The baselines are checked against the same optimum. ("Never slower
// than a baseline" would hold by construction: the baselines' plans are candidates of the DAPPLE
// planner. Beyond the exhaustive search's reach, tests/plan/hand_plan_test.cc checks the planner
// against a hand-built plan.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "dapple/common/error.h"
#include "dapple/plan/planner.h"
#include "plan/random_problems.h"

namespace dapple {
namespace {

// Under the sanitizers (scripts/sanitize.sh) the first 30 seeds and no share checked: the
// sweep's statistics are the regular build's business, the sanitizers only need its code
// paths (200 problems take about 4 minutes there).
#ifdef DAPPLE_SANITIZED
constexpr int kProblems = 30;
#else
constexpr int kProblems = 200;
#endif

using Maker = std::unique_ptr<testing::RandomProblem> (*)(unsigned);

void CompareWithExhaustive(Maker make, const char* label) {
  int compared = 0, within5 = 0, dp_origin = 0, exact = 0;
  double worst_ratio = 1;
  for (int seed = 1; seed <= kProblems; ++seed) {
    std::unique_ptr<testing::RandomProblem> owner = make(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    PlannerOptions o;
    o.interleave = false;  // the exhaustive search has one chunk per stage
    PlanResult dapple = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
    o.planner = PlannerKind::kExhaustive;
    PlanResult truth = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
    // The exhaustive search covers every plan DAPPLE can make.
    if (!truth.plan) {
      EXPECT_FALSE(dapple.plan);
      continue;
    }
    ++compared;
    if (!dapple.plan) {
      ADD_FAILURE() << "DAPPLE found no plan, exhaustive did";
      continue;
    }
    const double t = dapple.plan->estimate->iteration_ms;
    const double best = truth.plan->estimate->iteration_ms;
    EXPECT_GE(t, best * (1 - 1e-9)) << "faster than the exhaustive optimum";
    if (t < best * (1 - 1e-9) && std::getenv("DAPPLE_DEBUG"))
      std::printf("%s\n dapple: %s\n exhaustive: %s\n", p.description.c_str(),
                  PlanToJsonText(*dapple.plan).c_str(), PlanToJsonText(*truth.plan).c_str());
    double ratio = t / best;
    worst_ratio = std::max(worst_ratio, ratio);
    if (ratio <= 1.05) ++within5;
    if (ratio > 1.05 && std::getenv("DAPPLE_DEBUG"))
      std::printf("%s ratio %.3f\n dapple: %s\n exhaustive: %s\n", p.description.c_str(), ratio,
                  PlanToJsonText(*dapple.plan).c_str(), PlanToJsonText(*truth.plan).c_str());
    if (ratio <= 1 + 1e-9) ++exact;
    if (dapple.origin == "dapple-dp") ++dp_origin;
    // Every plan fits memory.
    for (double bytes : dapple.plan->estimate->stage_peak_memory_bytes)
      EXPECT_LE(bytes, p.memory_bytes * (1 + 1e-12));
    // No baseline beats the optimum either (the exhaustive search must cover its plans).
    for (PlannerKind b : {PlannerKind::kDataParallel, PlannerKind::kStraight, PlannerKind::kGPipe,
                          PlannerKind::kPipeDream}) {
      o.planner = b;
      PlanResult base;
      try {
        base = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
      } catch (const InputError&) {
        continue;  // dp with more devices than samples
      }
      if (base.plan) {
        EXPECT_GE(base.plan->estimate->iteration_ms, best * (1 - 1e-9))
            << "baseline " << ToString(b);
      }
    }
  }
  std::printf(
      "%s: %d problems with a plan; DAPPLE within 5%% of the optimum in %d, "
      "optimal in %d, worst ratio %.4f; the DP's own plan won %d\n",
      label, compared, within5, exact, worst_ratio, dp_origin);
  ASSERT_GT(compared, kProblems / 2);
  // The bar is 98%: 175 of 177 fake-cost problems (98.9%) and 170 of 170
  // analytic ones, since the search over several schedules contains each schedule's own
  // (Note [Never slower with more schedules] in family_search.cc; before: 173 of 177).
#ifndef DAPPLE_SANITIZED  // 30 problems are too few for the share (seed 23 alone is 4%)
  EXPECT_GE(within5, 0.98 * compared);
#endif
}

TEST(RandomPlanner, FakeCostsNearExhaustive) {
  CompareWithExhaustive(&testing::MakeRandomProblem, "fake costs");
}

TEST(RandomPlanner, AnalyticCostsNearExhaustive) {
  CompareWithExhaustive(&testing::MakeRandomAnalyticProblem, "analytic costs");
}

TEST(RandomPlanner, Deterministic) {
  for (int seed = 1; seed <= 20; ++seed) {
    auto owner =
        seed % 2 ? testing::MakeRandomProblem(seed) : testing::MakeRandomAnalyticProblem(seed);
    testing::RandomProblem& p = *owner;
    PlanResult a = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, {});
    PlanResult b = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, {});
    ASSERT_EQ(a.plan.has_value(), b.plan.has_value());
    if (a.plan) {
      EXPECT_EQ(PlanToJsonText(*a.plan), PlanToJsonText(*b.plan)) << p.description;
    }
  }
}

}  // namespace
}  // namespace dapple
