// The refinement's budget counts work, not time (Note [A budget of work] in refine.cc): on
// seeded random problems, a climb cut short by its budget takes the same moves to the same
// plan with any number of simulating threads, and a budget of exactly the work an uncut
// climb did changes nothing.
#include <gtest/gtest.h>

#include <vector>

#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/planner.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/plan/search/rescoring.h"
#include "random_problems.h"

namespace dapple {
namespace {

void ExpectSameClimb(const RefineResult& a, const RefineResult& b, const std::string& what) {
  EXPECT_EQ(a.best.sim.iteration_ms, b.best.sim.iteration_ms) << what;
  EXPECT_EQ(a.work, b.work) << what;
  EXPECT_EQ(a.out_of_budget, b.out_of_budget) << what;
  ASSERT_EQ(a.steps.size(), b.steps.size()) << what;
  for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].move, b.steps[i].move) << what;
}

TEST(RefineBudget, ACutClimbIsTheSameOnAnyNumberOfThreads) {
  int cut = 0, climbs = 0;
  for (unsigned seed = 0; seed < 60; ++seed) {
    auto p = testing::MakeRandomProblem(seed);
    const int m = 1, M = p->global_batch;
    DpOptions dp;
    dp.micro_batch_size = m;
    dp.num_micro_batches = M;
    std::vector<Proposal> proposals;
    for (DpCandidate& c : DappleDp(*p->cost, p->cluster, dp))
      proposals.push_back({std::move(c.plan), "dapple-dp"});
    if (proposals.empty()) continue;
    // The slowest candidate: a start with moves to take.
    Selection start = SelectFastest({proposals.back()}, *p->cost);
    if (!start.best) continue;
    RefineOptions o;
    o.sizes = MicroBatchSizes(p->global_batch);
    o.schedules = {ScheduleKind::kDappleA, ScheduleKind::kDappleB};
    o.threads = 1;
    const RefineResult whole = Refine({*start.best}, *p->cost, p->cluster, o);
    ASSERT_FALSE(whole.out_of_budget) << p->description;
    if (whole.steps.empty()) continue;
    ++climbs;
    // A budget of exactly the work done: the same climb, not cut.
    o.max_work = whole.work;
    ExpectSameClimb(whole, Refine({*start.best}, *p->cost, p->cluster, o), p->description);
    // Half of it: cut, and alike with 1, 2 and 5 threads.
    o.max_work = whole.work / 2;
    const RefineResult one = Refine({*start.best}, *p->cost, p->cluster, o);
    // Not cut only when what was left past half was listing a last round with nothing to
    // simulate: then it is the whole climb.
    if (!one.out_of_budget) ExpectSameClimb(whole, one, p->description + ", uncut");
    ASSERT_LE(one.steps.size(), whole.steps.size()) << p->description;
    for (size_t i = 0; i < one.steps.size(); ++i)  // the uncut climb's first moves
      EXPECT_EQ(one.steps[i].move, whole.steps[i].move) << p->description;
    cut += one.out_of_budget;
    for (int threads : {2, 5}) {
      o.threads = threads;
      ExpectSameClimb(one, Refine({*start.best}, *p->cost, p->cluster, o),
                      p->description + ", " + std::to_string(threads) + " threads");
    }
  }
  EXPECT_GE(climbs, 20);
  EXPECT_GE(cut, climbs * 3 / 4);
}

}  // namespace
}  // namespace dapple
