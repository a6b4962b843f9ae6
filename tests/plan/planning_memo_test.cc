// Note [One memo for several planner calls]: planner calls sharing a PlanningMemo return
// what each returns alone, whichever planner or schedule each runs, also when the memo
// moves between problems.
#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/plan/planner.h"
#include "random_problems.h"

namespace dapple {
namespace {

void ExpectSamePlan(const PlanResult& a, const PlanResult& b, const std::string& what) {
  ASSERT_EQ(a.plan.has_value(), b.plan.has_value()) << what;
  if (!a.plan) return;
  const Plan &p = *a.plan, &q = *b.plan;
  EXPECT_EQ(p.micro_batch_size, q.micro_batch_size) << what;
  EXPECT_EQ(p.schedule, q.schedule) << what;
  EXPECT_EQ(p.virtual_stages, q.virtual_stages) << what;
  ASSERT_EQ(p.num_stages(), q.num_stages()) << what;
  for (int s = 0; s < p.num_stages(); ++s) {
    EXPECT_EQ(p.stages[s].first_layer, q.stages[s].first_layer) << what;
    EXPECT_EQ(p.stages[s].devices, q.stages[s].devices) << what;
    EXPECT_EQ(p.stages[s].recompute, q.stages[s].recompute) << what;
    EXPECT_EQ(p.stages[s].shard_optimizer, q.stages[s].shard_optimizer) << what;
  }
  EXPECT_EQ(p.estimate->iteration_ms, q.estimate->iteration_ms) << what;
  EXPECT_EQ(a.origin, b.origin) << what;
  EXPECT_EQ(a.refine_moves, b.refine_moves) << what;
}

TEST(PlanningMemo, SharedCallsPlanAsAlone) {
  PlanningMemo memo;
  int compared = 0;
  // Two problems in turn, so that the memo also changes problems.
  for (unsigned seed = 0; seed < 12; ++seed) {
    auto p = seed % 2 ? testing::MakeRandomAnalyticProblem(seed) : testing::MakeRandomProblem(seed);
    std::vector<PlannerOptions> calls;
    for (PlannerKind k : {PlannerKind::kDapple, PlannerKind::kDataParallel, PlannerKind::kStraight,
                          PlannerKind::kGPipe, PlannerKind::kPipeDream}) {
      PlannerOptions o;
      o.planner = k;
      calls.push_back(o);
    }
    // The V shapes search as zb-h1, whose search the first call ran already (Shared::refined).
    for (ScheduleKind k : {ScheduleKind::kDappleB, ScheduleKind::kInterleaved, ScheduleKind::kZbV,
                           ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
      PlannerOptions o;
      o.schedule = k;
      calls.push_back(o);
    }
    for (PlannerOptions o : calls) {
      PlanResult alone;
      try {
        alone = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, o);
      } catch (const InputError&) {
        continue;  // e.g. data parallelism with more devices than samples
      }
      o.memo = &memo;
      PlanResult shared = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, o);
      ExpectSamePlan(shared, alone, p->description + ", planner " + ToString(o.planner));
      EXPECT_FALSE(shared.refine_out_of_budget);
      ++compared;
    }
  }
  EXPECT_GE(compared, 70);
}

}  // namespace
}  // namespace dapple
