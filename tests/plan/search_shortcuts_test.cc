// Shortcuts of the planner that must find what the plain search finds: the linear partition's
// cuts by bisection (Note [Bisecting the cuts] in balanced_baselines.cc) against the scan over
// every cut, the climbs of twin starts (Note [Twin starts] in refine.h), and when a question
// goes to the run without contention first (Note [Learning whether to run without contention
// first] in slower_than.h).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/search/sim_cache.h"
#include "dapple/plan/search/slower_than.h"
#include "fakes/fake_cost_model.h"
#include "plan/random_mixed_problems.h"
#include "plan/random_plans.h"

namespace dapple {
namespace {

// The linear partition's cuts by the scan over every cut (the reference): stage k on
// groups[k], the smallest largest stage work, ties to the earliest cut of each stage.
std::vector<int> ScannedLastLayers(const CostModel& cost,
                                   const std::vector<std::vector<int>>& groups, int m) {
  const int n = cost.num_layers(), S = static_cast<int>(groups.size());
  GroupWorkCache tables;
  auto work = [&](int first, int last, int k) {
    return tables.TableFor(cost, m, groups[k]).Work(first, last);
  };
  std::vector<std::vector<double>> best(S, std::vector<double>(n, 1e300));
  std::vector<std::vector<int>> cut(S, std::vector<int>(n, -1));
  for (int j = 0; j < n; ++j) best[0][j] = work(0, j, 0);
  for (int k = 1; k < S; ++k)
    for (int j = k; j < n; ++j)
      for (int i = k - 1; i < j; ++i)
        if (const double v = std::max(best[k - 1][i], work(i + 1, j, k)); v < best[k][j]) {
          best[k][j] = v;
          cut[k][j] = i;
        }
  std::vector<int> last(S);
  for (int k = S - 1, j = n - 1; k >= 0; j = cut[k][j], --k) last[k] = j;
  return last;
}

TEST(BalancedPlanOnGroups, BisectedCutsAreTheScannedOnes) {
  int bisected = 0, compared = 0;
  for (unsigned seed = 0; seed < 30; ++seed) {
    const auto p = testing::MakeRandomProblemOfAnyKind(seed);
    SCOPED_TRACE(p->description);
    std::mt19937 rng(seed);
    const int n = p->cost->num_layers(), N = p->cluster.num_devices();
    for (int m : {1, 2, 4}) {
      // Device groups of random widths over the devices in order, at most one per layer.
      std::vector<std::vector<int>> groups;
      for (int d = 0; d < N && static_cast<int>(groups.size()) < n;) {
        const int width = std::min(1 + static_cast<int>(rng() % 3), N - d);
        groups.emplace_back();
        for (int i = 0; i < width; ++i) groups.back().push_back(d++);
      }
      const std::vector<int> expected = ScannedLastLayers(*p->cost, groups, m);
      const Plan plan =
          BalancedPlanOnGroups(*p->cost, groups, {m, 4}, ScheduleKind::kDappleA, "balanced");
      ASSERT_EQ(plan.num_stages(), static_cast<int>(groups.size()));
      for (int k = 0; k < plan.num_stages(); ++k) EXPECT_EQ(plan.stages[k].last_layer, expected[k]);
      GroupWorkCache tables;
      bisected += tables.TableFor(*p->cost, m, groups.back()).shrinks_from_left;
      ++compared;
    }
  }
  EXPECT_GE(bisected, compared / 2);  // most tables are monotone: the bisection is exercised
}

// Layer times of a few whole values, zeros among them: ties everywhere (equal ranges, equal
// largest stages), where the earliest cut must be found.
TEST(BalancedPlanOnGroups, BisectedCutsAreTheScannedOnesWithTies) {
  int differ = 0;
  for (unsigned seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    const int n = 12, N = 8;
    FakeCostModel cost(n, N);
    for (int i = 0; i < n; ++i) {
      cost.fwd_ms[i] = static_cast<double>(rng() % 3);
      cost.bwd_ms[i] = 2 * cost.fwd_ms[i];
    }
    std::vector<std::vector<int>> groups;
    for (int d = 0; d < N;) {
      const int width = std::min(1 + static_cast<int>(rng() % 2), N - d);
      groups.emplace_back();
      for (int i = 0; i < width; ++i) groups.back().push_back(d++);
    }
    const std::vector<int> expected = ScannedLastLayers(cost, groups, 2);
    const Plan plan = BalancedPlanOnGroups(cost, groups, {2, 4}, ScheduleKind::kDappleA, "b");
    for (int k = 0; k < plan.num_stages(); ++k) {
      EXPECT_EQ(plan.stages[k].last_layer, expected[k]) << "seed " << seed << " stage " << k;
      differ += k > 0 && plan.stages[k].last_layer == plan.stages[k - 1].last_layer + 1;
    }
  }
  EXPECT_GT(differ, 0);  // one-layer stages among the cuts: the partitions are not all alike
}

TEST(TwinStarts, FindTheFirstEqualPlanAndCopyItsClimb) {
  int twins = 0, moved = 0;
  for (unsigned seed = 0; seed < 16; ++seed) {
    const auto p = testing::MakeRandomProblemOfAnyKind(seed);
    SCOPED_TRACE(p->description);
    std::vector<Proposal> proposals;
    for (Plan& plan : testing::PlansOf(*p))
      if (plan.virtual_stages == 1) proposals.push_back({std::move(plan), "random"});
    // The slowest fitting proposal: a start the climb moves from.
    Selection sel;
    for (const Proposal& one : proposals)
      if (Selection s = SelectFastest({one}, *p->cost);
          s.best && (!sel.best || s.best->sim.iteration_ms > sel.best->sim.iteration_ms))
        sel = std::move(s);
    if (!sel.best) continue;
    Scored twin = *sel.best;  // the same plan from another origin
    twin.origin = "other";
    twin.plan.planner = "other";
    const std::vector<Scored> starts = {*sel.best, twin};
    const std::vector<size_t> first = TwinStarts(starts);
    ASSERT_EQ(first, (std::vector<size_t>{0, 0}));
    RefineOptions o;
    o.threads = 1;
    o.max_work = 200000;
    // The climb from the twin is the first one's: the premise of the copy.
    const RefineResult a = Refine({starts[0]}, *p->cost, p->cluster, o);
    const RefineResult b = Refine({starts[1]}, *p->cost, p->cluster, o);
    EXPECT_EQ(SimKey(a.best.plan), SimKey(b.best.plan));
    EXPECT_EQ(a.best.sim.iteration_ms, b.best.sim.iteration_ms);
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].move, b.steps[i].move);
    EXPECT_EQ(a.work, b.work);
    const std::vector<RefineResult> climbs = WithTwinClimbs(first, {a, {}});
    EXPECT_EQ(climbs[1].best.origin, a.best.origin);
    EXPECT_EQ(climbs[1].work, a.work);
    // A different plan is its own first.
    Scored other = *sel.best;
    other.plan.micro_batch_size *= 2;
    EXPECT_EQ(TwinStarts({*sel.best, other, twin}), (std::vector<size_t>{0, 1, 0}));
    ++twins;
    moved += !a.steps.empty();
  }
  EXPECT_GE(twins, 6);
  EXPECT_GE(moved, 4);  // climbs that moved, not only starts that stayed
}

