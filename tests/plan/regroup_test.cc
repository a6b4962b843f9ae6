// The regrouped plans of the refinement (Note [Regrouping the stages] in regroup_moves.cc) and
// the climbs from them at a local optimum (Note [Regrouping at a local optimum] in refine.cc):
// two stages' device groups exchanged with the layers cut anew, and the medium problems whose
// optimum the climbs reached only that way.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/planner.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/refine/refine_moves.h"
#include "fakes/fake_cost_model.h"
#include "plan/random_medium_problems.h"
#include "plan/stages_text.h"

namespace dapple {
namespace {

const std::vector<ScheduleKind> kRegroupSchedules = {ScheduleKind::kDappleA, ScheduleKind::kDappleB,
                                                     ScheduleKind::kZbH1};

// The fake model with every device of one kind (the default makes each its own).
struct OneKindFake : FakeCostModel {
  using FakeCostModel::FakeCostModel;
  int DeviceKind(int) const override { return 0; }
};

// 4 layers of a fake model on 3 devices of one kind, `servers` servers, m = 2.
struct FakeStages {
  explicit FakeStages(int servers) : cost(4, 3) {
    cluster.name = "fake";
    cluster.servers.assign(servers, ServerSpec{3 / servers, std::nullopt});
    plan.global_batch_size = 8;
    plan.micro_batch_size = 2;
    plan.num_micro_batches = 4;
    options.sizes = MicroBatchSizes(8);
    options.schedules = {ScheduleKind::kDappleA};
  }
  // The regrouped plans listed as `move` ("regroup" or "drop-group").
  std::vector<std::string> Regrouped(const char* move = "regroup") const {
    std::vector<std::string> out;
    for (const internal::Neighbour& n : internal::Neighbours(plan, cost, cluster, options, nullptr,
                                                             nullptr, internal::Moves::kRegroup)) {
      EXPECT_TRUE(std::string(n.move) == "regroup" || std::string(n.move) == "drop-group");
      if (std::string(n.move) == move) out.push_back(testing::StagesText(n.plan));
    }
    return out;
  }
  OneKindFake cost;
  Cluster cluster;
  Plan plan;
  RefineOptions options;
};

TEST(Regroup, ExchangesTwoGroupsAndCutsTheLayersAnew) {
  FakeStages t(3);  // a device a server
  t.plan.stages = {StagePlan{0, 0, "", "", {0}}, StagePlan{1, 3, "", "", {1, 2}}};
  // The groups exchanged: the pair first, then the single device, the layers balanced on them.
  const Plan balanced =
      BalancedPlanOnGroups(t.cost, {{1, 2}, {0}}, {2, 4}, ScheduleKind::kDappleA, "balanced");
  EXPECT_EQ(testing::StagesText(balanced), "[0-2: 1 2][3-3: 0]");
  EXPECT_EQ(t.Regrouped(), std::vector<std::string>{testing::StagesText(balanced)});
  // None of the moves of one step gives it.
  for (const internal::Neighbour& n : internal::Neighbours(t.plan, t.cost, t.cluster, t.options))
    EXPECT_NE(std::string(n.move), "regroup") << "a regrouped plan among the one-step moves";
}

TEST(Regroup, GroupsAlikeAreNotExchanged) {
  FakeStages one_server(1);  // three devices of one kind on one server: alike
  one_server.plan.stages = {StagePlan{0, 0, "", "", {0}}, StagePlan{1, 1, "", "", {1}},
                            StagePlan{2, 3, "", "", {2}}};
  EXPECT_TRUE(one_server.Regrouped().empty());
  FakeStages three_servers(3);  // each device on a server of its own: every pair exchanged
  three_servers.plan.stages = one_server.plan.stages;
  EXPECT_EQ(three_servers.Regrouped().size(), 3u);
}

TEST(Regroup, LeavesOneGroupOutAndCutsTheLayersAnew) {
  FakeStages t(3);  // a device a server
  t.plan.stages = {StagePlan{0, 0, "", "", {0}}, StagePlan{1, 1, "", "", {1}},
                   StagePlan{2, 3, "", "", {2}}};
  std::vector<std::string> expected;
  for (std::vector<std::vector<int>> groups :
       {std::vector<std::vector<int>>{{1}, {2}}, {{0}, {2}}, {{0}, {1}}})
    expected.push_back(testing::StagesText(
        BalancedPlanOnGroups(t.cost, groups, {2, 4}, ScheduleKind::kDappleA, "balanced")));
  EXPECT_EQ(expected[2], "[0-1: 0][2-3: 1]");
  EXPECT_EQ(t.Regrouped("drop-group"), expected);
  // Three alike devices on one server: leaving out any of them is the same plan, listed once.
  FakeStages one_server(1);
  one_server.plan.stages = t.plan.stages;
  EXPECT_EQ(one_server.Regrouped("drop-group"), std::vector<std::string>{expected[2]});
  for (const internal::Neighbour& n : internal::Neighbours(t.plan, t.cost, t.cluster, t.options))
    EXPECT_NE(testing::StagesText(n.plan), expected[2]) << "among the one-step moves: " << n.move;
}

// `stages` at m = 2 under `schedule` on `p`, sharded where it pays, simulated.
Scored ScoredPlan(const testing::RandomProblem& p, ScheduleKind schedule,
                  std::vector<StagePlan> stages) {
  Plan plan;
  plan.global_batch_size = p.global_batch;
  plan.micro_batch_size = 2;
  plan.num_micro_batches = p.global_batch / 2;
  plan.schedule = schedule;
  plan.stages = std::move(stages);
  RecomputeWhereNeeded(plan, *p.cost, testing::ForwardTimedLayers(p.profile));
  std::optional<Scored> s = ScoreFitting(plan, EvaluatePlan(plan, *p.cost), *p.cost);
  EXPECT_TRUE(s) << testing::StagesText(plan);
  return s ? *s : Scored{};
}

// `stuck` on `p` is a local optimum of the climb; the regrouping from it (as after the
// planner's climbs, about 30 k of work on these problems: it may spend 8 times that; the climb
// from a local optimum spends next to nothing) reaches `optimum`, `first_move` its first move,
// and without RefineOptions::regroup stays.
void ExpectRegroupingReaches(const testing::RandomProblem& p, const Scored& stuck,
                             const Scored& optimum, const char* first_move) {
  RefineOptions o;
  o.sizes = MicroBatchSizes(p.global_batch);
  o.schedules = kRegroupSchedules;
  o.forward_timed = testing::ForwardTimedLayers(p.profile);
  o.threads = 1;
  o.max_work = 5'000'000;
  RefineResult climbed = Refine({stuck}, *p.cost, p.cluster, o);
  EXPECT_EQ(climbed.best.sim.iteration_ms, stuck.sim.iteration_ms) << "not a local optimum";
  climbed.work = 30'000;
  const RefineResult same = Regrouped(climbed, *p.cost, p.cluster, o);  // o.regroup false
  EXPECT_EQ(same.best.sim.iteration_ms, stuck.sim.iteration_ms);
  EXPECT_TRUE(same.steps.empty());
  o.regroup = true;
  const RefineResult regrouped = Regrouped(climbed, *p.cost, p.cluster, o);
  EXPECT_LE(regrouped.best.sim.iteration_ms, optimum.sim.iteration_ms * (1 + 1e-9))
      << testing::StagesText(regrouped.best.plan);
  ASSERT_FALSE(regrouped.steps.empty());
  EXPECT_EQ(regrouped.steps[0].move, first_move);
  EXPECT_NO_THROW(ValidatePlan(regrouped.best.plan, p.profile, p.cluster, "regrouped"));
}

// 10 layers, 2 x 6 devices, GBS 30 (the analytic model): the planner's climbs ended at 6
// stages on 10 devices, 2.1% above the exhaustive optimum, 7 stages [1+2+2+2+2+2+1] on the
// servers A, A, B, B, B, A, A. No move of one step nor wide move is faster there; the climb
// from the plan with its first and last groups exchanged reaches the optimum.
TEST(Regroup, ClimbsFromTheRegroupedPlansReachTheOptimum) {
  std::unique_ptr<testing::RandomProblem> p = testing::MakeMediumAnalyticProblem(1);
  ASSERT_EQ(p->global_batch, 30);
  const Scored stuck = ScoredPlan(*p, ScheduleKind::kZbH1,
                                  {{0, 1, "", "", {8, 9}},
                                   {2, 2, "", "", {6, 7}},
                                   {3, 4, "", "", {5}},
                                   {5, 6, "", "", {3, 4}},
                                   {7, 7, "", "", {1, 2}},
                                   {8, 9, "", "", {0}}});
  const Scored optimum = ScoredPlan(*p, ScheduleKind::kDappleB,
                                    {{0, 0, "", "", {5}},
                                     {1, 1, "", "", {3, 4}},
                                     {2, 3, "", "", {10, 11}},
                                     {4, 5, "", "", {8, 9}},
                                     {6, 6, "", "", {6, 7}},
                                     {7, 7, "", "", {1, 2}},
                                     {8, 9, "", "", {0}}});
  ASSERT_LT(optimum.sim.iteration_ms, stuck.sim.iteration_ms / 1.02);
  ExpectRegroupingReaches(*p, stuck, optimum, "regroup");
}

// The medium problems on two servers of different speeds that the planner missed by 2.6% and
// 3.2% before the regrouping (10 layers, 2 x 6 devices): within 2% of the exhaustive optimum
// now. (The third, analytic seed 1, is MediumExhaustive.AnalyticCosts' first seed.)
TEST(Regroup, ThePlannerIsWithin2PercentWhereItWasNot) {
  for (unsigned seed : {3u, 8u}) {
    std::unique_ptr<testing::RandomProblem> p = testing::MakeMediumAnalyticProblem(seed, true);
    SCOPED_TRACE(p->description);
    PlannerOptions o;
    o.interleave = false;
    const PlanResult found = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, o);
    ASSERT_TRUE(found.plan);
    const ExhaustiveResult best = ExhaustivePlan(
        *p->cost, p->cluster, p->global_batch, MicroBatchSizes(p->global_batch), kRegroupSchedules,
        true, testing::ForwardTimedLayers(p->profile), true, &*found.plan);
    EXPECT_LE(found.plan->estimate->iteration_ms, best.iteration_ms * 1.02)
        << testing::StagesText(*found.plan) << " against " << testing::StagesText(*best.plan);
  }
}

// 11 layers, 2 x 6 devices, GBS 30 (the analytic model): the planner's climbs ended at 7
// stages, 4.1% above the exhaustive optimum, which is the same plan without the pair of devices
// that held layer 7 (its layers cut anew). No move of one step nor wide move is faster there,
// nor any exchange of two groups; the climb from the plan with that group left out reaches it.
TEST(Regroup, ClimbsFromAPlanWithAGroupLeftOutReachTheOptimum) {
  std::unique_ptr<testing::RandomProblem> p =
      testing::MakeMediumAnalyticProblem(4, /*mixed=*/false, /*layers=*/11);
  ASSERT_EQ(p->global_batch, 30);
  const Scored stuck = ScoredPlan(*p, ScheduleKind::kDappleB,
                                  {{0, 1, "", "", {11}},
                                   {2, 3, "", "", {10}},
                                   {4, 5, "", "", {8, 9}},
                                   {6, 6, "", "", {6, 7}},
                                   {7, 7, "", "", {4, 5}},
                                   {8, 9, "", "", {2, 3}},
                                   {10, 10, "", "", {0, 1}}});
  const Scored optimum = ScoredPlan(*p, ScheduleKind::kDappleB,
                                    {{0, 1, "", "", {11}},
                                     {2, 3, "", "", {10}},
                                     {4, 5, "", "", {8, 9}},
                                     {6, 6, "", "", {6, 7}},
                                     {7, 8, "", "", {2, 3}},
                                     {9, 10, "", "", {0, 1}}});
  ASSERT_LT(optimum.sim.iteration_ms, stuck.sim.iteration_ms / 1.02);
  ExpectRegroupingReaches(*p, stuck, optimum, "drop-group");
}

// Problems of 11 and 12 layers the planner missed by 4.6% and 4.1% while the regrouping had
// twice the work of the climbs it follows (the regrouped plan's climb that reaches the optimum
// was cut off): within 2% of the exhaustive optimum now, built here as the exhaustive search
// printed it (MediumExhaustive with DAPPLE_MEDIUM_LAYERS=11 and 12: 343.44 and 192.99 ms).
TEST(Regroup, ThePlannerIsWithin2PercentOnElevenAndTwelveLayers) {
  struct Case {
    unsigned seed;
    bool mixed;
    int layers;
    ScheduleKind schedule;
    std::vector<StagePlan> optimum;  // at m = 2
  };
  const std::vector<Case> cases = {{8u,
                                    false,
                                    11,
                                    ScheduleKind::kDappleB,
                                    {{0, 1, "", "", {8, 9}},
                                     {2, 3, "", "", {7}},
                                     {4, 6, "", "", {5, 6}},
                                     {7, 7, "", "", {4}},
                                     {8, 9, "", "", {2, 3}},
                                     {10, 10, "", "", {0, 1}}}},
                                   {11u,
                                    true,
                                    12,
                                    ScheduleKind::kZbH1,
                                    {{0, 0, "", "", {3, 4}},
                                     {1, 3, "", "", {9}},
                                     {4, 6, "", "", {7, 8}},
                                     {7, 9, "", "", {5, 6}},
                                     {10, 10, "", "", {2}},
                                     {11, 11, "", "", {0, 1}}}}};
  for (const Case& c : cases) {
    std::unique_ptr<testing::RandomProblem> p =
        testing::MakeMediumAnalyticProblem(c.seed, c.mixed, c.layers);
    SCOPED_TRACE(p->description);
    const Scored optimum = ScoredPlan(*p, c.schedule, c.optimum);
    PlannerOptions o;
    o.interleave = false;
    const PlanResult found = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, o);
    ASSERT_TRUE(found.plan);
    EXPECT_LE(found.plan->estimate->iteration_ms, optimum.sim.iteration_ms * 1.02)
        << testing::StagesText(*found.plan) << " against " << testing::StagesText(optimum.plan);
  }
}

}  // namespace
}  // namespace dapple
