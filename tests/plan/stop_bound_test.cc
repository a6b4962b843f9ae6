// BoundedRun (plan/search/bounded_run.h; Note [Stopping above a time] in stop_bound.cc), through
// the planner's question SimulateSlowerThan (plan/search/slower_than.h): the bound a
// run stops with never exceeds the time the whole run gives, so a run asked whether a plan
// is faster than its own time (plus 1e-6) never stops and gives that time, and one asked
// about less stops with a bound between the two. On the DP's candidates of random problems
// (fake costs, the analytic model, mixed devices) with every schedule (interleaved with two
// chunks too), with and without re-computation and allreduce overlap; and through the
// planner's memo, which keeps a stopped run only for the questions it answers. Such a
// question is first put to a run without contention (Note [Uncontended first] in
// plan/search/slower_than.cc): these checks fail if it ever ends later than the contended run.
#include "dapple/plan/search/stop_bound.h"

#include <gtest/gtest.h>

#include "dapple/plan/planner.h"
#include "dapple/plan/search/sim_cache.h"
#include "dapple/plan/search/slower_than.h"
#include "dapple/sim/prepared_run.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "random_mixed_problems.h"
#include "random_plans.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

SimResult RunStopping(const Plan& plan, const CostModel& cost, double stop_above_ms) {
  return SimulateSlowerThan(plan, cost, stop_above_ms);
}

using testing::PlansOf;