// How many of n questions the odds send to the run without contention first.
int AskedFirst(UncontendedOdds& odds, int n) {
  int yes = 0;
  for (int i = 0; i < n; ++i) yes += odds.Worth() ? 1 : 0;
  return yes;
}

TEST(UncontendedOdds, AskFirstWhileItSettlesHalfAndFollowTheOddsOtherwise) {
  UncontendedOdds odds;
  EXPECT_EQ(AskedFirst(odds, 16), 16);  // learning: every question
  for (int i = 0; i < 40; ++i) odds.Record(i % 4 == 0);  // settles a quarter
  EXPECT_EQ(AskedFirst(odds, 64), 8);                     // one in 8 still
  for (int i = 0; i < 40; ++i) odds.Record(i % 2 == 0);  // half: not enough yet
  EXPECT_EQ(AskedFirst(odds, 64), 8);
  for (int i = 0; i < 200; ++i) odds.Record(true);  // the old ones fade
  EXPECT_EQ(AskedFirst(odds, 64), 64);
  UncontendedOdds even;
  for (int i = 0; i < 16; ++i) even.Record(i % 2 == 0);  // exactly half pays
  EXPECT_EQ(AskedFirst(even, 64), 64);
}

// With odds shared by every question on a problem, the answers are the plain simulation's,
// whichever run went first; on some problems the odds learn to skip the first run.
TEST(UncontendedOdds, AnswersAreThePlainSimulations) {
  int asked = 0, skipping = 0;
  for (unsigned seed = 0; seed < 12; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    UncontendedOdds odds;
    for (const Plan& plan : testing::PlansOf(*p)) {
      const Schedule lowered = LoweredSchedule(plan);
      const double t =
          SimulatePlan(plan, *p->cost, SimOptions{.record_timeline = false}).iteration_ms;
      for (double f : {0.97, 0.999, 1.001, 1.05}) {
        const SimResult got =
            SimulateSlowerThan(plan, ViewOf(lowered), *p->cost, t * f, true, nullptr, &odds);
        ASSERT_EQ(!got.stopped && got.iteration_ms < t * f, t < t * f) << p->description;
        if (!got.stopped) {
          ASSERT_EQ(got.iteration_ms, t) << p->description;
        }
        ++asked;
      }
    }
    skipping += AskedFirst(odds, 64) < 64;
  }
  EXPECT_GT(asked, 4000);
  EXPECT_GT(skipping, 0);
}

}  // namespace
}  // namespace dapple
