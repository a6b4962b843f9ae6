// The refinement's wide moves (Note [Wide moves at a local optimum] in refine.cc): a split
// onto a device taken from another stage and the layers cut anew over the device groups.
// They are valid plans that reach what one step cannot; a climb with them is the one-step
// climb until that one stops, never ends slower, and tries none above its time cap; and the
// partitions' shared compute tables (GroupWorkCache) give the partitions computed without
// them.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/planner.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/refine/refine_moves.h"
#include "fakes/fake_cost_model.h"
#include "plan/random_medium_problems.h"
#include "plan/random_mixed_problems.h"
#include "plan/stages_text.h"

namespace dapple {
namespace {

// 4 layers on 3 devices of a fake model: [0-1: 0][2-3: 1 2] at m = 2.
struct TwoStages {
  TwoStages() : cost(4, 3) {
    cluster.name = "fake";
    cluster.servers.assign(3, ServerSpec{1, std::nullopt});
    cost.fwd_ms = {1, 1, 1, 1};
    cost.bwd_ms = {2, 2, 2, 2};
    plan.global_batch_size = 8;
    plan.micro_batch_size = 2;
    plan.num_micro_batches = 4;
    plan.stages = {StagePlan{0, 1, "", "", {0}}, StagePlan{2, 3, "", "", {1, 2}}};
    options.sizes = MicroBatchSizes(8);
    options.schedules = {ScheduleKind::kDappleA};
  }
  FakeCostModel cost;
  Cluster cluster;
  Plan plan;
  RefineOptions options;
};

TEST(WideMoves, ASplitTakesADeviceFromAReplicatedStage) {
  TwoStages t;
  std::vector<std::string> split;
  for (const internal::Neighbour& n : internal::Neighbours(
           t.plan, t.cost, t.cluster, t.options, nullptr, nullptr, internal::Moves::kWide)) {
    if (std::string(n.move) == "split-borrow") split.push_back(testing::StagesText(n.plan));
  }
  // Stage 0 splits at its midpoint onto device 2 of stage 1, the new device either half's;
  // stage 1 splits onto nothing (stage 0 has one device).
  EXPECT_EQ(split,
            (std::vector<std::string>{"[0-0: 0][1-1: 2][2-3: 1]", "[0-0: 2][1-1: 0][2-3: 1]"}));
  for (const internal::Neighbour& n : internal::Neighbours(t.plan, t.cost, t.cluster, t.options))
    EXPECT_NE(std::string(n.move), "split-borrow") << "a wide move among the one-step moves";
}

TEST(WideMoves, RebalanceCutsTheLayersAnewOnTheGroups) {
  TwoStages t;  // [0-1: 0][2-3: 1 2]: 2 x 3 ms x 2 samples against 2 x 3 ms x 1
  int found = 0;
  for (const internal::Neighbour& n : internal::Neighbours(
           t.plan, t.cost, t.cluster, t.options, nullptr, nullptr, internal::Moves::kWide)) {
    if (std::string(n.move) != "rebalance") continue;
    ++found;
    const Plan balanced =
        BalancedPlanOnGroups(t.cost, {{0}, {1, 2}}, {2, 4}, ScheduleKind::kDappleA, "balanced");
    EXPECT_EQ(testing::StagesText(n.plan), testing::StagesText(balanced));
    EXPECT_EQ(testing::StagesText(n.plan), "[0-0: 0][1-3: 1 2]");  // 6 ms against 9
  }
  EXPECT_EQ(found, 1);
  // Balanced already: no rebalanced neighbour.
  t.plan.stages = {StagePlan{0, 0, "", "", {0}}, StagePlan{1, 3, "", "", {1, 2}}};
  for (const internal::Neighbour& n : internal::Neighbours(
           t.plan, t.cost, t.cluster, t.options, nullptr, nullptr, internal::Moves::kWide))
    EXPECT_NE(std::string(n.move), "rebalance");
}

// The fastest DP candidate of size m, simulated (a start of the refinement).
std::optional<Scored> DpStart(const testing::RandomProblem& p, int m) {
  DpOptions o;
  o.micro_batch_size = m;
  o.num_micro_batches = p.global_batch / m;
  std::vector<Proposal> proposals;
  for (DpCandidate& c : DappleDp(*p.cost, p.cluster, o)) {
    c.plan.global_batch_size = p.global_batch;
    proposals.push_back({std::move(c.plan), "dp"});
  }
  return SelectFastest(proposals, *p.cost).best;
}

TEST(WideMoves, AClimbIsTheOneStepClimbUntilThatStopsAndNeverSlower) {
  int climbs = 0, wide_taken = 0;
  auto check = [&](const testing::RandomProblem& p) {
    SCOPED_TRACE(p.description);
    RefineOptions o;
    o.sizes = MicroBatchSizes(p.global_batch);
    o.schedules = {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1};
    o.threads = 1;
    for (int m : {1, 2}) {
      std::optional<Scored> start = p.global_batch % m == 0 ? DpStart(p, m) : std::nullopt;
      if (!start) continue;
      o.wide_moves_up_to_ms = 0;
      const RefineResult step = Refine({*start}, *p.cost, p.cluster, o);
      o.wide_moves_up_to_ms = std::numeric_limits<double>::infinity();
      const RefineResult wide = Refine({*start}, *p.cost, p.cluster, o);
      ++climbs;
      EXPECT_LE(wide.best.sim.iteration_ms, step.best.sim.iteration_ms);
      ASSERT_GE(wide.steps.size(), step.steps.size());
      for (size_t i = 0; i < step.steps.size(); ++i) {
        EXPECT_EQ(wide.steps[i].move, step.steps[i].move) << "step " << i;
        EXPECT_EQ(wide.steps[i].iteration_ms, step.steps[i].iteration_ms) << "step " << i;
      }
      EXPECT_NO_THROW(ValidatePlan(wide.best.plan, p.profile, p.cluster, "climbed"));
      // Wide moves only up to a time faster than where the one-step climb stops: none.
      o.wide_moves_up_to_ms = step.best.sim.iteration_ms * (1 - 1e-9);
      const RefineResult capped = Refine({*start}, *p.cost, p.cluster, o);
      EXPECT_EQ(capped.best.sim.iteration_ms, step.best.sim.iteration_ms);
      EXPECT_EQ(capped.steps.size(), step.steps.size());
      for (size_t i = step.steps.size(); i < wide.steps.size(); ++i)
        wide_taken += wide.steps[i].move == "split-borrow" || wide.steps[i].move == "rebalance";
    }
  };
  for (unsigned seed = 1; seed <= 6; ++seed) check(*testing::MakeMediumAnalyticProblem(seed));
  for (unsigned seed = 0; seed < 12; ++seed) check(*testing::MakeRandomProblemOfAnyKind(seed));
  EXPECT_GT(climbs, 10);
  EXPECT_GT(wide_taken, 0) << "no climb took a wide move: the test checks nothing of them";
}

// 10 layers, 2 x 5 devices, GBS 72: the optimum has 7 stages, one more than the planner's
// plan without the wide moves (6 stages, 3.3% slower), three of them single devices.
TEST(WideMoves, ThePlannerReachesTheOptimumOfANarrowerPipeline) {
  std::unique_ptr<testing::RandomProblem> p = testing::MakeMediumAnalyticProblem(6);
  PlannerOptions o;
  o.interleave = false;
  const PlanResult found = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, o);
  ASSERT_TRUE(found.plan);
  std::vector<bool> timed;
  for (const LayerProfile& l : p->profile.layers) timed.push_back(l.forward_ms > 0);
  const ExhaustiveResult best =
      ExhaustivePlan(*p->cost, p->cluster, p->global_batch, MicroBatchSizes(p->global_batch),
                     {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1}, true,
                     timed, true, &*found.plan);
  EXPECT_LE(found.plan->estimate->iteration_ms, best.iteration_ms * 1.02)
      << testing::StagesText(*found.plan) << " against " << testing::StagesText(*best.plan);
}

TEST(GroupWorkCache, ASharedCacheGivesThePartitionsOfNone) {
  int compared = 0;
  for (unsigned seed = 0; seed < 12; ++seed) {
    std::unique_ptr<testing::RandomProblem> p = testing::MakeRandomProblemOfAnyKind(seed);
    SCOPED_TRACE(p->description);
    const int n = p->cost->num_layers(), N = p->cluster.num_devices();
    GroupWorkCache shared;  // across sizes, widths and stage counts
    for (int m : MicroBatchSizes(p->global_batch)) {
      for (int k = 1; k <= std::min(n, N); ++k) {
        // k groups over the devices in id order, the first one wider by the rest.
        std::vector<std::vector<int>> groups(k);
        for (int d = 0; d < N; ++d) groups[std::max(0, d - (N - k))].push_back(d);
        const MicroBatching mb{m, p->global_batch / m};
        const Plan alone = BalancedPlanOnGroups(*p->cost, groups, mb, ScheduleKind::kDappleA, "x");
        const Plan with =
            BalancedPlanOnGroups(*p->cost, groups, mb, ScheduleKind::kDappleA, "x", &shared);
        EXPECT_EQ(testing::StagesText(with), testing::StagesText(alone)) << "m " << m << " k " << k;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 50);
}

}  // namespace
}  // namespace dapple