TEST(StopAbove, TheBoundNeverExceedsTheWholeRun) {
  int checked = 0, stopped_below = 0, stopped_half = 0, chunked = 0;
  for (unsigned seed = 0; seed < 24; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    for (const Plan& plan : PlansOf(*p)) {
      const SimResult whole = SimulatePlan(plan, *p->cost, SimOptions{.record_timeline = false});
      const double t = whole.iteration_ms;
      const std::string what = p->description + ", " + ToString(plan.schedule) + ", m " +
                               std::to_string(plan.micro_batch_size) + ", " +
                               std::to_string(plan.num_stages()) + " stages";
      ASSERT_FALSE(whole.stopped) << what;
      const SimResult above = RunStopping(plan, *p->cost, t * (1 + 1e-6));
      ASSERT_FALSE(above.stopped) << what << ": stopped at " << above.iteration_ms
                                  << " above its time " << t;
      ASSERT_EQ(above.iteration_ms, t) << what;
      ASSERT_EQ(above.devices.size(), whole.devices.size()) << what;
      for (double f : {0.999, 0.5}) {
        const SimResult below = RunStopping(plan, *p->cost, t * f);
        if (!below.stopped) {
          ASSERT_EQ(below.iteration_ms, t) << what;
          continue;
        }
        ASSERT_GT(below.iteration_ms, t * f) << what;
        ASSERT_LE(below.iteration_ms, t * (1 + 1e-12)) << what;
        (f < 0.9 ? stopped_half : stopped_below) += 1;
      }
      chunked += plan.virtual_stages > 1;
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000);
  EXPECT_GT(chunked, 20);
  // It stops at all: most runs asked about half their time stop (the others end before
  // the engine's next look at the bound).
  EXPECT_GT(stopped_half, checked / 2);
  EXPECT_GT(stopped_below, 0);
}

// SimulateSlowerThan's uncontended_first changes what a question costs, not what it
// answers: asked whether a plan is faster than t, a run with and one without the
// uncontended first run (Note [Uncontended first] in plan/search/slower_than.cc) say the same, and
// a whole run gives the same time. The uncontended first run settles some of the questions (it is
// checked to).
TEST(StopAbove, UncontendedFirstAnswersAsTheContendedRunAlone) {
  int asked = 0, settled_apart = 0;
  for (unsigned seed = 0; seed < 12; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    for (const Plan& plan : PlansOf(*p)) {
      const double t =
          SimulatePlan(plan, *p->cost, SimOptions{.record_timeline = false}).iteration_ms;
      for (double f : {0.97, 0.999, 1.001, 1.05}) {
        auto run = [&](bool first) { return SimulateSlowerThan(plan, *p->cost, t * f, first); };
        const SimResult with = run(true), without = run(false);
        const bool faster_with = !with.stopped && with.iteration_ms < t * f;
        const bool faster_without = !without.stopped && without.iteration_ms < t * f;
        ASSERT_EQ(faster_with, faster_without) << p->description << ", f " << f;
        if (!with.stopped && !without.stopped) {
          ASSERT_EQ(with.iteration_ms, without.iteration_ms) << p->description;
        }
        settled_apart += with.stopped && !without.stopped;
        ++asked;
      }
    }
  }
  EXPECT_GT(asked, 4000);
  EXPECT_GT(settled_apart, 0);  // the first run stops some that the contended run does not
}

TEST(StopAbove, TheMemoKeepsAStoppedRunOnlyForWhatItAnswers) {
  auto p = testing::MakeRandomAnalyticProblem(4);
  std::vector<Plan> plans = PlansOf(*p);
  ASSERT_FALSE(plans.empty());
  const Plan& plan = plans.front();
  const double t = SimulatePlan(plan, *p->cost).iteration_ms;
  SimCache cache;
  const SimResult low = cache.Simulate(plan, *p->cost, t / 4);
  ASSERT_TRUE(low.stopped);
  // A question the stopped run answers (its bound is above it) is answered from the memo.
  EXPECT_TRUE(cache.Simulate(plan, *p->cost, t / 8).stopped);
  EXPECT_EQ(cache.hits(), 1);
  // A whole run is simulated anew, kept, and then answers every question.
  const SimResult whole = cache.Simulate(plan, *p->cost);
  EXPECT_FALSE(whole.stopped);
  EXPECT_EQ(whole.iteration_ms, t);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_FALSE(cache.Simulate(plan, *p->cost, t / 4).stopped);
  EXPECT_EQ(cache.hits(), 2);
}

// The memo hands each run the facts of its lists it gathered once (ListsChecked):
// its runs stop where runs that gather them stop, with the same bound.
TEST(StopAbove, TheMemosListFactsStopAsARunsOwn) {
  int stopped = 0;
  for (unsigned seed : {1u, 2u, 5u}) {
    auto p = seed % 3 == 2 ? testing::MakeRandomMixedProblem(seed)
                           : testing::MakeRandomAnalyticProblem(seed);
    SimCache cache;
    for (const Plan& plan : PlansOf(*p)) {
      const double t = SimulatePlan(plan, *p->cost).iteration_ms;
      const SimResult own = RunStopping(plan, *p->cost, t * 0.6);
      const SimResult memo = cache.Simulate(plan, *p->cost, t * 0.6);
      ASSERT_EQ(memo.stopped, own.stopped) << p->description;
      ASSERT_EQ(memo.iteration_ms, own.iteration_ms) << p->description;
      stopped += own.stopped;
    }
  }
  EXPECT_GT(stopped, 100);
}

// Note [The buckets' exposure]: before anything has run, the bound already counts what the
// last B (or W) cannot hide of a long overlapped allreduce. Each stage: 2 replicas of 1
// sample, F = 2, B = 4 (I = W = 2), M = 4, one bucket of 40 ms: each device computes 24 ms
// and then waits 40 ms for its allreduce, which the listed costs alone leave out (24 and,
// with dapple-b's drain, stage 1's 24 ms and then stage 0's last B: 28).
TEST(StopAbove, TheBoundCountsTheBucketsLeftAfterTheLastBackward) {
  FakeCostModel cost(4, 4);
  cost.allreduce_ms = 40;
  for (auto [k, expected] :
       {std::pair{ScheduleKind::kDappleB, 24 + 4 + 40}, std::pair{ScheduleKind::kZbH1, 24 + 40}}) {
    Plan plan = testing::MakePlan({{0, 1, {0, 1}}, {2, 3, {2, 3}}}, 2, 4, k);
    plan.allreduce_overlap = true;
    const Schedule lowered = LoweredSchedule(plan);
    internal::PreparedRun run =
        internal::Prepare(plan, ViewOf(lowered), cost, {.twins = true}, nullptr);
    internal::StopBound bound;
    std::vector<int> watched;
    bound.Prepare(run.setup, watched);
    const std::vector<internal::DeviceState> start(run.setup.devices.size());
    EXPECT_DOUBLE_EQ(bound.Bound(start), expected) << ToString(k);
    EXPECT_LE(bound.Bound(start), SimulatePlan(plan, cost).iteration_ms) << ToString(k);
  }
}

}  // namespace
}  // namespace dapple
