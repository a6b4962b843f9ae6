// The planner's shortcuts that must not change what it finds: SelectFastest with a time to
// beat (it picks what it picks without one, when that is faster) and ShardWhereItPays with a
// memo of its decisions (each stage decides as it does alone).
#include <gtest/gtest.h>

#include <limits>

#include "dapple/plan/refine/refine.h"
#include "dapple/plan/search/rescoring.h"
#include "dapple/plan/search/sim_cache.h"
#include "random_plans.h"

namespace dapple {
namespace {

std::vector<Proposal> ProposalsOf(const testing::RandomProblem& p) {
  std::vector<Proposal> out;
  for (Plan& plan : testing::PlansOf(p))
    if (plan.virtual_stages == 1) out.push_back({std::move(plan), "random"});
  return out;
}

TEST(SelectFastest, WithATimeToBeatPicksTheSameOrNone) {
  int compared = 0;
  for (unsigned seed = 0; seed < 12; ++seed) {
    auto p = seed % 2 ? testing::MakeRandomAnalyticProblem(seed) : testing::MakeRandomProblem(seed);
    SCOPED_TRACE(p->description);
    const std::vector<Proposal> ps = ProposalsOf(*p);
    const Selection all = SelectFastest(ps, *p->cost);
    if (!all.best) continue;
    const double t = all.best->sim.iteration_ms;
    SimCache cache;
    const Selection above = SelectFastest(ps, *p->cost, false, &cache, t * (1 + 1e-9));
    ASSERT_TRUE(above.best);
    EXPECT_EQ(SimKey(above.best->plan), SimKey(all.best->plan));
    EXPECT_EQ(above.best->sim.iteration_ms, t);
    EXPECT_LE(above.simulated, all.simulated);
    EXPECT_FALSE(SelectFastest(ps, *p->cost, false, &cache, t).best);  // none is faster
    ++compared;
  }
  EXPECT_GE(compared, 8);
}

TEST(ShardWhereItPays, WithAMemoDecidesAsAlone) {
  int stages = 0, sharded = 0;
  for (unsigned seed = 0; seed < 10; ++seed) {
    auto p = testing::MakeRandomAnalyticProblem(seed);
    SCOPED_TRACE(p->description);
    ShardMemo memo;  // one for every plan of the problem, as the refinement's neighbours share one
    for (const Proposal& prop : ProposalsOf(*p)) {
      Plan alone = prop.plan, remembered = prop.plan;
      ShardWhereItPays(alone, *p->cost);
      ShardWhereItPays(remembered, *p->cost, &memo);
      for (int s = 0; s < alone.num_stages(); ++s) {
        EXPECT_EQ(remembered.stages[s].shard_optimizer, alone.stages[s].shard_optimizer);
        stages += alone.stages[s].replicas() > 1;
        sharded += alone.stages[s].shard_optimizer;
      }
    }
  }
  EXPECT_GT(stages, 100);
  EXPECT_GT(sharded, 0);
}

}  // namespace
}  // namespace dapple
